"""tests/scheduling.py (which tests share an xdist worker) agrees with what pytest collected:
every test that takes the JupyterLab server, or a fixture broader than a test and narrower than
the session, is in one scope with the others that share it."""
from __future__ import annotations

import pytest

from tests import scheduling


def _misplaced(collected: dict[str, str | None]) -> list[str]:
    return [f"{nodeid}: scope {scheduling.scope(nodeid)!r}, needs {want!r}"
            for nodeid, want in collected.items()
            if want is not None and scheduling.scope(nodeid) != want]


def test_tests_that_share_a_fixture_share_a_scope(pytestconfig, request):
    # every test collected, before -m / -k chose (tests/conftest.py notes them)
    collected = getattr(pytestconfig, scheduling.COLLECTED)
    assert request.node.nodeid in collected
    wrong = _misplaced(collected)
    assert not wrong, "tests/scheduling.py misreads these files:\n" + "\n".join(wrong)


def test_the_rule_reads_the_files():
    lab_test = "tests/browser/test_jupyterlab.py::test_widget_in_jupyterlab"
    assert scheduling.scope(lab_test) == "jupyterlab"
    # through a module fixture that takes the server
    assert scheduling.scope("tests/browser/test_first_look_lab.py::test_x") == "jupyterlab"
    assert scheduling.scope("tests/test_buffers.py::test_text_twin") == "tests/test_buffers.py"
    assert scheduling.scope("tests/test_capture.py::test_x") == "tests/test_capture.py::test_x"
    assert scheduling.scope("tests/gone.py::test_x") == "tests/gone.py::test_x"


def test_the_check_sees_a_test_that_shares_without_its_scope():
    ok = {"tests/browser/test_jupyterlab.py::test_widget_in_jupyterlab": scheduling.LAB,
          "tests/test_buffers.py::test_text_twin": "tests/test_buffers.py",
          "tests/test_capture.py::test_x": None}
    assert _misplaced(ok) == []
    # a test of a file read as sharing nothing that takes the server or a module's fixture
    assert len(_misplaced({"tests/test_capture.py::test_x": scheduling.LAB,
                           "tests/test_run.py::test_y": "tests/test_run.py"})) == 2


def test_the_scheduler_uses_the_rule():
    pytest.importorskip("xdist", reason="pytest-xdist (the test extra) is not installed")
    cls = scheduling.scheduler_class()
    sched = object.__new__(cls)           # (its __init__ wants the controller's worker specs)
    assert sched._split_scope("tests/test_buffers.py::test_text_twin") == "tests/test_buffers.py"
    assert sched._split_scope("tests/test_run.py::test_x[a]") == "tests/test_run.py::test_x[a]"


def test_the_device_files_exist():
    # a file renamed or removed would drop its tests from the device's half of test-device
    missing = sorted(f for f in scheduling.DEVICE_FILES if not (scheduling.ROOT / f).is_file())
    assert not missing, f"tests/scheduling.py's DEVICE_FILES names no such file: {missing}"
    assert scheduling.on_device("tests/test_buffers.py::test_text_twin")
    assert not scheduling.on_device("tests/test_layout.py::test_x")

"""Shared fixtures. jax is configured by each test module; browser fixtures live in tests/browser."""
from __future__ import annotations

import gc
import os
import pathlib
import sys

import jax  # (reads JAX_PLATFORMS now: what is set below is for the children only)
import pytest

# The processes a test starts run on the CPU: one process at a time may hold an accelerator
# (on a TPU a second one fails: "The TPU is already in use"), and they find jaxviz in this
# checkout also where it is not installed (the accelerator machine).
os.environ["JAX_PLATFORMS"] = "cpu"
_ROOT = str(pathlib.Path(__file__).resolve().parent.parent)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (os.environ.get("PYTHONPATH"), _ROOT) if p
)


def pytest_addoption(parser):
    parser.addoption(
        "--on-device", action="store_true",
        help="make test-device: this process holds the accelerator; run the files of "
             "tests/scheduling.py's DEVICE_FILES alone and say how many ran on it")


@pytest.hookimpl(tryfirst=True)           # before -m / -k deselect: test_scheduling sees all
def pytest_collection_modifyitems(config, items):
    from tests.scheduling import COLLECTED, on_device, shares
    setattr(config, COLLECTED, {item.nodeid: shares(item) for item in items})
    for item in items:
        if on_device(item.nodeid):
            item.add_marker(pytest.mark.device)
    if config.getoption("on_device"):
        keep = [item for item in items if on_device(item.nodeid)]
        config.hook.pytest_deselected(items=[i for i in items if not on_device(i.nodeid)])
        items[:] = keep


_RUNNING = os.environ.get("JAXVIZ_TEST_RUNNING_DIR")


def pytest_runtest_logstart(nodeid, location):
    """Under `make test-device`: the test this process runs, in RUNNING_DIR/<pid>, so that
    tools/host_memory_guard.py names the test of a process it kills."""
    if _RUNNING:
        try:
            pathlib.Path(_RUNNING, str(os.getpid())).write_text(nodeid)
        except OSError:
            pass                            # (a diagnostic only: never the run's failure)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Under --on-device: how many tests ran in the process that holds the accelerator."""
    if not config.getoption("on_device") or config.option.collectonly:
        return
    stats = terminalreporter.stats
    n = {k: len([r for r in stats.get(k, []) if r.when == "call" or k != "passed"])
         for k in ("passed", "failed", "error", "skipped")}
    where = ", ".join(f"{d.platform}:{d.id} ({d.device_kind})" for d in jax.local_devices())
    terminalreporter.write_line(
        f"{n['passed'] + n['failed']} tests ran on the device, {where}: {n['passed']} passed, "
        f"{n['failed']} failed, {n['error']} errors, {n['skipped']} skipped")


@pytest.hookimpl(optionalhook=True)      # pytest-xdist's hook: absent without it (test-device)
def pytest_xdist_make_scheduler(config, log):
    """Under -n: tests that share the JupyterLab server or a module's fixture stay on one
    worker (tests/scheduling.py); the rest go wherever a worker is free."""
    if config.getoption("dist") not in ("load", "loadscope", "loadfile", "loadgroup"):
        return None                         # a mode asked for by name (each, worksteal)
    from tests.scheduling import make_scheduler
    return make_scheduler(config, log)


def on_accelerator() -> bool:
    """Whether the suite's own process runs on a TPU or GPU (`make test-device`)."""
    return jax.default_backend() != "cpu"


@pytest.fixture
def ip():
    """IPython's real test shell with jaxviz loaded."""
    from IPython.testing.globalipapp import get_ipython, start_ipython
    shell = start_ipython() or get_ipython()
    shell.run_cell("%load_ext jaxviz")
    yield shell
    shell.run_cell("%reset -f")
    gc.collect()


@pytest.fixture
def dispatch_state():
    """What capture patches: checked to be restored after each use."""
    from jax._src import core, pjit

    from jaxviz._compat import dispatch

    def state():
        # the Python path's tracker a recording installs for good (dispatch._JitBook) counts
        # as JAX's own path: it calls it, and only notes which function ran
        book, run = dispatch._BOOK, pjit._run_python_pjit
        if book is not None and run is book.tracked_run:
            run = dispatch._PRISTINE_RUN
        return (run, pjit._get_fastpath_data, core.EvalTrace.process_primitive)

    before = state()
    yield before
    after = state()
    assert after == before, "jaxviz left JAX's dispatch patched"
    if hasattr(sys, "monitoring"):
        # jaxviz may hold its tool ids between recordings: no events set, or (held by
        # %%jaxtrace) CALL events whose callback turns each place off, no local events
        from jaxviz.capture import events

        mon = sys.monitoring
        held = events.MONITOR
        for i in range(6):
            if mon.get_tool(i) == "jaxviz" and mon.get_events(i):
                assert i == held.tool and held.on and not held.active
                callback = mon.register_callback(i, mon.events.CALL, None)
                mon.register_callback(i, mon.events.CALL, callback)
                assert callback is events.idle_call_event
        assert not held.live

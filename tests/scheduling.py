"""Which tests share a pytest-xdist worker (`make test` runs the suite with -n auto).

A test goes to whichever worker is free, except where tests share something expensive; those
run on one worker, one after another, in the order of the file:

- every test of a file that takes the `jupyterlab` fixture (a test or a fixture of the file
  has it as a parameter): one JupyterLab server for the run, started once, whose kernels the
  tests shut down between them; scope "jupyterlab";
- every test of a file that defines a module-, class- or package-scoped fixture (a traced
  transformer, an executed notebook): built once; scope: the file.

The controller schedules from test ids alone (the workers collect), so the rule reads the test
files; tests/test_scheduling.py checks it against the fixtures pytest collected. pytest-xdist's
own `xdist_group` marks are not used: with pytest 9.2 they no longer group anything
(pytest-xdist issue 1386: `--dist loadgroup` edits `item._nodeid`, which pytest now ignores).
"""
from __future__ import annotations

import functools
import pathlib
import re
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent      # pytest's rootdir: ids are relative
LAB = "jupyterlab"
_TAKES_LAB = re.compile(r"def \w+\([^)]*\bjupyterlab\b")
_SHARED_FIXTURE = re.compile(r"scope=[\"'](?:module|class|package)[\"']")


@functools.cache
def file_scope(path: str) -> str | None:
    """LAB, `path` itself, or None (its tests go one by one) for a test file's id path."""
    try:
        text = (ROOT / path).read_text()
    except OSError:
        return None
    if _TAKES_LAB.search(text):
        return LAB
    if _SHARED_FIXTURE.search(text):
        return path
    return None


def scope(nodeid: str) -> str:
    """The unit of work a test id belongs to: all tests of one scope run on one worker."""
    return file_scope(nodeid.split("::", 1)[0]) or nodeid


COLLECTED = "jaxviz_collected_sharing"   # config attribute: what `shares` said of each test


def shares(item: Any) -> str | None:
    """What a collected test shares, read from its fixtures: LAB, its file (a module-, class-
    or package-scoped fixture), or None."""
    if LAB in item.fixturenames:
        return LAB
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs if info is not None else {}
    if any(d.scope in ("module", "class", "package") for ds in defs.values() for d in ds
           if d.argname in item.fixturenames):
        return item.nodeid.split("::", 1)[0]
    return None


@functools.cache
def scheduler_class() -> Any:
    """pytest-xdist's LoadScopeScheduling over `scope`: the largest scopes are handed out first
    (the JupyterLab tests start at once), then tests one by one as workers free up."""
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid)

    return SharedFixtureScheduling


def make_scheduler(config: Any, log: Any) -> Any:
    return scheduler_class()(config, log)


# `make test-device` on a machine with a TPU or GPU: one process may hold the accelerator, so
# the files whose tests read the device (compiled memory, the live chart, the profile, NaN
# checks on the device, dispatch and capture, users' code) run in that process
# (`pytest --on-device`), and every other file runs beside it on the host's other cores as
# CPU-only workers (JAX_PLATFORMS=cpu, `-m "not device"`). tests/conftest.py marks these.
DEVICE_FILES = frozenset({
    # memory: layouts, buffer assignment, the allocator's own figures
    "tests/test_buffers.py", "tests/test_buffers_tpu.py", "tests/test_compile.py",
    "tests/test_run.py", "tests/test_cell_memory.py", "tests/test_session_memory.py",
    "tests/test_timeline.py",
    # time: the device's own trace
    "tests/test_profile.py",
    # NaN checks reduce on the device and read flags on jaxviz's thread
    "tests/diagnostics/test_nan_device_path.py", "tests/diagnostics/test_nan_on_device.py",
    "tests/diagnostics/test_nan_causes.py", "tests/diagnostics/test_later_nans.py",
    # dispatch: async on an accelerator, the hooks and the watch
    "tests/test_watch.py", "tests/test_magic.py", "tests/test_timeit.py", "tests/test_cli.py",
    "tests/test_async_dispatch.py",
    # users' code, run as they run it
    "tests/diagnostics/test_held_out.py",
})


def on_device(nodeid: str) -> bool:
    """Whether `make test-device` runs this test in the process that holds the accelerator."""
    return nodeid.split("::", 1)[0] in DEVICE_FILES

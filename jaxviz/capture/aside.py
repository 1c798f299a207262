"""Stepping aside: a block of a traced cell that runs as without jaxviz.

IPython's %timeit picks its loop count from the time of its first 1, 10, 100, ... runs, and
then times the statement: watched, a statement's first calls cost more (the eager statement
staged, JAX's Python path, the first-call checks), so inside a traced cell %timeit chose
other loop counts than a plain cell, and timed jaxviz's hooks. While IPython's %timeit and
%%timeit run in a traced cell (`timeit_aside`), the recorder steps aside
(`Recorder.suspended()` -> `Aside`): JAX's dispatch hooks and the CALL events are off, the
functions refused JAX's fast path so far get it back; what the block runs is not recorded;
the capture goes on after it.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import Any

from jaxviz import _compat


class Aside:
    """Recorder.suspended(): steps aside on entry, back on exit (nested: the outer one)."""

    def __init__(self, rec: Any) -> None:
        self._rec = rec
        self._stepped = False

    def __enter__(self) -> None:
        self._stepped = step_aside(self._rec)

    def __exit__(self, *exc: Any) -> None:
        if self._stepped:
            step_back(self._rec)


def step_aside(rec: Any) -> bool:
    """Takes the recorder's hooks and CALL events off and gives the functions it refused
    JAX's fast path their entries back; False when it is not recording (nothing to do)."""
    if rec._ctx is None:
        return False
    if rec._tool is not None:
        if rec.calls_deferred:
            rec._resume_calls = rec._calls_on
            rec.watch_calls(False)
        else:
            rec._close_local()
            sys.monitoring.set_events(rec._tool, 0)  # type: ignore[attr-defined]
    rec._count_calls(False)
    rec._frames_ctx.__exit__(None, None, None)
    rec._ctx.__exit__(None, None, None)
    rec._ctx = None
    if None in rec._refused:  # their "never fast" entries: the block's calls are fast
        _compat.clear_cpp_dispatch_caches()
    else:
        for jitted in rec._refused.values():
            _compat.clear_fun_cache(jitted)
    rec._refused.clear()
    return True


def step_back(rec: Any) -> None:
    """Puts the hooks and the CALL events back as `step_aside` found them."""
    if rec._tool is None:  # Python < 3.12: the block's fast entries would hide later calls
        _compat.clear_cpp_dispatch_caches()
        rec._count_calls(True)
    rec._ctx = _compat.patched_dispatch(rec._on_jit, rec._on_eager, rec._keep_fast)
    rec._ctx.__enter__()
    rec._frames_ctx = _compat.watching_top_frames(rec._on_top_frame)
    rec._frames_ctx.__enter__()
    if rec._tool is not None:
        if rec.calls_deferred:
            rec.watch_calls(rec._resume_calls)
        else:
            sys.monitoring.set_events(rec._tool, sys.monitoring.events.CALL)  # type: ignore[attr-defined]
            rec._open_local()


def timeit_aside(
    undo: contextlib.ExitStack,
    shell: Any,
    rec: Any,
    also: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> None:
    """IPython's %timeit and %%timeit, inside a traced cell, time the statement as a plain
    cell would: jaxviz steps aside while they run (Recorder.suspended). Watched, a
    statement's first calls cost more (staging, JAX's Python path, first-call checks), and
    %timeit picks its loop count from the time of its first 1, 10, 100, ... runs.
    also: what else steps aside meanwhile (the memory watch's sampler, made later)."""
    magics = getattr(getattr(shell, "magics_manager", None), "magics", None) or {}
    for kind in ("line", "cell"):
        table: Any = magics.get(kind)
        try:  # the loaded magic (IPython 9 registers its own magics lazily)
            orig = getattr(shell, f"find_{kind}_magic")("timeit")
        except Exception:  # an IPython without it: nothing to wrap
            orig = None
        if table is None or not callable(orig):
            continue

        @functools.wraps(orig)  # (its needs_local_scope mark, which IPython reads)
        def aside(*a: Any, _orig: Any = orig, **k: Any) -> Any:
            with rec.suspended(), also() if also is not None else contextlib.nullcontext():
                return _orig(*a, **k)

        table["timeit"] = aside
        undo.callback(table.__setitem__, "timeit", orig)

"""Stepping aside: a block of a traced cell that runs as without jaxviz.

IPython's %timeit picks its loop count from the time of its first 1, 10, 100, ... runs, and
then times the statement: watched, a statement's first calls cost more (the eager statement
staged, JAX's Python path, the first-call checks), so inside a traced cell %timeit chose
other loop counts than a plain cell, and timed jaxviz's hooks. While IPython's %timeit and
%%timeit run in a traced cell (`timeit_aside`), the recorder steps aside
(`Recorder.suspended()` -> `Aside`): JAX's dispatch hooks and the CALL events are off, the
functions refused JAX's fast path so far get it back; what the block runs is not recorded;
the capture goes on after it. The recorder's observers are told what ran unwatched
(`on_aside(filename, line, what)`: the cell's line of the %timeit and its statement), and
the cell says so: a misuse that runs only inside %timeit (a jit made per call) is not found.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import Any


class Aside:
    """Recorder.suspended(): steps aside on entry, back on exit (nested: the outer one).
    `hooks`: the recorder's (events.Hooks), which take its hooks and CALL events off and
    give the functions it refused JAX's fast path their entries back (`pause`), then put
    them back as they were (`resume`)."""

    def __init__(self, hooks: Any) -> None:
        self._hooks = hooks
        self._stepped = False

    def __enter__(self) -> None:
        self._stepped = self._hooks.pause()

    def __exit__(self, *exc: Any) -> None:
        if self._stepped:
            self._hooks.resume()


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
        def aside(*a: Any, _orig: Any = orig, _kind: str = kind, **k: Any) -> Any:
            _tell(rec, _kind, a, k)
            with rec.suspended(), also() if also is not None else contextlib.nullcontext():
                return _orig(*a, **k)

        table["timeit"] = aside
        undo.callback(table.__setitem__, "timeit", orig)


def _tell(rec: Any, kind: str, a: tuple, k: dict) -> None:
    """The observers' `on_aside(filename, line, what)`: the cell's line that runs the
    %timeit (its frame, outward from here: IPython's run_line_magic is called from it; a
    %%timeit cell: its first line) and the statement it times, as written."""
    top = getattr(rec, "top_filename", None)
    line = 1
    f: Any = sys._getframe(2)
    while f is not None:
        if f.f_code.co_filename == top:
            line = f.f_lineno or 1
            break
        f = f.f_back
    del f
    text = str(k.get("line", a[0] if a else "")).strip()
    cell = k.get("cell", a[1] if len(a) > 1 else None)
    what = f"%%timeit {text}".strip() if kind == "cell" else f"%timeit {text}"
    if kind == "cell" and cell:
        what += " (" + "; ".join(s.strip() for s in str(cell).splitlines() if s.strip())[:200] + ")"
    for o in getattr(rec, "observers", ()):
        tell = getattr(o, "on_aside", None)
        if tell is not None and top is not None:
            try:
                tell(top, line, what)
            except Exception:  # an observer's failure must not stop the user's %timeit
                pass

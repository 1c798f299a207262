"""Running a cell's source as a notebook would, under the recorder.

>>> rec = Recorder("<cell 1>", observers=[])
>>> staged, error = capture(lambda: run_source("y = 1 + 1\\n", {}, "<cell 1>"), rec)
"""

from __future__ import annotations

import ast
import linecache
import os
import re
import types
from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz.capture.recorder import Recorder
from jaxviz.capture.staged import Staged


def register_source(filename: str, source: str) -> None:
    """Lets tracebacks and JAX's source_info show the cell's lines (as IPython does)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def run_source(source: str, namespace: dict, filename: str) -> None:
    """Runs source like a notebook cell: statements, then the last expression displayed."""
    tree = ast.parse(source, filename=filename, mode="exec")
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = ast.Module(body=tree.body[:-1] if last else tree.body, type_ignores=[])
    exec(compile(body, filename, "exec"), namespace)
    if last is not None:
        expr = ast.Interactive(body=[last])
        exec(compile(expr, filename, "single"), namespace)  # calls sys.displayhook


def capture(
    run: Callable[[], Any], rec: Recorder, catch: tuple[type[BaseException], ...] = (Exception,)
) -> tuple[list[Staged], BaseException | None]:
    """Runs `run()` under the recorder; returns what it staged and the exception it raised."""
    error = None
    with rec:
        try:
            run()
        except catch as e:  # the user's exception: recorded, returned, not raised here
            error = e
    return take_staged(rec, error), error


def take_staged(rec: Recorder, error: BaseException | None) -> list[Staged]:
    """The recorder's records (taken from it), led by the partial one when the cell failed
    while tracing."""
    staged = rec.take()
    if error is not None:
        partial = rec.partial_staged(error)
        if partial is not None:
            staged.insert(0, partial)
    return staged


_OWN = _compat.PACKAGE_DIR + os.sep  # jaxviz's files


def _own(tb: Any) -> bool:
    return tb.tb_frame.f_code.co_filename.startswith(_OWN)


def _hook(tb: Any) -> bool:
    """A frame of one of jaxviz's hooks on JAX's dispatch (each marks itself hidden)."""
    code = tb.tb_frame.f_code
    return "__tracebackhide__" in code.co_varnames and code.co_filename.startswith(_OWN)


def drop_hook_frames(exc: BaseException) -> bool:
    """Unlinks jaxviz's hooks from the tracebacks of `exc` and of the exceptions chained to
    it; whether any was there.

    A call the user's code makes into JAX passes through the hooks jaxviz puts on JAX's
    dispatch (jaxviz._compat.patched_dispatch, the Recorder's and the observer's) while a
    cell is watched. JAX's traceback filtering hides them under its api_boundary only, and
    only in IPython's mode; an eager primitive (`lax.add(1, 1.0)`) fails outside it. A hook
    marks its frame with `__tracebackhide__`; the run of jaxviz's frames it starts (the
    callables it passes the call through) ends where JAX's frames resume, and is unlinked
    there: the traceback is the one the code gives without jaxviz. jaxviz frames the user's
    code called on purpose (jaxviz.trace inside a cell) carry no mark and stay.
    """
    changed = False
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        prev: types.TracebackType | None = None
        tb = e.__traceback__
        while tb is not None:
            if _hook(tb):
                resume: types.TracebackType | None = tb
                while resume is not None and _own(resume):
                    resume = resume.tb_next
                if resume is not None:  # JAX's frames resume: the hooks were in between
                    if prev is None:
                        e.__traceback__ = resume
                    else:
                        prev.tb_next = resume
                    changed = True
                    tb = resume
                    continue
                if prev is not None:  # JAX's C++ raised under them (the fast path of a
                    prev.tb_next = None  # counted call, Python 3.11): the user's frame ends it
                    changed = True
                    break
            prev, tb = tb, tb.tb_next
        todo += [e.__cause__, e.__context__]
    return changed


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CALL = re.compile(r"get_ipython\(\)\.run_line_magic\('jaxtrace', (?:'[^'\n]*'|\"[^\"\n]*\")\)")


def magic_line_back(stb: list, head: str) -> list:
    """A traceback's lines (IPython's structured traceback) with the cell's first line as
    the user wrote it (`head`: `%%jaxtrace -q`), not the call `cell_to_line` made of it
    (`get_ipython().run_line_magic('jaxtrace', '-q')`). That line loses its colours."""
    if not head:
        return stb
    out = []
    for entry in stb:
        if not isinstance(entry, str) or "run_line_magic" not in _ANSI.sub("", entry):
            out.append(entry)
            continue
        lines = []
        for ln in entry.split("\n"):
            plain = _ANSI.sub("", ln)
            lines.append(_CALL.sub(lambda _m: head, plain, count=1) if _CALL.search(plain) else ln)
        out.append("\n".join(lines))
    return out

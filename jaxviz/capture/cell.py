"""Running a cell's source as a notebook would, under the recorder.

>>> rec = Recorder("<cell 1>", observers=[])
>>> staged, error = capture(lambda: run_source("y = 1 + 1\\n", {}, "<cell 1>"), rec)
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Callable
from typing import Any

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

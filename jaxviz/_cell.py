"""trace_cell: run a cell's source exactly as a notebook would, and capture what JAX staged.

    >>> import jaxviz
    >>> ct = jaxviz.trace_cell("import jax.numpy as jnp\\ny = jnp.sin(jnp.ones(3))\\n")
    >>> [t.kind for t in ct.traces]
    ['eager', 'eager']
"""
from __future__ import annotations

import ast
import dataclasses
import itertools
import linecache
import sys
from typing import Any, Callable

from jaxviz._capture import Recorder
from jaxviz._diagnostic import Diagnostic
from jaxviz._trace import Trace, error_frames

_cell_ids = itertools.count(1)


class CellTrace:
    """Everything one cell ran through JAX.

    Attributes:
      traces: one jaxviz.Trace per distinct (function, signature): the user's own jitted
        functions first, then library jits and eager statements, each in first-call order.
      diagnostics: every Diagnostic of the cell (the traces' ones included).
      error: the cell's exception, or None (trace_cell records it and does not raise).
      filename: the cell's filename, as in tracebacks.
      source: the cell's source.
    """

    def __init__(self, traces: list[Trace], *, source: str, filename: str,
                 error: BaseException | None = None, error_frames: list | None = None,
                 diagnostics: list[Diagnostic] | None = None, label: str | None = None):
        self.traces = traces
        self.label = label or filename           # what the user calls the cell: "cell [3]"
        self.source = source
        self.filename = filename
        self.error = error
        self.error_frames = list(error_frames or [])
        self.diagnostics: list[Diagnostic] = list(diagnostics or [])

    def __getitem__(self, name_or_index: str | int) -> Trace:
        if isinstance(name_or_index, int):
            return self.traces[name_or_index]
        for t in self.traces:
            if t.name == name_or_index:
                return t
        raise KeyError(f"no trace named {name_or_index!r}; the cell traced "
                       f"{[t.name for t in self.traces]}")

    def __len__(self) -> int:
        return len(self.traces)

    def __iter__(self):
        return iter(self.traces)

    def __str__(self) -> str:
        from jaxviz._text import cell_text
        return cell_text(self)

    def __repr__(self) -> str:
        err = f", error={type(self.error).__name__}" if self.error else ""
        return (f"<jaxviz.CellTrace {len(self.traces)} traces, "
                f"{len(self.diagnostics)} diagnostics{err}>")

    @property
    def widget(self):
        """The live view's model: `cell.widget.selected_eqn` is the equation clicked last."""
        if getattr(self, "_widget", None) is None:
            from jaxviz._widget import make_widget
            self._widget = make_widget(self.traces, self.diagnostics, {self.filename: self.source})
        return self._widget

    def _repr_mimebundle_(self, include=None, exclude=None):
        from jaxviz._text import cell_text
        from jaxviz._views import TEXT_LINES, in_kernel, mimebundle
        return mimebundle(self.traces, self.diagnostics, cell_text(self, max_lines=TEXT_LINES),
                          widget=self.widget if in_kernel() and self.traces else None,
                          sources={self.filename: self.source})


def _register_source(filename: str, source: str) -> None:
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
        exec(compile(expr, filename, "single"), namespace)   # calls sys.displayhook


def capture(run: Callable[[], Any], top_filename: str | None,
            catch: tuple[type[BaseException], ...] = (Exception,)
            ) -> tuple[list[Trace], BaseException | None]:
    """Runs `run()` under the recorder; returns the traces and the exception it raised."""
    error = None
    rec = Recorder(top_filename)
    with rec:
        try:
            run()
        except catch as e:  # the user's exception: recorded, returned, not raised here
            error = e
    return traces_of(rec, error), error


def traces_of(rec: Recorder, error: BaseException | None) -> list[Trace]:
    """The recorder's traces, led by the partial one when the cell failed while tracing."""
    traces = rec.traces()
    if error is not None:
        partial = rec.partial_trace(error)
        if partial is not None:
            traces.insert(0, partial)
    return traces


def trace_cell(source: str, namespace: dict | None = None, filename: str | None = None) -> CellTrace:
    """Runs `source` as a notebook cell would and captures every JAX computation it triggers.

    Same prints, same results, same namespace changes as running it plainly; the cell's
    exception is recorded in `CellTrace.error` instead of raised (KeyboardInterrupt still
    propagates, after everything jaxviz touched is restored).

    Args:
      source: the cell's code.
      namespace: the globals to run it in (a fresh `__main__`-like dict when None).
      filename: the name tracebacks and diagnostics use ("<cell 3>" when None).
    """
    if not isinstance(source, str):
        raise TypeError(f"jaxviz.trace_cell expects the cell's source as a str, got "
                        f"{type(source).__name__}.")
    ns = namespace if namespace is not None else {"__name__": "__main__", "__builtins__": __builtins__}
    filename = filename or f"<cell {next(_cell_ids)}>"
    _register_source(filename, source)
    try:
        ast.parse(source, filename=filename)
    except SyntaxError as e:
        return CellTrace([], source=source, filename=filename, error=e,
                         error_frames=[(filename, e.lineno or 0, "<module>")])
    traces, error = capture(lambda: run_source(source, ns, filename), filename)
    return finish_cell(traces, source=source, filename=filename, error=error, namespace=ns)


def finish_cell(traces: list[Trace], *, source: str, filename: str,
                error: BaseException | None, label: str | None = None,
                namespace: dict | None = None) -> CellTrace:
    """Builds the CellTrace and runs the diagnostics over it (namespace: the cell's globals,
    scanned for leaked tracers; else the capture's observer found them)."""
    frames = error_frames(error) if error is not None else []
    ct = CellTrace(traces, source=source, filename=filename, error=error, error_frames=frames,
                   label=label)
    from jaxviz._diagnostics import diagnose_cell
    ct.diagnostics.extend(diagnose_cell(ct, namespace))
    _link_failed_traces(ct)
    return ct


def _link_failed_traces(ct: CellTrace) -> None:
    """Points the cell's error diagnostics at the nodes of the line that failed to trace."""
    failed = [t for t in ct.traces if t.error is not None and t.graph.n_eqns]
    if not failed:
        return
    for k, d in enumerate(ct.diagnostics):
        if d.node_ids or d.line is None or d.severity != "error":
            continue
        for t in failed:
            ids = tuple(f"{b.id}:{n.id}" for b in t.graph.bodies for n in b.nodes
                        if n.kind == "eqn" and n.loc is not None
                        and (n.loc.file, n.loc.line) == (d.filename, d.line))
            if ids:
                linked = dataclasses.replace(d, node_ids=ids, trace=d.trace or t.name)
                ct.diagnostics[k] = linked
                t.diagnostics[:] = [x for x in t.diagnostics if x != d] + [linked]
                break

"""The pipeline: capture -> build -> check, and the records a user holds.

`trace(f, *args)` stages one function without running it; `trace_cell(source)` runs a cell's
source under the capture. Both build the graph model of what was staged (jaxviz.graph) and
run the diagnostics (jaxviz.diagnostics), and return a `Trace` / `CellTrace`: the records of
jaxviz.graph with the later stages on call: `compile()` and `run()` (jaxviz.memory),
`str()`, `to_dot()` and the notebook view (jaxviz.view).

    >>> import jax.numpy as jnp, jaxviz
    >>> t = jaxviz.trace(lambda x: jnp.tanh(x) * 2, jnp.ones(4))
    >>> t.graph.n_eqns
    2
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from jaxviz import _compat
from jaxviz.capture.cell import capture, register_source, run_source
from jaxviz.capture.recorder import Recorder
from jaxviz.capture.staged import EMPTY_JAXPR, Staged, flat_arg_names, partial_jaxpr, specs
from jaxviz.config import options
from jaxviz.diagnostics.check import (
    cell_end,
    diagnose_cell,
    diagnose_trace,
    link_failed_traces,
)
from jaxviz.diagnostics.collectives import collective_diagnostics
from jaxviz.diagnostics.donation import donated_flat
from jaxviz.diagnostics.observer import CellObserver
from jaxviz.diagnostics.report import finding, quoted
from jaxviz.diagnostics.rules import RULES
from jaxviz.distributed.merge import MergedReport
from jaxviz.distributed.session import Processes, cell_prefix
from jaxviz.graph import trace as records
from jaxviz.graph.build import build_graph
from jaxviz.graph.fold import fold_cell
from jaxviz.graph.trace import Analysed
from jaxviz.memory.buffers import memory_report
from jaxviz.memory.compile import CompileReport, compile_trace
from jaxviz.memory.oom import held_errors, out_of_memory
from jaxviz.memory.peaks import cell_reports, with_donations
from jaxviz.memory.prerun import PreRunCheck
from jaxviz.memory.report import MemoryReport
from jaxviz.memory.run import RunReport, run_trace
from jaxviz.memory.timeline import CellMemory
from jaxviz.mesh.eager import of_cell
from jaxviz.profile.report import ProfileReport
from jaxviz.view import html as _html
from jaxviz.view.chart import MemoryEntry, live_run
from jaxviz.view.dot import to_dot
from jaxviz.view.html import save_html as save_html  # the user's: checks what it is given
from jaxviz.view.text import TEXT_LINES, cell_text, trace_text
from jaxviz.view.widget import GraphWidget, make_widget

_cell_ids = itertools.count(1)


class Trace(records.Trace):
    """What JAX staged for one function and signature (the record, jaxviz.graph.trace.Trace),
    with the later stages on call.

    Attributes: see jaxviz.graph.trace.Trace (name, graph, jaxpr, diagnostics, error, calls,
    call_sites, fun, args_spec, kwargs_spec, ...).
    """

    _widget: GraphWidget | None = None  # made on first use of `widget`

    def compile(self) -> CompileReport:
        """Lowers and compiles for the attached devices: jaxviz.CompileReport."""
        return compile_trace(self)

    def memory(self, what_if: bool = True) -> MemoryReport:
        """Where the compiled program's memory goes, without running it: jaxviz.MemoryReport
        (the schedule's timeline, the buffers live at the peak with their lines, and with
        `what_if` what donating each argument saves, measured by compiling again)."""
        if self.error is not None:
            raise ValueError(
                f"jaxviz: {self.name} has no compiled program to explain: tracing failed "
                f"({type(self.error).__name__}). Fix the error in Trace.error (or its "
                f"diagnostics), then trace it again."
            )
        return memory_report(self.compilable(), what_if=what_if)

    def profile(self, steps: int = 5, *args: Any, **kwargs: Any) -> ProfileReport:
        """Where the device time goes, by source line: compiles, calls once to warm up, then
        `steps` times under JAX's profiler (on `args`, else zeros of the traced shapes):
        jaxviz.ProfileReport (docs/time.md)."""
        from jaxviz.profile.session import profile_trace  # the profiler only when asked for

        return profile_trace(self, steps, args, kwargs)

    def run(self, *args: Any, **kwargs: Any) -> RunReport:
        """Runs the compiled function in a loop and samples device memory: jaxviz.RunReport."""
        return run_trace(self, *args, **kwargs)

    def live_run(self, *args: Any, **kwargs: Any) -> RunReport:
        """Displays a live memory chart and runs (see run); returns the RunReport."""
        return live_run(self, *args, **kwargs)

    def to_dot(self, **kwargs: Any) -> Any:
        """The graph as a graphviz.Digraph (DOT; `.pipe("svg")` with a `dot` program)."""
        return to_dot(self.graph, **kwargs)

    def __str__(self) -> str:
        return trace_text(self)

    @property
    def widget(self) -> GraphWidget:
        """The live view's model: `trace.widget.selected_eqn` is the equation clicked last."""
        if self._widget is None:
            self._widget = make_widget([self], self.diagnostics, lazy=True)
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        return _html.mimebundle(
            [self],
            self.diagnostics,
            trace_text(self, max_lines=TEXT_LINES),
            widget=self.widget if _html.in_kernel() else None,
        )


@dataclasses.dataclass(eq=False, repr=False)
class CellTrace(records.CellTrace):
    """Everything one cell ran through JAX (the record, jaxviz.graph.trace.CellTrace), with
    the memory tab's runs and the views.

    Attributes: traces, diagnostics, error, filename, source, label (see the record), and
    memory: the memory stage's entries (jaxviz.view.chart.MemoryEntry): the cell's own
    memory while it ran (`cell_memory`), and with --compare one per function %%jaxtrace
    compiled and ran after the cell, filled as each run goes.
    """

    _: dataclasses.KW_ONLY
    memory: list[MemoryEntry] = dataclasses.field(default_factory=list)
    # each of the user's own jitted functions' compiled memory (jaxviz.memory.peaks): the
    # memory tab's buffers at each compiled peak; and what was skipped, with how to get it
    # (filled by the cell's analysis: Analysed)
    compiled: list[MemoryReport] = Analysed(())  # type: ignore[assignment]  # noqa: RUF009
    compiled_notes: list[str] = Analysed(())  # type: ignore[assignment]  # noqa: RUF009
    # the collectives of the programs JAX compiled for its eager ops on several devices
    # (jaxviz.mesh.eager.EagerCollectives, largest first; none on one device)
    eager_collectives: tuple = Analysed(())  # type: ignore[assignment]
    # where the device time went, by line (%%jaxtrace --profile; jaxviz.profile); None
    # when the cell was not profiled
    profile: ProfileReport | None = None
    # a jax.distributed run's processes merged, on process 0 (jaxviz.distributed); else None
    processes: MergedReport | None = None
    _widget: GraphWidget | None = dataclasses.field(default=None, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.compiled, self.compiled_notes = list(self.compiled), list(self.compiled_notes)

    def memory_of(self, name: str) -> MemoryEntry | None:
        """The memory entry of the trace named `name` (None when it did not run)."""
        return next((m for m in self.memory if m.trace == name), None)

    @property
    def cell_memory(self) -> CellMemory | None:
        """Device memory while the cell ran, its jitted calls and the arrays it made
        (jaxviz.memory.timeline.CellMemory; None with --no-run or -q).

        Example:
            %%jaxtrace -o ct
            ...
            ct.cell_memory.alive_at(1.5)   # the arrays alive 1.5 s into the cell
        """
        return next((m.cell for m in self.memory if m.cell is not None), None)

    def __str__(self) -> str:
        return cell_text(self)

    @property
    def widget(self) -> GraphWidget:
        """The live view's model: `cell.widget.selected_eqn` is the equation clicked last."""
        if self._widget is None:
            self._widget = make_widget(
                self.traces, self.diagnostics, {self.filename: self.source}, lazy=True
            )
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        return _html.mimebundle(
            self.traces,
            self.diagnostics,
            cell_text(self, max_lines=TEXT_LINES),
            widget=self.widget if _html.in_kernel() and self.traces else None,
            sources={self.filename: self.source},
            memory=self.memory,
            cost=self.cost,
            memory_reports=[*self.compiled, *self.eager_collectives],
            memory_notes=self.compiled_notes,
            profile=self.profile,
            processes=self.processes,
        )


# --- build: a capture record -> a Trace ----------------------------------------------------------


def build_trace(s: Staged) -> Trace:
    """The graph model of what the capture recorded, as a Trace (diagnostics not yet run).

    The trace holds the function weakly, and, once checked, the jaxpr's equations but not
    JAX's jaxpr object (`_let_go`): a kept trace does not keep JAX's compiled executable.
    """
    jaxpr = s.jaxpr
    build = functools.partial(
        build_graph,
        name=s.name,
        arg_names=s.arg_names,
        loc=s.loc,
        root_code=s.root_code,
        eqn_locs=s.eqn_locs,
        name_outputs=s.kind != "eager",
        arg_axes=_compat.input_axes(s.args_spec, s.kwargs_spec),
    )
    # built when first read, from the trace's own jaxpr (JAX's object is let go, `_let_go`);
    # a failed trace's partial jaxpr is not kept: its graph is built now
    graph: Any = (
        build(jaxpr) if s.error is not None else records.GraphLater(lambda t: build(t.jaxpr))
    )
    return Trace(
        s.name,
        graph,
        None if s.error is not None else jaxpr,
        fun=s.fun,
        args_spec=s.args_spec,
        kwargs_spec=s.kwargs_spec,
        error=s.error,
        error_frames=list(s.error_frames),
        calls=s.calls,
        calls_uncounted=s.calls_uncounted,
        call_sites=list(s.call_sites),
        library_sites=list(s.library_sites),
        kind=s.kind,
        arg_names=list(s.arg_names),
        donated=list(s.donated),
        donation_quiet=s.donation_quiet,
        notes=list(s.notes),
        user_code=s.user_code,
        static=s.static,
        rejitted=s.rejitted,
        call_mesh=s.call_mesh,
    )


def build_traces(staged: Sequence[Staged], internal_errors: list | None = None) -> list[Trace]:
    """One Trace per record; a graph jaxviz cannot model must not hide the others (its error
    goes to `internal_errors`)."""
    out = []
    for s in staged:
        try:
            out.append(build_trace(s))
        except Exception as e:
            if internal_errors is not None:
                internal_errors.append(e)
    return out


# --- one function ----------------------------------------------------------------------------


def trace(fn: Callable, *args: Any, **kwargs: Any) -> Trace:
    """Stages `fn(*args, **kwargs)` with JAX, without running it, and models what it staged.

    Args may be arrays, pytrees of arrays, or jax.ShapeDtypeStruct. Errors in the user's
    function do not raise: they are in `Trace.error`, with the graph staged up to them.

    Example:
        >>> import jax, jax.numpy as jnp, jaxviz
        >>> t = jaxviz.trace(jax.nn.relu, jax.ShapeDtypeStruct((8,), jnp.float32))
        >>> t.graph.n_eqns >= 1
        True
    """
    if not callable(fn):
        raise TypeError(
            f"jaxviz.trace expects a function, got {type(fn).__name__} {fn!r:.60}. "
            f"Pass the function and its arguments separately: jaxviz.trace(f, x), not "
            f"jaxviz.trace(f(x))."
        )
    name = _compat.fun_name(fn)
    jitted = fn if isinstance(fn, _compat.JIT_FUNCTION_TYPE) else jax.jit(fn)
    names = flat_arg_names(args, kwargs, _compat.param_names(fn))
    common = dict(
        kind="trace",
        fun=jitted,
        args_spec=specs(args),
        kwargs_spec=specs(kwargs),
        root_code=getattr(_compat.unwrap(fn), "__code__", None),
        call_mesh=_compat.context_mesh(),
    )
    top: list = []
    with _compat.watching_top_frames(lambda frame, *_: top.append(frame)):
        try:
            traced = jitted.trace(*args, **kwargs)
        except Exception as e:  # the user's code failed: keep what was staged
            frames = _compat.error_frames(e)
            partial = partial_jaxpr(top[0]) if top else None
            staged = Staged(
                name,
                partial if partial is not None else EMPTY_JAXPR,
                arg_names=names if partial is not None else (),
                error=_compat.forget_traceback(e),
                error_frames=frames,
                **common,
            )
            return _checked(build_trace(staged))
    closed = traced.jaxpr
    n_flat = len(_compat.open_jaxpr(closed).invars)
    if len(names) != n_flat:
        names = [f"arg{i}" for i in range(n_flat)]
    donated = donated_flat(jitted, common["args_spec"], common["kwargs_spec"])
    staged = Staged(
        name, closed, arg_names=names, donated=donated if len(donated) == n_flat else (), **common
    )
    return _checked(build_trace(staged))


def _checked(t: Trace) -> Trace:
    t.diagnostics.extend(diagnose_trace(t))
    _let_go([t])
    return t


def _let_go(traces: Sequence[Trace]) -> None:
    """After the diagnostics (which find JAX's objects by identity): each trace keeps its
    jaxpr's equations but not JAX's own jaxpr object, whose life keeps JAX's compiled
    executable in its caches (`_compat.detached`); `fun` is held weakly already."""
    for t in traces:
        if t.jaxpr is not None and t.error is None:
            t.jaxpr = _compat.detached(t.jaxpr)


# --- a cell --------------------------------------------------------------------------------------


def trace_cell(
    source: str,
    namespace: dict | None = None,
    filename: str | None = None,
    *,
    profile: bool = False,
) -> CellTrace:
    """Runs `source` as a notebook cell would and captures every JAX computation it triggers.

    Same prints, same results, same namespace changes as running it plainly; the cell's
    exception is recorded in `CellTrace.error` instead of raised (KeyboardInterrupt still
    propagates, after everything jaxviz touched is restored).

    Args:
      source: the cell's code.
      namespace: the globals to run it in (a fresh `__main__`-like dict when None).
      filename: the name tracebacks and diagnostics use ("<cell 3>" when None).
      profile: run JAX's profiler around the cell: `CellTrace.profile`, each line's device
        time (jaxviz.profile, docs/time.md).

    Example:
        >>> import jaxviz
        >>> ct = jaxviz.trace_cell("import jax.numpy as jnp\\ny = jnp.sin(jnp.ones(3))\\n")
        >>> [t.kind for t in ct.traces]
        ['eager', 'eager']
    """
    if not isinstance(source, str):
        raise TypeError(
            f"jaxviz.trace_cell expects the cell's source as a str, got {type(source).__name__}."
        )
    ns = (
        namespace
        if namespace is not None
        else {"__name__": "__main__", "__builtins__": __builtins__}
    )
    filename = filename or f"<cell {next(_cell_ids)}>"
    register_source(filename, source)
    try:
        ast.parse(source, filename=filename)
    except SyntaxError as e:
        return CellTrace(
            [],
            source=source,
            filename=filename,
            error=e,
            error_frames=[(filename, e.lineno or 0, "<module>")],
        )
    rec, obs = recorder(filename, ns)
    prof = start_profile() if profile else None
    t0 = time.perf_counter()
    try:
        staged, error = capture(lambda: run_source(source, ns, filename), rec)
    finally:
        t1 = time.perf_counter()
        if prof is not None:
            prof.stop()
    t2 = time.perf_counter()
    ct = finish_cell(
        staged,
        source=source,
        filename=filename,
        error=error,
        namespace=ns,
        observer=obs,
        internal_errors=rec.internal_errors,
    )
    if prof is not None:
        finish_profile(ct, prof, rec=rec)
    ct.cost = records.CellCost(t1 - t0, rec.hook_seconds, time.perf_counter() - t2)
    return ct


def start_profile() -> Any:
    """JAX's profiler and compile listener on (jaxviz.profile.session.Profiling), imported
    only now: a cell without --profile costs nothing of it."""
    from jaxviz.profile.session import Profiling

    p = Profiling()
    p.start()
    return p


def finish_profile(ct: CellTrace, p: Any, name: str = "", rec: Recorder | None = None) -> None:
    """`ct.profile`: the profiled cell's ProfileReport (jaxviz's failure is kept in the
    recorder's internal_errors, never raised into the cell)."""
    from jaxviz.profile.session import cell_profile

    try:
        ct.profile = cell_profile(ct, p, name)
    except Exception as e:
        if rec is not None:
            rec.internal_errors.append(e)


def recorder(
    filename: str | None, namespace: dict | None = None, *, calls_deferred: bool = False,
    observers: Sequence[Any] = (),
) -> tuple[Recorder, CellObserver]:  # fmt: skip
    """A Recorder for a cell or script, with the observer the diagnostics read afterwards and
    the check that says before a run when its program cannot fit (memory.prerun).
    namespace: the globals the cell will run in, as they are before it runs; calls_deferred:
    see Recorder.watch_calls; observers: more, a multi-process run's, distributed.session."""
    obs = CellObserver(filename, namespace)
    rec = Recorder(filename, observers=[obs, PreRunCheck(filename), *observers],
                   namespace=namespace, calls_deferred=calls_deferred)  # fmt: skip
    return rec, obs


def finish_cell(
    staged: Sequence[Staged],
    *,
    source: str,
    filename: str,
    error: BaseException | None,
    label: str | None = None,
    namespace: dict | None = None,
    observer: CellObserver | None = None,
    internal_errors: list | None = None,
    compiled_memory: bool = True,
    lazy: bool = False,
) -> CellTrace:
    """Builds each staged function's Trace and the CellTrace, and runs the diagnostics over
    them (namespace: the cell's globals, scanned for leaked tracers; observer: what the
    capture saw while the cell ran; compiled_memory: each of the user's jitted functions'
    compiled memory, jaxviz.memory.peaks, while the staged records keep them alive).

    `lazy`: what the namespace holds is read now (`cell_end`), the rest when the CellTrace
    is first read (`CellTrace.later`), holding `staged` (its functions; no array) until then."""
    traces = build_traces(staged, internal_errors)
    frames = _compat.error_frames(error) if error is not None else []
    ct = CellTrace(
        traces,
        source=source,
        filename=filename,
        error=error,
        error_frames=frames,
        label=label or "",
    )
    end = cell_end(ct, namespace, observer)
    held = list(staged)
    # results that hold an allocation's error, read from the namespace now (names change)
    errors = held_errors(namespace) if lazy and namespace is not None else None

    def analyse(ct: CellTrace) -> None:
        ct.diagnostics.extend(diagnose_cell(ct, None, observer, end))
        fold_cell(ct)  # (after the diagnostics: they count the look-alikes)
        if compiled_memory:
            ct.compiled, ct.compiled_notes = cell_reports(ct.traces)
        if observer is not None:  # (the programs JAX compiled for its eager ops)
            seen = observer.programs
            ct.eager_collectives = of_cell(seen.programs, ct.traces, filename, seen.lines)
        # out of memory: what fills it
        ct.diagnostics.extend(_oom_findings(ct, None if lazy else namespace, errors))
        ct.diagnostics.extend(collective_diagnostics(ct.compiled))  # a sharded program's reshards
        link_failed_traces(ct)
        _let_go(ct.traces)
        held.clear()  # the functions may go with the user's names

    ct.later = analyse
    if not lazy:  # now, its failure kept as when it runs later (`analysis_error`), never
        ct.analyse()  # raised into the cell, the script or trace_cell's caller
    return ct


class CellCapture:
    """A cell's capture, for a front end that runs the cell itself (%%jaxtrace: with IPython's
    machinery): `start()` and `stop()` around its statements (stop also when they raise),
    then `finish(...)`: the CellTrace (finish_cell) with its profile (`profile`: JAX's
    profiler around the cell), what jaxviz added (`CellTrace.cost`, the profiler's own start
    and stop left out) and, with `what_if`, what donating each argument saves."""

    def __init__(
        self, filename: str, namespace: dict, label: str, *, nans: bool, profile: bool
    ) -> None:
        self.filename, self.namespace, self.label = filename, namespace, label
        self.processes = Processes(cell_prefix())  # a jax.distributed run's (no work alone)
        self.rec, self.obs = recorder(filename, namespace, calls_deferred=True,
                                      observers=self.processes.observers)  # fmt: skip
        self.nans, self.profile = nans, profile
        self.profiling: Any = None  # JAX's profiler while the cell runs (jaxviz.profile)
        self.scope = contextlib.ExitStack()  # the options, the recorder, the profiler
        self.started = self.ended = 0.0

    def start(self) -> None:
        self.started = time.perf_counter()
        every = self.nans or options.check_every_call
        self.scope.enter_context(options.using(check_every_call=every))
        self.scope.enter_context(self.rec)
        if self.profile:  # stopped first when the scope closes
            self.profiling = start_profile()
            self.scope.callback(self.profiling.stop)

    def stop(self) -> None:
        try:
            self.scope.close()
        finally:
            self.ended = time.perf_counter()

    def finish(
        self, staged: Sequence[Staged], error: BaseException | None, source: str, *,
        what_if: bool = False, compiled_memory: bool = True, lazy: bool = False,
        cell_memory: Any = None,
    ) -> CellTrace:  # fmt: skip
        """The CellTrace (`lazy`: finish_cell's, not with a profile or `what_if`)."""
        rec, profiling = self.rec, self.profiling
        lazy = lazy and profiling is None and not what_if
        ct = finish_cell(staged, source=source, filename=self.filename, error=error,
                         label=self.label, namespace=self.namespace, observer=self.obs,
                         internal_errors=rec.internal_errors,
                         compiled_memory=compiled_memory, lazy=lazy)  # fmt: skip
        aside = 0.0  # JAX's profiler starting and stopping, not the cell's time
        if profiling is not None:  # each line's device time (the time tab)
            finish_profile(ct, profiling, self.label, rec)
            aside = profiling.start_seconds + profiling.stop_seconds
        ct.cost = records.CellCost.measured(self.started, self.ended, rec.hook_seconds, aside)
        try:  # several processes: process 0's merged report (the others' wait: none)
            done = self.processes.finish(ct, seconds=self.ended - self.started, live=cell_memory)
            ct.processes = done.report if done is not None else None
        except Exception as e:
            rec.internal_errors.append(e)
        if what_if and ct.compiled:  # (its compiles are not counted in the cost)
            ct.compiled = with_donations(ct.traces, ct.compiled)
        return ct


def _oom_findings(
    ct: CellTrace, namespace: dict | None, errors: list[tuple[str, str]] | None = None
) -> list:
    """The out-of-memory findings (jaxviz.memory.oom): the cell ran out of memory, or a
    function's compiled peak exceeds jaxviz.options.memory_limit or its device's memory."""
    hint = RULES["out-of-memory"].hint
    known = ct.compiled
    return [finding("out-of-memory", quoted(o.where) + o.message, o.where, hint=o.hint or hint,
                    node_ids=o.node_ids, related=o.related, trace=o.trace,
                    severity=o.severity)
            for o in out_of_memory(ct, known, namespace, errors)]  # fmt: skip

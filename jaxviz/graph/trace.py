"""Trace: the record of one staged function (a jitted function and signature, or an eager
statement), and CellTrace: the record of everything one cell staged.

These are records: every field is declared here and set when the record is made. What later
stages find (diagnostics aside, which the pipeline in `jaxviz.api` computes before it makes
the record) lives in their own records: `CompileReport`, `RunReport`, the memory tab's
entries. A Trace keeps avals and JAX's jaxpr, never the user's arrays.

The `jaxviz.Trace` a user holds is `jaxviz.api.Trace`, this record with the later stages on
call (`compile()`, `run()`, `str()`, the notebook view).
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz.config import options
from jaxviz.format import fmt_seconds
from jaxviz.graph.model import Graph

KINDS = ("jit", "eager", "shard_map", "trace")


class _HeldWeakly:
    """A record field that holds its value by weak reference (a strong one when the value
    takes none), for `Trace.fun`: a kept trace must not keep the user's old jitted function
    alive, and with it JAX's compiled executable (MBs per function, for a kernel's whole
    session). Reads give None once the function is gone. Setting it also records the jit's
    options, so `api.Trace` can compile a stand-in from the jaxpr (`jit_of_jaxpr`).
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}_ref"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return None  # the field's default
        ref = obj.__dict__.get(self._slot)
        return ref() if isinstance(ref, weakref.ref) else ref

    def __set__(self, obj: Any, value: Any) -> None:
        try:
            ref: Any = None if value is None else weakref.ref(value)
        except TypeError:  # no weak references to it: held as it is
            ref = value
        obj.__dict__[self._slot] = ref
        if value is not None:
            obj.__dict__["fun_options"] = _compat.jit_options(value)
            obj.__dict__["fun_signature"] = _compat.signature_of(value)


class GraphLater:
    """A Trace's graph, built when first read (`Trace.graph`): `build(trace)` makes it.

    A cell stages many functions and statements; their graphs cost ~0.3 ms each to build
    and are read only by the view, the text twin, `Trace.graph` and the diagnostics that
    found something to point at. A trace made with one holds its jaxpr meanwhile, as it
    does anyway."""

    __slots__ = ("build", "max_eqns")

    def __init__(self, build: Callable[[Any], Graph]) -> None:
        self.build = build
        self.max_eqns = options.max_eqns  # the budget in force now: the graph's, later too


class _Built:
    """A record field that may be given as a GraphLater: built on the first read, then
    kept (and `owner._built(value)` told). Required: the class has no default for it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}_value"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            raise AttributeError(self._slot)  # no default: dataclasses makes it required
        value = obj.__dict__[self._slot]
        if type(value) is GraphLater:
            with options.using(max_eqns=value.max_eqns):
                graph = obj.__dict__[self._slot] = value.build(obj)
                obj._built(graph)
            return graph
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self._slot] = value

    def ready(self, obj: Any) -> bool:
        return type(obj.__dict__.get(self._slot)) is not GraphLater


@dataclasses.dataclass(eq=False, repr=False)
class Trace:
    """What JAX staged for one function and signature, with its diagnostics.

    Example:
        >>> import jax.numpy as jnp, jaxviz
        >>> t = jaxviz.trace(lambda x: jnp.sin(x) * 2, jnp.ones(3))
        >>> [n.op for n in t.graph.body.nodes if n.kind == "eqn"]
        ['sin', 'mul']
    """

    name: str  # the function's name, "train_step"
    graph: Graph = _Built()  # type: ignore[assignment]  # the graph model (given as a
    # GraphLater, it is built when first read)
    jaxpr: Any = None  # JAX's jaxpr; None when tracing failed before it existed
    _: dataclasses.KW_ONLY
    fun_options: dict | None = dataclasses.field(default=None, init=False)  # jax.jit's
    # options of `fun` (static and donated arguments, shardings), set with it
    fun_signature: Any = dataclasses.field(default=None, init=False)  # its inspect.Signature
    fun: Callable | None = _HeldWeakly()  # type: ignore[assignment]  # a jitted callable:
    # `fun.lower(*args_spec, **kwargs_spec)`; held weakly, None once the user dropped it
    # (`jaxviz.api.Trace.compile()` then compiles `jaxpr` in its place)
    args_spec: tuple = ()  # the arguments as pytrees of jax.ShapeDtypeStruct
    kwargs_spec: dict = dataclasses.field(default_factory=dict)  # (static values as they are)
    error: BaseException | None = None  # what tracing raised; the graph holds what came before
    error_frames: list[tuple] = dataclasses.field(default_factory=list)  # [(filename, line,
    # function)] of `error`, innermost last
    calls: int = 1  # how often the cell called it with this signature
    calls_uncounted: bool = False  # more calls ran than `calls`: on Python < 3.12, JAX's
    # fast path served a busy call site's later calls, which jaxviz cannot see there
    call_sites: list[tuple] = dataclasses.field(default_factory=list)  # [(filename, line,
    # count)] of those calls
    library_sites: list[tuple] = dataclasses.field(default_factory=list)  # [(filename,
    # line)] in a library that made those calls on the user's behalf (call_sites: the
    # user's lines that called into the library)
    kind: str = "jit"  # one of KINDS
    arg_names: list[str] = dataclasses.field(default_factory=list)  # flat argument paths,
    # "params['w1']"
    donated: list[bool] = dataclasses.field(default_factory=list)  # per flat argument
    donation_quiet: bool = False  # called with JAX's warning about unusable donations
    # ignored by its message: a library's documented choice (equinox's donate="all")
    diagnostics: list = dataclasses.field(default_factory=list)  # jaxviz.Diagnostic records
    notes: list[str] = dataclasses.field(default_factory=list)  # what the user should know
    user_code: bool | None = None  # the user's own function, not JAX's or a library's
    # (None: decided by kind, "jit" and "trace" are)
    static: str = ""  # static arguments of the call, "act='gelu'"
    rejitted: bool = False  # `fun` is a new jax.jit of the bare function (the jitted
    # object was not seen): running it would trace again
    call_mesh: Any = None  # the meshes set when it was called (jax.set_mesh, `with mesh:`;
    # a _compat.MeshContext): `fun` lowers under them, whatever the cell set later (None:
    # not recorded, the meshes set then)
    _held: Any = dataclasses.field(default=None, init=False)  # a stand-in's own `fun`,
    # held strongly (see compilable)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown trace kind {self.kind!r}; expected one of {KINDS}")
        self.kwargs_spec = dict(self.kwargs_spec or {})
        self.error_frames = list(self.error_frames)
        self.call_sites = list(self.call_sites)
        self.library_sites = list(self.library_sites)
        self.arg_names = list(self.arg_names)
        self.donated = list(self.donated)
        self.diagnostics = list(self.diagnostics)
        self.notes = list(self.notes)
        if self.user_code is None:
            self.user_code = self.kind in ("jit", "trace")
        if Trace.__dict__["graph"].ready(self):
            self._built(self.graph)

    def _built(self, graph: Graph) -> None:
        """The graph is there (given, or built when first read): what it left out is noted."""
        if graph.cut:
            self.notes.append(
                f"{self.name} staged more than {options.max_eqns:,} equations; the graph holds "
                f"the first {options.max_eqns:,} and leaves out {graph.cut:,}. To see them "
                f"all, set jaxviz.options.max_eqns = {options.max_eqns + graph.cut:,} (views "
                f"get slower), or trace a smaller part (one layer, one step)."
            )

    def compilable(self) -> Trace:
        """This trace, or, when the user's function is gone (redefined or deleted: a trace
        holds it weakly), a copy whose `fun` jits the recorded jaxpr with the same options.

        Raises ValueError when there is nothing to compile (an eager statement, a trace that
        failed)."""
        if self.fun is not None:
            return self
        if self.kind not in ("jit", "trace") or self.jaxpr is None or self.error is not None:
            what = "failed to trace" if self.error is not None else f"is {self.kind!r}"
            raise ValueError(
                f"{self.name} {what}: there is no jitted function to compile. Trace a function "
                f"with jaxviz.trace(f, *args) to compile it."
            )
        fun, n = _compat.jit_of_jaxpr(
            self.jaxpr, self.args_spec, self.kwargs_spec, self.fun_options, self.fun_signature
        )
        n_in = len(_compat.open_jaxpr(self.jaxpr).invars)
        if n != n_in:
            raise ValueError(
                f"{self.name} is no longer defined and its recorded arguments ({n} arrays) do "
                f"not match its jaxpr ({n_in} inputs); trace it again with jaxviz.trace."
            )
        stand_in = dataclasses.replace(self, fun=fun, rejitted=True)
        stand_in._held = fun  # the trace holds `fun` weakly: this keeps the stand-in's alive
        return stand_in

    @property
    def signature(self) -> str:
        """The input avals, "f32[8,128], f32[128]"."""
        b = self.graph.body
        return ", ".join(b.nodes[i].out[0] for i in b.inputs)

    def eqn(self, body: int, node: int) -> Any:
        """JAX's equation behind graph node `node` of body `body` (None for io nodes)."""
        return self.graph.eqn(body, node)

    def __repr__(self) -> str:
        err = f", error={type(self.error).__name__}" if self.error else ""
        return (
            f"<jaxviz.Trace {self.name}({self.signature}): {self.graph.n_eqns} eqns, "
            f"{len(self.diagnostics)} diagnostics{err}>"
        )


class Analysed:
    """A CellTrace field its cell's analysis fills: read while the analysis is still to
    run (`CellTrace.later`: a -q cell's, run when the record is first read; a view's, after
    the reply), it runs it first. `default`: the field's default (None: required)."""

    def __init__(self, default: Any = None) -> None:
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}_value"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            if self.default is None:
                raise AttributeError(self._slot)  # no default: dataclasses makes it required
            return self.default
        d = obj.__dict__
        if d.get("later") is not None:
            obj.analyse()
        return d[self._slot]

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self._slot] = value


@dataclasses.dataclass(frozen=True)
class CellCost:
    """What jaxviz added to a cell's wall time, as it measured it: the capture's hooks and
    CALL events while the cell ran (JAX's own work inside them excluded) and the analysis
    after it. A lower bound: Python's own cost of raising each event and entering each hook
    (about 1 us each) is not measured, and an eager loop raises thousands."""

    cell_seconds: float  # the cell's wall time under the capture, hooks included
    capture_seconds: float  # in jaxviz's hooks while the cell ran
    analysis_seconds: float  # building the graphs and the diagnostics after it

    @classmethod
    def measured(
        cls, started: float, ended: float, capture_seconds: float, aside_seconds: float = 0.0
    ) -> CellCost:
        """The cost of a cell that ran from `started` to `ended` (time.perf_counter), less
        `aside_seconds` that were not the cell's (JAX's profiler starting and stopping),
        analysed from `ended` until now."""
        return cls(ended - started - aside_seconds, capture_seconds, time.perf_counter() - ended)

    @property
    def added_seconds(self) -> float:
        return self.capture_seconds + self.analysis_seconds

    def __str__(self) -> str:
        plain = max(self.cell_seconds - self.capture_seconds, 1e-9)
        return (
            f"jaxviz added at least {fmt_seconds(self.added_seconds)} to this cell "
            f"({self.added_seconds / plain:.0%} of its {fmt_seconds(plain)} without it): "
            f"{fmt_seconds(self.capture_seconds)} capturing, "
            f"{fmt_seconds(self.analysis_seconds)} analysing"
        )


@dataclasses.dataclass(eq=False, repr=False)
class CellTrace:
    """Everything one cell ran through JAX.

    Example:
        >>> import jaxviz
        >>> ct = jaxviz.trace_cell("import jax.numpy as jnp\\ny = jnp.sin(jnp.ones(3))\\n")
        >>> [t.kind for t in ct.traces]
        ['eager', 'eager']
    """

    traces: list = Analysed()  # type: ignore[assignment]  # one Trace per distinct
    # (function, signature): the user's own jitted functions first, then library jits and
    # eager statements, each in first-call order
    _: dataclasses.KW_ONLY
    source: str  # the cell's source
    filename: str  # the cell's filename, as in tracebacks ("<cell 3>")
    error: BaseException | None = None  # the cell's exception (recorded, not raised)
    error_frames: list[tuple] = dataclasses.field(default_factory=list)  # of `error`
    diagnostics: list = Analysed(())  # type: ignore[assignment]  # every Diagnostic of the
    # cell, the traces' own included
    label: str = ""  # what the user calls the cell, "cell [3]" ("" = filename)
    cost: CellCost | None = None  # what jaxviz added to the cell's time (None: not measured)
    # the cell's analysis, still to run (jaxviz.api.finish_cell(lazy=True)): `later(self)`
    # fills the Analysed fields; reading one runs it first (`analyse`). None: done
    later: Callable[[Any], None] | None = dataclasses.field(default=None, repr=False)
    # jaxviz's own failure in an analysis that ran later: kept, never raised into the code
    # that read the record (what it filled before it failed is there)
    analysis_error: BaseException | None = None

    def __post_init__(self) -> None:
        self.error_frames = list(self.error_frames)
        self.diagnostics = list(self.diagnostics)
        self.label = self.label or self.filename

    def analyse(self) -> None:
        """Runs the cell's analysis if it is still to run (`later`); at once otherwise."""
        later, self.later = self.later, None  # (the analysis reads the fields it fills)
        if later is None:
            return
        try:
            later(self)
        except Exception as e:  # jaxviz's own failure: a note, never the reader's error
            self.analysis_error = e

    @property
    def analysed(self) -> bool:
        """Whether the cell's analysis has run (its fields read without running it)."""
        return self.later is None

    def __getitem__(self, name_or_index: str | int) -> Any:
        if isinstance(name_or_index, int):
            return self.traces[name_or_index]
        for t in self.traces:
            if t.name == name_or_index:
                return t
        raise KeyError(
            f"no trace named {name_or_index!r}; the cell traced {[t.name for t in self.traces]}"
        )

    def __len__(self) -> int:
        return len(self.traces)

    def __iter__(self):
        return iter(self.traces)

    def __repr__(self) -> str:
        err = f", error={type(self.error).__name__}" if self.error else ""
        return (
            f"<jaxviz.CellTrace {len(self.traces)} traces, "
            f"{len(self.diagnostics)} diagnostics{err}>"
        )

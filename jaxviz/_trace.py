"""Trace: one staged function (a jitted function and abstract signature, or an eager group).

`jaxviz.trace(f, *args)` stages `f` without running it; `jaxviz.trace_cell` makes one
Trace per distinct (function, signature) that a cell ran. A Trace keeps avals, never the
user's arrays.

    >>> import jax.numpy as jnp, jaxviz
    >>> t = jaxviz.trace(lambda x: jnp.sin(x) * 2, jnp.ones(3))
    >>> [n.op for n in t.graph.body.nodes if n.kind == "eqn"]
    ['sin', 'mul']
"""
from __future__ import annotations

import traceback as _tb
import types
from typing import Any, Callable, Sequence

import jax

from jaxviz import _compat
from jaxviz._build import build_graph
from jaxviz._diagnostic import Diagnostic
from jaxviz._graph import Graph


class Trace:
    """What JAX staged for one function and signature, with diagnostics.

    Attributes:
      name: the function's name, "train_step".
      graph: the graph model (jaxviz.Graph).
      jaxpr: JAX's own jaxpr object (None when tracing failed before it existed).
      diagnostics: list of jaxviz.Diagnostic.
      error: what tracing raised, or None. The graph then holds what was staged before it.
      calls: how often the cell called it with this signature (1 for jaxviz.trace).
      call_sites: [(filename, line, count)] of the calls.
      fun: a jit-wrapped callable that `.lower(*args_spec, **kwargs_spec)` compiles.
      args_spec, kwargs_spec: the arguments as pytrees of jax.ShapeDtypeStruct (static
        values kept as they are): what compile() and run() need, without user arrays.
    """

    def __init__(self, name: str, graph: Graph, jaxpr: Any = None, *, fun: Callable | None = None,
                 args_spec: tuple = (), kwargs_spec: dict | None = None,
                 error: BaseException | None = None, error_frames: Sequence[tuple] = (),
                 calls: int = 1, call_sites: Sequence[tuple[str, int, int]] = (),
                 kind: str = "jit", arg_names: Sequence[str] = (), donated: Sequence[bool] = (),
                 diagnostics: list[Diagnostic] | None = None, notes: Sequence[str] = ()):
        self.name = name
        self.graph = graph
        self.jaxpr = jaxpr
        self.fun = fun
        self.args_spec = args_spec
        self.kwargs_spec = dict(kwargs_spec or {})
        self.error = error
        self.error_frames = list(error_frames)   # [(filename, line, function)] innermost last
        self.calls = calls
        self.call_sites = list(call_sites)
        self.kind = kind                         # "jit" | "eager" | "shard_map" | "trace"
        self.arg_names = list(arg_names)
        self.donated = list(donated)
        self.diagnostics: list[Diagnostic] = list(diagnostics or [])
        self.notes = list(notes)                 # things the user should know ("graph truncated")
        self.user_code = kind in ("jit", "trace")  # the user's own function, not a JAX-internal one
        self.static = ""                           # static arguments of the call, "act='gelu'"
        if graph.cut:
            from jaxviz._options import options
            self.notes.append(
                f"{name} staged more than {options.max_eqns:,} equations; the graph holds the "
                f"first {options.max_eqns:,} and leaves out {graph.cut:,}. To see them all, set "
                f"jaxviz.options.max_eqns = {options.max_eqns + graph.cut:,} (views get slower), "
                f"or trace a smaller part (one layer, one step).")

    @property
    def signature(self) -> str:
        """The input avals, "f32[8,128], f32[128]"."""
        b = self.graph.body
        return ", ".join(b.nodes[i].out[0] for i in b.inputs)

    def compile(self):
        """Lowers and compiles for the attached devices: jaxviz.CompileReport."""
        from jaxviz._compile import compile_trace
        return compile_trace(self)

    def run(self, *args, **kwargs):
        """Runs the compiled function in a loop and samples device memory: jaxviz.RunReport."""
        from jaxviz._run import run_trace
        return run_trace(self, *args, **kwargs)

    def live_run(self, *args, **kwargs):
        """Displays a live memory chart and runs (see run); returns the RunReport."""
        from jaxviz._memory import live_run
        return live_run(self, *args, **kwargs)

    def to_dot(self, **kwargs):
        """The graph as a graphviz.Digraph (DOT; `.pipe("svg")` with a `dot` program)."""
        from jaxviz._dot import to_dot
        return to_dot(self.graph, **kwargs)

    def __str__(self) -> str:
        from jaxviz._text import trace_text
        return trace_text(self)

    def __repr__(self) -> str:
        err = f", error={type(self.error).__name__}" if self.error else ""
        return (f"<jaxviz.Trace {self.name}({self.signature}): {self.graph.n_eqns} eqns, "
                f"{len(self.diagnostics)} diagnostics{err}>")

    def eqn(self, body: int, node: int) -> Any:
        """JAX's equation behind graph node `node` of body `body` (None for io nodes)."""
        return self.graph._eqns.get((body, node))

    @property
    def widget(self):
        """The live view's model: `trace.widget.selected_eqn` is the equation clicked last."""
        if getattr(self, "_widget", None) is None:
            from jaxviz._widget import make_widget
            self._widget = make_widget([self], self.diagnostics)
        return self._widget

    def _repr_mimebundle_(self, include=None, exclude=None):
        from jaxviz._text import trace_text
        from jaxviz._views import TEXT_LINES, mimebundle
        return mimebundle([self], self.diagnostics, trace_text(self, max_lines=TEXT_LINES),
                          widget=self.widget if _in_kernel() else None)


def _in_kernel() -> bool:
    """Whether a Jupyter kernel (with a front-end to sync widgets to) is running us."""
    from jaxviz._views import in_kernel
    return in_kernel()


def _spec(x: Any) -> Any:
    """An array leaf as a ShapeDtypeStruct (with its sharding); other leaves unchanged."""
    if isinstance(x, jax.ShapeDtypeStruct):
        return x
    if isinstance(x, jax.Array):
        try:
            # an uncommitted array goes wherever the computation does: pinning its default
            # device would clash with the sharded arguments next to it
            sharding = x.sharding if _compat.is_committed(x) else None
            return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding,
                                        weak_type=getattr(x, "weak_type", False))
        except (RuntimeError, ValueError, TypeError):     # deleted (donated) arrays
            return jax.ShapeDtypeStruct(x.shape, x.dtype)
    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (int, float, complex, bool)):
        return jax.ShapeDtypeStruct(x.shape, x.dtype)     # numpy arrays
    return x


def specs(tree: Any) -> Any:
    return jax.tree_util.tree_map(_spec, tree)


def fun_name(fn: Any) -> str:
    inner = _compat.jit_wrapped_fun(fn) or fn
    inner = getattr(inner, "func", inner)            # functools.partial
    name = getattr(inner, "__qualname__", None) or getattr(inner, "__name__", None)
    return (name or type(fn).__name__).rsplit(".<locals>.", 1)[-1]


def error_frames(exc: BaseException) -> list[tuple[str, int, str]]:
    """[(filename, line, function)] of an exception's traceback, user frames only."""
    return [(f.filename, f.lineno or 0, f.name) for f in _tb.extract_tb(exc.__traceback__)
            if _compat.is_user_filename(f.filename)]


def forget_traceback(exc: BaseException) -> BaseException:
    """Drops an exception's frames (and the arrays their locals hold), keeping its message."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return exc


def flat_arg_names(args: tuple, kwargs: dict, params: Sequence[str] = ()) -> list[str]:
    """Pytree paths of the flat arguments: "x", "params['w1']"."""
    out = []
    for i, a in enumerate(args):
        base = params[i] if i < len(params) else f"args[{i}]"
        for path, _ in jax.tree_util.tree_flatten_with_path(a)[0]:
            out.append(base + jax.tree_util.keystr(path))
    for k, v in kwargs.items():
        for path, _ in jax.tree_util.tree_flatten_with_path(v)[0]:
            out.append(k + jax.tree_util.keystr(path))
    return out


def _param_names(fn: Any) -> list[str]:
    import inspect
    try:
        sig = inspect.signature(_compat.jit_wrapped_fun(fn) or fn)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


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
            f"Pass the function and its arguments separately: jaxviz.trace(f, x), not jaxviz.trace(f(x)).")
    name = fun_name(fn)
    jitted = fn if isinstance(fn, _compat.JIT_FUNCTION_TYPE) else jax.jit(fn)
    names = flat_arg_names(args, kwargs, _param_names(fn))
    args_spec, kwargs_spec = specs(args), specs(kwargs)
    top: list = []
    with _compat.watching_top_frames(lambda frame, *_: top.append(frame)):
        try:
            traced = jitted.trace(*args, **kwargs)
        except Exception as e:  # the user's code failed: keep what was staged
            frames_ = error_frames(e)
            partial = partial_jaxpr(top[0]) if top else None
            graph = build_graph(partial, name, arg_names=names, root_code=_root_code(fn)) if partial is not None else \
                build_graph(_EMPTY, name)
            t = Trace(name, graph, None, fun=jitted, args_spec=args_spec,
                      kwargs_spec=kwargs_spec, error=forget_traceback(e),
                      error_frames=frames_, kind="trace", arg_names=names)
            from jaxviz._diagnostics import diagnose_trace
            t.diagnostics.extend(diagnose_trace(t))
            return t
    closed = traced.jaxpr
    n_flat = len(_compat.open_jaxpr(closed).invars)
    if len(names) != n_flat:
        names = [f"arg{i}" for i in range(n_flat)]
    graph = build_graph(closed, name, arg_names=names, root_code=_root_code(fn))
    t = Trace(name, graph, closed, fun=jitted, args_spec=args_spec, kwargs_spec=kwargs_spec,
              kind="trace", arg_names=names)
    from jaxviz._diagnostics import diagnose_trace
    t.diagnostics.extend(diagnose_trace(t))
    return t


def _root_code(fn: Any) -> Any:
    inner = _compat.jit_wrapped_fun(fn) or fn
    return getattr(getattr(inner, "func", inner), "__code__", None)


_EMPTY = types.SimpleNamespace(invars=[], constvars=[], outvars=[], eqns=[])


def partial_jaxpr(frame: Any) -> Any | None:
    """What a trace staged before it failed, as a jaxpr-like object (None if nothing)."""
    eqns = _compat.frame_eqns(frame)
    if not eqns:
        return None
    return types.SimpleNamespace(invars=_compat.frame_invars(frame), constvars=[], outvars=[],
                                 eqns=eqns)

"""Rules read from what was staged: large-constant, donation-unusable, recompile.

* large-constant: the graph's constant nodes (closed-over arrays) above
  `jaxviz.options.large_constant_bytes`, with the node that consumes each.
* donation-unusable: JAX's own matching, replayed on avals: each donated input takes the
  first unclaimed output with its shape and dtype; an input with none (or one the function
  never reads) cannot be aliased. This also covers the silent dtype-changing case.
* recompile: one function traced again in a cell (not served by JAX's cache), with what
  changed (the tracing context, the arguments' structure, static values, avals); or a
  function made anew at each call and traced each time. The function is the object jit
  wrapped, or, when a wrapper from another module (equinox's filter_jit) is jitted and the
  user's function is passed to it as a static argument, that user's function.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
import types
import weakref
from collections.abc import Callable, Set
from typing import Any

import jax

from jaxviz import _compat
from jaxviz.capture.places import is_user_file
from jaxviz.config import options
from jaxviz.diagnostics.retrace_why import (
    remade_reason,
    sharding_name,
    static_change,
    tree_difference,
    user_partial_code,
)


@dataclasses.dataclass
class BigConst:
    nbytes: int
    type: str  # "f32[1024,1024]"
    node_id: str  # "b:id" of the consumer (or of the constant when unused)
    loc: Any  # the consumer's Loc, or None
    consumer: str  # the consuming op, "dot_general"


# each jaxpr's summary, held as long as JAX holds the jaxpr (its tracing cache): a cell run
# again checks the same jaxpr objects (an 800-equation train step's walk: ~0.8 ms a cell)
_SUMMARIES: weakref.WeakKeyDictionary[Any, tuple[frozenset[str], int]] = weakref.WeakKeyDictionary()


def staged_summary(jaxpr: Any) -> tuple[frozenset[str], int]:
    """The primitives a jaxpr stages, its sub-jaxprs' included, and the bytes of its largest
    constant (each body's constvars): what tells the static checks whether to read the
    graph at all (a trace's graph is built when first read)."""
    return _compat.per_jaxpr(_SUMMARIES, jaxpr, _summary)


def _summary(jaxpr: Any) -> tuple[frozenset[str], int]:
    names: set[str] = set()
    biggest = 0
    todo, seen = [jaxpr], set()
    while todo:
        j = todo.pop()
        if id(j) in seen:
            continue
        seen.add(id(j))
        open_j = _compat.open_jaxpr(j)
        consts = _compat.jaxpr_consts(j)
        for i, v in enumerate(open_j.constvars):
            n = int(getattr(consts[i], "nbytes", 0)) if i < len(consts) else 0
            biggest = max(biggest, n or _compat.aval_nbytes(v.aval))
        for eqn in open_j.eqns:
            names.add(eqn.primitive.name)
            todo.extend(sub.jaxpr for sub in _compat.sub_jaxprs(eqn))
    return frozenset(names), biggest


def large_constants(graph: Any, threshold: int | None = None) -> list[BigConst]:
    limit = options.large_constant_bytes if threshold is None else threshold
    out = []
    for b in graph.bodies:
        consts = [n for n in b.nodes if n.kind == "const" and n.nbytes > limit]
        if not consts:
            continue
        for c in consts:
            dst = next((e.dst for e in b.edges if e.src == c.id), None)
            node = b.nodes[dst] if dst is not None else c
            out.append(
                BigConst(
                    c.nbytes,
                    c.out[0] if c.out else "?",
                    f"{b.id}:{node.id}",
                    node.loc,
                    node.op if dst is not None else "",
                )
            )
    return out


@dataclasses.dataclass
class Unusable:
    index: int  # flat input index
    name: str  # "params['w']"
    type: str  # "f32[1000]"
    why: str


def donated_flat(fun: Any, args_spec: tuple, kwargs_spec: dict) -> list[bool]:
    """Donation mask over flat inputs, from a jitted function's donate_argnums/argnames."""
    opts = _compat.jit_options(fun)
    if not opts or not (opts["donate_argnums"] or opts["donate_argnames"]):
        return []
    static = set(opts["static_argnums"])
    mask: list[bool] = []
    for i, a in enumerate(args_spec):
        if i in static:
            continue
        n = len(jax.tree_util.tree_leaves(a))
        mask += [i in opts["donate_argnums"]] * n
    for k, v in kwargs_spec.items():
        if k in opts["static_argnames"]:
            continue
        mask += [k in opts["donate_argnames"]] * len(jax.tree_util.tree_leaves(v))
    return mask


def unusable_donations(jaxpr: Any, donated: list[bool], names: list[str]) -> list[Unusable]:
    j = _compat.open_jaxpr(jaxpr)
    if not any(donated) or len(donated) != len(j.invars):
        return []
    used: set = set()
    for e in j.eqns:
        used.update(v for v in e.invars if not _compat.is_literal(v))
    used.update(v for v in j.outvars if not _compat.is_literal(v))
    pool = [(tuple(v.aval.shape), str(v.aval.dtype)) for v in j.outvars if hasattr(v.aval, "shape")]
    taken: dict[tuple, list[str]] = {}  # (shape, dtype) -> the donated inputs that took them
    out = []
    for i, (v, d) in enumerate(zip(j.invars, donated)):
        if not d:
            continue
        name = names[i] if i < len(names) else f"arg{i}"
        typ = _compat.short_type(v.aval)
        if v not in used:
            out.append(
                Unusable(
                    i,
                    name,
                    typ,
                    f"the function never reads `{name}`, so jit drops "
                    f"it and the donation does nothing",
                )
            )
            continue
        want = (tuple(v.aval.shape), str(v.aval.dtype))
        if want in pool:
            pool.remove(want)
            taken.setdefault(want, []).append(name)
            continue
        same_shape = [dt for sh, dt in pool if sh == want[0]]
        if want in taken:  # outputs of its type exist, and earlier donations took them all
            takers = taken[want]
            n = len(takers)
            who = ", ".join(f"`{t}`" for t in takers[:-1]) + (" and " if n > 1 else "")
            who += f"`{takers[-1]}`"
            what = f"the only {typ} output" if n == 1 else f"all {n} {typ} outputs"
            why = (
                f"{who} already {'takes' if n == 1 else 'take'} {what} (each output can "
                f"reuse one donated buffer)"
            )
        elif same_shape:
            why = (
                f"the only output with its shape has dtype {same_shape[0]}, not {want[1]}: XLA "
                f"cannot reuse the buffer and does not say so"
            )
        else:
            outs = ", ".join(_compat.short_type(o.aval) for o in j.outvars) or "none"
            why = f"no output has its shape and dtype (outputs: {outs})"
        out.append(Unusable(i, name, typ, why))
    return out


@dataclasses.dataclass
class Retrace:
    """One recompile: `trace` was traced in the cell after `previous`, a trace of the same
    function; or (`remade`) the function was a new object at each call, all made at one
    place in the code."""

    trace: Any  # the later Trace
    previous: Any  # the Trace before it
    reason: str
    signatures: int = 2  # how many traces of this function the cell made in all
    remade: tuple = ()  # a new function object at each call: the first trace of each
    name: str = ""  # the user's name for the function ("" : the trace's name)
    # remade: how many calls each new object served; each more than one (a factory's
    # function, made per config and then called many times: jit's cache served the rest)
    calls: tuple = ()
    uncounted: bool = False  # more calls ran than `calls` counts (unwatched: "16+ calls")

    @property
    def reused(self) -> bool:
        """Each function object made anew served more than one call (no cache miss at each
        call: one trace per object, as a sweep over configs makes)."""
        return bool(self.calls) and min(self.calls) > 1


def _user_code(t: Any) -> Any:
    code = getattr(_compat.unwrap(t.fun), "__code__", None) if t.fun is not None else None
    if code is None or not _compat.is_user_filename(code.co_filename):
        return None
    return code


_LEAF_TYPES = (jax.ShapeDtypeStruct, str, bytes, int, float, complex, bool, type(None), type)


def _static_functions(t: Any, budget: int = 256) -> list:
    """The user's functions among a trace's arguments (static ones: jit cannot trace a
    function): the leaves of the arguments, and inside a leaf that is a plain object (a
    wrapper of the static part, as equinox's filter_jit makes), its attributes' leaves, a
    few levels deep. A pytree node's own fields (a Module's activation) are not looked in:
    jit traces its leaves."""
    found: list = []
    seen: set[int] = set()
    todo: list[tuple[Any, int]] = [(v, 0) for v in (*t.args_spec, *(t.kwargs_spec or {}).values())]
    while todo and budget > 0:
        v, depth = todo.pop(0)
        if isinstance(v, _LEAF_TYPES) or id(v) in seen:
            continue
        budget -= 1
        seen.add(id(v))
        if _is_user_function(v):
            found.append(_compat.unwrap(v, partial=False))
            continue
        if depth >= 4 or isinstance(v, (types.ModuleType, types.FunctionType, types.MethodType)):
            continue
        leaves = jax.tree_util.tree_leaves(v)
        if len(leaves) != 1 or leaves[0] is not v:  # a pytree: its leaves
            todo.extend((x, depth + 1) for x in leaves)
            continue
        try:
            attrs = list(vars(v).values())
        except TypeError:  # no __dict__: a treedef, a C object
            continue
        todo.extend((x, depth + 1) for x in attrs)
    return found


def _fid(fn: Any) -> tuple:
    """A function's identity (a bound method is a new object at each attribute access)."""
    if isinstance(fn, types.MethodType):
        return (id(fn.__func__), id(fn.__self__))
    return (id(fn),)


def _subject(t: Any) -> tuple[Any, tuple]:
    """The function a trace traced, to the user, and its identity. jit's cache is per
    function object (the one jax.jit wrapped: a functools.partial is an object of its own);
    but when the jitted function is a wrapper from another module (a library's, a helper
    module's) and a user's function from elsewhere is passed to it as a static argument
    (equinox's filter_jit jits one shared function so), that function is what is traced:
    each one is a different function, though one jitted object traces them all."""
    obj = _compat.unwrap(t.fun, partial=False)
    code = _user_code(t)
    if code is not None and not _binds_user_function(obj):
        here = code.co_filename
        try:
            static = _static_functions(t)
        except Exception:  # an argument object that cannot be looked into
            static = []
        others = [f for f in static if getattr(_compat.user_code(f), "co_filename", here) != here]
        if others:
            return others[0], (id(obj), *(x for f in others for x in _fid(f)))
    return obj, (id(obj),)


def _is_user_function(v: Any) -> bool:
    fn = _compat.unwrap(v, partial=False)
    if not isinstance(fn, (types.FunctionType, types.MethodType, functools.partial)):
        return False
    code = _compat.user_code(fn)
    return code is not None and is_user_file(code.co_filename)


def _binds_user_function(obj: Any) -> bool:
    """Whether a jitted function holds a user's function of its own (in its closure, a
    partial's arguments, `__wrapped__`): a wrapper made for that one function, which it
    calls; not a shared wrapper that is handed the function to call."""
    held: list = [getattr(obj, "__wrapped__", None)]
    if isinstance(obj, functools.partial):
        held += [obj.func, *obj.args, *obj.keywords.values()]
        obj = obj.func
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    return any(v is not None and v is not obj and _is_user_function(v) for v in held)


def retraces(
    traces: list,
    first_call: Callable[[Any], Any] | None = None,
    kept: Callable[[], Set[int]] = frozenset,
) -> list[Retrace]:
    """The cell's recompiles: a function traced again with another signature or in another
    tracing context, and a function made anew at each call (`jax.jit(lambda ...)` in a
    loop) and traced each time.

    first_call(trace): the observer's FirstCall of the trace's first call in the cell, or
    None when unknown (then taken as traced in the cell, in an unknown context). A trace
    JAX's cache served (an earlier cell traced it) is no recompile. kept: ids of the objects
    the user keeps (the namespace's values and the items of its containers), asked for only
    when needed: functions kept side by side are distinct functions, each traced once, even
    when they share code.
    """
    first = first_call or (lambda t: None)

    def traced(t: Any) -> bool:
        fc = first(t)
        return fc is None or bool(fc.traced)

    def context(t: Any) -> tuple:
        fc = first(t)
        return fc.context if fc is not None else ()

    # jit's cache is per function object, so a retrace is a trace of a function traced
    # before: the object jax.jit wrapped, or the user's function a wrapper was given
    by_fun: dict[tuple, list] = {}
    subject: dict[tuple, Any] = {}
    for t in traces:
        if t.kind == "jit" and (_user_code(t) or user_partial_code(t)) is not None:
            fn, key = _subject(t)
            by_fun.setdefault(key, []).append(t)
            subject.setdefault(key, fn)
    names = {
        k: _compat.fun_name(fn) if len(k) > 1 else by_fun[k][0].name for k, fn in subject.items()
    }
    out = []
    for k, ts in by_fun.items():
        for prev, t in itertools.pairwise(ts):
            if traced(t):
                reason = _reason(prev, t, context(prev), context(t))
                out.append(Retrace(t, prev, reason, len(ts), name=names[k]))
    # one function made anew at each call: objects with one code and one name, first called
    # by the same call expression, none kept by the user but (maybe) the last. Functions that
    # share code but not their name are different functions (a library names the function
    # it jits for each user function after it, as equinox's filter_jit does).
    made_at: dict[tuple, list] = {}
    for k, ts in by_fun.items():
        t = ts[0]
        fc = first(t)
        at = (
            fc.at
            if fc is not None and fc.at
            else (tuple(t.call_sites[0][:2]) if t.call_sites else None)
        )
        code = (
            getattr(_compat.unwrap(subject[k]), "__code__", None)
            if len(k) > 1
            else (_user_code(t) or user_partial_code(t))
        )
        if at is not None and code is not None:
            made_at.setdefault((code, at, names[k]), []).append(k)
    ids: Set[int] | None = None
    for group in made_at.values():
        if len(group) < 2:
            continue
        ids = kept() if ids is None else ids
        keys = [k for k in group[:-1] if not _kept(by_fun[k][0], ids)] + group[-1:]
        firsts = [by_fun[k][0] for k in keys]
        if len(keys) < 2 or not any(traced(t) for t in firsts[1:]):
            continue
        out.append(
            Retrace(
                firsts[-1],
                firsts[0],
                remade_reason(subject[keys[-1]]),
                len(keys),
                tuple(t for t in firsts if t is firsts[0] or traced(t)),
                name=names[keys[-1]],
                calls=tuple(sum(t.calls for t in by_fun[k]) for k in keys),
                uncounted=any(
                    getattr(t, "calls_uncounted", False) for k in keys for t in by_fun[k]
                ),
            )
        )
    return out


def _kept(t: Any, kept: Set[int]) -> bool:
    return id(t.fun) in kept or id(_compat.unwrap(t.fun, partial=False)) in kept


def _reason(a: Any, b: Any, ctx_a: tuple = (), ctx_b: tuple = ()) -> str:
    """Why one function object was traced again: what differs between two of its traces
    (the tracing context, the arguments' structure, static values, avals)."""
    ctx = _compat.context_changes(ctx_a, ctx_b)
    if ctx:
        return _join([f"{what} changed: {x} -> {y}" for what, x, y in ctx])
    oa = None if a.rejitted else _compat.jit_options(a.fun)
    ob = None if b.rejitted else _compat.jit_options(b.fun)
    if oa is not None and ob is not None:  # the options that change what is traced
        opts = [
            f"{k} {oa[k]!r:.30} -> {ob[k]!r:.30}"
            for k in ("static_argnums", "static_argnames")
            if oa[k] != ob[k]
        ]
        if opts:
            return "it was jitted again with other options: " + ", ".join(opts)
    ka, kb = set(a.kwargs_spec or {}), set(b.kwargs_spec or {})
    if ka != kb:
        parts = ([f"added {', '.join(f'`{k}`' for k in sorted(kb - ka))}"] if kb - ka else []) + (
            [f"left out {', '.join(f'`{k}`' for k in sorted(ka - kb))}"] if ka - kb else []
        )
        return f"the keyword arguments changed: {' and '.join(parts)}"
    if len(a.args_spec) != len(b.args_spec):
        return (
            f"the number of positional arguments changed: {len(a.args_spec)} -> {len(b.args_spec)}"
        )
    params = _compat.param_names(b.fun)
    static = _static_params(b, params)
    args = [
        (params[i] if i < len(params) else f"args[{i}]", x, y)
        for i, (x, y) in enumerate(zip(a.args_spec, b.args_spec))
    ] + [(k, a.kwargs_spec[k], b.kwargs_spec[k]) for k in b.kwargs_spec]
    tree = {name: c for name, x, y in args if (c := _tree_change(name, x, y))}
    users = _users_names(b, args, static)
    leaves = list(tree.values())  # and what changed in the arguments of one structure
    for name, x, y in args:
        for (path, lx), ly in (
            []
            if name in tree
            else zip(jax.tree_util.tree_flatten_with_path(x)[0], jax.tree_util.tree_leaves(y))
        ):
            nm = name + jax.tree_util.keystr(path)
            c = _leaf_change(users.get(nm, nm), lx, ly, static, name)
            if c:
                leaves.append(c)
    if leaves:
        return _join(leaves)
    if a.static != b.static:  # one function jitted with other static_argnums / argnames
        return f"the static arguments changed: {a.static or 'none'} -> {b.static or 'none'}"
    shardings = []
    for name, x, y in args:
        for (path, lx), ly in zip(
            jax.tree_util.tree_flatten_with_path(x)[0], jax.tree_util.tree_leaves(y)
        ):
            sx, sy = getattr(lx, "sharding", None), getattr(ly, "sharding", None)
            if isinstance(lx, jax.ShapeDtypeStruct) and sx != sy:
                nm = name + jax.tree_util.keystr(path)
                shardings.append(
                    f"`{nm}` changed sharding: {sharding_name(sx)} -> {sharding_name(sy)}"
                )
    if shardings:
        return _join(shardings)
    return (
        "the arguments and the tracing context (mesh, config) are the same: JAX's caches "
        "were cleared in between (jax.clear_caches()), or it was jitted again with other "
        "options"
    )


def _users_names(t: Any, args: list, static: set[str] | None) -> dict[str, str]:
    """{the jitted function's path to a traced leaf: the user's name for it}, when a library
    made the call on the user's behalf and the capture found the user's names (equinox's
    filter_jit: `dynamic[2]` is the user's `x`); else empty."""
    if not t.library_sites or static is None:
        return {}
    n = len(t.args_spec)
    ordered = args[:n] + sorted(args[n:], key=lambda a: a[0])  # jit flattens kwargs sorted
    paths = [
        name + jax.tree_util.keystr(path)
        for name, x, _y in ordered
        if name not in static
        for path, _leaf in jax.tree_util.tree_flatten_with_path(x)[0]
    ]
    names = list(t.arg_names)
    if len(paths) != len(names):
        return {}
    return {p: u for p, u in zip(paths, names) if u != p and not re.fullmatch(r"arg\d+", u)}


def _join(changes: list[str], most: int = 3) -> str:
    more = f"; and {len(changes) - most} more" if len(changes) > most else ""
    return "; ".join(changes[:most]) + more


def _static_params(t: Any, params: list[str]) -> set[str] | None:
    """The names of the static parameters of a trace's jitted function (None: unknown)."""
    opts = None if t.rejitted else _compat.jit_options(t.fun)
    if opts is None:
        return None
    names = set(opts["static_argnames"])
    names.update(params[i] if i < len(params) else f"args[{i}]" for i in opts["static_argnums"])
    return names


def _tree_change(name: str, x: Any, y: Any) -> str:
    """How the pytree structure of one argument changed ("" when it did not)."""
    tu = jax.tree_util
    if tu.tree_structure(x) == tu.tree_structure(y):  # type: ignore[operator]
        return ""
    if isinstance(x, dict) and isinstance(y, dict):
        if set(x) != set(y):
            added = [k for k in y if k not in x]
            gone = [k for k in x if k not in y]
            parts = ([f"added {', '.join(repr(k) for k in added)}"] if added else []) + (
                [f"left out {', '.join(repr(k) for k in gone)}"] if gone else []
            )
            return f"`{name}` has other keys: {' and '.join(parts)}"
        for k in x:
            c = _tree_change(f"{name}[{k!r}]", x[k], y[k])
            if c:
                return c
    elif isinstance(x, (list, tuple)) and type(x) is type(y):
        fields = getattr(x, "_fields", None)
        if len(x) != len(y):
            return f"`{name}` changed length: {len(x)} -> {len(y)}"
        for i, (u, v) in enumerate(zip(x, y)):
            c = _tree_change(f"{name}.{fields[i]}" if fields else f"{name}[{i}]", u, v)
            if c:
                return c
    elif type(x) is not type(y):
        return f"`{name}` was {_kind(x)}, then {_kind(y)}"
    return tree_difference(name, x, y) or f"`{name}` changed pytree structure"


def _kind(v: Any) -> str:
    if isinstance(v, jax.ShapeDtypeStruct):
        return f"a {_fmt(v)} array"
    if v is None:
        return "None"
    return f"a {type(v).__name__}"


def _leaf_change(nm: str, x: Any, y: Any, static: set[str] | None, top: str) -> str:
    """How one leaf of an argument changed in a way that makes jit trace again ("" if not)."""
    if isinstance(x, jax.ShapeDtypeStruct) and isinstance(y, jax.ShapeDtypeStruct):
        if x.shape != y.shape:
            return f"`{nm}` changed shape: {_fmt(x)} -> {_fmt(y)}"
        if x.dtype != y.dtype:
            return f"`{nm}` changed dtype: {_fmt(x)} -> {_fmt(y)}"
        if getattr(x, "weak_type", False) != getattr(y, "weak_type", False):
            return (
                f"`{nm}` changed weak type: {_fmt(x)} -> {_fmt(y)} (weakly typed one "
                f"time, as an array made from a Python number is: `jnp.array(1.0)`; "
                f"strongly typed the other)"
            )
        return ""
    is_static = static is not None and top in static
    if not is_static and (_py_scalar(x) or _py_scalar(y)):
        # A Python number is traced as a weakly typed array, not as a static value
        if isinstance(x, jax.ShapeDtypeStruct) or isinstance(y, jax.ShapeDtypeStruct):
            arr = x if isinstance(x, jax.ShapeDtypeStruct) else y
            num = y if arr is x else x
            order = (
                "a {a} array, then a Python {n}" if arr is x else "a Python {n}, then a {a} array"
            )
            why = (
                ": a Python number is weakly typed, an array is not"
                if arr.shape == ()
                else ": the shape changed (a Python number is a scalar)"
            )
            return f"`{nm}` was " + order.format(a=_fmt(arr), n=type(num).__name__) + why
        if type(x) is not type(y):
            return (
                f"`{nm}` was a Python {type(x).__name__}, then a Python "
                f"{type(y).__name__}: the dtype changed"
            )
        if static is not None:
            return ""  # a traced Python number: its value is no part of the signature
    try:
        same = type(x) is type(y) and bool(x == y)
    except Exception:  # a static value without a usable ==
        same = x is y
    return "" if same else static_change(nm, x, y)


def _py_scalar(v: Any) -> bool:
    return type(v) in (bool, int, float, complex)


def _fmt(s: Any) -> str:
    t = (
        _compat.short_type(
            jax.core.ShapedArray(s.shape, s.dtype, weak_type=getattr(s, "weak_type", False))
        )
        if hasattr(jax.core, "ShapedArray")
        else f"{s.dtype}{list(s.shape)}"
    )
    return t

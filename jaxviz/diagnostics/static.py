"""Rules read from what was staged: large-constant, donation-unusable, recompile.

* large-constant: the graph's constant nodes (closed-over arrays) above
  `jaxviz.options.large_constant_bytes`, with the node that consumes each.
* donation-unusable: JAX's own matching, replayed on avals: each donated input takes the
  first unclaimed output with its shape and dtype; an input with none (or one the function
  never reads) cannot be aliased. This also covers the silent dtype-changing case.
* recompile: several traces of one user function in a cell, with what changed.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import jax

from jaxviz import _compat
from jaxviz.config import options


@dataclasses.dataclass
class BigConst:
    nbytes: int
    type: str  # "f32[1024,1024]"
    node_id: str  # "b:id" of the consumer (or of the constant when unused)
    loc: Any  # the consumer's Loc, or None
    consumer: str  # the consuming op, "dot_general"


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
    trace: Any  # the later Trace
    previous: Any  # the Trace before it
    reason: str
    signatures: int = 2  # how many times the cell traced this function in all


def _user_code(t: Any) -> Any:
    code = getattr(_compat.unwrap(t.fun), "__code__", None) if t.fun is not None else None
    if code is None or not _compat.is_user_filename(code.co_filename):
        return None
    return code


def retraces(traces: list) -> list[Retrace]:
    groups: dict[Any, list] = {}
    for t in traces:
        if t.kind != "jit":
            continue
        code = _user_code(t)
        if code is not None:
            groups.setdefault(code, []).append(t)
    out = []
    for ts in groups.values():
        for prev, t in itertools.pairwise(ts):
            out.append(Retrace(t, prev, _reason(prev, t), len(ts)))
    return out


def _reason(a: Any, b: Any) -> str:
    fa = _compat.unwrap(a.fun, partial=False)
    fb = _compat.unwrap(b.fun, partial=False)
    spec_a = (a.args_spec, a.kwargs_spec)
    spec_b = (b.args_spec, b.kwargs_spec)
    la, ta = jax.tree_util.tree_flatten(spec_a)
    lb, tb = jax.tree_util.tree_flatten(spec_b)
    names = b.arg_names
    if ta != tb:  # type: ignore[operator]  # PyTreeDefs compare by structure
        ka, kb = set(a.kwargs_spec or {}), set(b.kwargs_spec or {})
        if ka != kb:
            parts = (
                [f"added {', '.join(f'`{k}`' for k in sorted(kb - ka))}"] if kb - ka else []
            ) + ([f"left out {', '.join(f'`{k}`' for k in sorted(ka - kb))}"] if ka - kb else [])
            return f"the keyword arguments changed: {' and '.join(parts)}"
        return f"the arguments' pytree structure changed: {ta} -> {tb}"
    k = 0
    for x, y in zip(la, lb):
        nm = names[k] if k < len(names) else f"argument {k}"
        if isinstance(x, jax.ShapeDtypeStruct) and isinstance(y, jax.ShapeDtypeStruct):
            if x.shape != y.shape:
                return f"`{nm}` changed shape: {_fmt(x)} -> {_fmt(y)}"
            if x.dtype != y.dtype:
                return f"`{nm}` changed dtype: {_fmt(x)} -> {_fmt(y)}"
            if getattr(x, "weak_type", False) != getattr(y, "weak_type", False):
                return (
                    f"`{nm}` changed weak type: {_fmt(x)} -> {_fmt(y)} (a Python scalar "
                    f"one time, an array the other)"
                )
            k += 1
        elif _py_scalar(x) or _py_scalar(y):
            # A Python number is traced as a weakly typed array, not as a static value
            if isinstance(x, jax.ShapeDtypeStruct) or isinstance(y, jax.ShapeDtypeStruct):
                arr = x if isinstance(x, jax.ShapeDtypeStruct) else y
                num = y if arr is x else x
                order = (
                    "a {a} array, then a Python {n}"
                    if arr is x
                    else "a Python {n}, then a {a} array"
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
            if x != y:
                return f"a static argument changed: {x!r} -> {y!r}"
            k += 1
        elif type(x) is not type(y) or x != y:
            return f"a static argument changed: {x!r} -> {y!r}"
    if fa is not fb and fa is not None:
        return (
            "the function is a new object each time (a lambda or a function defined inside "
            "a loop or another function, jitted again): jit's cache is per function object"
        )
    return "the signature is the same (the cache was cleared or the function's globals changed)"


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

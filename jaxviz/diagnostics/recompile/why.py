"""recompile: why a function was traced again, in words that point at the fix; and which fix.

`retrace_reason` finds what differs between two traces of one function (the tracing
context, the jit options, the arguments' structure, static values, avals, shardings). The
differences that need more than "x -> y" are worded here too: a static argument whose class
compares by identity (a new instance at each call misses jit's cache however equal), a
static value shown by what it is rather than a repr cut mid-address, and two pytree
structures shown at the first place they differ. `hint_variant` picks the recompile rule's
hint that fits a reason (jaxviz.diagnostics.rules).
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

import jax

from jaxviz import _compat

_DEFAULT_REPR = re.compile(r"^<([\w.]+) object at 0x[0-9a-f]+>$")
_MOST = 40  # characters of a static value's repr


# --- what differs between two traces of one function ---------------------------------------


def retrace_reason(a: Any, b: Any, ctx_a: tuple = (), ctx_b: tuple = ()) -> str:
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
    shardings: list[str] = []
    alike: list[str] = []  # (a layout written otherwise: after the ones that differ)
    for name, x, y in args:
        for (path, lx), ly in zip(
            jax.tree_util.tree_flatten_with_path(x)[0], jax.tree_util.tree_leaves(y)
        ):
            sx, sy = getattr(lx, "sharding", None), getattr(ly, "sharding", None)
            if isinstance(lx, jax.ShapeDtypeStruct) and sx != sy:
                nm = name + jax.tree_util.keystr(path)
                same = _same_layout(sx, sy, len(lx.shape))
                (alike if same else shardings).append(
                    f"`{nm}` changed sharding: {sharding_name(sx)} -> {sharding_name(sy)}"
                    + (_SAME_LAYOUT if same else "")
                )
    if shardings or alike:
        return _join(shardings + alike)
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


# --- the words for what differs ----------------------------------------------------------------


def compares_by_identity(x: Any) -> bool:
    """Whether x's class keeps object's `__eq__` (so equal instances are different keys of
    jit's cache, and a new instance per call traces again)."""
    cls = type(x)
    return cls.__eq__ is object.__eq__ and not isinstance(x, type) and not callable(x)


def describe(v: Any) -> str:
    """A static value as the user would name it: `sin`, `a lambda`, a `Hparams` object,
    or its repr, cut at a word boundary."""
    if callable(v) and not isinstance(v, type):
        name = _compat.fun_name(v)
        return "a lambda" if name == "<lambda>" else f"`{name}`"
    r = repr(v)
    if _DEFAULT_REPR.match(r):
        return f"a `{type(v).__name__}` object"
    return r if len(r) <= _MOST else r[: _MOST - 3].rstrip() + "..."


def static_change(nm: str, x: Any, y: Any) -> str:
    """How a static argument changed between two traces (it did: `x != y`)."""
    if type(x) is type(y) and compares_by_identity(x):
        cls = type(x).__name__
        return (
            f"the static argument `{nm}` is a new `{cls}` object at each call, and `{cls}` "
            f"defines no `__eq__`/`__hash__`: jit compares its instances by identity, so "
            f"equal ones miss its cache"
        )
    kind = "function argument" if callable(x) and callable(y) else "argument"
    return f"the static {kind} `{nm}` changed: {describe(x)} -> {describe(y)}"


def user_partial_code(t: Any) -> Any:
    """The code of the function a `functools.partial` wraps, when the user jitted the partial
    and called it (`jax.jit(partial(gmres, matvec, tol=1e-6))` of a library's gmres): the
    partial is the user's object, a new one at each `jax.jit(partial(...))`, though the code
    is a library's. None otherwise, and when a library made the call."""
    fun = t.fun
    obj = _compat.unwrap(fun, partial=False) if fun is not None else None
    if not isinstance(obj, functools.partial) or t.library_sites or not t.call_sites:
        return None
    return getattr(_compat.unwrap(obj), "__code__", None)


def remade_reason(fn: Any) -> str:
    """Why a function made anew at each call is traced each time."""
    if isinstance(fn, functools.partial):
        what = "`jax.jit(partial(...))` wraps a new functools.partial object at each call"
    elif inspect.ismethod(fn):
        what = f"`{_compat.fun_name(fn)}` is a new bound method object at each call"
    elif _compat.fun_name(fn) == "<lambda>":
        what = "the lambda is a new function object at each call"
    else:
        what = (
            f"`{_compat.fun_name(fn)}` is a new function object at each call (defined "
            f"inside a loop or another function, and jitted again)"
        )
    return what + ": jit's cache is per function object, so each one is traced and compiled"


# two shardings of one layout (a Levanter-style step's params went in as P('data', 'model',
# None) and came back as P('data', 'model')): not what made JAX trace again, said last
_SAME_LAYOUT = " (the same layout)"


def _same_layout(a: Any, b: Any, ndim: int) -> bool:
    """Two shardings that lay an array of `ndim` dimensions out alike (JAX's own test)."""
    try:
        return a is not None and b is not None and bool(a.is_equivalent_to(b, ndim))
    except Exception:  # a sharding of another kind
        return False


def sharding_name(s: Any) -> str:
    if s is None:
        return "none (uncommitted)"
    spec = getattr(s, "spec", None)
    if spec is None:
        return type(s).__name__
    parts = [  # as the user writes it: P('x'), not JAX's P('x',); a trailing None kept
        repr(e) if isinstance(e, str) else "None" if e is None else f"({', '.join(map(repr, e))})"
        for e in spec
    ]
    return f"{type(s).__name__}(P({', '.join(parts)}))"


def tree_difference(name: str, x: Any, y: Any) -> str:
    """The first place two pytrees' structures differ, as the user's path and what is there:
    "`m.layers[5].b` was an array, then None"; "" when they do not differ."""
    tu = jax.tree_util
    if tu.tree_structure(x) == tu.tree_structure(y):  # type: ignore[operator]
        return ""
    if type(x) is not type(y) or _is_leaf(x) or _is_leaf(y):
        return f"`{name}` was {_what(x)}, then {_what(y)}"
    cx, cy = _children(x), _children(y)
    kx, ky = [k for k, _ in cx], [k for k, _ in cy]
    if kx != ky:
        added = [tu.keystr(k) for k in ky if k not in kx]
        gone = [tu.keystr(k) for k in kx if k not in ky]
        parts = ([f"gained {', '.join(added)}"] if added else []) + (
            [f"lost {', '.join(gone)}"] if gone else []
        )
        if not parts:
            parts = [f"had {len(kx)} children, then {len(ky)}"]
        return f"`{name}` ({_what(x)}) {' and '.join(parts)}"
    for (k, u), (_, v) in zip(cx, cy):
        c = tree_difference(name + tu.keystr(k), u, v)
        if c:
            return c
    da, db = (_aux(v) for v in (x, y))
    change = f": {describe(da)} -> {describe(db)}" if da is not db else ""
    return f"`{name}` ({_what(x)}) changed its static fields{change}"


def _aux(x: Any) -> Any:
    """A pytree node's static part (a Partial's function, a Module's static fields)."""
    t: Any = jax.tree_util.tree_structure(x, is_leaf=lambda v: v is not x)
    nd = t.node_data()
    return nd[1] if nd else None


def _children(x: Any) -> list:
    """One level of a pytree node: [(key path of one key, child)], as jax.tree_util names
    them."""
    return jax.tree_util.tree_flatten_with_path(x, is_leaf=lambda v: v is not x)[0]


def _is_leaf(x: Any) -> bool:
    t: Any = jax.tree_util.tree_structure(x)
    return x is None or (t.num_nodes == 1 and t.num_leaves == 1)


def _what(x: Any) -> str:
    if x is None:
        return "None"
    if _is_leaf(x):
        return "an array" if hasattr(x, "shape") else f"a {type(x).__name__}"
    return f"a `{type(x).__name__}`"


# --- which hint fits ---------------------------------------------------------------------------


def hint_variant(reason: str) -> str:
    """The recompile rule's hint variant for a reason ("" : the rule's own hint, a function
    made anew). The reasons are jaxviz's own words (this module's); the first
    of several changes decides."""
    reason = reason.split("; ")[0]
    if reason.startswith("the mesh set by `jax.set_mesh` changed"):
        return "mesh"
    if "defines no `__eq__`" in reason:
        return "static-identity"
    if "a Python " in reason and ", then " in reason:
        return "python-number"
    if "changed dtype" in reason or "weak type" in reason:
        return "dtype"
    if "changed shape" in reason:
        return "shape"
    if any(w in reason for w in _STRUCTURE):
        return "structure"
    if "the static argument" in reason or "changed its static fields" in reason:
        return "static"
    if "changed sharding" in reason:
        return "sharding"
    return ""


# words of this module's pytree structure changes
_STRUCTURE = (
    "pytree structure",
    "has other keys",
    "changed length",
    "` was ",
    "children, then",
)

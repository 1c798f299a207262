"""Why a function was traced again, in words that point at the fix; and which fix.

jaxviz.diagnostics.static finds what differs between two traces of one function; this
module words the differences that need more than "x -> y": a static argument whose class
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


def sharding_name(s: Any) -> str:
    if s is None:
        return "none (uncommitted)"
    spec = getattr(s, "spec", None)
    return f"{type(s).__name__}({spec})" if spec is not None else type(s).__name__


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
    made anew). The reasons are jaxviz's own words (static.py and this module); the first
    of several changes decides."""
    reason = reason.split("; ")[0]
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
    return ""


# words of static.py's and this module's pytree structure changes
_STRUCTURE = (
    "pytree structure",
    "has other keys",
    "changed length",
    "` was ",
    "children, then",
)

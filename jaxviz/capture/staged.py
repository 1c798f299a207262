"""Staged: the capture's record of one distinct (function, signature) or eager statement.

The capture records what JAX staged as it happens: the jaxpr (JAX's own, cached object),
the arguments as avals and ShapeDtypeStructs, how often and from where it was called.
`jaxviz.api` turns each record into a `Trace` (graph model and diagnostics). Nothing here
keeps the user's arrays.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Sequence
from typing import Any

import jax

from jaxviz import _compat


@dataclasses.dataclass(eq=False)
class Staged:
    """What the capture saw of one function: enough to build and check its graph."""

    name: str  # "train_step", or "line 4: y = jnp.sin(x)" (eager)
    jaxpr: Any  # JAX's jaxpr, or a jaxpr-like partial one (error)
    kind: str = "jit"  # "jit" | "eager" | "trace"
    fun: Callable | None = None  # a jitted callable for compile/run
    args_spec: tuple = ()  # arguments as jax.ShapeDtypeStruct pytrees
    kwargs_spec: dict = dataclasses.field(default_factory=dict)
    arg_names: Sequence[str] = ()  # flat argument paths, "params['w1']"
    donated: Sequence[bool] = ()  # per flat argument
    donation_quiet: bool = False  # called with JAX's warning about unusable donations
    # ignored by its message (a library's documented choice: equinox's donate="all")
    calls: int = 1  # calls with this signature
    calls_uncounted: bool = False  # Python < 3.12: more calls ran on JAX's fast path
    call_sites: Sequence[tuple] = ()  # [(filename, line, count)]
    library_sites: Sequence[tuple] = ()  # [(filename, line)] in a library that made the
    # calls on the user's behalf; the user's lines, the calls into the library, are call_sites
    static: str = ""  # static arguments, "act='gelu'"
    rejitted: bool = False  # `fun` is a new jax.jit (the jitted object unseen)
    user_code: bool | None = None  # the user's own function (None: by kind)
    loc: Any = None  # graph.model.Loc-like (file, line, col, fn) of the call
    root_code: Any = None  # the function's code: frames above are the caller's
    eqn_locs: list | None = None  # eager: each equation's location
    error: BaseException | None = None  # what tracing raised (the jaxpr is then partial)
    error_frames: Sequence[tuple] = ()  # [(filename, line, function)] of `error`
    notes: Sequence[str] = ()  # "12 more eager ops were counted, not drawn"
    order: int = 0  # first-call order in the cell
    call_mesh: Any = None  # the meshes set at its first call (jax.set_mesh, `with mesh:`; None:
    # not recorded): `fun` lowers under them (_compat.mesh_set)


def _spec(x: Any) -> Any:
    """An array leaf as a ShapeDtypeStruct (with its sharding); other leaves unchanged."""
    if isinstance(x, jax.ShapeDtypeStruct):
        return x
    if isinstance(x, jax.Array):
        try:
            # an uncommitted array goes wherever the computation does: pinning its default
            # device would clash with the sharded arguments next to it
            sharding = x.sharding if _compat.is_committed(x) else None
            return jax.ShapeDtypeStruct(
                x.shape, x.dtype, sharding=sharding, weak_type=getattr(x, "weak_type", False)
            )
        except (RuntimeError, ValueError, TypeError):  # deleted (donated) arrays
            return jax.ShapeDtypeStruct(x.shape, x.dtype)
    if (
        hasattr(x, "shape")
        and hasattr(x, "dtype")
        and not isinstance(x, (int, float, complex, bool))
    ):
        return jax.ShapeDtypeStruct(x.shape, x.dtype)  # numpy arrays
    return x


_ARRAY = _compat.ARRAY_TYPE


def specs(tree: Any) -> Any:
    """A pytree of arguments as ShapeDtypeStructs (static leaves kept): no user arrays.

    A call's arguments are most often a tuple of arrays (and no keywords): those are mapped
    here, not through jax.tree_util (~40 us of a tiny cell's first call, its code cold
    after the user's loop)."""
    kind = type(tree)
    if kind is dict and not tree:
        return {}
    if kind is tuple and all(type(x) is _ARRAY for x in tree):
        return tuple(map(_spec, tree))
    return jax.tree_util.tree_map(_spec, tree)


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


EMPTY_JAXPR = types.SimpleNamespace(invars=[], constvars=[], outvars=[], eqns=[])


def partial_jaxpr(frame: Any) -> Any | None:
    """What a trace staged before it failed, as a jaxpr-like object (None if nothing)."""
    eqns = _compat.frame_eqns(frame)
    if not eqns:
        return None
    return types.SimpleNamespace(
        invars=_compat.frame_invars(frame), constvars=[], outvars=[], eqns=eqns
    )

"""Shardings as plain data: a mesh's axes, a PartitionSpec's axes per dimension.

JAX 0.10.2 and 0.12 (measured): `compiled.input_shardings` / `output_shardings` hold
`NamedSharding(mesh=Mesh('x': 8, axis_types=(Auto,)), spec=P('x', None))`; a Mesh has
`axis_names`, `devices` (an ndarray of devices in the mesh's shape), `axis_types`
(`AxisType.Auto` / `Explicit` / `Manual`); the program's partition p is the mesh's p-th device
in the devices' flat order. Under explicit axes an aval carries `aval.sharding.spec` (JAX
prints it `f32[64@data,32@model]`). `jax._src.core.ShardingTypeError` is what explicit
sharding raises at trace time.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from math import prod
from typing import Any, NamedTuple

from jax.tree_util import tree_leaves


class MeshAxes(NamedTuple):
    """A mesh as plain data."""

    names: tuple[str, ...]  # ("data", "model")
    sizes: tuple[int, ...]  # (2, 4)
    types: tuple[str, ...]  # ("Auto", "Auto"): "Auto" | "Explicit" | "Manual"


def mesh_axes(sharding: Any) -> MeshAxes | None:
    """The mesh of a NamedSharding (None for a sharding without a mesh: one device)."""
    mesh = getattr(sharding, "mesh", None)
    names = getattr(mesh, "axis_names", None)
    if mesh is None or names is None:
        return None
    try:
        sizes = tuple(int(k) for k in mesh.devices.shape)
    except AttributeError:  # an AbstractMesh: its sizes by name
        sizes = tuple(int(k) for k in getattr(mesh, "axis_sizes", ()))
    if len(sizes) != len(names):
        return None
    types = tuple(getattr(t, "name", str(t)) for t in getattr(mesh, "axis_types", ()))
    if len(types) != len(names):
        types = ("Auto",) * len(names)
    return MeshAxes(tuple(str(n) for n in names), sizes, types)


def spec_axes(spec: Any, ndim: int) -> tuple[tuple[str, ...], ...]:
    """Mesh axes per dimension of a PartitionSpec: P('x', None) on 3 dims ->
    (('x',), (), ()); P(('data', 'model'),) -> (('data', 'model'), (), ...)."""
    out: list[tuple[str, ...]] = []
    for entry in tuple(spec or ())[:ndim]:
        if entry is None:
            out.append(())
        elif isinstance(entry, (tuple, list)):
            out.append(tuple(str(a) for a in entry))
        else:
            out.append((str(entry),))
    return tuple(out) + ((),) * (ndim - len(out))


def sharding_axes(sharding: Any, ndim: int) -> tuple[tuple[str, ...], ...] | None:
    """spec_axes of a sharding's spec (None: not a NamedSharding)."""
    spec = getattr(sharding, "spec", None)
    return None if spec is None else spec_axes(spec, ndim)


def aval_axes(aval: Any) -> tuple[tuple[str, ...], ...]:
    """An aval's explicit sharding per dimension (JAX >= 0.10: `aval.sharding.spec`); () for
    none or every dimension unsharded (Auto axes leave the spec empty)."""
    spec = getattr(getattr(aval, "sharding", None), "spec", None)
    ndim = len(getattr(aval, "shape", ()))
    if spec is None or not ndim:
        return ()
    axes = spec_axes(spec, ndim)
    return axes if any(axes) else ()


class MeshContext(NamedTuple):
    """The meshes a call ran under, JAX's own objects (JAX's empty mesh for none)."""

    set: Any  # the concrete mesh `jax.set_mesh` set (as a setter or a `with` block)
    entered: Any  # the mesh of a `with mesh:` block (deprecated since jax 0.10)


def context_mesh() -> MeshContext | None:
    """The meshes set now (None when JAX has no such context). jax 0.10.2 and 0.12:
    jax._src.mesh.get_concrete_mesh() and thread_resources.env.physical_mesh, thread-local
    reads: jit's tracing and lowering read them (the abstract mesh is in jit's cache key,
    `jax.shard_map` without `mesh=` takes its devices, a constraint's bare P() its mesh)."""
    try:
        from jax._src import mesh as _mesh

        return MeshContext(_mesh.get_concrete_mesh(), _mesh.thread_resources.env.physical_mesh)
    except Exception:  # JAX moved them: nothing recorded, nothing set later
        return None


def _empty(mesh: Any) -> bool:
    return not getattr(mesh, "axis_names", ())


@contextlib.contextmanager
def mesh_set(ctx: MeshContext | None) -> Iterator[None]:
    """Runs the block under the meshes `ctx` (a `context_mesh()` recorded at a call) as the
    call ran, then puts back what was set: a function called under one mesh lowers under it
    after the script has set another, or left its `with` block. None: nothing recorded,
    nothing changed."""
    now = context_mesh()
    if ctx is None or now is None or ctx == now:
        yield
        return
    import jax

    with contextlib.ExitStack() as stack:
        if ctx.set is not now.set:
            stack.enter_context(jax.set_mesh(None if _empty(ctx.set) else ctx.set))
        if ctx.entered is not now.entered and not _empty(ctx.entered):
            with warnings.catch_warnings():  # JAX's deprecation of `with mesh:` is the
                warnings.simplefilter("ignore", DeprecationWarning)  # user's, said once
                stack.enter_context(ctx.entered)
        yield


def is_sharding_type_error(e: BaseException) -> bool:
    """`jax._src.core.ShardingTypeError` (explicit sharding's trace-time error)."""
    return any(c.__name__ == "ShardingTypeError" for c in type(e).__mro__)


_TYPE = re.compile(r"(~?[a-z][a-z0-9]*)\[([0-9,]*)\]")


def sharded_type(typ: str, axes: tuple[tuple[str, ...], ...]) -> str:
    """`f32[4096@x,1024]`: the global type with each sharded dimension's mesh axes
    (several as `@(data,model)`); `typ` itself when nothing is sharded."""
    m = _TYPE.fullmatch(typ)
    if m is None or not any(axes):
        return typ
    dims = m.group(2).split(",")
    out = []
    for i, d in enumerate(dims):
        a = axes[i] if i < len(axes) else ()
        out.append(d if not a else f"{d}@{a[0]}" if len(a) == 1 else f"{d}@({','.join(a)})")
    return f"{m.group(1)}[{','.join(out)}]"


def input_axes(args_spec: tuple, kwargs_spec: dict) -> tuple:
    """Per flat array argument, the mesh axes of each dimension of its NamedSharding on a
    mesh of several devices (() for one device); () when no argument is sharded."""
    leaves = [x for x in tree_leaves((args_spec, kwargs_spec)) if hasattr(x, "shape")]
    out = []
    for x in leaves:
        sh = getattr(x, "sharding", None)
        mesh = mesh_axes(sh)
        axes = sharding_axes(sh, len(x.shape)) if mesh and prod(mesh.sizes) > 1 else None
        out.append(axes if axes and any(axes) else ())
    return tuple(out) if any(out) else ()

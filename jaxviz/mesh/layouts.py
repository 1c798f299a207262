"""Each value's layout as XLA compiled it, mapped back to the graph's equations.

Under Auto mesh axes (GSPMD / Shardy) the jaxpr's avals carry no sharding: the partitioner
chooses the layouts after JAX is done. The compiled (partitioned) HLO holds each instruction
with one device's shape; an instruction whose metadata names a graph node of the same
primitive gives that node's layout: each dimension split k ways names the mesh axis (or
axes) of that size (`f32[2048@x,1024]`; `?` where several axes have the size); a shape equal
to the global one is whole on each device. A fusion names its root op only: values inside
fusions get none (never guessed). The function's outputs take theirs from the entry
computation's ROOT, the program's results in output order (as its inputs are typed from the
arrays it was called with: an output sharded as `f32[512,2048@model]`, not `f32[512,2048]`).

    >>> from jaxviz.mesh.layout import Mesh
    >>> split_axes(Mesh(("data", "model"), (2, 4), ("Auto",) * 2), "f32[32,64]", "f32[64,256]")
    (('data',), ('model',))
"""

from __future__ import annotations

from typing import Any

from jaxviz import _compat
from jaxviz.graph.nodeindex import NodeIndex
from jaxviz.mesh.devices import dims_of
from jaxviz.mesh.layout import Mesh

MAX_LAYOUTS = 20_000  # nodes given a layout per function


def split_axes(mesh: Mesh, local: str, whole: str) -> tuple[tuple[str, ...], ...] | None:
    """The mesh axes splitting each dimension of `whole` into `local` (() for a dimension not
    split); None when the two do not match (other ranks or dtypes, a dimension grown)."""
    lo, gl = dims_of(local), dims_of(whole)
    if lo is None or gl is None or lo[0] != gl[0].lstrip("~") or len(lo[1]) != len(gl[1]):
        return None
    out: list[tuple[str, ...]] = []
    for a, b in zip(lo[1], gl[1]):
        if a == b:
            out.append(())
            continue
        if a <= 0 or a > b:
            return None
        out.append(_axes_of_size(mesh, -(-b // a)))
    return tuple(out)


def _axes_of_size(mesh: Mesh, k: int) -> tuple[str, ...]:
    one = [a for a, s in zip(mesh.axes, mesh.sizes) if s == k]
    if len(one) == 1:
        return (one[0],)
    if one:
        return ("?",)
    n = len(mesh.axes)
    pairs = [
        (mesh.axes[i], mesh.axes[j])
        for i in range(n)
        for j in range(i + 1, n)
        if mesh.sizes[i] * mesh.sizes[j] == k
    ]
    if len(pairs) == 1:
        return pairs[0]
    if mesh.size == k:
        return mesh.axes
    return ("?",)


def layouts(module: Any, graph: Any, mesh: Mesh, nodes: NodeIndex) -> dict[str, str]:
    """{"body:node": its type on the mesh as compiled} for the graph's equations an
    instruction of the entry computation (or a loop body it runs) names, first one wins."""
    out: dict[str, str] = {}
    if graph is None:
        return out
    comps, seen = [module.entry], set()
    while comps and len(out) < MAX_LAYOUTS:
        comp = comps.pop(0)
        if comp in seen:
            continue
        seen.add(comp)
        for ins in module.computation(comp):
            comps.extend(c for c in ins.calls if c not in seen)
            if not ins.op_name or not isinstance(ins.shape, _compat.HloLeaf):
                continue
            _one(module, ins, graph, mesh, nodes, out)
    _outputs(module, graph, mesh, out)
    return out


def _outputs(module: Any, graph: Any, mesh: Mesh, out: dict) -> None:
    """The root body's output nodes, each with its result's layout as compiled."""
    root = next((i for i in module.computation(module.entry) if i.root), None)
    body = graph.bodies[graph.root]
    if root is None:
        return
    leaves = root.shape if isinstance(root.shape, list) else [root.shape]
    if len(leaves) != len(body.outputs):  # (a result XLA gives otherwise: none guessed)
        return
    for leaf, i in zip(leaves, body.outputs):
        node = body.nodes[i]
        if isinstance(leaf, _compat.HloLeaf) and len(node.out) == 1 and "@" not in node.out[0]:
            axes = split_axes(mesh, leaf.type, node.out[0])
            if axes is not None:
                out[f"{graph.root}:{i}"] = _compat.sharded_type(node.out[0], axes)


def _one(module: Any, ins: Any, graph: Any, mesh: Mesh, nodes: NodeIndex, out: dict) -> None:
    prim = _compat.op_primitive(ins.op_name)
    stack = module.stack(ins.frame)
    chain = [(f.file, f.line) for f in stack] or (
        [(ins.source[0], ins.source[1])] if ins.source is not None else []
    )
    if not chain or prim.startswith("("):
        return
    for ref in nodes.lookup(prim, chain, ins.op_name)[:16]:
        if ref in out:
            continue
        b, n = (int(x) for x in ref.split(":"))
        node = graph.bodies[b].nodes[n]
        if node.op != prim or len(node.out) != 1 or "@" in node.out[0]:
            continue
        axes = split_axes(mesh, ins.shape.type, node.out[0])
        if axes is not None:
            out[ref] = _compat.sharded_type(node.out[0], axes)

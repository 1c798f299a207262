"""Every collective of a compiled sharded program, at the line of the op it serves, with
what required it.

XLA's SPMD partitioner inserts the collectives after JAX is done: they exist only in the
optimised HLO (`compiled.as_text()`), where a collective's metadata names a neighbouring op,
not its cause (docs/sharding.md; measured on jax 0.10.2 and 0.12: the all-gather forced by
a `with_sharding_constraint` carries the metadata of the `sin` or `add` of the line before).
So the cause is found from what the op is and where its value goes:

- an explicit collective of a `shard_map` body (`psum`, `all_gather`, `ppermute`, ...): the
  op itself, at its line;
- an all-reduce / reduce-scatter of a `dot_general` (or a convolution): the product
  contracts a dimension that is sharded; of a reduction: the reduced dimension is sharded;
- otherwise a reshard, required by what the value reaches next in the graph: a
  `with_sharding_constraint` or a `jax.reshard` (its line and spec), the function's output
  sharding, or an argument's sharding when the collective reads the argument itself.

Async pairs (`all-gather-start` / `-done`, `async-start` wrapping a reduce-scatter) count once.
"""

from __future__ import annotations

import dataclasses
import linecache
from collections.abc import Iterator, Sequence
from typing import Any

from jaxviz import _compat
from jaxviz.capture.places import users_frame
from jaxviz.graph.files import file_label
from jaxviz.graph.nodeindex import NodeIndex
from jaxviz.mesh.layout import Mesh, axes_text, spec_text

# primitives of a shard_map body that are collectives the user wrote
EXPLICIT = frozenset({
    "psum", "psum_invariant", "pmax", "pmin", "pmean", "all_gather", "all_gather_invariant",
    "ppermute", "pshuffle", "all_to_all", "reduce_scatter", "psum_scatter", "pbroadcast",
    "ragged_all_to_all", "pcast",
})  # fmt: skip
# what the user called, for the primitive it binds
USER_NAMES = {"psum_invariant": "psum", "all_gather_invariant": "all_gather",
              "reduce_scatter": "psum_scatter"}  # fmt: skip
PRODUCTS = frozenset({"dot_general", "conv_general_dilated", "ragged_dot_general"})

CAUSES = ("shard_map", "contracting", "reduced", "constraint", "output", "input", "reshard")
"""What required a collective: an explicit collective in a shard_map; a product contracting,
or a reduction reducing, a sharded dimension; a reshard for a with_sharding_constraint or a
jax.reshard ("constraint"), an output's sharding, an argument's sharding, or one XLA's
propagation chose."""
# the user's own requests for a layout: with_sharding_constraint, jax.reshard (explicit axes)
CONSTRAINTS = {"sharding_constraint": "with_sharding_constraint", "reshard": "jax.reshard"}


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective of the compiled program (an async start/done pair as one)."""

    name: str  # "all-gather.3": the HLO instruction (the `-start` of an async pair)
    kind: (
        str  # "all-gather" | "all-reduce" | "reduce-scatter" | "all-to-all" | "collective-permute"
    )
    bytes: int  # bytes each device holds through it: the larger of what it sends and receives
    type: str  # "f32[1024,1024]": its result on one device
    axes: tuple[str, ...]  # ("x",): the mesh axes it communicates over; () when unknown
    group: int  # devices in each of its groups (8)
    op: str  # "dot_general": the primitive of the op it serves (XLA's metadata)
    op_name: str  # "jit(f)/dot_general"
    file: str  # the user's file of that op ("" when XLA kept none)
    line: int  # its line (0 when unknown)
    fn: str  # "f"
    cause: str  # one of CAUSES
    reason: str  # "the product at line 9 contracts a dimension sharded over `x`"
    cause_line: int = 0  # the line that asked for it (the constraint's, the psum's); 0: none
    node_ids: tuple[str, ...] = ()  # graph nodes of the op it serves
    cause_ids: tuple[str, ...] = ()  # the graph node that asked for it (the constraint)
    inside: str = ""  # "while body region_0.4": inside a loop body, run each iteration
    times: int = 1  # how often it runs per call (a loop's known trip count)
    spmd: bool = True  # inserted by XLA's partitioner (False: the user's shard_map op)

    @property
    def where(self) -> str:
        if not self.file:
            return ""
        return f"{file_label(self.file)}:{self.line}" + (f" ({self.fn})" if self.fn else "")

    @property
    def total_bytes(self) -> int:
        return self.bytes * self.times


@dataclasses.dataclass(frozen=True)
class Facts:
    """What the compiled program says of its arguments and outputs (jaxviz.memory.compile's
    CompileReport: donations and outputs): paths, global types, sharding texts."""

    mesh: Mesh
    args: Sequence[tuple[str, str, str]] = ()  # ("params['w']", "f32[64,64]", "P('x', None)")
    outputs: Sequence[tuple[str, str]] = ()  # ("out", "P()")


def collectives(
    module: Any, graph: Any, facts: Facts, nodes: NodeIndex | None = None
) -> tuple[Collective, ...]:
    """The collectives of a parsed optimised HLO module (`_compat.parse_hlo_module`), largest
    bytes per device first. `graph`: the trace's graph (its nodes, the causes' lines)."""
    nodes = nodes if nodes is not None else NodeIndex(graph)
    out = [_describe(module, ins, where, facts, nodes) for ins, where in _found(module)]
    return tuple(sorted(out, key=lambda c: (-c.total_bytes, c.line, c.name)))


def _found(module: Any) -> Iterator[tuple[Any, tuple[str, int]]]:
    """(instruction, (loop body it is in, trips)) of each collective, the entry computation
    and the computations its loops, conditionals and calls run."""
    todo: list[tuple[str, tuple[str, int]]] = [(module.entry, ("", 1))]
    seen: set[str] = set()
    while todo:
        comp, where = todo.pop(0)
        if comp in seen:
            continue
        seen.add(comp)
        if not module.mentions(comp, _WORDS):
            continue
        for ins in module.computation(comp):
            if ins.opcode == "while" and len(ins.calls) == 2:
                body = (f"while body {ins.calls[1]}", max(ins.trips, 1) * where[1])
                todo.append((ins.calls[1], body))
                continue
            if ins.opcode == "async-start":
                inner = next((i for i in module.computation(ins.wrapped) if _kind(i)), None)
                if inner is not None:
                    yield dataclasses.replace(
                        inner, name=ins.name, op_name=inner.op_name or ins.op_name,
                        frame=inner.frame or ins.frame,
                    ), where  # fmt: skip
                continue
            for c in ins.calls:
                todo.append((c, where))
            if _kind(ins):
                yield ins, where


_WORDS = tuple(_compat.COLLECTIVES) + ("while", "call", "conditional", "async-start")


def _kind(ins: Any) -> str:
    op = ins.opcode
    if op in _compat.COLLECTIVES:
        return op
    if op.endswith("-start") and op[: -len("-start")] in _compat.COLLECTIVES:
        return op[: -len("-start")]
    return ""


def _bytes(ins: Any, kind: str, group: int) -> tuple[int, str]:
    leaves = _compat.hlo_leaves(ins.shape)
    if not leaves:
        return 0, ""
    if ins.opcode.endswith("-start"):  # (operand, result, ...contexts): the data's largest
        big = max(leaves, key=lambda leaf: leaf.bytes)
        return big.bytes, big.type
    total = sum(leaf.bytes for leaf in leaves)
    typ = leaves[0].type if len(leaves) == 1 else f"{len(leaves)} x {leaves[0].type}"
    if kind == "reduce-scatter":  # each device reduces the whole operand, keeps its part
        return total * max(group, 1), typ
    return total, typ


def _describe(
    module: Any, ins: Any, where: tuple[str, int], facts: Facts, nodes: NodeIndex
) -> Collective:
    kind = _kind(ins)
    groups = _compat.device_groups(ins.groups, facts.mesh.size) if ins.groups else None
    if kind == "collective-permute" and groups:
        groups = [g for g in groups if len(set(g)) > 1]
    axes = facts.mesh.axes_of(groups)
    group = max((len(g) for g in groups), default=0) if groups else 0
    if kind == "collective-permute":
        group = facts.mesh.size_of(axes) if axes else group
    nbytes, typ = _bytes(ins, kind, group)
    src = ins
    if not ins.frame and ins.source is None and ins.op_name and "/" not in ins.op_name:
        src = _reader(module, ins) or ins  # XLA kept an argument's path: the op reading it
    stack = module.stack(src.frame)
    if stack:  # the user's innermost line (flax's Linear.__call__ runs the product that
        # `y = self.dot1(x)` of the user's asked for), else the op's own
        f = users_frame(stack)
        file, line, fn = f.file, f.line, f.fn
    elif src.source is not None:
        file, line, fn = src.source[0], src.source[1], ""
    else:
        file, line, fn = "", 0, ""
    parts = _compat.op_primitives(src.op_name) if src.op_name else [""]
    prim = parts[0]
    if len(parts) > 1:  # XLA's combiner made one collective of several: its ops, commonest first
        counts: dict[str, int] = {}
        for q in parts:
            counts[q] = counts.get(q, 0) + 1
        prim = "+".join(sorted(counts, key=lambda q: -counts[q]))
    chain = [(f.file, f.line) for f in stack] or ([(file, line)] if file else [])
    ids = nodes.lookup(parts[0], chain, src.op_name) if chain else ()
    if len(parts) > 1:
        cause, reason, cause_line, cause_ids = _combined(kind, parts, axes, ins)
    else:
        cause, reason, cause_line, cause_ids = _cause(
            kind, prim, line, axes, ins, ids, module, facts, nodes, file
        )
    return Collective(
        name=ins.name, kind=kind, bytes=nbytes, type=typ, axes=axes, group=group, op=prim,
        op_name=ins.op_name, file=file, line=line, fn=fn, cause=cause, reason=reason,
        cause_line=cause_line, node_ids=tuple(ids[:8]), cause_ids=cause_ids,
        inside=where[0], times=where[1], spmd=cause != "shard_map",
    )  # fmt: skip


def _cause(
    kind: str, prim: str, line: int, axes: tuple[str, ...], ins: Any, ids: tuple[str, ...],
    module: Any, facts: Facts, nodes: NodeIndex, file: str = "",
) -> tuple[str, str, int, tuple[str, ...]]:  # fmt: skip
    """(cause, reason, cause line, cause node ids) of one collective."""
    at = f" at line {line}" if line else ""
    over = axes_text(axes)
    if prim in EXPLICIT or (not ins.spmd and "shard_map" in ins.op_name and prim):
        said = _user_name(prim, file, line)
        return "shard_map", _explicit(said, ins.op_name, line), line, ids[:1]
    reduces = kind in ("all-reduce", "reduce-scatter")
    if reduces and prim in PRODUCTS:
        what = "the gradient of the product" if _compat.is_backward(ins.op_name) else "the product"
        return "contracting", f"{what}{at} contracts a dimension sharded over {over}", 0, ()
    if reduces and (prim.startswith("reduce_") or prim.startswith("arg")):
        return "reduced", f"`{prim}`{at} reduces a dimension sharded over {over}", 0, ()
    if prim == "reshard" and ids:  # XLA kept the jax.reshard's own metadata: it asked
        found = _asked_by(ids[0], _node(nodes.graph, ids[0]), facts, nodes)
        if found is not None:
            return found
    args = {p: sh for p, _, sh in facts.args}
    param = ins.op_name if ins.op_name in args else None  # XLA kept the argument's path
    param = param or getattr(_read_parameter(module, ins), "op_name", None)
    reader = ""
    for ref in nodes.inputs.get(param, ()) if param else ids[:4]:
        for r, node in nodes.downstream(ref, through=_same_value):
            laid = args.get(param, "") if param else ""
            found = _asked_by(r, node, facts, nodes, laid) or _product_reads(r, node, kind, over)
            if found is not None and not (param and found[0] == "contracting"):
                return found
            if found is not None and not reader:  # an argument a product reads: say so
                reader = f"the product at line {found[2]}" if found[2] else "a product"
    if param is not None:
        sh = f" sharded as {args[param]}" if args.get(param) else ""
        need = "whole" if kind == "all-gather" else "in another layout"
        reader = reader or f"`{prim or 'its reader'}`{at}"
        reason = f"the argument `{param}` arrives{sh}; {reader} needs it {need}"
        return "input", reason, 0, ()
    what = f"`{prim}`{at}" if prim else "an op XLA kept no source for"
    if kind == "collective-permute":
        return (
            "reshard",
            f"{what} needs its neighbours' shards along {over} (a halo exchange)",
            0,
            (),
        )
    return "reshard", f"XLA's partitioner moved {what}'s value to another layout over {over}", 0, ()


def _user_name(prim: str, file: str, line: int) -> str:
    """What the user called for a shard_map collective's primitive: `pmean` binds a psum
    (then divides), named so where the line calls pmean and no psum."""
    name = USER_NAMES.get(prim, prim)
    if name == "psum" and file and line:
        text = linecache.getline(file, line)
        if "pmean(" in text and "psum(" not in text:
            return "pmean"
    return name


def _explicit(name: str, op_name: str, line: int) -> str:
    """What a shard_map's collective is, in words: the user's op, its gradient (the backward
    pass transposes an `all_gather` into a `psum_scatter`, a replicated value's use into a
    `psum` of its gradient), or the user's op run again for the backward pass (remat)."""
    if not _compat.is_backward(op_name):
        return f"`{name}` in a shard_map" + (f" at line {line}" if line else "")
    if "rematted_computation" in op_name:
        at = f" at line {line}" if line else ""
        return f"`{name}` in a shard_map{at}, computed again for the backward pass (remat)"
    of = f"the gradient of line {line}" if line else "a gradient"
    return f"`{name}` of {of} in a shard_map (the backward pass)"


# ops whose result is their operand's value elementwise: a reshard of one is a reshard of the
# value the walk follows to the constraint or output that asked for it
ELEMENTWISE = frozenset({
    "add", "sub", "mul", "div", "neg", "sin", "cos", "tanh", "exp", "log", "log1p", "expm1",
    "logistic", "max", "min", "abs", "sqrt", "rsqrt", "pow", "integer_pow", "square", "sign",
    "convert_element_type", "copy", "copy_p", "select_n", "erf", "tan", "atan2", "floor",
    "ceil", "round", "and", "or", "not", "xor", "eq", "ne", "lt", "le", "gt", "ge", "exp2",
    "stop_gradient", "reduce_precision", "clamp", "nextafter", "is_finite",
})  # fmt: skip


def _same_value(node: Any) -> bool:
    return node.kind == "eqn" and node.op in ELEMENTWISE


def _combined(
    kind: str, parts: list[str], axes: tuple[str, ...], ins: Any
) -> tuple[str, str, int, tuple[str, ...]]:
    """A collective XLA's combiner made of several (its op_name `.../(reduce_sum:dot_general)`)."""
    over = axes_text(axes)
    products = sum(q in PRODUCTS for q in parts)
    reductions = sum(q.startswith("reduce_") for q in parts)
    grad = " in the backward pass" if _compat.is_backward(ins.op_name) else ""
    what = []
    if products:
        what.append(f"{products} product{'s' if products > 1 else ''} contracting a dimension")
    if reductions:
        what.append(f"{reductions} reduction{'s' if reductions > 1 else ''} of a dimension")
    rest = len(parts) - products - reductions
    if rest:
        what.append(f"{rest} other ops' values" if rest > 1 else "1 other op's value")
    cause = (
        "contracting"
        if products >= reductions and products
        else "reduced"
        if reductions
        else "reshard"
    )
    return cause, (f"XLA combined {len(parts)} {kind}s into one{grad}: "
                   f"{', '.join(what)} sharded over {over}"), 0, ()  # fmt: skip


def _product_reads(
    ref: str, node: Any, kind: str, over: str
) -> tuple[str, str, int, tuple[str, ...]] | None:
    """A gathered value a product reads next: the product contracts (or keeps) a dimension
    of it that is sharded where its other operand's is not, and XLA makes it whole."""
    if kind not in ("all-gather", "all-to-all") or node.kind != "eqn" or node.op not in PRODUCTS:
        return None
    line = node.loc.line if node.loc is not None else 0
    at = f" at line {line}" if line else ""
    return (
        "contracting",
        f"the product{at} reads it whole over {over}: it is sharded there where the "
        "product's other operand is not",
        line,
        (ref,),
    )


def _same_spec(a: str, b: str) -> bool:
    """Two sharding texts alike but for trailing unsharded dimensions: P('x',) is P('x', None)."""

    def dims(t: str) -> list[str]:
        d = [x.strip() for x in t.strip().removeprefix("P(").removesuffix(")").split(",")]
        while d and d[-1] in ("", "None"):
            d.pop()
        return d

    return bool(a) and bool(b) and dims(a) == dims(b)


def _asked_by(
    ref: str, node: Any, facts: Facts, nodes: NodeIndex, laid: str = ""
) -> tuple[str, str, int, tuple[str, ...]] | None:
    """What asked a value for its layout: a constraint, or an output laid out otherwise than
    `laid` (the argument's sharding it flows from, elementwise: an output laid out as the
    argument asks for nothing)."""
    if node is not None and node.kind == "eqn" and node.op in CONSTRAINTS:
        spec = constraint_spec(nodes.graph, ref, node)
        line = node.loc.line if node.loc is not None else 0
        to = f" to {spec}" if spec else ""
        via = _helper_call(nodes.graph, ref, node)
        return "constraint", f"{CONSTRAINTS[node.op]}{to} at line {line}{via}", line, (ref,)
    if node is not None and node.kind == "out":
        k = nodes.output_index(ref)
        if 0 <= k < len(facts.outputs):
            path, sh = facts.outputs[k]
            if _same_spec(sh, laid):
                return None
            to = f" {sh}" if sh else ""
            return (
                "output",
                f"the output `{path}` is laid out{to} (out_shardings, or what XLA chose for it)",
                0,
                (ref,),
            )
    return None


def _helper_call(graph: Any, ref: str, node: Any) -> str:
    """ " (in `shard`, called at line 81)": where the user's helper that holds a constraint
    and little else (Levanter's `shard(x, "batch", ...)`), used at several places, was
    called for this one; "" for a constraint written once, or in a layer's function."""
    if graph is None or node.loc is None:
        return ""
    at = (node.loc.file, node.loc.line)
    uses = sum(
        1
        for body in graph.bodies
        for n in body.nodes
        if n.kind == "eqn" and n.op == node.op and n.loc is not None
        and (n.loc.file, n.loc.line) == at
    )  # fmt: skip
    if uses < 2:
        return ""
    body = graph.bodies[int(ref.split(":")[0])]
    groups = {g.id: g for g in body.groups}
    g = groups.get(node.group)
    if g is None or g.n_eqns > 2:  # (the helper's own call: the constraint, a reshape)
        return ""
    while g is not None and (g.loc is None or (g.loc.file, g.loc.line) == at):
        g = groups.get(g.parent)
    if g is None or g.loc is None:
        return ""
    return f" (in `{node.loc.fn}`, called at line {g.loc.line})" if node.loc.fn else ""


def constraint_spec(graph: Any, ref: str, node: Any) -> str:
    """ "P(None, 'x')": the spec a `with_sharding_constraint` or `jax.reshard` node
    ("body:node") asks for; "" when unknown (no graph, not a NamedSharding)."""
    if graph is None:
        return ""
    b, n = (int(x) for x in ref.split(":"))
    eqn = graph.eqn(b, n)
    params = getattr(eqn, "params", {}) if eqn is not None else {}
    sh = params.get("sharding", params.get("dst_sharding"))
    typ = node.out[0] if node.out else ""
    ndim = len(typ.split(",")) if "[" in typ and not typ.endswith("[]") else 0
    axes = _compat.sharding_axes(sh, ndim)
    return spec_text(axes) if axes is not None else ""


def _node(graph: Any, ref: str) -> Any:
    """The graph node `ref` ("body:node"); None without a graph."""
    if graph is None:
        return None
    b, n = (int(x) for x in ref.split(":"))
    return graph.bodies[b].nodes[n]


def _reader(module: Any, ins: Any, hops: int = 4) -> Any:
    """The first instruction of `ins`'s computation that reads it, or reads what reads it
    (a bitcast or copy of a gathered argument keeps the argument's path only: a Levanter-
    style FSDP step's gathered weights), and has a source; nearest first."""
    ops = list(module.computation(module.computation_of(ins.name)))
    names = {ins.name}
    for _ in range(hops):
        readers = [i for i in ops if names.intersection(i.operands) and i.name not in names]
        found = next((i for i in readers if i.frame or i.source is not None), None)
        if found is not None or not readers:
            return found
        names.update(i.name for i in readers)
    return None


def _read_parameter(module: Any, ins: Any) -> Any:
    """The entry parameter a collective reads directly (through bitcasts and copies)."""
    by_name = {i.name: i for i in module.computation(module.entry)}  # (rare: a reshard's)
    seen = 0
    cur = ins
    while cur is not None and cur.operands and seen < 4:
        op = by_name.get(cur.operands[0])
        if op is None:
            return None
        if op.opcode == "parameter":
            return op
        if op.opcode not in ("bitcast", "copy", "reshape", "transpose"):
            return None
        cur, seen = op, seen + 1
    return None

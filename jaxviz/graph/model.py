"""The graph model: one node per equation, one body per distinct jaxpr.

This module only holds the data model; `jaxviz.graph.build` makes it from a jaxpr. Field names
are exactly what the widget reads (js/src/graph/model.js declares the same shapes in JSDoc,
jaxviz.schema as TypedDicts), and `Graph.to_json()` is the widget's payload. Ids are small
integers assigned in jaxpr order, so the same function and avals always give byte-identical
JSON.

A jaxpr that several equations share (one jitted function called 12 times) is one `Body`,
referenced by every equation that calls it through `Node.subs`; a view instantiates a body
each time it expands such a node. Node `(body, id)` pairs are written `"b:id"` in
`Diagnostic.node_ids`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any, NamedTuple

from jaxviz._compat import Loc as Loc  # (file, line, col, fn): where a node came from
from jaxviz.schema import BodyDict, GraphDict, GroupDict, LocJSON, NodeDict, SubDict


@dataclasses.dataclass(slots=True)
class Sub:
    """One sub-jaxpr of an equation (a jit body, a scan body, one cond branch, ...)."""

    body: int  # index into Graph.bodies
    role: str  # "jit", "scan", "branch 0", "cond", "body", "remat", "custom_jvp", ...
    in_map: list[int]  # for each body input: the index of the equation input feeding it, -1 if none
    out_map: list[
        int
    ]  # for each body output: the index of the equation output it becomes, -1 if none
    times: int = 1  # how often the body runs per execution of the equation (scan length)


@dataclasses.dataclass(slots=True)
class Node:
    """One equation, or an input, output, constant or literal of a body."""

    id: int  # unique within its body; equations and io share one counter
    kind: str  # "eqn" | "in" | "out" | "const" | "lit"
    op: str = ""  # primitive name for eqns ("dot_general"); var name for io ("x")
    params: list[str] = dataclasses.field(
        default_factory=list
    )  # ["dimension_numbers=(([1],[0]),([],[]))"]
    out: list[str] = dataclasses.field(default_factory=list)  # output avals, ["f32[8,128]"]
    loc: Loc | None = None  # source location; inherited from the calling eqn when JAX kept none
    # (JSON: [file index into Graph.files, line, col, fn])
    ns: str = ""  # name stack ("layer1/attn"), joined with the parent's
    path: str = ""  # user call path, "model > block[3] > layernorm" (not in JSON:
    # the view joins Body.path and the group labels)
    group: int = -1  # index into Body.groups (call-path group), -1 at top
    flops: float = 0.0  # estimated floating point ops, body totals included
    bytes: float = 0.0  # estimated bytes read + written
    nbytes: int = 0  # constants: size in bytes
    value: str = ""  # literals: the value, "1.0"
    subs: list[Sub] = dataclasses.field(default_factory=list)  # sub-jaxprs, for jit/scan/cond/...


class Edge(NamedTuple):
    """One value flowing from a node's output to another node's input."""

    src: int  # node id producing the value
    dst: int  # node id consuming it
    type: str  # the variable's aval, "f32[8,128]"
    port: int = 0  # input index at dst
    src_port: int = 0  # output index at src


@dataclasses.dataclass(slots=True)
class Group:
    """A user call-path group: the equations one Python call made (`block[3]`)."""

    id: int
    parent: int  # enclosing group, -1 for none
    label: str  # "block[3]"
    fn: str  # "block"
    loc: Loc | None  # the call site
    n_eqns: int = 0  # equations inside, nested groups included
    repeat_of: int = -1  # id of the first sibling with the same structure, -1 if none
    repeats: int = 1  # on the first of a run of identical siblings: how many there are


@dataclasses.dataclass(slots=True)
class Body:
    """One jaxpr: its nodes and edges, with io node ids in order."""

    id: int
    label: str  # "jit(mlp)", "scan body", "branch 1"
    nodes: list[Node]
    edges: list[Edge]
    inputs: list[int]  # node ids of "in" nodes, in invar order
    outputs: list[int]  # node ids of "out" nodes, in outvar order
    groups: list[Group] = dataclasses.field(default_factory=list)
    path: str = ""  # user call path of the body's caller, "train_step > model"
    n_eqns: int = 0  # equations, nested bodies counted once per reference
    flops: float = 0.0  # total, nested bodies included (scan bodies x length)
    bytes: float = 0.0


@dataclasses.dataclass
class Graph:
    """The staged program of one traced function."""

    name: str  # "train_step"
    bodies: list[Body]  # bodies[root] is the traced function itself
    root: int = 0
    cut: int = 0  # equations left out past jaxviz.options.max_eqns
    # (body, node id) -> JAX's JaxprEqn, for selecting in Python; never serialised
    _eqns: dict[tuple[int, int], Any] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    def eqn(self, body: int, node: int) -> Any:
        """JAX's equation behind node `node` of body `body` (None for io nodes)."""
        return self._eqns.get((body, node))

    def eqn_ids(self) -> dict[int, str]:
        """id(JAX equation) -> its node, "body:id" (as Diagnostic.node_ids writes it)."""
        return {id(e): f"{b}:{n}" for (b, n), e in self._eqns.items()}

    @property
    def body(self) -> Body:
        return self.bodies[self.root]

    def walk(self, body: int | None = None, depth: int = 0) -> Iterator[tuple[Body, Node, int]]:
        """Yields (body, node, depth) for every node, expanding sub-jaxprs at each use."""
        b = self.bodies[self.root if body is None else body]
        for n in b.nodes:
            yield b, n, depth
            for s in n.subs:
                yield from self.walk(s.body, depth + 1)

    def eqns(self) -> Iterator[tuple[Body, Node]]:
        """Every equation node once (shared bodies once)."""
        for b in self.bodies:
            for n in b.nodes:
                if n.kind == "eqn":
                    yield b, n

    @property
    def n_eqns(self) -> int:
        """Equations with every nested body counted at each use (what the program stages)."""
        return self.body.n_eqns

    @property
    def flops(self) -> float:
        return self.body.flops

    def to_dict(self) -> GraphDict:
        files: dict[str, int] = {}
        bodies = [_body_json(b, files) for b in self.bodies]
        d: GraphDict = {
            "version": 1,
            "name": self.name,
            "root": self.root,
            "files": list(files),
            "bodies": bodies,
        }
        if self.cut:
            d["cut"] = self.cut
        return d

    def to_json(self) -> str:
        """The widget's payload: compact, deterministic JSON (docs/graph-json.md)."""
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=False, allow_nan=False)


def _loc_json(loc: Loc | None, files: dict[str, int]) -> LocJSON | None:
    """[file index into Graph "files", line, col, fn]."""
    if loc is None:
        return None
    return [files.setdefault(loc.file, len(files)), loc.line, loc.col, loc.fn]


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 1)


def _node_json(n: Node, files: dict[str, int]) -> NodeDict:
    """Node as JSON with defaults left out (most nodes carry 5-8 fields)."""
    d: NodeDict = {"id": n.id} if n.kind == "eqn" else {"id": n.id, "kind": n.kind}
    if n.op:
        d["op"] = n.op
    if n.params:
        d["params"] = n.params
    if n.out:
        d["out"] = n.out
    if n.loc is not None:
        d["loc"] = _loc_json(n.loc, files) or []
    if n.ns:
        d["ns"] = n.ns
    if n.group >= 0:
        d["group"] = n.group
    if n.flops:
        d["flops"] = _num(n.flops)
    if n.bytes:
        d["bytes"] = _num(n.bytes)
    if n.nbytes:
        d["nbytes"] = n.nbytes
    if n.value:
        d["value"] = n.value
    if n.subs:
        d["subs"] = [_sub_json(s) for s in n.subs]
    return d


def _sub_json(s: Sub) -> SubDict:
    d: SubDict = {"body": s.body, "role": s.role, "in_map": s.in_map, "out_map": s.out_map}
    if s.times != 1:
        d["times"] = s.times
    return d


def _group_json(g: Group, files: dict[str, int]) -> GroupDict:
    d: GroupDict = {
        "id": g.id,
        "parent": g.parent,
        "label": g.label,
        "fn": g.fn,
        "loc": _loc_json(g.loc, files),
        "n_eqns": g.n_eqns,
    }
    if g.repeat_of >= 0:
        d["repeat_of"] = g.repeat_of
    if g.repeats > 1:
        d["repeats"] = g.repeats
    return d


def _body_json(b: Body, files: dict[str, int]) -> BodyDict:
    return {
        "id": b.id,
        "label": b.label,
        "path": b.path,
        "n_eqns": b.n_eqns,
        "flops": _num(b.flops),
        "bytes": _num(b.bytes),
        "inputs": b.inputs,
        "outputs": b.outputs,
        # a node's call path is body.path + " > " + the labels of its group chain
        "nodes": [_node_json(n, files) for n in b.nodes],
        # [src, dst, type, port, src_port]: positional to keep big graphs small
        "edges": [[e.src, e.dst, e.type, e.port, e.src_port] for e in b.edges],
        "groups": [_group_json(g, files) for g in b.groups],
    }

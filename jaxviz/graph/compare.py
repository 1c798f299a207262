"""Two graphs side by side: which equations were added, removed or changed, per call path.

Equations are matched by call path and source line (`mlp > layer[1]`, line 3 of the same
file, `dot_general`, the k-th such), then, for what is left (lines moved by an edit, or two
versions in two cells, whose line numbers say nothing of each other), by call path and op alone,
then by structure: the call path's shape with its functions' names left out (`* > *[1]`) and
op, then op and types anywhere. A call path is read from the traced function down: two
versions of a function kept under different names (`mlp`, `mlp_v2`: a notebook's usual case)
match as one, b's paths named as a's.
A matched pair is changed when its input or output types (shape, dtype) or its params
differ. Every call path (and each path above it) gets its FLOPs and bytes in both graphs,
counted over the equations that do the work (leaves, each use of a shared body, a scan body
times its length), so "layer[1] got 2x the FLOPs" reads off one line.

Nested bodies are walked at each use: an equation of the jit body of `relu` called from
`layer[0]` is at `mlp > layer[0]`. The view marks a body's node (shared by several uses)
with the strongest status any of its uses has.

    >>> d = diff_graphs(a.graph, b.graph)          # a, b: jaxviz.trace of two MLPs
    >>> [(g.path, g.status) for g in d.groups if g.status != "same"]
    [('mlp', 'changed'), ('mlp > layer[0]', 'changed'), ('mlp > layer[1]', 'changed')]
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterator

from jaxviz.graph.model import Body, Graph, Node

STATUSES = ("same", "changed", "added", "removed")
_RANK = {"same": 0, "changed": 1, "removed": 2, "added": 2}


@dataclasses.dataclass(frozen=True)
class Use:
    """One use of an equation: where it sits when its body is expanded from the root."""

    body: int  # index into Graph.bodies
    node: Node
    path: str  # call path of this use, "mlp > layer[1]"
    times: float  # how often it runs per call of the traced function (scan lengths)
    ins: tuple[str, ...]  # input types, in port order ("f32[8,16]"; literals by value)
    parent: int = -1  # index of the use that calls this one's body, -1 at the root

    @property
    def line(self) -> int | None:
        return self.node.loc.line if self.node.loc is not None else None

    @property
    def file(self) -> str:
        return self.node.loc.file if self.node.loc is not None else ""

    @property
    def leaf(self) -> bool:
        return not self.node.subs


@dataclasses.dataclass(frozen=True)
class NodeDiff:
    """One equation added, removed or changed (a matched pair whose types or params differ)."""

    status: str  # "changed" | "added" | "removed"
    path: str  # call path, "mlp > layer[1]"
    op: str  # "dot_general"
    a: tuple[int, int] | None  # (body, node id) in graph a; None when added
    b: tuple[int, int] | None  # (body, node id) in graph b; None when removed
    file: str = ""  # the source file of the line (a's when both)
    file_b: str = ""  # b's source file when both (another cell when a function was copied)
    line_a: int | None = None  # the file's own numbering (files.shown_line for the editor's)
    line_b: int | None = None
    ins_a: tuple[str, ...] = ()  # input types ("f32[8,4]", "f32[4,16]")
    ins_b: tuple[str, ...] = ()
    out_a: tuple[str, ...] = ()  # output types ("f32[8,16]",)
    out_b: tuple[str, ...] = ()
    params_a: tuple[str, ...] = ()  # the params that differ, as the graph writes them
    params_b: tuple[str, ...] = ()
    flops_a: float = 0.0
    flops_b: float = 0.0
    bytes_a: float = 0.0
    bytes_b: float = 0.0


@dataclasses.dataclass(frozen=True)
class GroupDiff:
    """One call path: its equations' cost in both graphs and how many of them differ."""

    path: str  # "mlp > layer[1]"
    status: str  # "same" | "changed" | "added" | "removed"
    flops_a: float  # FLOPs of its leaf equations (every use, scan bodies x length)
    flops_b: float
    bytes_a: float
    bytes_b: float
    eqns_a: int  # leaf equation uses
    eqns_b: int
    changed: int = 0  # equations changed, added, removed under this path
    added: int = 0
    removed: int = 0

    @property
    def depth(self) -> int:
        return self.path.count(" > ")


@dataclasses.dataclass
class GraphDiff:
    """The differences between graphs `a` and `b` (`diff_graphs`)."""

    a: Graph
    b: Graph
    nodes: list[NodeDiff]  # the equations that differ, in a's order, then b's additions
    groups: list[GroupDiff]  # every call path, parents before children, in first-use order
    pairs: list[tuple[int, int, int, int]]  # matched equations: (body a, id a, body b, id b)
    group_pairs: list[tuple[int, int, int, int]]  # matched groups: (body a, group, body b, group)
    same: int  # matched equations with the same types and params
    # "body:id" -> status, the strongest over each body node's uses (a node whose body holds
    # a difference is "changed"); "body:g<group id>" -> its call path's status
    marks_a: dict[str, str] = dataclasses.field(default_factory=dict)
    marks_b: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.nodes)

    def count(self, status: str) -> int:
        return sum(d.status == status for d in self.nodes)

    def group(self, path: str) -> GroupDiff | None:
        return next((g for g in self.groups if g.path == path), None)


def uses(graph: Graph) -> list[Use]:
    """Every equation use, walking nested bodies at each call, in the order a reader meets
    them (an equation, then what its bodies hold)."""
    out: list[Use] = []

    def visit(b: Body, prefix: str | None, times: float, parent: int) -> None:
        ins = _in_types(b)
        for n in b.nodes:
            if n.kind != "eqn":
                continue
            path = n.path if prefix is None else _join(prefix, _relative(n.path, b.path))
            out.append(Use(b.id, n, path, times, ins.get(n.id, ()), parent))
            me = len(out) - 1
            for s in n.subs:
                visit(graph.bodies[s.body], path, times * max(1, s.times), me)

    visit(graph.body, None, 1.0, -1)
    return out


def _relative(path: str, base: str) -> str:
    if base and path.startswith(base):
        return path[len(base) :].lstrip(" >")
    return path if not base else ""


def _join(prefix: str, rest: str) -> str:
    return f"{prefix} > {rest}" if prefix and rest else prefix or rest


def _in_types(b: Body) -> dict[int, tuple[str, ...]]:
    got: dict[int, list[tuple[int, str]]] = {}
    for e in b.edges:
        src = b.nodes[e.src]
        got.setdefault(e.dst, []).append((e.port, src.value if src.kind == "lit" else e.type))
    return {k: tuple(t for _, t in sorted(v)) for k, v in got.items()}


def _signature(u: Use) -> tuple:
    return (u.ins, tuple(u.node.out), tuple(u.node.params))


def _skeleton(path: str) -> str:
    """A call path's shape without its functions' names: `mlp > layer[1]` -> `* > *[1]`."""
    return " > ".join("*" + p[p.index("[") :] if "[" in p else "*" for p in path.split(" > "))


_KEYS = (
    # a line number matches only in its own file: two cells' line 3 are unrelated lines
    lambda u: (u.path, u.file, u.line, u.node.op),
    lambda u: (u.path, u.node.op),
    lambda u: (_skeleton(u.path), u.node.op),
    lambda u: (u.node.op, *_signature(u)),
)


def _match(ua: list[Use], ub: list[Use]) -> list[tuple[Use | None, Use | None]]:
    """Pairs of uses: by each of _KEYS in turn (call path, file, line and op; call path and op;
    the path's shape and op; op and types), each the k-th with its key in order among what
    is left; the rest alone."""
    pairs: dict[int, Use] = {}  # index in ua -> matched use of b
    taken: set[int] = set()  # ids of matched uses of b
    for key in _KEYS:
        free: dict[tuple, deque[Use]] = {}
        for u in ub:
            if id(u) not in taken:
                free.setdefault(key(u), deque()).append(u)
        for i, u in enumerate(ua):
            if i in pairs:
                continue
            q = free.get(key(u))
            if q:
                pairs[i] = q.popleft()
                taken.add(id(pairs[i]))
    out: list[tuple[Use | None, Use | None]] = [(u, pairs.get(i)) for i, u in enumerate(ua)]
    out.extend((None, u) for u in ub if id(u) not in taken)
    return out


def _renamed(ub: list[Use], b: Graph, a: Graph) -> list[Use]:
    """b's uses with b's traced function's name in their call paths replaced by a's."""
    na, nb = a.body.path, b.body.path
    if not na or not nb or na == nb:
        return ub
    head = nb + " > "
    return [
        dataclasses.replace(u, path=na + u.path[len(nb) :])
        if u.path == nb or u.path.startswith(head)
        else u
        for u in ub
    ]


def _node_diff(status: str, x: Use | None, y: Use | None) -> NodeDiff:
    pa = tuple(x.node.params) if x else ()
    pb = tuple(y.node.params) if y else ()
    if x and y:  # only the params that differ
        pa, pb = tuple(p for p in pa if p not in pb), tuple(p for p in pb if p not in pa)
    one = x or y
    assert one is not None
    return NodeDiff(
        status=status,
        path=one.path,
        op=one.node.op,
        a=(x.body, x.node.id) if x else None,
        b=(y.body, y.node.id) if y else None,
        file=one.file,
        file_b=y.file if x and y else "",
        line_a=x.line if x else None,
        line_b=y.line if y else None,
        ins_a=x.ins if x else (),
        ins_b=y.ins if y else (),
        out_a=tuple(x.node.out) if x else (),
        out_b=tuple(y.node.out) if y else (),
        params_a=pa,
        params_b=pb,
        flops_a=x.node.flops * x.times if x else 0.0,
        flops_b=y.node.flops * y.times if y else 0.0,
        bytes_a=x.node.bytes * x.times if x else 0.0,
        bytes_b=y.node.bytes * y.times if y else 0.0,
    )


def _prefixes(path: str) -> Iterator[str]:
    parts = path.split(" > ") if path else []
    for k in range(1, len(parts) + 1):
        yield " > ".join(parts[:k])


class _Tally:
    def __init__(self) -> None:
        self.v = [0.0, 0.0, 0.0, 0.0, 0, 0]  # flops a, flops b, bytes a, bytes b, eqns a, b
        self.n = {"changed": 0, "added": 0, "removed": 0}


def diff_graphs(a: Graph, b: Graph) -> GraphDiff:
    """The differences between graphs `a` and `b` (see the module's docstring)."""
    ua, ub = uses(a), _renamed(uses(b), b, a)
    matched = _match(ua, ub)
    # a use whose own signature is the same may still hold a changed body
    nodes: list[NodeDiff] = []
    pairs: dict[tuple[int, int, int, int], None] = {}  # an ordered set
    same = 0
    status_of: list[str] = []
    for x, y in matched:
        if x is not None and y is not None:
            pairs[(x.body, x.node.id, y.body, y.node.id)] = None
            st = "same" if _signature(x) == _signature(y) else "changed"
        else:
            st = "removed" if x is not None else "added"
        status_of.append(st)
        if st == "same":
            same += 1
        else:
            nodes.append(_node_diff(st, x, y))
    tallies: dict[str, _Tally] = {}
    for (x, y), st in zip(matched, status_of):
        for side, u in ((0, x), (1, y)):
            if u is None or not u.leaf:
                continue
            for p in _prefixes(u.path):
                t = tallies.setdefault(p, _Tally())
                t.v[side] += u.node.flops * u.times
                t.v[2 + side] += u.node.bytes * u.times
                t.v[4 + side] += 1
        if st != "same":
            for p in _prefixes((x or y).path):  # type: ignore[union-attr]
                tallies.setdefault(p, _Tally()).n[st] += 1
    groups = [_group_diff(p, t) for p, t in tallies.items()]
    marks_a, marks_b = _marks(a, b, ua, ub, matched, status_of)
    return GraphDiff(
        a=a,
        b=b,
        nodes=nodes,
        groups=groups,
        pairs=list(pairs),
        group_pairs=_group_pairs(a, b, pairs),
        same=same,
        marks_a=marks_a,
        marks_b=marks_b,
    )


def _group_diff(path: str, t: _Tally) -> GroupDiff:
    fa, fb, ba, bb, na, nb = t.v
    if not na and not nb:
        status = "changed" if any(t.n.values()) else "same"
    elif not na:
        status = "added"
    elif not nb:
        status = "removed"
    else:
        status = "changed" if any(t.n.values()) or (fa, ba) != (fb, bb) else "same"
    return GroupDiff(path, status, fa, fb, ba, bb, int(na), int(nb), **t.n)


def _marks(
    a: Graph, b: Graph, ua: list[Use], ub: list[Use], matched: list, status_of: list[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Per side: "body:id" and "body:g<group>" -> status, for the view to colour. A use that
    calls a body holding a difference is changed; a node of a body shared by several uses
    takes the strongest status of its uses."""
    sides: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for marks, us, k in ((sides[0], ua, 0), (sides[1], ub, 1)):
        index = {id(u): i for i, u in enumerate(us)}
        status = ["same"] * len(us)
        for pair, st in zip(matched, status_of):
            if pair[k] is not None:
                status[index[id(pair[k])]] = st
        for i in range(len(us)):  # mark the callers of each difference
            j = us[i].parent if status[i] != "same" else -1
            while j >= 0 and status[j] == "same":
                status[j] = "changed"
                j = us[j].parent
        for u, st in zip(us, status):
            key = f"{u.body}:{u.node.id}"
            if key not in marks or _RANK[st] > _RANK[marks[key]]:
                marks[key] = st
    for marks, g in zip(sides, (a, b)):
        for body in g.bodies:
            for grp, st in _group_marks(body, marks).items():
                marks[f"{body.id}:g{grp}"] = st
    return sides


def _group_marks(body: Body, marks: dict[str, str]) -> dict[int, str]:
    """A group is added (removed) when all its equations are, changed when any differs."""
    held: dict[int, set[str]] = {}
    parent = {g.id: g.parent for g in body.groups}
    for n in body.nodes:
        if n.kind != "eqn":
            continue
        st = marks.get(f"{body.id}:{n.id}", "same")
        gid = n.group
        while gid >= 0:
            held.setdefault(gid, set()).add(st)
            gid = parent.get(gid, -1)
    out = {}
    for g in body.groups:
        got = held.get(g.id, {"same"})
        out[g.id] = next(iter(got)) if len(got) == 1 else "changed"
    return out


def _group_pairs(a: Graph, b: Graph, pairs) -> list[tuple[int, int, int, int]]:
    """Groups matched by their labels' path, in bodies whose equations were matched."""
    out: list[tuple[int, int, int, int]] = []
    for ba, bb in dict.fromkeys((p[0], p[2]) for p in pairs):
        ga, gb = _group_paths(a.bodies[ba], ""), _group_paths(b.bodies[bb], "")
        by_path = {path: gid for gid, path in gb.items() if gid >= 0}
        out.extend((ba, gid, bb, by_path[path]) for gid, path in ga.items() if path in by_path)
    return out


def _group_paths(body: Body, base: str) -> dict[int, str]:
    paths = {-1: base}
    for g in body.groups:  # parents come first
        paths[g.id] = _join(paths[g.parent], g.label)
    return paths

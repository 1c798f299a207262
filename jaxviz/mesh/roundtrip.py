"""A value resharded back and forth inside a loop, each iteration.

A `scan` / `while` body whose `with_sharding_constraint`s ask one value (one global type) for
two different shardings makes XLA's partitioner move it from one layout to the other and
back in every iteration: two reshards (all-to-all, all-gather, collective-permute) in the
loop body of the compiled program, run as many times as the loop. Measured on jax 0.10.2
and 0.12.1, 8 CPU devices: a `fori_loop` body constraining its carry to P('x') then to
P(None, 'x') compiles to two all-to-alls of 512 KiB per device in the while body, one named
by the second constraint's op, one XLA kept no source for (the carry's way back).

Read from the compiled program's collectives in one loop body (two reshards or more) and the
loop body's constraints in the graph: two of one type asking for two specs, the first's
value reaching the second (the loop's carry takes it back to the first). A loop body with
one reshard, one sharding asked for, or two values of one type each constrained its own way,
is not a round trip (it is the collective rule's "loop" case, or no finding).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jaxviz.mesh.collectives import Collective, constraint_spec

RESHARDS = ("all-gather", "all-to-all", "collective-permute")


@dataclasses.dataclass(frozen=True)
class Roundtrip:
    """One value resharded back and forth in each iteration of a loop."""

    inside: str  # "while body region_0.0_spmd": the loop body, in the compiled program
    type: str  # "f32[1024,1024]": the value's global type
    shardings: tuple[tuple[str, int], ...]  # (("P('x')", 13), ("P(None, 'x')", 14)): spec, line
    collectives: tuple[Collective, ...]  # the reshards of the loop body, largest first
    times: int  # iterations a call (the loop's known trip count; 1 when unknown)
    file: str  # the user's file of the constraints
    node_ids: tuple[str, ...]  # the constraints' graph nodes

    @property
    def step_bytes(self) -> int:
        """Bytes each device moves through the reshards in one iteration."""
        return sum(c.bytes for c in self.collectives)

    @property
    def line(self) -> int:
        """The line that moves the value away from its first sharding (the second's)."""
        return self.shardings[1][1] if len(self.shardings) > 1 else self.shardings[0][1]


def roundtrips(cs: Sequence[Collective], graph: Any) -> tuple[Roundtrip, ...]:
    """The loop bodies of `cs` (a compiled program's collectives) where a value is resharded
    back and forth: two reshards or more in the body, the body's constraints asking one
    type for two shardings or more. () without a graph."""
    if graph is None:
        return ()
    by_body: dict[str, list[Collective]] = {}
    for c in cs:
        if c.inside and c.kind in RESHARDS and c.spmd:
            by_body.setdefault(c.inside, []).append(c)
    out = []
    for inside, group in by_body.items():
        if len(group) < 2:
            continue
        found = _asked(graph, group)
        if found is not None:
            typ, shardings, file, ids = found
            times = max(c.times for c in group)
            out.append(Roundtrip(inside, typ, shardings, tuple(group), times, file, ids))
    return tuple(out)


def _asked(
    graph: Any, group: list[Collective]
) -> tuple[str, tuple[tuple[str, int], ...], str, tuple[str, ...]] | None:
    """(type, its two shardings asked for with their lines, file, nodes) of the first two
    constraints of a loop body, in the equations' order, that ask one value for two specs:
    of one type, the first's value reaching the second (the carry takes it back)."""
    bodies = sorted({int(r.split(":")[0]) for c in group for r in (*c.cause_ids, *c.node_ids)})
    for b in bodies:
        if not 0 <= b < len(graph.bodies):
            continue
        body = graph.bodies[b]
        asks = []  # (node id, spec, line, file, type)
        for node in body.nodes:
            if node.kind != "eqn" or node.op != "sharding_constraint" or not node.out:
                continue
            spec = constraint_spec(graph, f"{b}:{node.id}", node)
            if spec and node.loc is not None:
                asks.append((node.id, spec, node.loc.line, node.loc.file, node.out[0]))
        nexts: dict[int, list[int]] = {}
        for e in body.edges:
            nexts.setdefault(e.src, []).append(e.dst)
        for i, a in enumerate(asks):
            for z in asks[i + 1 :]:
                if a[4] == z[4] and a[1] != z[1] and _reaches(nexts, a[0], z[0]):
                    return a[4], ((a[1], a[2]), (z[1], z[2])), a[3], (f"{b}:{a[0]}", f"{b}:{z[0]}")
    return None


def _reaches(nexts: dict[int, list[int]], src: int, dst: int) -> bool:
    """Whether node `src`'s value reaches node `dst` in its body."""
    seen, todo = {src}, list(nexts.get(src, ()))
    while todo:
        k = todo.pop()
        if k == dst:
            return True
        if k not in seen:
            seen.add(k)
            todo.extend(nexts.get(k, ()))
    return False

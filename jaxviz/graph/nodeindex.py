"""The graph nodes of a compiled op's source: an HLO instruction's metadata names a primitive
and a call chain of (file, line); `NodeIndex.lookup` finds the graph's equations of it
(jaxviz.memory's buffers, jaxviz.mesh's collectives and jaxviz.profile's kernels select
them). `NodeIndex.downstream` follows a node's value forward through its consumers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


class NodeIndex:
    """Graph nodes by (primitive, call chain of (file, line)), innermost frame first."""

    def __init__(self, graph: Any):
        # (primitive, chain) -> [(node id, name stack, its output types)]
        self.by_chain: dict[tuple, list[tuple[str, str, tuple[str, ...]]]] = {}
        self.inputs: dict[str, tuple[str, ...]] = {}  # argument path -> its input node
        self.outputs: dict[int, tuple[str, ...]] = {}  # output index -> the node writing it
        self.writers: dict[int, tuple[str, str, int, str]] = {}  # -> its (op, file, line, fn)
        self.out_paths: dict[int, str] = {}  # output index -> its path ("result[1]", "params['w']")
        self.callers: dict[int, list[str]] = {}  # a body -> the equations calling it
        self.out_types: dict[str, tuple[str, ...]] = {}  # node id -> its output types
        self._graph = graph
        self._consumers: dict[int, dict[int, list[int]]] = {}
        if graph is None:
            return
        root = graph.bodies[graph.root]
        for i in root.inputs:
            self.inputs[root.nodes[i].op] = (f"{root.id}:{i}",)
        src = {e.dst: e.src for e in root.edges}
        for k, o in enumerate(root.outputs):
            self.out_paths[k] = root.nodes[o].op or ""
            if o in src and root.nodes[src[o]].kind == "eqn":
                n = root.nodes[src[o]]
                self.outputs[k] = (f"{root.id}:{src[o]}",)
                if n.loc is not None:
                    self.writers[k] = (n.op, n.loc.file, n.loc.line, n.loc.fn)
        for body in graph.bodies:
            for n in body.nodes:
                for sub in n.subs:
                    self.callers.setdefault(sub.body, []).append(f"{body.id}:{n.id}")
        for body in graph.bodies:
            groups = {g.id: g for g in body.groups}
            for n in body.nodes:
                if n.kind != "eqn" or n.loc is None:
                    continue
                chain = [(n.loc.file, n.loc.line)]
                g = groups.get(n.group)
                while g is not None:
                    if g.loc is not None:
                        chain.append((g.loc.file, g.loc.line))
                    g = groups.get(g.parent)
                ref = (f"{body.id}:{n.id}", n.ns, tuple(o.lstrip("~") for o in n.out or ()))
                self.out_types[ref[0]] = ref[2]
                for k in range(1, len(chain) + 1):
                    self.by_chain.setdefault((n.op, tuple(chain[:k])), []).append(ref)
                    self.by_chain.setdefault(("", tuple(chain[:k])), []).append(ref)

    def lookup(
        self, prim: str, chain: list[tuple[str, int]], op_name: str, type_: str = ""
    ) -> tuple[str, ...]:
        """The nodes of `prim` at the call chain (in `op_name`'s name scope when some are);
        with `type_` ("f32[64,128]"), those writing a value of that type when some do: a
        line's `x / sqrt(...)` makes a f32[64,1] div and a f32[64,128] one. (Dimensions of
        size 1 aside: XLA drops the f32[64,1]'s.)"""
        for op in (prim, ""):
            for k in range(len(chain), 0, -1):
                refs = self.by_chain.get((op, tuple(chain[:k])))
                if refs:
                    want = _squeezed(type_)
                    typed = [r for r in refs if want in map(_squeezed, r[2])] if type_ else []
                    refs = typed or refs
                    same_ns = [r for r, ns, _t in refs if ns and ns in op_name]
                    return self._callers(tuple((same_ns or [r for r, _ns, _t in refs])[:64]))
        return ()

    def _callers(self, ids: tuple[str, ...]) -> tuple[str, ...]:
        """Nodes of one body that several equations call (jax.nn.relu's, called in each
        layer) stand for no one call: their callers do, each in its own layer (told apart
        by memory.buffers' _spread)."""
        bodies = {i.split(":", 1)[0] for i in ids}
        if len(bodies) != 1:
            return ids
        callers = self.callers.get(int(next(iter(bodies))), [])
        return tuple(callers[:64]) if len(callers) > 1 else ids

    def count_typed(self, ref: str, type_: str) -> int:
        """How many of node `ref`'s outputs are of type `type_` (size-1 dimensions aside)."""
        want = _squeezed(type_)
        return sum(_squeezed(t) == want for t in self.out_types.get(ref, ()))

    def path(self, ref: str) -> str:
        """The call path of node `ref` ("step > loss > block[2]"); "" when there is none."""
        try:
            b, n = (int(x) for x in ref.split(":"))
            return str(self._graph.bodies[b].nodes[n].path)
        except Exception:  # no graph, or a ref of another graph
            return ""

    @property
    def graph(self) -> Any:
        return self._graph

    def output_index(self, ref: str) -> int:
        """The position of output node `ref` among the root body's outputs (-1: not one)."""
        if self._graph is None:
            return -1
        b, n = (int(x) for x in ref.split(":"))
        root = self._graph.bodies[self._graph.root]
        return root.outputs.index(n) if b == root.id and n in root.outputs else -1

    def downstream(
        self, ref: str, limit: int = 12, through: Callable[[Any], bool] | None = None
    ) -> Iterator[tuple[str, Any]]:
        """(ref, node) of the nodes `ref`'s value reaches in its body, nearest first (at
        most `limit`), an output node included (its ref is "body:id" of the "out" node);
        `through`: which nodes the walk goes on past (all when None)."""
        if self._graph is None:
            return
        b, n = (int(x) for x in ref.split(":"))
        body = self._graph.bodies[b]
        nexts = self._consumers.get(b)
        if nexts is None:
            nexts = self._consumers[b] = {}
            for e in body.edges:
                nexts.setdefault(e.src, []).append(e.dst)
        seen, queue = {n}, list(nexts.get(n, ()))
        while queue and limit > 0:
            k = queue.pop(0)
            if k in seen:
                continue
            seen.add(k)
            limit -= 1
            node = body.nodes[k]
            yield f"{b}:{k}", node
            if through is None or through(node):
                queue.extend(nexts.get(k, ()))


def _squeezed(type_: str) -> str:
    """A type less its dimensions of size 1: "f32[64,1]" -> "f32[64]"."""
    head, _, dims = type_.partition("[")
    if not dims:
        return type_
    return f"{head}[{','.join(d for d in dims.rstrip(']').split(',') if d.strip() != '1')}]"

"""Synthetic graph models for the view's tests and scale benchmarks.

No JAX: these build `jaxviz.graph.model.Graph` objects shaped like what the builder makes from a
transformer (call-path groups `model > block[i] > attn`, folded repeats, jit / scan / cond
sub-bodies, a body shared by several equations), at any size.

Example:
    g = flat_graph(20_000)          # one body, 20k equations, `block x400` groups
    g = nested_graph(100_000)       # jit > stages > blocks, scan and cond bodies
"""
from __future__ import annotations

import random

from jaxviz.graph.model import Body, Edge, Graph, Group, Loc, Node, Sub

OPS = ("dot_general", "add", "mul", "tanh", "exp", "reduce_sum", "div", "sub", "max",
       "broadcast_in_dim", "reshape", "transpose", "convert_element_type", "rsqrt")
CELL = "<cell 1>"


class _BodyMaker:
    """Appends nodes and edges to one body; ids follow jaxpr order (inputs, eqns, outputs)."""

    def __init__(self, bid: int, label: str, n_in: int, rng: random.Random):
        self.b = Body(id=bid, label=label, nodes=[], edges=[], inputs=[], outputs=[])
        self.rng = rng
        self.recent: list[int] = []
        for i in range(n_in):
            nid = self._add(Node(id=0, kind="in", op=f"x{i}" if i else "x", out=["f32[8,128]"],
                                 loc=Loc(CELL, 1, 0, "")))
            self.b.inputs.append(nid)
            self.recent.append(nid)

    def _add(self, node: Node) -> int:
        node.id = len(self.b.nodes)
        self.b.nodes.append(node)
        return node.id

    def group(self, parent: int, label: str, fn: str, line: int) -> int:
        gid = len(self.b.groups)
        self.b.groups.append(Group(id=gid, parent=parent, label=label, fn=fn,
                                   loc=Loc(CELL, line, 4, fn)))
        return gid

    def eqn(self, op: str, group: int, line: int, fn: str, path: str, ns: str = "",
            subs: list[Sub] | None = None, n_out: int = 1, flops: float = 0.0) -> int:
        srcs = [self.recent[-1]]
        if len(self.recent) > 2 and self.rng.random() < 0.35:
            srcs.append(self.recent[-self.rng.randint(2, min(10, len(self.recent)))])
        if op == "dot_general":
            flops = flops or 2 * 8 * 128 * 128
            params = ["dimension_numbers=(([1], [0]), ([], []))", "precision=None",
                      "preferred_element_type=float32"]
        else:
            flops = flops or 8 * 128
            params = []
        nid = self._add(Node(id=0, kind="eqn", op=op, params=params, out=["f32[8,128]"] * n_out,
                             loc=Loc(CELL, line, 8, fn), ns=ns, path=path, group=group,
                             flops=flops, bytes=3 * 4 * 8 * 128, subs=subs or []))
        for port, s in enumerate(srcs):
            self.b.edges.append(Edge(s, nid, "f32[8,128]", port, 0))
        self.b.n_eqns += 1
        self.b.flops += flops
        self.b.bytes += 3 * 4 * 8 * 128
        for g in self._chain(group):
            self.b.groups[g].n_eqns += 1
        self.recent.append(nid)
        return nid

    def _chain(self, g: int):
        while g >= 0:
            yield g
            g = self.b.groups[g].parent

    def finish(self, n_out: int = 1) -> Body:
        for i in range(n_out):
            src = self.recent[-1 - i] if len(self.recent) > i else self.recent[-1]
            nid = self._add(Node(id=0, kind="out", op=f"out{i}", out=["f32[8,128]"]))
            self.b.outputs.append(nid)
            self.b.edges.append(Edge(src, nid, "f32[8,128]", 0, 0))
        return self.b


def _blocks(m: _BodyMaker, n_blocks: int, per_block: int, parent: int, prefix: str,
            line0: int, ns: str = "") -> None:
    """`n_blocks` identical `block[i]` groups (attn + mlp inside), folded as `block xN`."""
    first = -1
    n_attn = per_block // 2
    for i in range(n_blocks):
        g = m.group(parent, f"block[{i}]", "block", line0)
        if i == 0:
            first = g
        else:
            m.b.groups[g].repeat_of = first
        ga = m.group(g, "attn", "attn", line0 + 1)
        gm = m.group(g, "mlp", "mlp", line0 + 2)
        path = f"{prefix}block[{i}]"
        for k in range(n_attn):
            m.eqn(OPS[k % len(OPS)], ga, 10 + k % 5, "attn", path + " > attn", ns)
        for k in range(per_block - n_attn):
            m.eqn(OPS[(k + 3) % len(OPS)], gm, 20 + k % 5, "mlp", path + " > mlp", ns)
    if n_blocks > 1:
        m.b.groups[first].repeats = n_blocks


def flat_graph(n_eqns: int, grouped: bool = True, seed: int = 0, per_block: int = 50) -> Graph:
    """One body of about `n_eqns` equations: `model > block[i] > attn|mlp`, or ungrouped."""
    rng = random.Random(seed)
    m = _BodyMaker(0, "jit(model)", 4, rng)
    if grouped:
        top = m.group(-1, "model", "model", 30)
        _blocks(m, max(1, n_eqns // per_block), per_block, top, "model > ", 31)
    else:
        for k in range(n_eqns):
            m.eqn(OPS[k % len(OPS)], -1, 1 + k % 40, "f", "")
    return Graph(name="model", bodies=[m.finish(2)])


def nested_graph(n_eqns: int, seed: int = 0) -> Graph:
    """jit(train_step) > stage_k (jit) > blocks, each stage with a scan over a shared body and a cond."""
    rng = random.Random(seed)
    bodies: list[Body] = []
    per_stage = 5_000
    n_stages = max(1, n_eqns // per_stage)
    # a scan body shared by every stage: stored once, referenced n_stages times
    sm = _BodyMaker(0, "scan body", 2, rng)
    for k in range(30):
        sm.eqn(OPS[k % len(OPS)], -1, 40 + k % 3, "step", "train_step > step")
    scan_body = sm.finish(2)
    branch = []
    for bi in range(2):
        bm = _BodyMaker(0, f"branch {bi}", 1, rng)
        for k in range(20):
            bm.eqn(OPS[(k + bi) % len(OPS)], -1, 50 + bi, "branch", "train_step > branch")
        branch.append(bm.finish(1))
    stage_bodies = []
    for s in range(n_stages):
        m = _BodyMaker(0, f"jit(stage_{s})", 2, rng)
        top = m.group(-1, f"stage_{s}", "stage", 60)
        _blocks(m, (per_stage - 100) // 50, 50, top, f"train_step > stage_{s} > ", 61,
                ns=f"stage_{s}")
        stage_bodies.append(m)
    # ids: root 0, jit(train_step) 1, stages 2.., scan body, branches
    sid = 2 + n_stages
    b0id, b1id = sid + 1, sid + 2
    for s, m in enumerate(stage_bodies):
        m.eqn("scan", -1, 70, "train_step", "train_step",
              subs=[Sub(sid, "scan", [0, 1], [0, 1], times=16)], n_out=2,
              flops=scan_body.flops * 16)
        m.eqn("cond", -1, 71, "train_step", "train_step",
              subs=[Sub(b0id, "branch 0", [0], [0]), Sub(b1id, "branch 1", [0], [0])],
              flops=branch[0].flops)
        m.b.n_eqns += 16 * scan_body.n_eqns + branch[0].n_eqns
    stage_done = []
    for s, m in enumerate(stage_bodies):
        m.b.id = 2 + s
        stage_done.append(m.finish(1))
    tm = _BodyMaker(1, "jit(train_step)", 2, rng)
    for s, sb in enumerate(stage_done):
        tm.eqn("pjit", -1, 80 + s, "train_step", "train_step",
               subs=[Sub(sb.id, "jit", [0, 1], [0])], flops=sb.flops)
        tm.b.n_eqns += sb.n_eqns
    train = tm.finish(1)
    rm = _BodyMaker(0, "train_step", 2, rng)
    rm.eqn("pjit", -1, 90, "", "", subs=[Sub(1, "jit", [0, 1], [0])], flops=train.flops)
    rm.b.n_eqns += train.n_eqns
    root = rm.finish(1)
    scan_body.id, branch[0].id, branch[1].id = sid, b0id, b1id
    bodies = [root, train, *stage_done, scan_body, *branch]
    for i, b in enumerate(bodies):
        assert b.id == i, (i, b.id)
    return Graph(name="train_step", bodies=bodies)


class FakeTrace:
    """Duck-types jaxviz.Trace for the views: .name, .graph, .calls, .call_sites, .diagnostics."""

    def __init__(self, graph: Graph, name: str | None = None, diagnostics=(), calls=1,
                 call_sites=()):
        self.name = name or graph.name
        self.graph = graph
        self.diagnostics = list(diagnostics)
        self.calls = calls
        self.call_sites = list(call_sites)
        self.error = None

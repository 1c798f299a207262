"""The graph as Graphviz DOT (graphviz.Digraph), for export and static pictures.

Sub-jaxprs become nested clusters (each shared body drawn at every use, up to a depth).
Labels are passed as plain strings; the graphviz package quotes them for DOT.

    >>> import jax.numpy as jnp, jaxviz
    >>> dot = jaxviz.trace(jnp.tanh, jnp.ones(3)).to_dot()
    >>> "tanh" in dot.source
    True
"""

from __future__ import annotations

import graphviz

from jaxviz.graph.model import Graph

_SHAPES = {"in": "invhouse", "out": "house", "const": "cylinder", "lit": "plaintext", "eqn": "box"}


def _clean(text: str) -> str:
    # graphviz quotes labels; backslashes would still start DOT escapes such as \l or \N
    return text.replace("\\", "\\\\")


def to_dot(graph: Graph, *, max_depth: int = 8, max_nodes: int = 5000) -> graphviz.Digraph:
    """Builds a Digraph of the graph; nested bodies expanded to max_depth, nodes capped."""
    dot = graphviz.Digraph(
        name=_clean(graph.name),
        graph_attr={"rankdir": "TB", "fontsize": "10"},
        node_attr={"fontsize": "10", "fontname": "Helvetica"},
        edge_attr={"fontsize": "8", "fontname": "Helvetica"},
    )
    count = [0]

    def add_body(g: graphviz.Digraph, body_id: int, prefix: str, depth: int) -> tuple[list, list]:
        body = graph.bodies[body_id]
        ids = {}
        for n in body.nodes:
            if count[0] >= max_nodes:
                break
            count[0] += 1
            nid = f"{prefix}n{n.id}"
            ids[n.id] = nid
            label = (
                n.op
                if n.kind == "eqn"
                else (f"{n.kind} {n.op}".strip() if n.kind != "lit" else n.value)
            )
            if n.out and n.kind != "lit":
                label += "\n" + ", ".join(n.out)
            if n.kind == "const" and n.nbytes:
                label += f"\n{n.nbytes} B"
            g.node(nid, _clean(label), shape=_SHAPES.get(n.kind, "box"))
            if n.subs and depth < max_depth:
                for k, s in enumerate(n.subs):
                    sub = graph.bodies[s.body]
                    sp = f"{nid}s{k}_"
                    with g.subgraph(name=f"cluster_{sp}") as c:
                        c.attr(
                            label=_clean(
                                f"{s.role}: {sub.label}" + (f" x{s.times}" if s.times > 1 else "")
                            ),
                            style="rounded",
                            color="gray50",
                        )
                        ins, _outs = add_body(c, s.body, sp, depth + 1)
                    for bi, src_port in enumerate(s.in_map):
                        if src_port >= 0 and bi < len(ins) and ins[bi]:
                            g.edge(nid, ins[bi], style="dotted", arrowhead="none")
        for e in body.edges:
            if e.src in ids and e.dst in ids:
                g.edge(ids[e.src], ids[e.dst], label=_clean(e.type))
        return [ids.get(i) for i in body.inputs], [ids.get(i) for i in body.outputs]

    add_body(dot, graph.root, "", 0)
    if count[0] >= max_nodes:
        dot.node("truncated", f"... graph truncated at {max_nodes} nodes", shape="plaintext")
    return dot

"""large-constant: an array closed over instead of passed in, baked into the compiled
program and copied at every compile.

The graph's constant nodes above `jaxviz.options.large_constant_bytes`, with the node that
consumes each; one finding per line and consumer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxviz.config import options
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.report import finding, quoted
from jaxviz.diagnostics.rules import RULES
from jaxviz.format import fmt_bytes
from jaxviz.graph.trace import Trace


@dataclasses.dataclass
class BigConst:
    nbytes: int
    type: str  # "f32[1024,1024]"
    node_id: str  # "b:id" of the consumer (or of the constant when unused)
    loc: Any  # the consumer's Loc, or None
    consumer: str  # the consuming op, "dot_general"


def large_constants(graph: Any, threshold: int | None = None) -> list[BigConst]:
    limit = options.large_constant_bytes if threshold is None else threshold
    out = []
    for b in graph.bodies:
        consts = [n for n in b.nodes if n.kind == "const" and n.nbytes > limit]
        if not consts:
            continue
        for c in consts:
            dst = next((e.dst for e in b.edges if e.src == c.id), None)
            node = b.nodes[dst] if dst is not None else c
            out.append(
                BigConst(
                    c.nbytes,
                    c.out[0] if c.out else "?",
                    f"{b.id}:{node.id}",
                    node.loc,
                    node.op if dst is not None else "",
                )
            )
    return out


def large_constant_findings(t: Trace) -> list[Diagnostic]:
    """One finding per line and consumer: the arrays of one object one op reads (a sparse
    BCOO matrix's data and indices, read by bcoo_dot_general) are one finding."""
    groups: dict[tuple, list] = {}
    for c in large_constants(t.graph):
        where = (c.loc.file, c.loc.line) if c.loc is not None else None
        groups.setdefault((where, c.consumer or id(c)), []).append(c)
    out = []
    for (where, _by), cs in groups.items():
        mib = sum(c.nbytes for c in cs) / (1 << 20)
        types = " and ".join(c.type for c in cs)
        what, it = (
            (f"a {types} array ({mib:.1f} MiB) is captured as a constant", "it")
            if len(cs) == 1
            else (
                f"{len(cs)} arrays, {types} ({mib:.1f} MiB in all), are captured as constants",
                "them",
            )
        )
        msg = (
            f"{quoted(where)}{what} of {t.name} (closed over instead of passed in)"
            + (f"; {cs[0].consumer} reads {it}" if cs[0].consumer else "")
            + f". {'It is' if len(cs) == 1 else 'They are'} baked into the compiled program "
            f"and copied at every compile (threshold {fmt_bytes(options.large_constant_bytes)})."
        )
        out.append(
            finding(
                "large-constant",
                msg,
                where,
                hint=RULES["large-constant"].hint,
                node_ids=tuple(dict.fromkeys(c.node_id for c in cs)),
                trace=t.name,
            )
        )
    return out

"""The mesh's lines of a text twin: the mesh and each collective with its cause.

collectives on mesh x=8 (Auto), largest first (2, 8.0 MiB per device a call):
   4.0 MiB  all-gather  over x  m.py:14 (wsc)  sin: with_sharding_constraint to P() at line 15
   4.0 MiB  all-reduce  over x  m.py:43 (rs)  dot_general: the product at line 43 contracts ...
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxviz.format import fmt_bytes
from jaxviz.mesh.collectives import Collective
from jaxviz.mesh.devices import Replicated
from jaxviz.mesh.eager import EagerCollectives
from jaxviz.mesh.layout import Mesh


def collective_line(c: Collective) -> str:
    """`  4.0 MiB  all-gather  over x  model.py:14 (wsc)  sin: <why>  [in while body, x12]`."""
    over = "over " + ",".join(c.axes) if c.axes else "over ?"
    where = c.where or f"{c.name} (XLA kept no source)"
    op = f"  {c.op}" if c.op else ""
    loop = f"  [in {c.inside}, runs {c.times} times a call]" if c.inside else ""
    return f"{fmt_bytes(c.bytes):>10}  {c.kind:<19} {over:<8} {where}{op}: {c.reason}{loop}"


def collectives_lines(cs: Sequence[Collective], mesh: Mesh | None, top: int = 12) -> list[str]:
    """The text twin's collectives section ([] for none: a program on one device, or a
    sharded one that needs none, shows no empty section)."""
    if not cs:
        return []
    on = f" on {mesh.legend}" if mesh is not None else ""
    total = sum(c.total_bytes for c in cs)
    lines = [f"collectives{on}, largest first ({len(cs)}, {fmt_bytes(total)} per device a call):"]
    lines += ["  " + collective_line(c) for c in cs[:top]]
    if len(cs) > top:
        rest = cs[top:]
        lines.append(f"  {'':>10}  ... and {len(rest)} more, "
                     f"{fmt_bytes(sum(c.total_bytes for c in rest))}")  # fmt: skip
    return lines


def replicated_lines(rs: Sequence[Replicated], top: int = 5) -> list[str]:
    """The arguments several devices hold the same bytes of ([] for none)."""
    if not rs:
        return []
    extra = sum(r.spare for r in rs)
    what = "1 argument" if len(rs) == 1 else f"{len(rs)} arguments"
    lines = [f"replicated: {what} with the same bytes on several devices "
             f"({fmt_bytes(extra)} of the devices' memory holds copies), most first:"]  # fmt: skip
    lines += ["  " + r.sentence() for r in rs[:top]]
    if len(rs) > top:
        lines.append(f"  ... and {len(rs) - top} more")
    return lines


def eager_lines(es: Sequence[EagerCollectives], top: int = 12) -> list[str]:
    """The collectives of the cell's eager ops ([] for none): per mesh, largest first.

    collectives of eager ops (the programs JAX compiled for them) on mesh x=8 (Auto), ...:
        2.0 MiB  all-reduce  over x  m.py:7 (<module>)  dot_general: the product ... [matmul]
    """
    if not es:
        return []
    lines = []
    for legend in dict.fromkeys(e.mesh.legend for e in es):
        cs = [(c, e.program) for e in es if e.mesh.legend == legend for c in e.collectives]
        cs.sort(key=lambda ce: (-ce[0].total_bytes, ce[0].line))
        total = sum(c.total_bytes for c, _ in cs)
        lines.append(f"collectives of eager ops (the programs JAX compiled for them while the "
                     f"cell ran) on {legend}, largest first ({len(cs)}, {fmt_bytes(total)} "
                     f"per device a run):")  # fmt: skip
        lines += [f"  {collective_line(c)}  [{p}]" for c, p in cs[:top]]
        if len(cs) > top:
            rest = sum(c.total_bytes for c, _ in cs[top:])
            lines.append(f"  {'':>10}  ... and {len(cs) - top} more, {fmt_bytes(rest)}")
    return lines

"""The facts of the `collective` finding (jaxviz.api makes the finding, docs/diagnostics.md):
collectives of a sharded program worth changing the code for.

- "gather": an all-gather (or all-to-all) that makes a value whole on each device, larger
  than `GATHER_SHARE` of the device's compiled peak, that the user's code asked for through
  a sharding (a constraint, an output's, an argument's, a product reading it whole) rather
  than by a shard_map's own `all_gather`: a different constraint or `out_shardings` avoids it;
- "loop": a reshard (all-gather, all-to-all, collective-permute not of a shard_map) in a
  `scan` / `while` body, run each iteration: reshard once before the loop.
- "back-and-forth": a value a loop body resharded from one sharding to another and back in
  each iteration (jaxviz.mesh.roundtrip): its two shardings, the reshards an iteration
  costs and their bytes; keep one sharding. Its collectives are not "loop" findings too.

All-reduces of a sharded contraction are the price of the sharding chosen (tensor or data
parallelism), not findings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jaxviz.format import fmt_bytes
from jaxviz.mesh.layout import axes_text

GATHER_SHARE = 0.10  # an all-gather above this share of a device's peak is a finding
LOOP_BYTES = 64 << 10  # a reshard in a loop body this large or more, each iteration
RESHARDS = ("all-gather", "all-to-all", "collective-permute")


@dataclasses.dataclass(frozen=True)
class CollectiveFinding:
    """What one `collective` finding says."""

    message: str
    where: tuple[str, int]  # the line that asked for it, else the op's
    variant: str  # "" (a large gather) or "loop"
    node_ids: tuple[str, ...]
    trace: str  # the function's name


def collective_findings(reports: Sequence[Any]) -> list[CollectiveFinding]:
    """The findings of the MemoryReports of sharded programs (none for one device)."""
    out: list[CollectiveFinding] = []
    for r in reports:
        told: set[str] = set()  # the collectives a back-and-forth finding names
        for t in getattr(r, "roundtrips", ()):
            out.append(
                CollectiveFinding(
                    _back_and_forth(t), (t.file, t.line), "back-and-forth", t.node_ids, r.name
                )
            )
            told.update(c.name for c in t.collectives)
        for c in getattr(r, "collectives", ()):
            if c.cause == "shard_map" or not c.file or c.name in told:
                continue
            where = (c.file, c.cause_line or c.line)
            ids = tuple(c.cause_ids or c.node_ids)
            if c.inside and c.kind in RESHARDS and c.bytes >= LOOP_BYTES:
                out.append(CollectiveFinding(_loop(c), where, "loop", ids, r.name))
            elif (
                c.kind in ("all-gather", "all-to-all")
                and r.peak_bytes
                and (c.bytes > GATHER_SHARE * r.peak_bytes)
            ):
                out.append(CollectiveFinding(_gather(c, r), where, "", ids, r.name))
    return out


def _gather(c: Any, r: Any) -> str:
    share = c.bytes / r.peak_bytes
    does = (  # an all-to-all trades shards: it makes nothing whole
        f"makes {fmt_bytes(c.bytes)} whole on each device"
        if c.kind == "all-gather"
        else f"moves {fmt_bytes(c.bytes)} on each device to another layout"
    )
    return (
        f"{r.name}'s {c.kind} over {axes_text(c.axes)} {does} ({share:.0%} of its compiled "
        f"peak, {fmt_bytes(r.peak_bytes)}): {c.reason}"
    )


def _loop(c: Any) -> str:
    article = "an" if c.kind[0] in "aeiou" else "a"
    return (
        f"{article} {c.kind} of {fmt_bytes(c.bytes)} per device over {axes_text(c.axes)} runs "
        f"in each of the loop's {c.times} iterations ({fmt_bytes(c.total_bytes)} a call): "
        f"{c.reason}"
    )


def _back_and_forth(t: Any) -> str:
    """ "a f32[1024,1024] is resharded back and forth in each of the loop's 10 iterations
    ...": its shardings with their lines, the reshards of one iteration and their bytes."""
    asks = " and ".join(f"{spec} (line {line})" for spec, line in t.shardings)
    kinds: dict[str, int] = {}
    for c in t.collectives:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    each = ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in kinds.items())
    sizes = " + ".join(fmt_bytes(c.bytes) for c in t.collectives)
    axes = tuple(dict.fromkeys(a for c in t.collectives for a in c.axes))
    loop = f"each of the loop's {t.times} iterations" if t.times > 1 else "each iteration"
    return (
        f"a value ({t.type}) is resharded back and forth in {loop}: the loop body asks it for "
        f"{asks}, so each iteration moves it there and back with {each} over "
        f"{axes_text(axes)} ({sizes} = {fmt_bytes(t.step_bytes)} per device an iteration, "
        f"{fmt_bytes(t.step_bytes * t.times)} a call)"
    )

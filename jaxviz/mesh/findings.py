"""The facts of the `collective` finding (jaxviz.api makes the finding, docs/diagnostics.md):
collectives of a sharded program worth changing the code for.

- "gather": an all-gather (or all-to-all) that makes a value whole on each device, larger
  than `GATHER_SHARE` of the device's compiled peak, that the user's code asked for through
  a sharding (a constraint, an output's, an argument's, a product reading it whole) rather
  than by a shard_map's own `all_gather`: a different constraint or `out_shardings` avoids it;
- "loop": a reshard (all-gather, all-to-all, collective-permute not of a shard_map) in a
  `scan` / `while` body, run each iteration: reshard once before the loop.

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
        for c in getattr(r, "collectives", ()):
            if c.cause == "shard_map" or not c.file:
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
    return (
        f"{r.name}'s {c.kind} over {axes_text(c.axes)} makes {fmt_bytes(c.bytes)} whole on "
        f"each device ({share:.0%} of its compiled peak, {fmt_bytes(r.peak_bytes)}): {c.reason}"
    )


def _loop(c: Any) -> str:
    article = "an" if c.kind[0] in "aeiou" else "a"
    return (
        f"{article} {c.kind} of {fmt_bytes(c.bytes)} per device over {axes_text(c.axes)} runs "
        f"in each of the loop's {c.times} iterations ({fmt_bytes(c.total_bytes)} a call): "
        f"{c.reason}"
    )

"""Out of memory: when a cell fails with XLA's RESOURCE_EXHAUSTED, the failing function's
largest buffers at its compiled peak, with their lines and categories (what jax#9530 asks
for): the facts of the `out-of-memory` finding at the call that failed (jaxviz.api makes
the Diagnostic).

The function is compiled again for its recorded argument specs and never run
(jaxviz.memory.buffers); a function jaxviz cannot compile again gets no finding.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxviz.format import fmt_bytes
from jaxviz.memory.buffers import memory_report
from jaxviz.memory.report import MemoryReport

TOP = 5


def is_out_of_memory(error: BaseException | None) -> bool:
    """XLA's RESOURCE_EXHAUSTED (any backend, any jaxlib: matched on the status text)."""
    return error is not None and "RESOURCE_EXHAUSTED" in str(error)


def failing_trace(ct: Any) -> Any:
    """The jitted function whose call raised: the trace called at the cell's failing line
    (the last of the cell's frames in the traceback), else the last jitted trace."""
    jits = [t for t in ct.traces if t.kind in ("jit", "trace") and t.fun is not None]
    lines = [ln for f, ln, *_ in ct.error_frames if f == ct.filename]
    for line in reversed(lines):
        for t in reversed(jits):
            if any(site[0] == ct.filename and site[1] == line for site in t.call_sites):
                return t
    return jits[-1] if jits else None


@dataclasses.dataclass(frozen=True)
class OutOfMemory:
    """What the out-of-memory finding says."""

    message: str  # "big ran out of device memory: its compiled peak is 1.0 TiB ..."
    where: tuple[str, int] | None  # the call that failed, (filename, line)
    node_ids: tuple[str, ...]  # the largest buffers' graph nodes
    related: tuple[tuple[str, int, str], ...]  # their lines, "(file, 5, '1.0 TiB temporary')"
    trace: str  # the failing function's name
    report: MemoryReport


def out_of_memory(ct: Any) -> OutOfMemory | None:
    """The finding's facts when the cell failed with RESOURCE_EXHAUSTED, else None."""
    if not is_out_of_memory(ct.error):
        return None
    t = failing_trace(ct)
    if t is None:
        return None
    try:
        report = memory_report(t, what_if=False)
    except Exception:  # jaxviz's failure must not hide the user's error
        return None
    lines = [ln for f, ln, *_ in ct.error_frames if f == ct.filename]
    top = report.buffers[:TOP]
    return OutOfMemory(
        message=oom_message(report),
        where=(ct.filename, lines[-1]) if lines else None,
        node_ids=tuple(i for b in top for i in b.node_ids[:1]),
        related=tuple(
            (b.file, b.line, f"{fmt_bytes(b.bytes)} {b.category}") for b in top if b.file
        ),
        trace=t.name,
        report=report,
    )


def oom_message(r: MemoryReport) -> str:
    """`{name} ran out of device memory: its compiled peak is 1.0 TiB; largest buffers: ...`."""
    top = "; ".join(
        f"{fmt_bytes(b.bytes)} {b.type} {b.category} at {b.where or b.name + ' (no source)'}"
        for b in r.buffers[:TOP]
    )
    return (
        f"{r.name} ran out of device memory: its compiled peak is {fmt_bytes(r.peak_bytes)}"
        f" (XLA's figure: {fmt_bytes(r.xla_total)}). Largest buffers at the peak: {top}."
    )

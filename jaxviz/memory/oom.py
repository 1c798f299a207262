"""Out of memory: when a cell fails with XLA's RESOURCE_EXHAUSTED, the failing function's
largest buffers at its compiled peak, with their lines and categories (what jax#9530 asks
for), as an `out-of-memory` finding at the call that failed.

The function is compiled again for its recorded argument specs and never run
(jaxviz.memory.buffers); a function jaxviz cannot compile again gets no finding.
"""

from __future__ import annotations

from typing import Any

from jaxviz.diagnostics.report import finding
from jaxviz.format import fmt_bytes
from jaxviz.memory.buffers import MemoryReport, memory_report

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


def oom_findings(ct: Any) -> list:
    """[the out-of-memory finding] when the cell failed with RESOURCE_EXHAUSTED, else []."""
    if not is_out_of_memory(ct.error):
        return []
    t = failing_trace(ct)
    if t is None:
        return []
    try:
        report = memory_report(t, what_if=False)
    except Exception:  # jaxviz's failure must not hide the user's error
        return []
    lines = [ln for f, ln, *_ in ct.error_frames if f == ct.filename]
    where = (ct.filename, lines[-1]) if lines else None
    ids = tuple(i for b in report.buffers[:TOP] for i in b.node_ids[:1])
    return [
        finding(
            "out-of-memory",
            oom_message(report),
            where,
            node_ids=ids,
            trace=t.name,
            related=tuple(
                (b.file, b.line, f"{fmt_bytes(b.bytes)} {b.category}")
                for b in report.buffers[:TOP]
                if b.file
            ),
        )
    ]


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

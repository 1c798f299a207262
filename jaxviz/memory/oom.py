"""Out of memory: when a cell fails with XLA's RESOURCE_EXHAUSTED, the failing function's
largest buffers at its compiled peak, with their lines and categories (what jax#9530 asks
for): the facts of the `out-of-memory` finding at the call that failed (jaxviz.api makes
the Diagnostic).

The function is compiled again for its recorded argument specs and never run
(jaxviz.memory.buffers); a function jaxviz cannot compile again gets no finding. On a TPU,
out of memory is raised at compile time, before any executable exists: the optimised HLO
of that failing compile is read from XLA's dump of it (jaxviz.memory.compile.
failed_compile_report), and its buffers are explained the same way. With
`jaxviz.options.memory_limit` set (bytes: the device you mean to run on), every jitted
function of the cell whose compiled peak exceeds it gets the same finding, though it ran:
what would run out of memory there, found on the machine at hand.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxviz.config import options
from jaxviz.format import fmt_bytes
from jaxviz.memory.buffers import analyze, memory_report
from jaxviz.memory.compile import failed_compile_report
from jaxviz.memory.report import MemoryReport, category_sums, category_totals, donated_args

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
    hint: str = ""  # the fix for this code: what to shrink, donate (only what is not), remat


def out_of_memory(ct: Any, known: dict[str, MemoryReport] | None = None) -> list[OutOfMemory]:
    """The findings' facts: the failing function's when the cell failed with
    RESOURCE_EXHAUSTED; else, with `jaxviz.options.memory_limit` set, every jitted function
    of the user's whose compiled peak exceeds it (known: reports made already, by name)."""
    known = known or {}
    if is_out_of_memory(ct.error):
        t = failing_trace(ct)
        report = (known.get(t.name) or _report(t)) if t is not None else None
        if report is None:
            return []
        lines = [ln for f, ln, *_ in ct.error_frames if f == ct.filename]
        where = (ct.filename, lines[-1]) if lines else None
        return [_facts(t, report, where, oom_message(report))]
    limit = options.memory_limit
    if not limit or ct.error is not None:
        return []
    out = []
    for t in ct.traces:
        if t.kind not in ("jit", "trace") or t.fun is None or t.error is not None:
            continue
        if not t.user_code:
            continue
        report = known.get(t.name) or _report(t)
        if report is None:
            continue
        peak = max(report.peak_bytes, report.xla_total or 0)
        if peak > limit:
            site = t.call_sites[0] if t.call_sites else None
            where = (site[0], site[1]) if site else None
            out.append(_facts(t, report, where, over_limit_message(report, limit)))
    return out


def _report(t: Any) -> MemoryReport | None:
    try:
        return memory_report(t, what_if=False)
    except Exception as e:  # jaxviz's failure must not hide the user's error
        if not is_out_of_memory(e):
            return None
    try:  # out of memory at compile time (a TPU's): from XLA's dump of the failing compile
        cr = failed_compile_report(t)
        return analyze(t, cr) if cr is not None else None
    except Exception:
        return None


def _facts(t: Any, report: MemoryReport, where: Any, message: str) -> OutOfMemory:
    top = report.buffers[:TOP]
    return OutOfMemory(
        message=message,
        where=where,
        node_ids=tuple(i for b in top for i in b.node_ids[:1]),
        related=tuple(
            (b.file, b.line, f"{fmt_bytes(b.bytes)} {b.category}") for b in top if b.file
        ),
        trace=t.name,
        report=report,
        hint=oom_hint(report),
    )


def oom_hint(r: MemoryReport) -> str:
    """The fix that fits the function as written: the categories holding the peak, largest
    first, each with what shrinks it; donation suggested only for arguments not donated
    that an output could reuse (never to a step that donates them already)."""
    total = sum(b.bytes for b in r.buffers) or 1
    by = {c: n for c, (n, _k) in category_sums(r).items()}
    kept = by.get("activation", 0) + by.get("temporary", 0)
    lines: list[str] = []  # (the message gives the totals by category)
    if kept >= 0.3 * total:
        lines.append(
            f"Activations and temporaries hold {fmt_bytes(kept)}: jax.checkpoint the repeated "
            "blocks (recomputed in the backward pass instead of kept), or a smaller batch."
        )
    if r.donatable:
        names = tuple(a for a, _ in r.donatable)
        lines.append(
            f"Donate {', '.join(f'`{a}`' for a in names)} (an output of the same shape and "
            f"dtype can reuse it, up to {fmt_bytes(sum(n for _, n in r.donatable))}): "
            f"jax.jit(..., donate_argnames={names!r})."
        )
    done = donated_args(r)
    if done:
        lines.append(
            f"{', '.join(f'`{a}`' for a in done)} {'is' if len(done) == 1 else 'are'} donated "
            "already: their buffers are reused; the rest is what to shrink."
        )
    args = by.get("argument", 0) + by.get("donated argument", 0)
    if args >= 0.5 * total:
        lines.append(
            f"Arguments hold {fmt_bytes(args)}: keep them smaller (bfloat16, fewer at once) "
            "or shard them over devices."
        )
    if not lines:
        lines.append("Shrink the largest buffers the finding lists, or a smaller batch.")
    return "\n".join(lines)


def _top(r: MemoryReport) -> str:
    top = "; ".join(
        f"{fmt_bytes(b.bytes)} {b.type} {b.category} at {b.where or b.name + ' (no source)'}"
        for b in r.buffers[:TOP]
    )
    # (five 4 MiB buffers do not explain 110 MiB: the totals by category do)
    return f"{top}. By category: {', '.join(category_totals(r))}"


def oom_message(r: MemoryReport) -> str:
    """`{name} ran out of device memory: its compiled peak is 1.0 TiB; largest buffers: ...`."""
    return (
        f"{r.name} ran out of device memory: its compiled peak is {fmt_bytes(r.peak_bytes)}"
        f" (XLA's figure: {fmt_bytes(r.xla_total)}). Largest buffers at the peak: {_top(r)}."
    )


def over_limit_message(r: MemoryReport, limit: int) -> str:
    """The same for a compiled peak over `jaxviz.options.memory_limit` (the program ran)."""
    return (
        f"{r.name} would run out of memory on a device of {fmt_bytes(limit)} "
        f"(jaxviz.options.memory_limit): its compiled peak is {fmt_bytes(r.peak_bytes)} "
        f"(XLA's figure: {fmt_bytes(r.xla_total)}). Largest buffers at the peak: {_top(r)}."
    )

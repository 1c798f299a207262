"""Out of memory: when a cell fails because XLA could not allocate what a jitted function
needs, the function's largest buffers at its compiled peak, with their lines and
categories (what jax#9530 asks for): the facts of the `out-of-memory` finding at the call
that needs the memory (jaxviz.api makes the Diagnostic).

XLA reports out of memory on three paths, and each gets the finding at the call: at compile
time (a TPU's RESOURCE_EXHAUSTED, raised by the call), at dispatch, and deferred to the
result's first use (CPU's dispatch returns a result that holds "Out of memory allocating
640000000000 bytes"; reading it raises, as INTERNAL or RESOURCE_EXHAUSTED, at a later line:
`print(top)`). The call is the one whose compiled peak needs the bytes XLA could not
allocate; the line where the error surfaced is a related place.

A cell that does not raise is checked too: a jitted function whose compiled peak exceeds
the device's memory (`memory_stats()["bytes_limit"]` on an accelerator, the machine's RAM
on CPU) gets a warning at its call, an error where a result the cell holds has the
allocation's error in it (asked without waiting: `_compat.held_error`). Only the compiled
memory the cell computed anyway is read (jaxviz.memory.peaks: JAX's executables): nothing
is compiled for it.

For a failed call the function is compiled again for its recorded argument specs and never
run (jaxviz.memory.buffers) unless its report was made already; a function jaxviz cannot
compile again gets no finding. On a TPU, out of memory is raised at compile time, before
any executable exists: the optimised HLO of that failing compile is read from XLA's dump of
it (jaxviz.memory.compile.failed_compile_report), and its buffers are explained the same
way. With `jaxviz.options.memory_limit` set (bytes: the device you mean to run on), every
jitted function of the cell whose compiled peak exceeds it gets the same finding, though it
ran (compiled again where the cell's report is missing): what would run out of memory
there, found on the machine at hand.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from jaxviz import _compat
from jaxviz.config import options
from jaxviz.format import fmt_bytes
from jaxviz.memory.buffers import analyze, memory_report
from jaxviz.memory.compile import failed_compile_report
from jaxviz.memory.live import device_memory
from jaxviz.memory.report import MemoryReport, category_sums, category_totals, donated_args

TOP = 5
SHARE = 0.05  # a buffer outlined in the graph holds at least this share of the peak
MAX_NAMES = 2000  # the cell's names looked at for results holding an error

# XLA's out-of-memory status, as each path words it: "RESOURCE_EXHAUSTED: Out of memory
# allocating N bytes" (CPU, a run), "INTERNAL: Error dispatching computation: ... Out of
# memory allocating N bytes" (CPU, reading a result whose dispatch failed), "Ran out of
# memory on HBM" (a TPU's compile)
_OOM = re.compile(r"RESOURCE_EXHAUSTED|\b[Oo]ut of memory\b")
_ALLOCATING = re.compile(r"allocating (\d+) bytes")


def is_out_of_memory(error: BaseException | str | None) -> bool:
    """XLA's out-of-memory status (any backend, any jaxlib: matched on the status text)."""
    return error is not None and bool(_OOM.search(str(error)))


def allocating(error: BaseException | str | None) -> int:
    """The bytes XLA could not allocate, from its status ("allocating 640000000000 bytes");
    0 when it does not say."""
    m = _ALLOCATING.search(str(error)) if error is not None else None
    return int(m.group(1)) if m else 0


def _jits(ct: Any) -> list:
    return [t for t in ct.traces if t.kind in ("jit", "trace") and t.fun is not None]


def _known(t: Any, known: Sequence[MemoryReport]) -> MemoryReport | None:
    """The report made already of `t`: its name and signature."""
    try:
        sig = str(t.signature)
    except Exception:  # a duck-typed trace without a graph
        sig = ""
    for r in known:
        if r.name == t.name and (r.signature == sig or not sig):
            return r
    return None


def failing_trace(ct: Any, known: Sequence[MemoryReport] = ()) -> Any:
    """The jitted function that needs the memory XLA could not allocate: the trace called
    at a line of the traceback (the cell's failing line first); else, the error having
    surfaced at a later use of a result, the last one whose compiled peak (of the reports
    made already) holds the bytes XLA named; else the last jitted trace."""
    jits = _jits(ct)
    lines = [ln for f, ln, *_ in ct.error_frames if f == ct.filename]
    for line in reversed(lines):
        for t in reversed(jits):
            if any(site[0] == ct.filename and site[1] == line for site in t.call_sites):
                return t
    need = allocating(ct.error)
    reports = [(t, _known(t, known)) for t in jits] if need else []
    fits = [t for t, r in reports if r is not None and r.peak_bytes >= need]
    if fits:
        return fits[-1]
    return jits[-1] if jits else None


def call_site(t: Any, ct: Any) -> tuple[str, int] | None:
    """Where the cell called `t`: the call at a line of the traceback, else the last call
    before the line where the error surfaced, else its first call."""
    lines = [ln for f, ln, *_ in ct.error_frames if f == ct.filename]
    sites = [(s[0], s[1]) for s in t.call_sites]
    for line in reversed(lines):
        if (ct.filename, line) in sites:
            return ct.filename, line
    before = [s for s in sites if s[0] == ct.filename and lines and s[1] <= lines[-1]]
    if before:
        return before[-1]
    if sites:
        return sites[0]
    return (ct.filename, lines[-1]) if lines else None


@dataclasses.dataclass(frozen=True)
class OutOfMemory:
    """What the out-of-memory finding says."""

    message: str  # "big ran out of device memory: its compiled peak is 1.0 TiB ..."
    where: tuple[str, int] | None  # the call that needs the memory, (filename, line)
    node_ids: tuple[str, ...]  # the graph nodes of the buffers that hold the peak
    related: tuple[tuple[str, int, str], ...]  # their lines, "(file, 5, '1.0 TiB temporary')"
    trace: str  # the failing function's name
    report: MemoryReport
    hint: str = ""  # the fix for this code: what to shrink, donate (only what is not), remat
    severity: str = ""  # "" the rule's (error); "warning": predicted, nothing failed yet


def out_of_memory(
    ct: Any,
    known: Sequence[MemoryReport] = (),
    namespace: dict | None = None,
    errors: Sequence[tuple[str, str]] | None = None,
) -> list[OutOfMemory]:
    """The findings' facts: the function that needs the memory when the cell failed with
    XLA's out-of-memory status; else every jitted function of the user's whose compiled
    peak exceeds `jaxviz.options.memory_limit` when set, else the device's memory (known:
    the reports made already; namespace: the cell's globals, for results that hold
    the allocation's error; errors: those results, `held_errors` read as the cell ended,
    for an analysis that runs later)."""
    if is_out_of_memory(ct.error):
        t = failing_trace(ct, known)
        report = (_known(t, known) or _report(t)) if t is not None else None
        if report is None:
            return []
        where = call_site(t, ct)
        lines = [ln for f, ln, *_ in ct.error_frames if f == ct.filename]
        surfaced = (ct.filename, lines[-1]) if lines else None
        facts = _facts(t, report, where, oom_message(report))
        if surfaced is not None and surfaced != where:
            seen = (*surfaced, "the error surfaced here, at the first use of the result "
                    "(JAX dispatches asynchronously)")  # fmt: skip
            facts = dataclasses.replace(facts, related=(seen, *facts.related))
        return [facts]
    if options.memory_limit:
        return [] if ct.error is not None else _over_limit(ct, known)
    return _over_device(ct, known, namespace or {}, errors)


def _over_limit(ct: Any, known: Sequence[MemoryReport]) -> list[OutOfMemory]:
    """`jaxviz.options.memory_limit`: each function over it (compiled again if need be)."""
    limit = options.memory_limit or 0
    out = []
    for t in ct.traces:
        if t.kind not in ("jit", "trace") or t.fun is None or t.error is not None:
            continue
        if not t.user_code:
            continue
        report = _known(t, known) or _report(t)
        if report is None:
            continue
        peak = max(report.peak_bytes, report.xla_total or 0)
        if peak > limit:
            site = t.call_sites[0] if t.call_sites else None
            where = (site[0], site[1]) if site else None
            out.append(_facts(t, report, where, over_limit_message(report, limit)))
    return out


def _over_device(
    ct: Any,
    known: Sequence[MemoryReport],
    namespace: dict,
    errors: Sequence[tuple[str, str]] | None = None,
) -> list[OutOfMemory]:
    """Each function whose compiled peak (of the reports the cell made, nothing compiled)
    exceeds its device's memory: a warning at its call, an error where a result the cell
    holds has the allocation's error in it."""
    out, held = [], errors
    for t in _jits(ct):
        report = _known(t, known)
        if report is None:
            continue
        memory = device_memory(report.platform)
        if memory is None:
            continue
        total, what = memory
        shared = report.num_devices if report.platform == "cpu" else 1  # one RAM for all
        # both figures over it (the simulated peak, XLA's): no warning for a program that
        # one of them says fits
        peak = min(report.peak_bytes, report.xla_total or report.peak_bytes) * max(shared, 1)
        if peak <= total:
            continue
        site = t.call_sites[0] if t.call_sites else None
        where = (site[0], site[1]) if site else None
        if held is None:
            held = held_errors(namespace)
        mine = [(n, e) for n, e in held if 0 < allocating(e) <= peak or not allocating(e)]
        message = over_device_message(report, total, what, mine)
        facts = _facts(t, report, where, message)
        out.append(dataclasses.replace(facts, severity="error" if mine else "warning"))
    return out


def held_errors(namespace: dict) -> list[tuple[str, str]]:
    """(name, XLA's status) of the cell's arrays that hold an out-of-memory error instead
    of values (the cell's names, and one level into the lists, tuples and dicts they hold),
    asked without waiting (`_compat.held_error`)."""
    import jax

    out = []
    for name, v in list(namespace.items())[:MAX_NAMES]:
        if not isinstance(name, str) or name.startswith("_"):
            continue
        items = [(name, v)]
        if isinstance(v, (list, tuple)):
            items = [(f"{name}[{i}]", x) for i, x in enumerate(v[:100])]
        elif isinstance(v, dict):
            items = [(f"{name}[{k!r}]", x) for k, x in list(v.items())[:100]]
        for n, x in items:
            if isinstance(x, jax.Array) and not _compat.is_tracer(x):
                error = _compat.held_error(x)
                if error and is_out_of_memory(error):
                    out.append((n, error))
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
    # the buffers that hold the peak are outlined, not a 2 MiB input beside a 1 TiB op
    big = [b for b in top if b.bytes >= SHARE * max(report.peak_bytes, 1)] or top[:1]
    return OutOfMemory(
        message=message,
        where=where,
        node_ids=tuple(i for b in big for i in b.node_ids[:1]),
        related=tuple(
            (b.file, b.line, f"{fmt_bytes(b.bytes)} {b.category}") for b in big if b.file
        ),
        trace=t.name,
        report=report,
        hint=oom_hint(report),
    )


def _backward(r: MemoryReport) -> bool:
    """The program has a backward pass (a gradient) at its peak: activations kept for it."""
    return any(b.category == "activation" or _compat.is_backward(b.op_name) for b in r.buffers)


def oom_hint(r: MemoryReport) -> str:
    """The fix that fits the function as written: the categories holding the peak, largest
    first, each with what shrinks it (jax.checkpoint only where a backward pass keeps
    activations); donation suggested only for arguments not donated that an output could
    reuse (never to a step that donates them already)."""
    total = sum(b.bytes for b in r.buffers) or 1
    by = {c: n for c, (n, _k) in category_sums(r).items()}
    lines: list[str] = []  # (the message gives the totals by category)
    acts, temps, outs = by.get("activation", 0), by.get("temporary", 0), by.get("output", 0)
    if acts + temps >= 0.3 * total and _backward(r):
        lines.append(
            f"Activations and temporaries hold {fmt_bytes(acts + temps)}: jax.checkpoint the "
            "blocks that make them (recomputed in the backward pass instead of kept), or a "
            "smaller batch."
        )
    elif temps >= 0.3 * total:
        lines.append(
            f"Temporaries hold {fmt_bytes(temps)}: compute in pieces (jax.lax.map over "
            "chunks, or a smaller batch), or in a form that needs no intermediate of that "
            "size (reduce as you go rather than materialise the whole product)."
        )
    if outs >= 0.3 * total:
        lines.append(
            f"The outputs hold {fmt_bytes(outs)}: return less (reduce or slice inside the "
            "function, so that the whole result is never made), or make it in pieces."
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


def over_device_message(r: MemoryReport, total: int, what: str, held: list[tuple[str, str]]) -> str:
    """The same for a compiled peak over the device's memory, the cell having raised
    nothing: a result that holds the allocation's error is named, else it is a warning of
    what running it needs."""
    head = (
        f"{r.name} needs more memory than {what} ({fmt_bytes(total)}): its compiled peak is "
        f"{fmt_bytes(r.peak_bytes)}"
        + (f" per device, on {r.num_devices} devices" if r.num_devices > 1 else "")
        + f" (XLA's figure: {fmt_bytes(r.xla_total)})"
    )
    if held:
        names = ", ".join(f"`{n}`" for n, _ in held[:3])
        first = held[0][1].strip().splitlines()[0]
        fate = (
            f". XLA could not allocate it, and the call returned anyway (JAX dispatches "
            f"asynchronously): {names} {'holds' if len(held) == 1 else 'hold'} XLA's error "
            f"instead of values ({first}); the first use raises it"
        )
    else:
        fate = (
            ". It cannot run here: XLA's out-of-memory error comes at its call or, JAX "
            "dispatching asynchronously, at the first use of its result"
        )
    return f"{head}{fate}. Largest buffers at the peak: {_top(r)}."

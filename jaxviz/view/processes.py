"""A multi-process run's merged report as text (jaxviz.distributed.merge.MergedReport):
what process 0 prints after its own functions, and what the HTML report and the notebook
view show in their processes section.

    jaxviz: 2 processes, merged on process 0 (summaries: process 1 2.1 KB)
    processes:
      process 0  cpu:0, cpu:1  on host-a  ran 3.21 s
    programs:
      step: the same program on 2 of 2 processes
    ...
"""

from __future__ import annotations

import html

from jaxviz.distributed.merge import MergedReport
from jaxviz.distributed.programs import short_place
from jaxviz.format import fmt_bytes


def _processes(ps: tuple[int, ...], n: int) -> str:
    if len(ps) == n:
        return f"on {n} of {n} processes"
    return f"on process{'es' if len(ps) > 1 else ''} {', '.join(map(str, ps))} (of {n})"


def _secs(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def merged_lines(r: MergedReport, script: str | None = None) -> list[str]:
    """The merged report, line by line (`script`: paths shown by their base name)."""
    sizes = ", ".join(f"process {p} {fmt_bytes(b)}" for p, b in r.sizes.items() if p != 0)
    cost = f" in {_secs(r.seconds)} (waiting {_secs(r.waited)} for the others)" if r.seconds else ""
    out = [
        f"jaxviz: {r.processes} processes, merged on process 0{cost}"
        + (f"; summaries: {sizes}" if sizes else "")
    ]
    out.append("processes:")
    for s in r.summaries:
        err = f"; raised {s.error}" if s.error else ""
        out.append(
            f"  process {s.process}  {', '.join(s.devices)}  on {s.host}  "
            f"ran {_secs(s.seconds)}{err}"
        )
    for p in r.missing:
        out.append(
            f"  process {p}  MISSING: sent nothing in {r.wait:g} s (it died, hangs, or "
            f"is still running); the report holds the others"
        )
    out += _program_lines(r)
    out += _finding_lines(r)
    out += _memory_lines(r)
    out += _time_lines(r)
    return out


def _program_lines(r: MergedReport) -> list[str]:
    """Each function whose arrays span the processes: the same program on all, or not; the
    others (on each process's own devices, free to differ) named on one line."""
    if not r.programs:
        return []
    out = ["programs:"]
    for p in r.programs:
        if not p.spans:
            continue
        where = _processes(p.processes, r.processes)
        out.append(
            f"  {p.name}: the same program {where}"
            if p.same
            else f"  {p.name}: DIFFERENT programs {where}: see program-mismatch below"
        )
    local = [p.name for p in r.programs if not p.spans]
    if local:
        out.append(f"  on each process's own devices (not compared): {', '.join(local)}")
    return out


def _finding_lines(r: MergedReport) -> list[str]:
    if not r.findings:
        return ["findings: none"]
    out = ["findings:"]
    for f in r.findings:
        where = short_place(f.file or "", f.line or 0) if f.file else "?"
        out.append(
            f"  {where}: {f.severity}: {f.rule}: {f.message} "
            f"[{_processes(f.processes, r.processes)}]"
        )
        if f.hint:  # the fix, as the text twin writes it (view/text.py's fix_lines)
            first, *example = f.hint.splitlines()
            out += [f"    fix: {first}", *(f"    {x}" for x in example)]
    return out


def _memory_lines(r: MergedReport) -> list[str]:
    if not any(s.compiled or s.live for s in r.summaries):
        return []
    out = ["memory (per device):"]
    for s in r.summaries:
        top = max(s.compiled, key=lambda c: c["peak"], default=None)
        compiled = f"compiled peak {fmt_bytes(top['peak'])} ({top['name']})" if top else "-"
        live = max((v["peak"] for v in s.live), default=None)
        out.append(
            f"  process {s.process}  {compiled}  live peak "
            f"{fmt_bytes(live) if live is not None else '-'}"
        )
    big = r.largest()
    if big is not None:
        out.append(f"  largest: process {big[0]}, {fmt_bytes(big[1])}")
    return out


def _time_lines(r: MergedReport) -> list[str]:
    if not any(s.step or s.device_seconds is not None for s in r.summaries):
        return []
    out = ["time:"]
    for s in r.summaries:
        step = (
            (
                f"{s.step['name']}: {_secs(s.step['seconds'])} a call (median of its first "
                f"{s.step['calls']} calls)"
            )
            if s.step
            else "no step (no function called 3 times)"
        )
        dev = ""
        if s.device_seconds is not None:
            dev = f"; device {_secs(s.device_seconds)}, collectives {_secs(s.collective_seconds)}"
        lag = r.lags.get(s.process)
        late = f"; starts each call {_secs(lag)} after the earliest" if lag else ""
        mark = "  <- STRAGGLER" if s.process in r.stragglers else ""
        out.append(f"  process {s.process}  {step}{late}{dev}{mark}")
    for p in r.stragglers:
        lag = r.lags[p]
        out.append(
            f"  straggler: process {p} starts each call of {r.summaries[0].step.get('name', '')} "
            f"{_secs(lag)} after the earliest process, who wait for it in its collectives "
            f"({lag / r.median_step:.0%} of the median step, {_secs(r.median_step)})"
            if r.median_step
            else f"  straggler: process {p}"
        )
    return out


def merged_text(r: MergedReport, script: str | None = None) -> str:
    return "\n".join(merged_lines(r, script))


def merged_html(r: MergedReport) -> str:
    """The merged report as an escaped HTML section (the report page's and the notebook's)."""
    text = html.escape(merged_text(r))
    return (
        f'<details open class="jaxviz-processes"><summary>{r.processes} processes, '
        f"merged on process 0</summary><pre>{text}</pre></details>"
    )


__all__ = ["merged_html", "merged_lines", "merged_text"]

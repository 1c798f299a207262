"""The processes side by side: one report on process 0.

`merge(gathered, mismatches, programs)` makes the `MergedReport`: each process with its
devices; for each function, whether every process traced the same program (else the
`program-mismatch` finding the watch found); each finding once, with the processes it came
from; each process's compiled and live peak, the largest named; each process's step time
and, with --profile, its device and collective time; a straggler named (it starts each
step's call later than the others by more than a tenth of a step: they wait for it in the
step's collectives, their step >10% slower than it would be); the processes that sent
nothing in time.

    >>> r = merge(gathered, watch.mismatches, watch.programs())
    >>> r.stragglers
    [1]
"""

from __future__ import annotations

import dataclasses
import os
import statistics

from jaxviz.distributed.exchange import Gathered
from jaxviz.distributed.summary import ProcessSummary
from jaxviz.distributed.watch import Mismatch

STRAGGLER = 1.10  # a process that starts each step 10% of a step after the earliest, or
# later, is a straggler: the others wait that long in each collective (their step 10% slower)
STRAGGLER_MIN_SECONDS = 5e-3  # ... and at least this much later, at every call compared:
# the order the processes leave a collective in varies by a few ms (4 processes on 2 cores:
# 1.3 to 1.7 ms at the median of 6 calls, measured)


@dataclasses.dataclass(frozen=True)
class MergedFinding:
    """One finding, once, with the processes that reported it."""

    rule: str
    severity: str
    message: str
    file: str
    line: int | None
    hint: str
    processes: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Program:
    """One function's programs across processes: `same` when every process that traced it
    traced one program; `processes` those that did."""

    name: str
    processes: tuple[int, ...]
    same: bool
    spans: bool  # its arguments span several processes' devices


@dataclasses.dataclass
class MergedReport:
    """A multi-process run, merged on process 0."""

    processes: int  # how many the run has
    summaries: list[ProcessSummary]  # those that reported, by process
    sizes: dict[int, int]  # bytes of each summary
    missing: list[int]  # processes that sent nothing in time
    wait: float  # seconds process 0 was willing to wait
    waited: float  # seconds it waited
    programs: list[Program]
    findings: list[MergedFinding]
    stragglers: list[int]  # processes that start each step later than STRAGGLER allows
    median_step: float | None  # seconds
    lags: dict[int, float]  # each process's median lag behind the earliest at a step's start
    seconds: float = 0.0  # jaxviz's end on process 0: summary, exchange (waiting included), merge

    @property
    def errors(self) -> bool:
        return any(f.severity == "error" for f in self.findings)

    def largest(self) -> tuple[int, int] | None:
        """(process, bytes) of the largest peak, compiled or live, per device."""
        best = None
        for s in self.summaries:
            b = max([c["peak"] for c in s.compiled] + [v["peak"] for v in s.live] + [0])
            if b and (best is None or b > best[1]):
                best = (s.process, b)
        return best


def merge(g: Gathered, mismatches: list[Mismatch], programs: dict) -> MergedReport:
    """The merged report of what process 0 gathered, with the watch's mismatches and the
    programs it read ({(name, n): {process: signature}})."""
    summaries = list(g.summaries.values())
    progs = _programs(programs)
    median, lags, least = _stragglers(summaries, {p.name for p in progs if p.spans})
    return MergedReport(
        processes=summaries[0].processes if summaries else 0,
        summaries=summaries,
        sizes=g.sizes,
        missing=g.missing,
        wait=g.wait,
        waited=g.waited,
        programs=progs,
        findings=_mismatch_findings(mismatches) + _findings(summaries),
        stragglers=stragglers(least, median),
        median_step=median,
        lags=lags,
    )


def _findings(summaries: list[ProcessSummary]) -> list[MergedFinding]:
    """Each finding once: the same rule at the same line (the file by its base name:
    processes may run from different folders) is one, with the processes that found it
    and the message of the first (another's may differ in a figure: a compile's time)."""
    seen: dict[tuple, list] = {}
    for s in summaries:
        for f in s.findings:
            key = (f["rule"], os.path.basename(f["file"] or ""), f["line"])
            entry = seen.setdefault(key, [f, []])
            if s.process not in entry[1]:
                entry[1].append(s.process)
    return [
        MergedFinding(
            f["rule"],
            f["severity"],
            f["message"],
            f["file"],
            f["line"],
            f.get("hint", ""),
            tuple(ps),
        )
        for f, ps in seen.values()
    ]


def _mismatch_findings(mismatches: list[Mismatch]) -> list[MergedFinding]:
    out = []
    for m in mismatches:
        d = m.diagnostic()
        out.append(
            MergedFinding(d.rule, d.severity, d.message, d.filename, d.line, d.hint, (0, m.process))
        )
    return out


def _programs(programs: dict) -> list[Program]:
    by_name: dict[str, list] = {}
    for (name, _n), sigs in programs.items():
        by_name.setdefault(name, []).append(sigs)
    out = []
    for name, groups in by_name.items():
        procs = sorted({p for sigs in groups for p in sigs})
        same = all(len({s["hash"] for s in sigs.values()}) == 1 for sigs in groups)
        spans = any(s["spans"] for sigs in groups for s in sigs.values())
        out.append(Program(name, tuple(procs), same, spans))
    out.sort(key=lambda p: not p.spans)  # the programs every process must run alike first
    return out


def _stragglers(
    summaries: list[ProcessSummary], spanning: set[str]
) -> tuple[float | None, dict[int, float], dict[int, float]]:
    """The median step, and each process's lag: how long after the earliest process it
    starts the step's calls (the median over its calls, the first, compiling, left out).
    Processes that wait in a step's collectives start their next call as soon as the
    straggler let them finish: the straggler starts late, by its own extra time. Also each
    process's least lag: a straggler is late at every call. Only a step whose program spans
    the processes (`spanning`) makes them wait for each other: a step each process runs on
    its own devices alone keeps whatever offset the processes started with."""
    steps = [s for s in summaries if s.step.get("starts")]
    names = {s.step["name"] for s in steps}
    if len(steps) < 2 or len(names) != 1 or not names <= spanning:
        return None, {}, {}
    n = min(len(s.step["starts"]) for s in steps)
    if n < 2:
        return None, {}, {}
    lags: dict[int, list[float]] = {s.process: [] for s in steps}
    for k in range(1, n):
        first = min(s.step["starts"][k] for s in steps)
        for s in steps:
            lags[s.process].append(s.step["starts"][k] - first)
    median = statistics.median(s.step["seconds"] for s in steps)
    return (
        median,
        {p: statistics.median(v) for p, v in lags.items()},
        {p: min(v) for p, v in lags.items()},
    )


def stragglers(least: dict[int, float], median: float | None) -> list[int]:
    """The processes that start every call compared more than (STRAGGLER - 1) of a step
    after the earliest, and at least STRAGGLER_MIN_SECONDS after it (`least`: each
    process's least lag)."""
    if not median:
        return []
    bar = max((STRAGGLER - 1) * median, STRAGGLER_MIN_SECONDS)
    return [p for p, lag in least.items() if lag > bar]

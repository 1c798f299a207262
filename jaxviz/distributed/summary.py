"""One process's capture in a few KB: what process 0 needs to show it beside the others.

`summarise(ct, ...)` reads a finished CellTrace (and the run's `StepClock`) into a
`ProcessSummary`: the process's devices, its functions (name, signature, calls), its
findings (rule, severity, message, line), each jitted function's compiled peak, the live
memory (each device's peak where the device reports one; a notebook cell's memory lanes,
downsampled to `MAX_POINTS` points each), its step time and, with --profile, its device and
collective time. Summaries, not traces: lists are capped (`MAX_FUNCTIONS`, `MAX_FINDINGS`)
and messages cut, so a summary stays a few KB whatever the program.

    >>> s = ProcessSummary(process=1, processes=2, host="h", devices=["cpu:1"], platform="cpu")
    >>> ProcessSummary.from_json(s.to_json()) == s
    True
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import socket
import statistics
import threading
import time
from typing import Any

from jaxviz import _compat

MAX_FUNCTIONS = 40  # functions a summary lists (the user's own first)
MAX_FINDINGS = 40  # findings a summary lists
MAX_MESSAGE = 600  # characters of a finding's message
MAX_POINTS = 32  # points of each live memory lane
STEP_TIMES = 17  # calls a StepClock times per function (16 intervals)
CLOCKED_FUNCTIONS = 64  # functions a StepClock follows
_NOT_TIMED: list[float] = [0.0] * STEP_TIMES  # a full list: nothing is appended to it
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")


@dataclasses.dataclass
class ProcessSummary:
    """What one process of a multi-process run tells process 0 (JSON, a few KB)."""

    process: int  # 1: jax.process_index()
    processes: int  # 4: jax.process_count()
    host: str  # the host's name
    devices: list[str]  # its local devices, "cpu:2"
    platform: str  # "cpu", "tpu"
    seconds: float = 0.0  # the run's wall time under the capture
    error: str = ""  # the run's exception, "ValueError: ..."
    functions: list[dict] = dataclasses.field(default_factory=list)  # name, kind, signature,
    # calls ("16+" when a lower bound), eqns
    findings: list[dict] = dataclasses.field(default_factory=list)  # rule, severity,
    # message, file, line, code
    compiled: list[dict] = dataclasses.field(default_factory=list)  # name, peak (bytes per
    # device)
    live: list[dict] = dataclasses.field(default_factory=list)  # device, peak (bytes), and
    # points: [[t seconds, bytes], ...] at most MAX_POINTS
    step: dict = dataclasses.field(default_factory=dict)  # name, seconds (median), calls,
    # starts (the wall-clock start of each of its first calls)
    device_seconds: float | None = None  # --profile: device time of the run's ops
    collective_seconds: float | None = None  # --profile: of which in collectives

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ProcessSummary:
        data = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class StepClock:
    """An observer of the capture that notes when the first calls of each jitted function
    start (`on_call`: the CALL events the watch policy sees anyway, at most STEP_TIMES per
    function), on the wall clock, which processes on one host share (hosts: as far as their
    clocks agree). The step time is the median interval between its calls, the first one
    (compiling) left out; process 0 compares the starts: a straggler starts each call
    after the others, who wait for it in the call's collectives. Past its cap, or outside
    a multi-process run, a function's calls are not told it (on_call's answer)."""

    def __init__(self) -> None:
        self.times: dict[int, list[float]] = {}
        self.names: dict[int, str] = {}
        self._thread = threading.get_ident()
        self._by_events = False  # calls told by CALL events or the call counter (on_call)

    def on_call(self, jitted: Any, arg0: Any, frame: Any, slot: Any = None) -> bool:
        """True once it times no more of `jitted`'s calls (STEP_TIMES of them, or none: a
        single process's): the recorder then stops telling it of them."""
        self._by_events = True
        self._start(id(jitted), jitted)
        ts = self.times.get(id(jitted))
        return ts is not None and len(ts) >= STEP_TIMES

    def on_jit(self, call: Any, frame: Any, run: Any) -> Any:
        """Where no CALL event nor call counter tells the calls (Python 3.11's fallback),
        the calls JAX's Python path sees are timed."""
        __tracebackhide__ = True  # a hook: never in the user's tracebacks
        if not self._by_events:
            self._start(id(call.fun), call.name)
        return run()

    def _start(self, key: int, named: Any) -> None:
        ts = self.times.get(key)
        if ts is None:
            if len(self.times) >= CLOCKED_FUNCTIONS or threading.get_ident() != self._thread:
                return
            if _compat.process_group() is None:  # a single process: not timed
                self.times[key] = _NOT_TIMED
                return
            ts = self.times[key] = []
            self.names[key] = named if isinstance(named, str) else _compat.fun_name(named)
        if len(ts) < STEP_TIMES:
            ts.append(time.time())

    def step(self) -> dict:
        """The most-called function's median step: {"name", "seconds", "calls", "starts"
        (its calls' wall-clock starts)}; {} when no function was called 3 times."""
        timed = [kv for kv in self.times.items() if kv[1] is not _NOT_TIMED]
        best = max(timed, key=lambda kv: len(kv[1]), default=None)
        if best is None or len(best[1]) < 3:
            return {}
        ts = best[1]
        gaps = [b - a for a, b in itertools.pairwise(ts[1:])]
        return {
            "name": self.names[best[0]],
            "seconds": statistics.median(gaps),
            "calls": len(ts),
            "starts": [round(t, 4) for t in ts],
        }


def summarise(
    ct: Any,
    group: tuple[int, int],
    *,
    seconds: float = 0.0,
    clock: StepClock | None = None,
    live: Any = None,
) -> ProcessSummary:
    """The summary of this process's finished CellTrace (`group`: its index and the number
    of processes; `live`: the cell's CellMemory, when its memory was watched)."""
    import jax

    devices = list(jax.local_devices())
    s = ProcessSummary(
        process=group[0],
        processes=group[1],
        host=socket.gethostname(),
        devices=[f"{d.platform}:{d.id}" for d in devices],
        platform=devices[0].platform if devices else "",
        seconds=round(seconds, 4),
        error=_error(ct.error),
        functions=[_function(t) for t in ct.traces[:MAX_FUNCTIONS]],
        findings=[_finding(d) for d in ct.diagnostics[:MAX_FINDINGS]],
        compiled=[{"name": r.name, "peak": int(r.peak_bytes)} for r in ct.compiled],
        live=_live(devices, live if live is not None else getattr(ct, "cell_memory", None)),
        step=clock.step() if clock is not None else {},
    )
    profile = getattr(ct, "profile", None)
    if profile is not None:
        s.device_seconds = profile.total_us / 1e6
        s.collective_seconds = (
            sum(
                k.us
                for k in profile.kernels
                if any(c in k.name or c in k.kind for c in COLLECTIVES)
            )
            / 1e6
        )
    return s


def _error(e: BaseException | None) -> str:
    if e is None:
        return ""
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"[:MAX_MESSAGE]


def _function(t: Any) -> dict:
    b = t.graph.body
    sig = ", ".join(b.nodes[i].out[0] for i in b.inputs[:8]) + (
        ", ..." if len(b.inputs) > 8 else ""
    )
    calls = f"{t.calls}+" if t.calls_uncounted else str(t.calls)
    return {
        "name": t.name,
        "kind": t.kind,
        "signature": sig,
        "calls": calls,
        "eqns": t.graph.n_eqns,
    }


def _finding(d: Any) -> dict:
    return {
        "rule": d.rule,
        "severity": d.severity,
        "message": d.message[:MAX_MESSAGE],
        "file": d.filename,
        "line": d.line,
        "code": d.code[:200],
        "hint": d.hint[:MAX_MESSAGE],
    }


def _live(devices: list, cell_memory: Any) -> list[dict]:
    """Each device's live peak: the device's own figure where it keeps one (an accelerator's
    memory_stats), else a notebook cell's lanes (downsampled); [] when neither."""
    out = []
    for d in devices:
        try:
            stats = d.memory_stats() or {}
        except Exception:  # a backend without memory_stats
            stats = {}
        peak = stats.get("peak_bytes_in_use")
        if peak is not None:
            out.append({"device": f"{d.platform}:{d.id}", "peak": int(peak), "points": []})
    if out or cell_memory is None:
        return out
    lanes: dict[int, list[tuple[float, float]]] = {}
    for t, lane, b in cell_memory.samples:
        lanes.setdefault(lane, []).append((t, b))
    for i, points in sorted(lanes.items()):
        lane = cell_memory.lanes[i]
        if lane.device is None:  # the process's RSS: not a device's memory
            continue
        step = max(1, -(-len(points) // MAX_POINTS))
        kept = [[round(t, 3), int(b)] for t, b in points[::step]]
        out.append({"device": lane.device, "peak": int(max(b for _t, b in points)), "points": kept})
    return out

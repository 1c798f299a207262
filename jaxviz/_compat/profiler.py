"""JAX's profiler and compile events, read as plain data (jaxviz.profile).

`start(DIR)` / `stop()` run `jax.profiler.start_trace(DIR, create_perfetto_trace=True)` around
a block, and `read_trace(DIR)` reads the `perfetto_trace.json.gz` it wrote. One event per
executed HLO op; where it is, by platform (measured on jax 0.10.2 and 0.12):

- CPU (jax 0.10.2 and 0.12): an `X` event named after the op with args `hlo_module`
  ("jit_step"), `hlo_op` ("ynn_fusion.3") and `run_id` (one per call), on the thread that
  ran it (`tf_XLAExecute/...`, or `python` for an eager op run inline); `dur` in us. A
  while loop inside a `call` is one event: its body's ops are not events of their own.
- TPU (jax 0.10.2): the process `/device:TPU:0` has the threads `XLA Modules` (an event
  per call, "jit_step(12)"), `Steps` and `XLA Ops` (an event per op, named after its HLO
  instruction, with args `device_duration_ps`, `bytes_accessed`, `hlo_category`,
  `long_name`). An op belongs to the module event around it.

`compile_events()` listens to JAX's monitoring durations (`/jax/core/compile/...`: tracing,
lowering to MLIR, XLA's compile), each with the function's name (jax 0.10.2 and 0.12 give
`fun_name`). Nothing here is imported unless a profile is asked for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import gzip
import json
import os
import re
from collections.abc import Callable, Iterator
from typing import Any


@dataclasses.dataclass(frozen=True)
class OpEvent:
    """One executed HLO op, as the profiler recorded it."""

    module: str  # "jit_step": the HLO module (jitted function) it belongs to
    op: str  # "fusion.7": the HLO instruction's name
    start: float  # 1234.5: us from the trace's start
    dur: float  # 12.0: its device time in us (TPU: device_duration_ps)
    run: str  # "jit_step#3": the call of the module it ran in
    lane: str  # "/device:TPU:0" or the CPU thread that ran it
    category: str = ""  # "convolution fusion" (TPU's hlo_category; "" on CPU)
    bytes: float = 0.0  # bytes accessed (TPU's bytes_accessed; 0 when not reported)
    text: str = ""  # the instruction's text, shapes and all (TPU's long_name; "" on CPU)


@dataclasses.dataclass(frozen=True)
class ModuleRun:
    """One call of a compiled module on the device: its span."""

    module: str  # "jit_step"
    run: str  # "jit_step#3"
    start: float  # us
    dur: float  # us
    lane: str  # "/device:TPU:0", "cpu"


@dataclasses.dataclass
class DeviceTrace:
    """Everything jaxviz reads of one profile."""

    ops: list[OpEvent]
    runs: list[ModuleRun]  # in start order
    platform: str  # "cpu", "tpu", "gpu"
    path: str = ""  # the perfetto file read
    notes: list[str] = dataclasses.field(default_factory=list)


_RUN_SUFFIX = re.compile(r"\s*\(\d+\).*$")  # "jit_step(12)" -> "jit_step"


def start(log_dir: str) -> None:
    import jax.profiler

    jax.profiler.start_trace(log_dir, create_perfetto_trace=True)


def stop() -> None:
    import jax.profiler

    jax.profiler.stop_trace()


def perfetto_file(log_dir: str) -> str:
    """The newest perfetto_trace.json.gz under `log_dir` ("" when none)."""
    found = glob.glob(os.path.join(log_dir, "**", "perfetto_trace.json.gz"), recursive=True)
    return max(found, key=os.path.getmtime) if found else ""


def read_trace(log_dir: str) -> DeviceTrace:
    """The op events and module calls of the profile written to `log_dir`."""
    path = perfetto_file(log_dir)
    if not path:
        return DeviceTrace([], [], "", notes=["the profiler wrote no perfetto trace"])
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return parse_events(events, path)


def parse_events(events: list[dict], path: str = "") -> DeviceTrace:
    """The trace's events -> a DeviceTrace (see the module's docstring for the formats)."""
    procs: dict[Any, str] = {}
    threads: dict[tuple, str] = {}
    for e in events:
        if e.get("ph") != "M":
            continue
        name = (e.get("args") or {}).get("name", "")
        if e.get("name") == "process_name":
            procs[e.get("pid")] = name
        elif e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = name
    devices = {p for p, n in procs.items() if n.startswith("/device:")}
    platform = "cpu"
    for n in procs.values():
        m = re.match(r"/device:([A-Z]+):", n)
        if m and m.group(1) != "CPU":
            platform = m.group(1).lower()
            break
    ops: list[OpEvent] = []
    runs: list[ModuleRun] = []
    device_ops: list[tuple[dict, str]] = []
    cpu_runs: dict[tuple[str, str], list[float]] = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        pid = e.get("pid")
        args = e.get("args") or {}
        thread = threads.get((pid, e.get("tid")), "")
        if pid in devices:
            lane = procs[pid]
            if thread == "XLA Modules":
                name = _RUN_SUFFIX.sub("", str(e.get("name", "")))
                start, dur = float(e.get("ts", 0.0)), float(e.get("dur", 0.0))
                runs.append(ModuleRun(name, f"{name}#{len(runs)}", start, dur, lane))
            elif thread == "XLA Ops" or "hlo_op" in args:
                device_ops.append((e, lane))
            continue
        if "hlo_op" not in args:
            continue
        # a host platform's op (CPU): its module and call are in its args
        module = str(args.get("hlo_module", ""))
        run = f"{module}#{args.get('run_id', '')}"
        start, dur = float(e.get("ts", 0.0)), float(e.get("dur", 0.0))
        ops.append(OpEvent(module, str(args["hlo_op"]), start, dur, run, thread or "cpu"))
        span = cpu_runs.setdefault((module, run), [start, start + dur])
        span[0], span[1] = min(span[0], start), max(span[1], start + dur)
    if device_ops:  # an accelerator's own events: the host's (if any) are not device time
        ops = _device_ops(device_ops, runs)
    if not runs:
        runs = [ModuleRun(m, r, a, b - a, "cpu") for (m, r), (a, b) in cpu_runs.items()]
    runs.sort(key=lambda r: r.start)
    return DeviceTrace(ops, runs, platform if device_ops else "cpu", path)


def _device_ops(found: list[tuple[dict, str]], runs: list[ModuleRun]) -> list[OpEvent]:
    """An accelerator's op events, each in the module call around it (by lane and time)."""
    by_lane: dict[str, list[ModuleRun]] = {}
    for r in sorted(runs, key=lambda r: r.start):
        by_lane.setdefault(r.lane, []).append(r)
    out = []
    for e, lane in found:
        args = e.get("args") or {}
        start, dur = float(e.get("ts", 0.0)), float(e.get("dur", 0.0))
        ps = args.get("device_duration_ps")
        device_dur = float(ps) / 1e6 if ps not in (None, "") else dur
        module = str(args.get("hlo_module", ""))
        run = ""
        for r in by_lane.get(lane, ()):  # the call whose span holds the op's start
            if r.start <= start + 1e-3 and start <= r.start + r.dur + 1e-3:
                run, module = r.run, module or r.module
                break
        out.append(
            OpEvent(
                module,
                str(args.get("hlo_op") or e.get("name", "")),
                start,
                device_dur,
                run or f"{module}#?",
                lane,
                str(args.get("hlo_category", "")),
                float(args.get("bytes_accessed") or 0.0),
                str(args.get("long_name", ""))[:400],
            )
        )
    return out


# --- compile events --------------------------------------------------------------------------

_COMPILE_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "tracing",
    "/jax/core/compile/tracing_duration": "tracing",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering",
    "/jax/core/compile/backend_compile_duration": "compile",
}


@contextlib.contextmanager
def compile_events(record: Callable[[str, str, float], None]) -> Iterator[None]:
    """Calls `record(function name, phase, seconds)` for each of JAX's compile durations
    while the block runs (phase: "tracing", "lowering", "compile"); the name as JAX gives
    it, "jit(step)" -> "step"."""
    import jax.monitoring as monitoring

    def listener(event: str, duration: float, **kw: Any) -> None:
        phase = _COMPILE_EVENTS.get(event)
        if phase is None:
            return
        name = str(kw.get("fun_name", "") or "")
        while name.startswith(("jit(", "pjit(")) and name.endswith(")"):
            name = name[name.index("(") + 1 : -1]
        record(name, phase, float(duration))

    monitoring.register_event_duration_secs_listener(listener)  # type: ignore[arg-type]
    try:
        yield
    finally:
        try:  # jax 0.10.2 and 0.12: public unregister
            monitoring.unregister_event_duration_listener(listener)  # type: ignore[arg-type]
        except (AttributeError, ValueError):  # pragma: no cover - an older JAX
            pass


_MODULE_CHARS = re.compile(r"[^\w.-]")  # JAX's mlir.sanitize_name (jax 0.10.2 and 0.12)


def module_name(fun_name: str) -> str:
    """The HLO module JAX names a jitted function's program: "multiply" -> "jit_multiply",
    "<lambda>" -> "jit__lambda" (mlir.sanitize_name, trailing "_" stripped, as
    lower_jaxpr_to_module sets `sym_name`)."""
    return _MODULE_CHARS.sub("_", "jit_" + fun_name).rstrip("_")


def device_kind() -> tuple[str, str]:
    """(platform, device_kind) of the default device: ("tpu", "TPU v5 lite")."""
    import jax

    d = jax.devices()[0]
    return d.platform, str(getattr(d, "device_kind", ""))

"""The ProfileReport: where a profiled cell's (or function's) device time went, by line.

Plain data, the wire format of the view's time tab (jaxviz.view.payload), with a text twin
(`str(report)`). What is measured and what is estimated (docs/time.md):

- measured: each op's device time (JAX's profiler), the calls' spans, compile times;
- estimated: a fused kernel's time split over the lines it fused, in proportion to each
  fused instruction's estimated work (`LineTime.estimated`), and FLOP/s from XLA's cost
  analysis (per call) over the measured time.
"""

from __future__ import annotations

import dataclasses

from jaxviz.format import fmt_bytes


def fmt_us(us: float) -> str:
    """12.3 us, 4.56 ms, 1.23 s."""
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} us"


def fmt_rate(flops_per_s: float) -> str:
    for unit, k in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)):
        if flops_per_s >= k:
            return f"{flops_per_s / k:.1f} {unit}"
    return f"{flops_per_s:.0f} FLOP/s"


@dataclasses.dataclass(frozen=True)
class LineTime:
    """One source line's device time (or one named XLA category's, `line` 0)."""

    label: str  # "<cell 3>:5 (step)" or "copy / layout change" for a category
    file: str  # "/home/me/train.py"; "" for a category
    line: int  # 5; 0 for a category
    fn: str  # "step"
    text: str  # "h = jnp.tanh(x @ w)": the line's source ("" when unknown)
    us: float  # 1830.0: device time over the whole profile, in us
    per_step_us: float  # 610.0: us per step (per call of its function)
    share: float  # 0.41: of the profile's device time
    estimated: bool  # part of it is a fused kernel's time split over its lines
    kernels: tuple[str, ...]  # ("fusion.23", "dot.4"): the kernels it ran in, most time first
    prims: tuple[str, ...]  # ("dot_general", "tanh"): its primitives in those kernels
    trace: str = ""  # "step": the function whose graph has its nodes
    node_ids: tuple[str, ...] = ()  # ("b0:12",): its nodes in that trace's graph
    category: bool = False  # a named XLA category (copy, all-reduce, while loop overhead)
    bytes: float = 0.0  # a collective's row: the bytes its calls moved, all calls together
    calls: int = 0  # a collective's row: its calls (each device's counted)


@dataclasses.dataclass(frozen=True)
class KernelTime:
    """One executed op or fused kernel."""

    name: str  # "fusion.23"
    module: str  # "jit_step"
    kind: str  # "convolution fusion" (TPU's category), "fusion (kLoop)", "copy"
    us: float  # device time over the profile
    calls: int  # how many times it ran
    share: float  # of the profile's device time
    lines: tuple[tuple[str, float], ...]  # (("<cell 3>:5", 0.7), ...): lines and their split
    prims: tuple[str, ...]  # ("dot_general", "tanh", "mul")
    flops: float = 0.0  # estimated FLOPs per call (0: unknown)
    bytes: float = 0.0  # bytes accessed per call (TPU's figure; 0: not reported)


@dataclasses.dataclass(frozen=True)
class ModuleTime:
    """One compiled function: its calls, device time and achieved FLOP/s."""

    name: str  # "jit_step"
    trace: str  # "step" ("" for a module jaxviz did not capture, an eager op's)
    calls: int  # 3
    us: float  # device time, all calls
    flops_per_call: float | None  # XLA's cost analysis (the mean, over signatures); None: unknown
    flops_per_s: float | None  # achieved: each call's FLOPs summed, over the device time
    peak_flops_per_s: float | None  # the device's published peak (None: unknown)


@dataclasses.dataclass(frozen=True)
class CompileTime:
    """One function's compile time in the profiled block, from JAX's monitoring events."""

    name: str  # "step"
    tracing_s: float
    lowering_s: float
    compile_s: float  # XLA's backend compile
    where: str = ""  # "<cell 3>:4": where it is defined or called ("" when unknown)

    @property
    def total_s(self) -> float:
        return self.tracing_s + self.lowering_s + self.compile_s


@dataclasses.dataclass(frozen=True)
class Timeline:
    """The device's calls over the profiled block: busy vs idle between them."""

    calls: int  # module calls seen on the device
    span_us: float  # first call's start to last call's end
    busy_us: float  # union of the calls' spans
    idle_share: float  # 1 - busy / span
    host_per_step_us: float  # span / calls: the host's time per step
    verdict: str  # "dispatch-bound", "device-bound", "mixed", "" (too few calls)
    message: str  # the sentence the view shows
    skipped: int = 0  # the first calls left out: jaxviz's capture watched them (slower)
    # the calls on the device: (start, duration) in us from the first one's start, at most
    # MAX_SPANS of them (the view's strip of busy and idle)
    spans: tuple[tuple[float, float], ...] = ()
    steps: int = 0  # all calls of the step on the device: `calls` + `skipped`
    # device time per step as the lines count it (the op events of the step's calls)
    step_us: float = 0.0  # in the verdict's window (the `calls` counted)
    skipped_us: float = 0.0  # in the first calls left out (`skipped`)


@dataclasses.dataclass(frozen=True)
class StepTime:
    """The step's device time against the rest of the block's: what the lines' per-step
    figures add up to (each line's time over `steps`)."""

    name: str  # "step": the function whose calls are the steps
    steps: int  # its calls: the headline's steps
    us: float  # its op events' device time, all calls (nested events once)
    outside_us: float  # the block's other device time: other functions, eager ops

    @property
    def per_step_us(self) -> float:
        return self.us / self.steps

    def sentence(self) -> str:
        """'the rows add up to 2.67 ms a step, each line's time over the 40 steps: 2.58 ms
        in the 40 calls of step, 83.9 us a step outside them (3.36 ms in all: other
        functions, eager ops)'."""
        total = (self.us + self.outside_us) / self.steps
        head = (
            f"the rows add up to {fmt_us(total)} a step, each line's time over the "
            f"{self.steps} steps"
        )
        if self.outside_us <= 0:
            return f"{head}: the {self.steps} calls of {self.name}"
        return (
            f"{head}: {fmt_us(self.per_step_us)} in the {self.steps} calls of {self.name}, "
            f"{fmt_us(self.outside_us / self.steps)} a step outside them "
            f"({fmt_us(self.outside_us)} in all: other functions, eager ops)"
        )


@dataclasses.dataclass(frozen=True)
class ProfileReport:
    """Where the device time of a profiled cell (or `Trace.profile()`) went.

    `lines` are sorted by time, categories (copies, collectives, loop overhead) among them
    with `category=True`; `kernels` the executed ops by time.
    """

    name: str  # "cell [3]" or the function's name
    platform: str  # "cpu", "tpu"
    device: str  # "TPU v5 lite"
    total_us: float  # the sum of the op events' device time (nested events counted once)
    steps: int  # calls of the step: the function with most device time called >= 3 times
    lines: tuple[LineTime, ...]
    kernels: tuple[KernelTime, ...]
    modules: tuple[ModuleTime, ...]
    compiles: tuple[CompileTime, ...]
    timeline: Timeline | None
    attributed_share: float  # of total_us: to a source line or a named category
    events: int  # op events read
    events_us: float = 0.0  # their durations summed as read, nested events once
    profile_seconds: float = 0.0  # jaxviz's reading and attribution after the run
    profiler_seconds: float = 0.0  # JAX's profiler starting and stopping (not in the cell's time)
    notes: tuple[str, ...] = ()
    # device time (us, whole profile) per graph node, by trace: {"step": {"0:12": 830.0}}; a
    # line's time split over its nodes by their primitives (the text twin's time column, the
    # graph's "colour: device time")
    node_us: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    # jaxviz's own NaN check (its reductions on the user's arrays, jaxviz._compat.flags): in
    # none of the times above, said apart in one line
    nan_check_us: float = 0.0  # its device time, all calls
    nan_check_calls: int = 0  # its calls on the device
    nan_check_compile_s: float = 0.0  # compiling its reductions (jaxviz's thread)
    # the step's device time against the rest, which the lines' per-step figures add up to
    # (None without steps: a block with no loop)
    step: StepTime | None = None

    def top(self, n: int = 10) -> list[LineTime]:
        return list(self.lines[:n])

    def __str__(self) -> str:
        return render_text(self)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": render_text(self)}


def render_text(r: ProfileReport, top: int = 12) -> str:
    """The text twin: the timeline verdict, the top lines, kernels, FLOP/s, compile times."""
    if not r.events:
        out = [f"{r.name}: no op events profiled"]
        out.extend(f"  note: {n}" for n in r.notes)
        out.extend("  " + x for x in [own_line(r)] if x)
        return "\n".join(out)
    steps = f", {r.steps} step{'s' if r.steps != 1 else ''}" if r.steps else ""
    out = [
        f"{r.name}: device time {fmt_us(r.total_us)} on {r.device or r.platform}{steps} "
        f"({r.events} op events; {r.attributed_share:.1%} to a line or a named category)"
    ]
    if r.timeline is not None and r.timeline.message:
        out.append("  " + r.timeline.message)
    if r.lines:
        out.append(
            "  time by line (per step, share; ~ = a fused kernel's time split by estimated work):"
        )
        width = max(len(x.label) for x in r.lines[:top])
        for x in r.lines[:top]:
            est = "~" if x.estimated else " "
            text = f"  {x.text.strip()[:60]}" if x.text else ""
            if x.bytes and x.us > 0 and x.calls:  # a collective: its bytes and their rate
                rate = x.bytes / (x.us * 1e-6) / 1e9
                text = f"  {fmt_bytes(int(x.bytes / x.calls))} a call, {rate:.2f} GB/s achieved"
            out.append(
                f"    {est}{fmt_us(x.per_step_us):>10} {x.share:6.1%}  {x.label:<{width}}{text}"
            )
        if len(r.lines) > top:
            rest = sum(x.us for x in r.lines[top:])
            out.append(f"     ... {len(r.lines) - top} more ({fmt_us(rest)} in all)")
        if r.step is not None:
            out.append(f"    {r.step.sentence()}")
    if r.kernels:
        out.append("  top kernels:")
        for k in r.kernels[:6]:
            where = ", ".join(label for label, _ in k.lines[:4]) or "no source"
            prims = f" ({', '.join(k.prims[:4])})" if k.prims else ""
            mem = f", {fmt_bytes(int(k.bytes))} accessed" if k.bytes else ""
            out.append(
                f"    {k.name}: {where}{prims}, {fmt_us(k.us / max(k.calls, 1))} a call, "
                f"{k.share:.0%}{mem}"
            )
    for m in r.modules:
        if m.flops_per_s is None:
            continue
        peak = (
            f" of a {fmt_rate(m.peak_flops_per_s)} peak ({m.flops_per_s / m.peak_flops_per_s:.0%})"
            if m.peak_flops_per_s
            else ""
        )
        out.append(f"  {m.trace or m.name}: {fmt_rate(m.flops_per_s)} achieved{peak}")
    if r.compiles:
        total = sum(c.total_s for c in r.compiles)
        most = r.compiles[0]
        where = f" at {most.where}" if most.where else ""
        out.append(
            f"  compiling took {total:.2f} s of the block; most of it {most.name}{where} "
            f"({most.total_s:.2f} s). Compile time (tracing + lowering + XLA compile):"
        )
        for c in r.compiles[:6]:
            where = f" at {c.where}" if c.where else ""
            out.append(
                f"    {c.name}{where}: {c.total_s:.2f} s ({c.tracing_s:.2f} + "
                f"{c.lowering_s:.2f} + {c.compile_s:.2f})"
            )
    out.extend(f"  note: {n}" for n in r.notes)
    out.extend("  " + x for x in [own_line(r)] if x)
    out.append(
        f"  (the profiler's start and stop took {r.profiler_seconds:.2f} s, jaxviz's reading "
        f"{r.profile_seconds:.2f} s: neither is in the cell's own time)"
    )
    return "\n".join(out)


def own_line(r: ProfileReport) -> str:
    """jaxviz's own work in the profile, apart from the user's ("" when none): "jaxviz's NaN
    check: 31.3 us on the device (5 calls), 0.07 s compiling: in none of the times above"."""
    n = r.nan_check_calls
    if not (r.nan_check_us or n or r.nan_check_compile_s):
        return ""
    calls = f" ({n} call{'s' if n != 1 else ''})" if n else ""
    return (
        f"jaxviz's NaN check: {fmt_us(r.nan_check_us)} on the device{calls}, "
        f"{r.nan_check_compile_s:.2f} s compiling: in none of the times above"
    )

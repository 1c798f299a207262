"""Run a compiled trace as a loop and measure its memory, with and without donation.

`run_trace(trace, *args, steps=10)` compiles `trace.fun`, makes inputs (the given `args`, or
zeros / valid PRNG keys of the traced shapes, dtypes and shardings), and calls it `steps`
times, feeding each output back into the input it matches (`x = f(x)`; other inputs are
re-fed). A `Sampler` thread records memory meanwhile. With `compare=True` the same loop runs
twice, with donation and without, and the report gives both peaks and their ratio.

    >>> import jax, jax.numpy as jnp, jaxviz
    >>> t = jaxviz.trace(jax.jit(lambda x: x * 2 + 1), jnp.zeros((256, 256)))
    >>> r = t.run(steps=3)
    >>> r.donation_ratio >= 1.5     # 2 copies of x without donation, 1 with
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxviz import _compat
from jaxviz.format import fmt_bytes
from jaxviz.memory.compile import CompileReport, compile_with_executable
from jaxviz.memory.inputs import CallPlan, copy_array
from jaxviz.memory.sampler import Lane, Sampler

MIN_STEPS = 2
"""A run cut short by its time budget still makes this many steps: the second shows the
steady state (`x = f(x)` with the first output alive)."""

RSS_NOISE_BYTES = 1 << 20
"""Below this rise, process RSS is allocator noise: no RSS ratio is given."""


# --- data model ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Samples:
    """Memory samples of one run, as columns."""

    lanes: tuple[Lane, ...]  # what each lane index measures
    t: np.ndarray  # float64 seconds since the run started, e.g. [0.0, 0.008, ...]
    lane: np.ndarray  # int32 index into `lanes`
    bytes: np.ndarray  # float64 bytes (a missing figure is never recorded, never 0)

    def of(self, lane_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(t, bytes) of the lane with this id ("cpu:0", "rss")."""
        k = next(i for i, ln in enumerate(self.lanes) if ln.id == lane_id)
        m = self.lane == k
        return self.t[m], self.bytes[m]


@dataclasses.dataclass(frozen=True)
class Event:
    t: float  # seconds since the run started
    kind: str  # "donation" | "stop" | "budget" | "error"
    label: str  # "x donated (256.0 MiB) -> out"


@dataclasses.dataclass(frozen=True)
class Run:
    """One loop of `steps` calls."""

    label: str  # "with donation" / "without donation"
    donated: tuple[str, ...]  # argument leaves donated, e.g. ("x",)
    samples: Samples
    step_starts: tuple[float, ...]  # seconds since the run started
    step_times: tuple[float, ...]  # seconds per call, result ready
    baseline: dict[str, float]  # lane id -> bytes before the inputs existed
    peak_bytes: dict[str, float]  # lane id -> this run's peak (absolute bytes)
    peak_rise: dict[str, float]  # lane id -> peak minus baseline: what the run added
    xla_peak_bytes: int | None  # memory_analysis peak (per device) of this executable
    events: tuple[Event, ...]
    live_rate_hz: float  # achieved rate of the live-array walk (0: none)
    stop_seconds: float  # how long the sampler took to stop
    stopped: bool  # True: the Stop button ended it early

    @property
    def device_peak(self) -> float | None:
        """The largest rise on any device lane (live arrays on CPU, memory_stats elsewhere)."""
        vals = [v for k, v in self.peak_rise.items() if k != "rss"]
        return max(vals) if vals else None


@dataclasses.dataclass(frozen=True)
class RunReport:
    """What running a trace measured. The headline fields describe the first run (with
    donation when comparing); `runs` holds every run."""

    name: str
    steps: int  # steps asked for
    samples: Samples
    step_times: tuple[float, ...]
    peak_bytes: dict[str, float]  # lane id -> peak of the first run
    runs: tuple[Run, ...]
    compile: CompileReport  # of the first run's executable
    source: str  # "live JAX arrays per device" / "memory_stats"
    peak_bytes_with_donation: float | None = None  # device peak rise, donating run
    peak_bytes_without_donation: float | None = None  # device peak rise, no donation
    donation_ratio: float | None = None  # without / with (None: not compared)
    rss_ratio: float | None = None  # the same ratio from process RSS
    note: str = ""  # why no comparison, etc.

    @property
    def stopped(self) -> bool:
        return any(r.stopped for r in self.runs)

    def __str__(self) -> str:
        return render_text(self)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        import html

        return {"text/plain": str(self), "text/html": f"<pre>{html.escape(str(self))}</pre>"}


# --- running ---------------------------------------------------------------------------------


def _devices_of(report: CompileReport) -> list:
    names = set(report.devices)
    devs = [d for d in jax.devices() if _compat.device_name(d) in names]
    return devs or [jax.devices()[0]]


@dataclasses.dataclass
class _Steps:
    """What one run's step loop records (`_steps`), for its Run."""

    events: list[Event] = dataclasses.field(default_factory=list)
    starts: list[float] = dataclasses.field(default_factory=list)  # seconds since the start
    times: list[float] = dataclasses.field(default_factory=list)  # seconds per call
    stopped: bool = False  # the Stop button or an interrupt ended it early
    interrupted: bool = False  # a KeyboardInterrupt ended it
    stop_seconds: float = 0.0  # how long the sampler took to stop


def _one_run(
    plan: CallPlan,
    label: str,
    donate: tuple[int, ...],
    steps: int,
    stop: _Stop,
    on_sample: Callable | None,
    on_step: Callable | None,
    on_run: Callable | None = None,
    max_seconds: float | None = None,
) -> tuple[Run, CompileReport, bool]:
    """One loop of `steps` calls donating `donate`: (its Run, its executable's report,
    whether an interrupt ended it)."""
    compiled, report = _executable(plan, donate)
    donated = [i for i, d in enumerate(report.donations) if d.donated]
    # arrays already unreachable (a cycle, an earlier frame) would be freed during the run
    # and read as the run's own savings: freed first, the baseline is what the run adds to
    gc.collect()
    sampler = Sampler(_devices_of(report), on_batch=on_sample)
    sampler.sample()
    baseline = _last_per_lane(sampler)
    if on_run is not None:
        on_run(label, sampler.lanes, report.memory.peak_bytes, baseline)
    done = _steps(plan, compiled, report, donated, sampler, steps, stop, on_step, max_seconds)
    run = _run_record(label, report, donated, sampler, baseline, done)
    return run, report, done.interrupted


def _executable(plan: CallPlan, donate: tuple[int, ...]) -> tuple[Any, CompileReport]:
    """The executable donating `donate`: the plan's own when it donates as the function does."""
    if plan.compiled is not None and tuple(donate) == plan.own_donate():
        return plan.compiled, plan.base
    fun = _compat.rejit(plan.trace.fun, donate)
    report, _lowered, compiled = compile_with_executable(plan.trace, fun)
    return compiled, report


def _steps(
    plan: CallPlan,
    compiled: Any,
    report: CompileReport,
    donated: list[int],
    sampler: Sampler,
    steps: int,
    stop: _Stop,
    on_step: Callable | None,
    max_seconds: float | None,
) -> _Steps:
    """Makes the inputs, starts the sampler, calls the executable `steps` times feeding
    outputs back, and stops the sampler. The arrays live in this frame only: let go in
    `finally`, before the sampler stops, also when an error propagates."""
    done = _Steps()
    events, starts, times = done.events, done.starts, done.times
    refeed_donated = [i for i in donated if i not in plan.feedback]
    leaves = templates = out = None
    try:
        # Inputs first, then the sampling thread: making them can hold a scalar temporary
        # for a moment (jnp.zeros fills from one), which is no part of the run's memory.
        leaves = plan.make_inputs()
        templates = {i: copy_array(leaves[i]) for i in refeed_donated}
        jax.block_until_ready((leaves, templates))
        sampler.start()  # its first sample: the inputs alone
        loop_t0 = time.perf_counter()
        for step in range(steps):
            end = _end_event(step, loop_t0, max_seconds, stop, sampler.t0)
            if end is not None:
                events.append(end)
                done.stopped = end.kind == "stop"
                break
            for i in refeed_donated:  # a donated input that nothing feeds back
                if leaves[i].is_deleted():
                    leaves[i] = copy_array(templates[i])
            dyn_args, dyn_kw = jax.tree_util.tree_unflatten(plan.in_tree, leaves)
            t0 = time.perf_counter()
            out = compiled(*dyn_args, **dyn_kw)
            jax.block_until_ready(out)
            t1 = time.perf_counter()
            del dyn_args, dyn_kw
            starts.append(t0 - sampler.t0)
            times.append(t1 - t0)
            if donated and (step < 50 or step == steps - 1):
                gone = _donation_event(report, donated, leaves, t0 - sampler.t0)
                if gone is not None:
                    events.append(gone)
            # Both the inputs and the outputs are alive here: the in-call peak of live arrays.
            if step == 0 or step == steps - 1 or sampler.live_due(t1 - t0):
                sampler.sample()
            out_leaves = jax.tree_util.tree_leaves(out)
            for i, k in plan.feedback.items():
                leaves[i] = out_leaves[k]
            del out_leaves
            out = None
            if on_step is not None:
                on_step(step + 1, steps, t0 - sampler.t0, t1 - t0)
        sampler.sample()  # the last state, before freeing
    except KeyboardInterrupt:
        done.interrupted = done.stopped = True
        events.append(Event(time.perf_counter() - sampler.t0, "stop", "interrupted"))
    finally:
        out = leaves = templates = None
        done.stop_seconds = sampler.stop()
    return done


def _end_event(
    step: int, loop_t0: float, max_seconds: float | None, stop: _Stop, t0: float
) -> Event | None:
    """Why the loop ends before this step: its time budget spent (once MIN_STEPS ran), or a
    stop asked for (the Stop button, an interrupt); None: go on."""
    if (
        max_seconds is not None
        and step >= MIN_STEPS
        and time.perf_counter() - loop_t0 > max_seconds
    ):
        return Event(
            time.perf_counter() - t0,
            "budget",
            f"{step} steps in {max_seconds:g} s: enough to see memory",
        )
    if stop.is_set():
        how = "interrupted" if stop.signalled else "stopped"
        return Event(time.perf_counter() - t0, "stop", f"{how} at step {step}")
    return None


def _donation_event(
    report: CompileReport, donated: list[int], leaves: list, t: float
) -> Event | None:
    """The donated inputs this step's call deleted, as an event at `t`; None: none."""
    gone = [report.donations[i] for i in donated if leaves[i].is_deleted()]
    if not gone:
        return None
    return Event(
        t,
        "donation",
        ", ".join(f"{d.path} donated ({fmt_bytes(d.nbytes)}) -> {d.aliased_to}" for d in gone),
    )


def _run_record(
    label: str,
    report: CompileReport,
    donated: list[int],
    sampler: Sampler,
    baseline: dict[str, float],
    done: _Steps,
) -> Run:
    """The Run of a finished loop: the sampler's columns, each lane's peak and rise."""
    samples = _columns(sampler)
    peaks = {
        ln.id: float(samples.bytes[samples.lane == k].max())
        for k, ln in enumerate(sampler.lanes)
        if (samples.lane == k).any()
    }
    rise = {k: max(v - baseline.get(k, 0.0), 0.0) for k, v in peaks.items()}
    dur = (samples.t.max() if len(samples.t) else 0.0) or 1e-9
    return Run(
        label=label,
        donated=tuple(report.donations[i].path for i in donated),
        samples=samples,
        step_starts=tuple(done.starts),
        step_times=tuple(done.times),
        baseline=baseline,
        peak_bytes=peaks,
        peak_rise=rise,
        xla_peak_bytes=report.memory.peak_bytes,
        events=tuple(done.events),
        live_rate_hz=sampler.live_samples / dur,
        stop_seconds=done.stop_seconds,
        stopped=done.stopped,
    )


def _last_per_lane(s: Sampler) -> dict[str, float]:
    out: dict[str, float] = {}
    for _, lane, v in s.samples:
        out[s.lanes[lane].id] = v
    return out


def _columns(s: Sampler) -> Samples:
    data = list(s.samples)
    if not data:
        return Samples(s.lanes, np.zeros(0), np.zeros(0, np.int32), np.zeros(0))
    arr = np.asarray(data, dtype=np.float64)
    return Samples(s.lanes, arr[:, 0].copy(), arr[:, 1].astype(np.int32), arr[:, 2].copy())


class _Stop:
    """When to end the step loop: the Stop button's Event, or an interrupt (SIGINT).

    While the runs go on, the first SIGINT (the kernel's interrupt, which the chart's Stop
    button sends when the busy kernel cannot read its message) only sets a flag that the loop
    reads between steps: a KeyboardInterrupt raised at an arbitrary bytecode could land inside
    a lock held by JAX, the sampler or the kernel's message code and hang the kernel. A second
    SIGINT before the loop notices raises KeyboardInterrupt as usual.
    """

    def __init__(self, event: threading.Event) -> None:
        self.event = event
        self.signalled = False

    def is_set(self) -> bool:
        return self.signalled or self.event.is_set()

    @contextlib.contextmanager
    def on_sigint(self):
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.getsignal(signal.SIGINT)

        def handler(signum: int, frame: Any) -> None:
            if self.signalled:  # asked twice: interrupt for real
                if callable(previous):
                    previous(signum, frame)
                raise KeyboardInterrupt
            self.signalled = True  # a plain flag: no lock in a handler

        signal.signal(signal.SIGINT, handler)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, previous)


def run_trace(
    trace: Any,
    *args: Any,
    steps: int = 10,
    donate: Any = None,
    compare: bool = True,
    on_sample: Callable | None = None,
    on_step: Callable | None = None,
    on_run: Callable | None = None,
    on_events: Callable | None = None,
    stop: threading.Event | None = None,
    on_interrupt: str = "raise",
    max_seconds: float | None = None,
    **kwargs: Any,
) -> RunReport:
    """Runs `trace.fun` `steps` times and measures memory; see the module docstring.

    Args:
        args, kwargs: the call's arguments (copied, never donated); none: synthesised.
        steps: calls per run.
        donate: None: the function's own donation, or, when it donates nothing, every
            argument that is fed back; True: every argument fed back; False: none;
            a tuple: these argument positions.
        compare: also run without donation and report both peaks and their ratio.
        on_sample(run_index, batch): streamed samples `(t, lane, bytes)`, <= 30 per second.
        on_step(run_index, step, steps, t_start, seconds): after each call.
        on_run(run_index, label, lanes, xla_peak_bytes, baseline): when a run starts.
        on_events(run_index, events): each run's events (donations, stop) when it ends.
        stop: an Event that ends the loop early (the chart's Stop button sets it).
        on_interrupt: what an interrupt (Ctrl-C, the kernel's interrupt) does: it ends the
            loop at the next step boundary, then "raise" (KeyboardInterrupt propagates after
            cleanup) or "return" (the report of what ran so far comes back, marked stopped).
            A second interrupt before the step ends raises at once.
        max_seconds: a time budget per run: once the steps took this long (and at least
            MIN_STEPS ran), the run ends early (an event says so; not marked stopped).
    """
    trace = trace.compilable() if hasattr(trace, "compilable") else trace
    plan = CallPlan(trace, args, kwargs)
    own = plan.own_donate()
    donate = _donate_asked(plan, own, donate, compare)
    todo, note = _todo(donate, compare)
    if not any(don == own for _, don in todo):
        plan.compiled = None  # not needed: let the executable go now
    stopper = _Stop(stop or threading.Event())
    runs, reports = _run_all(
        plan, todo, steps, stopper, on_interrupt, max_seconds, on_sample, on_step, on_run, on_events
    )
    first = runs[0]
    kw = _comparison(runs)
    source = (
        "memory_stats bytes_in_use per device"
        if any(ln.source == "memory_stats" for ln in first.samples.lanes)
        else "live JAX arrays per device (CPU: memory_stats() is None)"
    )
    return RunReport(
        name=getattr(trace, "name", "f"),
        steps=steps,
        samples=first.samples,
        step_times=first.step_times,
        peak_bytes=first.peak_bytes,
        runs=tuple(runs),
        compile=reports[0],
        source=source,
        note=note,
        **kw,
    )


def _donate_asked(plan: CallPlan, own: tuple[int, ...], donate: Any, compare: bool) -> tuple:
    """The argument positions to donate in the first run (run_trace's `donate`)."""
    if donate is None:
        donate = own or (plan.auto_donate() if compare else ())
    elif donate is True:
        donate = plan.auto_donate()
    elif donate is False:
        donate = ()
    return tuple(donate)


def _todo(donate: tuple, compare: bool) -> tuple[list[tuple[str, tuple]], str]:
    """([(label, donated argument positions)] of each run, a note when there is no comparison)."""
    todo = [("with donation" if donate else "without donation", donate)]
    note = ""
    if compare and donate:
        todo.append(("without donation", ()))
    elif compare:
        note = "no argument can be donated (no output feeds an input back): nothing to compare"
    return todo, note


def _run_all(
    plan: CallPlan,
    todo: list[tuple[str, tuple]],
    steps: int,
    stopper: _Stop,
    on_interrupt: str,
    max_seconds: float | None,
    on_sample: Callable | None,
    on_step: Callable | None,
    on_run: Callable | None,
    on_events: Callable | None,
) -> tuple[list[Run], list[CompileReport]]:
    """Each (label, donation) of `todo` run in turn under the interrupt flag (`_Stop`); the
    callbacks get the run's index first."""
    runs: list[Run] = []
    reports: list[CompileReport] = []
    with stopper.on_sigint():
        for n, (label, don) in enumerate(todo):
            if n and stopper.is_set():  # the first run always reports (maybe 0 steps)
                break
            cb = (lambda batch, n=n: on_sample(n, batch)) if on_sample else None
            sb = (lambda *a, n=n: on_step(n, *a)) if on_step else None
            rb = (lambda *a, n=n: on_run(n, *a)) if on_run else None
            run, rep, interrupted = _one_run(
                plan, label, don, steps, stopper, cb, sb, rb, max_seconds
            )
            runs.append(run)
            reports.append(rep)
            if on_events is not None:
                on_events(n, run.events)
            if interrupted or stopper.signalled:
                if on_interrupt == "raise":
                    raise KeyboardInterrupt
                break
    return runs, reports


def _comparison(runs: list[Run]) -> dict[str, Any]:
    """RunReport's comparison fields from the runs with and without donation ({}: one run)."""
    kw: dict[str, Any] = {}
    if len(runs) == 2:
        w, wo = runs
        kw["peak_bytes_with_donation"] = w.device_peak
        kw["peak_bytes_without_donation"] = wo.device_peak
        if w.device_peak and wo.device_peak is not None:
            kw["donation_ratio"] = wo.device_peak / w.device_peak
        rw, rwo = w.peak_rise.get("rss"), wo.peak_rise.get("rss")
        if rw is not None and rwo is not None and min(rw, rwo) >= RSS_NOISE_BYTES:
            kw["rss_ratio"] = rwo / rw
    return kw


# --- text ------------------------------------------------------------------------------------


def _ms(xs: tuple[float, ...]) -> str:
    if not xs:
        return "no steps"
    a = np.asarray(xs, dtype=np.float64) * 1e3
    return (
        f"median {np.median(a):.2f} ms/step (min {np.min(a):.2f}, max {np.max(a):.2f}, "
        f"{len(a)} steps)"
    )


def _few(names: tuple[str, ...], n: int = 3) -> str:
    """`a, b, c and 58 more`: a model's donated leaves stay one short line."""
    return (
        ", ".join(names)
        if len(names) <= n + 1
        else f"{', '.join(names[:n])} and {len(names) - n} more"
    )


def render_text(r: RunReport) -> str:
    lines = [f"ran {r.name}: {r.source}"]
    for run in r.runs:
        rss = run.peak_rise.get("rss")
        dev = ", ".join(f"{k} +{fmt_bytes(v)}" for k, v in run.peak_rise.items() if k != "rss")
        lines.append(
            f"  {run.label}"
            + (f" ({_few(run.donated)})" if run.donated else "")
            + f": {_ms(run.step_times)}"
            + (" [stopped]" if run.stopped else "")
        )
        lines.append(
            f"    peak over baseline: {dev or 'no device lane'}; "
            + (f"process RSS +{fmt_bytes(rss)}; " if rss is not None else "")
            + f"XLA peak estimate {fmt_bytes(run.xla_peak_bytes)}"
        )
    if r.donation_ratio is not None:
        lines.append(
            f"  donation: peak {fmt_bytes(r.peak_bytes_without_donation)} without, "
            f"{fmt_bytes(r.peak_bytes_with_donation)} with: ratio {r.donation_ratio:.2f}x"
            + (f" (RSS ratio {r.rss_ratio:.2f}x)" if r.rss_ratio is not None else "")
        )
        if len(r.runs) == 2 and r.runs[0].step_times and r.runs[1].step_times:
            a, b = (float(np.median(x.step_times)) for x in r.runs)
            lines.append(
                f"  step time: {b * 1e3:.2f} ms without, {a * 1e3:.2f} ms with "
                f"({b / a if a else math.inf:.2f}x)"
            )
    if r.note:
        lines.append(f"  note: {r.note}")
    return "\n".join(lines)

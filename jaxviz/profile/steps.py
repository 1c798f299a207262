"""The steps of a profiled loop: busy vs idle between the step's calls, the verdict
(dispatch-bound or device-bound), and the sentences that reconcile its figures with the
report's others (docs/time.md, "Figures that add up").

Every per-step figure counts device time as the lines do: the op events' time of the
step's calls (nested events once, `Attribution.run_us`). The verdict's window leaves out
the first calls jaxviz's capture watched (`watched`) when three calls or more remain; its
message then says how many of the steps it counts, what the steps left out took, and the
figure over all steps, which is the one the lines add up to.

    >>> from jaxviz._compat.profiler import DeviceTrace
    >>> timeline(DeviceTrace([], [], "cpu")) is None
    True
"""

from __future__ import annotations

import dataclasses

from jaxviz._compat import profiler as _profiler
from jaxviz.profile.report import Timeline, fmt_us

MAX_SPANS = 400  # calls the timeline strip carries
DISPATCH_BOUND = 0.5  # idle share between steps at or above which a loop is dispatch-bound
DEVICE_BOUND = 0.2  # at or below which it is device-bound


def timeline(
    device: _profiler.DeviceTrace,
    module: str = "",
    watched: int = 0,
    loop: bool = True,
    run_us: dict[str, float] | None = None,
) -> Timeline | None:
    """Busy vs idle between the calls of `module` (the one with most device time; all
    calls when "") and the verdict when it holds (>= 3 calls of a loop: `loop` False, the
    block ran no loop, and its calls are no steps). `watched`: the first calls of a place
    that jaxviz's capture watches (JAX's Python path: slower to dispatch) are left out when
    3 calls or more remain after them: the verdict is the loop's, not jaxviz's. `run_us`:
    each call's op-event time (the lines' measure); without it, a call's span."""
    every = sorted(
        (r for r in device.runs if not module or r.module == module), key=lambda r: r.start
    )
    if not every:
        return None
    skipped = watched if len(every) - watched >= 3 else 0
    runs = every[skipped:]
    first, last = runs[0].start, max(r.start + r.dur for r in runs)
    span = max(last - first, 0.0)
    busy, cur_a, cur_b = 0.0, runs[0].start, runs[0].start + runs[0].dur
    for r in runs[1:]:
        if r.start > cur_b:
            busy += cur_b - cur_a
            cur_a, cur_b = r.start, r.start + r.dur
        else:
            cur_b = max(cur_b, r.start + r.dur)
    busy += cur_b - cur_a
    idle = 1.0 - busy / span if span > 0 else 0.0
    n = len(runs)

    def device_us(rs: list) -> float:
        return sum((run_us.get(r.run, 0.0) if run_us is not None else r.dur) for r in rs)

    step_us = device_us(runs) / n
    skipped_us = device_us(every[:skipped]) / skipped if skipped else 0.0
    verdict = ""
    if n >= 3 and loop:
        verdict = (
            "dispatch-bound"
            if idle >= DISPATCH_BOUND
            else "device-bound"
            if idle <= DEVICE_BOUND
            else "mixed"
        )
    every_n = max(1, -(-n // MAX_SPANS))
    tl = Timeline(
        n, span, busy, idle, span / n, verdict, "", skipped,
        spans=tuple((r.start - first, r.dur) for r in runs[::every_n]),
        steps=len(every), step_us=step_us, skipped_us=skipped_us,
    )  # fmt: skip
    return dataclasses.replace(tl, message=message(tl, watched))


def message(tl: Timeline, watched: int = 0) -> str:
    """The verdict's sentence ("" without a verdict), with its window when it is not every
    step: how many steps it counts, why, and the figures of the others."""
    if not tl.verdict:
        return ""
    idle, per, dev = tl.idle_share, fmt_us(tl.host_per_step_us), fmt_us(tl.step_us)
    ours = (
        f"; all {tl.calls} calls watched by jaxviz, slower to dispatch"
        if watched and not tl.skipped
        else ""
    )
    if tl.verdict == "dispatch-bound":
        head = (
            f"the device was idle {idle:.0%} of the time between steps: this loop is "
            f"dispatch-bound ({per} of host time per step, {dev} of device time{ours})"
        )
    elif tl.verdict == "device-bound":
        head = (
            f"the device was busy {1 - idle:.0%} of the time between steps: this loop is "
            f"device-bound ({dev} of device time per step{ours})"
        )
    else:
        head = (
            f"the device was idle {idle:.0%} of the time between steps "
            f"({per} per step, {dev} of it on the device{ours})"
        )
    return head + window(tl)


def window(tl: Timeline) -> str:
    """ "" when the verdict counts every step; else the sentence that says which it counts
    and reconciles its device time per step with the lines' (all steps)."""
    if not tl.skipped:
        return ""
    every = tl.steps or tl.calls + tl.skipped
    all_us = (tl.step_us * tl.calls + tl.skipped_us * tl.skipped) / every
    return (
        f". These are the last {tl.calls} of the {every} steps: the first {tl.skipped}, "
        f"watched by jaxviz (slower to dispatch), are left out ({fmt_us(tl.skipped_us)} of "
        f"device time a step); over all {every} steps, {fmt_us(all_us)} a step, as the "
        "lines count it"
    )

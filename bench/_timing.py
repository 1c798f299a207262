"""Timing helpers for the benchmarks: alternating wall times, best-of-N and paired ratios printed,
never asserted."""
from __future__ import annotations

import gc
import statistics
import time
from typing import Callable


def best(fn: Callable[[], object], repeat: int = 5, setup: Callable[[], object] | None = None) -> float:
    """The best wall time of `repeat` runs of fn() (setup() runs untimed before each)."""
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def alternating(fns: list[Callable[[], object]], repeat: int = 15) -> list[list[float]]:
    """The wall times of each of fns over `repeat` rounds, one run of each a round: a
    shared machine's slow spells fall on all of them alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times):
            gc.collect()
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return times


def best_alternating(fns: list[Callable[[], object]], repeat: int = 15) -> list[float]:
    """The best wall time of each of fns over `repeat` alternating rounds."""
    return [min(ts) for ts in alternating(fns, repeat)]


def paired(times: list[float], baseline: list[float]) -> float:
    """The median over rounds of each round's time over its baseline's, run next to it.

    This machine's speed drifts by up to 2x over seconds (a VM on a shared host): two
    runs side by side see the same speed, so their ratio holds while the speed moves, and
    the median leaves out the rounds a short spike hit. A ratio of best-of-N times compares
    each side's luckiest run instead: one lucky plain run among 30 moved a cell's ratio
    from 1.15x to 1.5x between two runs of the same code."""
    return statistics.median(t / b for t, b in zip(times, baseline))


def report(
    name: str,
    value: float,
    baseline: float,
    target: float | None = None,
    unit: str = "s",
    ratio: float | None = None,
) -> None:
    """Prints value / baseline; `ratio` (the paired median, `paired`) when given is the
    one the verdict reads, the best-of ratio printed next to it."""
    best_ratio = value / baseline if baseline else float("inf")
    r = best_ratio if ratio is None else ratio
    verdict = "" if target is None else ("  ok" if r <= target else f"  OVER target {target}x")
    tail = "" if ratio is None else f" (best of each: {best_ratio:4.2f}x)"
    shown = f"{r:5.2f}x" + (" paired" if ratio is not None else "")
    line = f"{name:58s} {value:9.4f} {unit} / {baseline:9.4f} {unit} = {shown}{verdict}{tail}"
    print(line, flush=True)

"""Timing helpers for the benchmarks: best-of-N wall time, ratios printed, never asserted."""
from __future__ import annotations

import gc
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


def best_alternating(fns: list[Callable[[], object]], repeat: int = 15) -> list[float]:
    """The best wall time of each of fns over `repeat` rounds, one run of each a round: a
    shared machine's slow spells fall on all of them alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times):
            gc.collect()
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return [min(ts) for ts in times]


def report(name: str, value: float, baseline: float, target: float | None = None, unit: str = "s") -> None:
    ratio = value / baseline if baseline else float("inf")
    verdict = "" if target is None else ("  ok" if ratio <= target else f"  OVER target {target}x")
    print(f"{name:58s} {value:9.4f} {unit} / {baseline:9.4f} {unit} = {ratio:5.2f}x{verdict}", flush=True)

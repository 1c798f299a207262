"""Benchmark: donation at work, and what the memory sampler costs.

Prints ratios against baselines measured in the same run (never asserts timings):
1. `x = f(x)` with a 256 MiB float32 x on CPU, with and without donation: peak device memory
   (live JAX arrays), process RSS rise, XLA's peak estimate, step times.
2. Sampler overhead on a dispatch-bound loop (a tiny jitted function, 100k steps per round)
   with <= 1k and with 10k live arrays: per-step time with the sampler vs without, interleaved.

    python bench/bench_memory.py [--mib 256] [--steps 20] [--loop 100000]
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import types

import jax
import jax.numpy as jnp

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
from jaxviz.memory.run import run_trace          # noqa: E402
from jaxviz.memory.sampler import ArrayLog, Sampler  # noqa: E402


def stand_in(fun, *specs):
    """A duck-typed Trace (jaxviz.trace(fun, *args) gives the same attributes)."""
    return types.SimpleNamespace(name=getattr(fun, "__name__", "f"), fun=fun, args_spec=specs,
                                 kwargs_spec={})


def donation(mib: int, steps: int) -> None:
    n = mib * (1 << 20) // 4
    step = jax.jit(lambda x: x * 0.5 + 1.0)
    r = run_trace(stand_in(step, jax.ShapeDtypeStruct((n,), jnp.float32)), steps=steps)
    print(f"== donation: x = f(x), x f32[{n}] = {mib} MiB, {steps} steps per run, CPU")
    print(r)
    w, wo = r.runs
    print(f"peak with donation    {w.device_peak / 2**20:8.1f} MiB  ({w.device_peak / (mib << 20):.2f} |x|)")
    print(f"peak without donation {wo.device_peak / 2**20:8.1f} MiB  ({wo.device_peak / (mib << 20):.2f} |x|)")
    print(f"donation ratio (live arrays) {r.donation_ratio:.2f}x   (issue wants >= 1.8x)")
    if r.rss_ratio is not None:
        print(f"donation ratio (process RSS) {r.rss_ratio:.2f}x   RSS rise "
              f"{w.peak_rise['rss'] / 2**20:.0f} MiB with, {wo.peak_rise['rss'] / 2**20:.0f} MiB without")
    mw, mwo = statistics.median(w.step_times), statistics.median(wo.step_times)
    print(f"step time median: {mw * 1e3:.1f} ms with, {mwo * 1e3:.1f} ms without ({mwo / mw:.2f}x)")
    print(f"sampler: live-array walk {w.live_rate_hz:.0f} Hz, stopped in {w.stop_seconds * 1e3:.2f} ms")


def _loop(f, x, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        x = f(x)
    jax.block_until_ready(x)
    return (time.perf_counter() - t0) / steps


def overhead(n_arrays: int, steps: int, rounds: int, log: bool = False) -> None:
    """`log`: with the ArrayLog a %%jaxtrace cell's watch keeps (births and deaths of arrays)."""
    keep = [jnp.full((4,), float(i)) for i in range(n_arrays)]
    jax.block_until_ready(keep)
    f = jax.jit(lambda x: x + 1.0)
    x = jnp.zeros((4,))
    _loop(f, x, 1000)
    base, samp, rates = [], [], []
    for _ in range(rounds):                 # interleaved: noise hits both alike
        gc.collect()
        base.append(_loop(f, x, steps))
        s = Sampler(jax.devices()[:1], log=ArrayLog() if log else None)
        s.start()
        t0 = time.perf_counter()
        samp.append(_loop(f, x, steps))
        dur = time.perf_counter() - t0
        s.stop()
        rates.append((s.live_samples / dur, len(s.samples) / dur / len(s.lanes), s.live_cost))
    b, m = statistics.median(base), statistics.median(samp)
    live_hz = statistics.median(r[0] for r in rates)
    print(f"== sampler overhead{' with the cell array log' if log else ''}: "
          f"{len(jax.live_arrays())} live arrays, {steps} steps x {rounds} rounds")
    print(f"  without sampler {b * 1e6:.2f} us/step, with {m * 1e6:.2f} us/step: "
          f"overhead {100 * (m / b - 1):+.1f}%   (target <= {3 if n_arrays <= 1000 else 10}%)")
    cheap_hz = statistics.median(r[1] for r in rates)
    print(f"  live-array walk {live_hz:.0f} Hz (cost {rates[-1][2] * 1e3:.2f} ms); samples per lane "
          f"{cheap_hz:.0f} Hz (backs off while the loop holds the GIL; 125 Hz when it does not)")
    del keep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--loop", type=int, default=100_000, help="steps per round of the dispatch-bound loop")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-donation", action="store_true")
    a = ap.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, {len(jax.devices())} device(s)")
    if not a.skip_donation:
        donation(a.mib, a.steps)
    overhead(1000, a.loop, a.rounds)
    overhead(10_000, a.loop, a.rounds)
    overhead(1000, a.loop, a.rounds, log=True)      # what a default %%jaxtrace cell runs
    overhead(10_000, a.loop, a.rounds, log=True)


if __name__ == "__main__":
    main()

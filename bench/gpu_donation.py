"""Donation on a GPU, measured with Device.memory_stats(): `x = f(x)` with and without donation.

Skips cleanly (exit 0, with the reason) when JAX sees no GPU. On a GPU it prints the
sampler's bytes_in_use peaks per run (in-call samples, step-end samples), the allocator's
peak_bytes_in_use after each run, XLA's peak estimate, and step times.

    python bench/gpu_donation.py [--mib 1024] [--steps 20]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import types

import jax
import jax.numpy as jnp

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as e:
        gpus, why = [], str(e).splitlines()[0]
    else:
        why = "jax.devices('gpu') is empty"
    if not gpus:
        print(f"skipped: no GPU ({why}); jax {jax.__version__} runs on {jax.devices()[0].platform}")
        return 0
    from jaxviz.memory.run import run_trace
    dev = gpus[0]
    print(f"jax {jax.__version__}, {dev.device_kind} ({dev.platform}:{dev.id}), "
          f"bytes_limit {dev.memory_stats().get('bytes_limit', 0) / 2**30:.1f} GiB")
    n = a.mib * (1 << 20) // 4
    spec = jax.ShapeDtypeStruct((n,), jnp.float32, sharding=jax.sharding.SingleDeviceSharding(dev))
    step = jax.jit(lambda x: x * 0.5 + 1.0)
    peaks = []

    def on_events(i, events):                 # after each run: the allocator's own peak
        peaks.append(dev.memory_stats().get("peak_bytes_in_use"))

    trace = types.SimpleNamespace(name="step", fun=step, args_spec=(spec,), kwargs_spec={})
    r = run_trace(trace, steps=a.steps, on_events=on_events)
    print(r)
    w, wo = r.runs
    lane = f"{dev.platform}:{dev.id}"
    x = a.mib << 20
    print(f"x = f(x), x f32[{n}] = {a.mib} MiB, {a.steps} steps per run")
    print(f"bytes_in_use peak over baseline: with donation {w.peak_rise[lane] / 2**20:.0f} MiB "
          f"({w.peak_rise[lane] / x:.2f} |x|), without {wo.peak_rise[lane] / 2**20:.0f} MiB "
          f"({wo.peak_rise[lane] / x:.2f} |x|): ratio {r.donation_ratio:.2f}x")
    print(f"peak_bytes_in_use after each run (process-wide, cumulative): "
          + ", ".join(f"{p / 2**20:.0f} MiB" if p is not None else "unavailable" for p in peaks))
    print(f"XLA peak estimate: {w.xla_peak_bytes / 2**20:.0f} MiB with, "
          f"{wo.xla_peak_bytes / 2**20:.0f} MiB without")
    mw, mwo = statistics.median(w.step_times), statistics.median(wo.step_times)
    print(f"step time median: {mw * 1e3:.2f} ms with, {mwo * 1e3:.2f} ms without ({mwo / mw:.2f}x)")
    print(f"sampler: {len(w.samples.t) / max(w.samples.t.max(), 1e-9):.0f} samples/s, "
          f"stopped in {w.stop_seconds * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

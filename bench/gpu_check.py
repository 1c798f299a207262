"""The GPU checks of issue 9, as one prepared script (about a minute on one GPU; the device
budget is 10 minutes): prints each figure and PASS / FAIL, exits 1 when a check fails, and
skips cleanly (exit 0, with the reason) when JAX sees no GPU.

1. live memory during a default `%%jaxtrace` cell (IPython's real shell): the
   `memory_stats` lane samples while the cell runs, one call mark per jitted call;
2. donation halves the peak of a 1 GiB `x = f(x)` loop: bytes_in_use's peak over the cell's
   start, from the cell's own calls (no hidden runs), with and without `donate_argnums`
   (expected ~1 |x| and ~2 |x|), beside the compiled peak the same cell's memory tab shows
   (jaxviz.memory.peaks) and a `run_trace` loop's allocator figures (peak_bytes_in_use);
3. out of memory: a cell whose jitted function needs 1 TiB fails with XLA's real
   RESOURCE_EXHAUSTED, and its text twin shows the out-of-memory finding with the largest
   buffers and their lines; `jaxviz.options.memory_limit` finds the same ahead of time.

    python bench/gpu_check.py [--mib 1024] [--steps 20] [--cpu]

`--cpu` is a dry run on the CPU (the live-array lane) that checks this script itself.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types

import jax
import jax.numpy as jnp

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

LOOP = """%%jaxtrace --text -o ct_{tag}
x = jnp.zeros(({n},), jnp.float32)
for _ in range({steps}):
    x = {fn}(x)
    x.block_until_ready()
    time.sleep(0.02)
del x
"""
OOM = """%%jaxtrace --text -o ct_oom
@jax.jit
def big(x):
    y = jnp.sort(x[:, None] * x[None, :], axis=0)
    return y.sum()

total = float(big(jnp.ones(1 << 19)))
"""
LIMIT = """%%jaxtrace -q -o ct_limit
y = plain(jnp.zeros(({n},), jnp.float32))
"""

failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"  {'PASS' if ok else 'FAIL'}: {what}", flush=True)
    if not ok:
        failures.append(what)


def live_cells(ip, dev, a, source: str) -> None:
    n = a.mib * (1 << 20) // 4
    x_bytes = a.mib << 20
    print(f"\n[1, 2] default %%jaxtrace cells: x = f(x), x f32[{n}] = {a.mib} MiB, {a.steps} steps")
    peaks: dict[str, int] = {}
    compiled_peaks: dict[str, int] = {}
    for tag, fn in (("with", "donating"), ("without", "plain")):
        t0 = time.perf_counter()
        out = ip.run_cell(LOOP.format(tag=tag, n=n, steps=a.steps, fn=fn))
        wall = time.perf_counter() - t0
        check(out.success, f"the {tag}-donation cell ran ({wall:.2f} s)")
        ct = ip.user_ns[f"ct_{tag}"]
        (mem,) = [m.cell for m in ct.memory if m.cell is not None]
        lanes = [ln for ln in mem.lanes if ln.source == source]
        check(bool(lanes), f"a {source} lane: {[ln.label for ln in mem.lanes]}")
        if not lanes:
            continue
        lane = mem.lanes.index(lanes[0])
        vals = [(t, v) for t, li, v in mem.samples if li == lane]
        during = [t for t, _v in vals if 0 < t < mem.seconds]
        peaks[tag] = max(v for _t, v in vals) - vals[0][1]
        print(f"  {tag} donation: lane {lanes[0].label!r}, {len(vals)} samples "
              f"({len(during) / max(mem.seconds, 1e-9):.0f}/s while the cell ran), "
              f"{len(mem.calls)} call marks, peak over start {peaks[tag] / 2**20:.0f} MiB "
              f"({peaks[tag] / x_bytes:.2f} |x|), {mem.seconds:.2f} s")
        check(len(during) >= 5, f"{tag}: samples arrived while the cell ran ({len(during)})")
        check(len(mem.calls) >= a.steps, f"{tag}: a call mark per jitted call ({len(mem.calls)})")
        compiled = {r.name: r for r in ct.compiled}
        r = compiled.get("<lambda>")
        check(r is not None, f"{tag}: the memory tab has the function's compiled memory")
        if r is not None:
            compiled_peaks[tag] = r.peak_bytes
            print(f"  {tag} donation: compiled peak {r.peak_bytes / 2**20:.0f} MiB "
                  f"({r.peak_bytes / x_bytes:.2f} |x|), XLA's {(r.xla_total or 0) / 2**20:.0f} MiB")
    if len(peaks) == 2:
        ratio = peaks["without"] / max(peaks["with"], 1)
        print(f"  donation ratio (live peak without / with): {ratio:.2f}x (expected ~2x)")
        if source == "memory_stats":
            check(ratio >= 1.6, "donation lowers the live peak of x = f(x) by ~half")
        else:  # the live-array lane sees one copy either way: the second is inside the call
            print("  (dry run: the live-array lane cannot see the copy inside the call)")
    if len(compiled_peaks) == 2:
        ratio = compiled_peaks["without"] / max(compiled_peaks["with"], 1)
        print(f"  donation ratio (compiled peak without / with): {ratio:.2f}x")
        check(ratio >= 1.6, "the memory tab's compiled peak halves with donation")


def run_loop(dev, a) -> None:
    from jaxviz.memory.run import run_trace

    n = a.mib * (1 << 20) // 4
    print(f"\n[2] run_trace: x = f(x) in a loop, with and without donation ({a.steps} steps)")
    spec = jax.ShapeDtypeStruct((n,), jnp.float32, sharding=jax.sharding.SingleDeviceSharding(dev))
    step = jax.jit(lambda x: x * 0.5 + 1.0)
    allocator = []

    def on_events(i, events):  # after each run: the allocator's own peak (process-wide)
        stats = dev.memory_stats() or {}
        allocator.append(stats.get("peak_bytes_in_use"))

    trace = types.SimpleNamespace(name="step", fun=step, args_spec=(spec,), kwargs_spec={})
    r = run_trace(trace, steps=a.steps, on_events=on_events)
    w, wo = r.runs
    lane = next(iter(w.peak_rise), None)
    x_bytes = a.mib << 20
    if lane is not None:
        print(f"  peak over baseline ({lane}): with {w.peak_rise[lane] / 2**20:.0f} MiB "
              f"({w.peak_rise[lane] / x_bytes:.2f} |x|), without {wo.peak_rise[lane] / 2**20:.0f}"
              f" MiB ({wo.peak_rise[lane] / x_bytes:.2f} |x|): ratio {r.donation_ratio:.2f}x")
    print("  peak_bytes_in_use after each run: "
          + ", ".join(f"{p / 2**20:.0f} MiB" if p is not None else "unavailable" for p in allocator))
    print(f"  XLA peak estimate: {w.xla_peak_bytes / 2**20:.0f} MiB with, "
          f"{wo.xla_peak_bytes / 2**20:.0f} MiB without")
    mw, mwo = statistics.median(w.step_times), statistics.median(wo.step_times)
    print(f"  step time median: {mw * 1e3:.2f} ms with, {mwo * 1e3:.2f} ms without")
    check(r.donation_ratio is not None and r.donation_ratio >= 1.6,
          f"run_trace's donation ratio ~2x ({r.donation_ratio})")


def out_of_memory(ip, a) -> None:
    print("\n[3] out of memory: a 1 TiB temporary (XLA's real RESOURCE_EXHAUSTED)")
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        out = ip.run_cell(OOM)
    text = buf.getvalue()
    check(not out.success and "RESOURCE_EXHAUSTED" in str(out.error_in_exec),
          f"the cell failed with RESOURCE_EXHAUSTED ({str(out.error_in_exec)[:120]!r})")
    ct = ip.user_ns.get("ct_oom")
    found = [d for d in ct.diagnostics if d.rule == "out-of-memory"] if ct is not None else []
    check(len(found) == 1, "one out-of-memory finding")
    for d in found:
        print("  " + d.message[:300])
        check("1.0 TiB f32[524288,524288] temporary" in d.message, "it names the 1 TiB buffer")
        check(bool(d.related) and d.related[0][1] == 3, f"with its line ({d.related[:1]})")
    check("ran out of device memory" in text, "the text twin shows the finding")
    import jaxviz

    n = a.mib * (1 << 20) // 4
    with jaxviz.options.using(memory_limit=(a.mib << 20) // 2):
        ip.run_cell(LIMIT.format(n=n))
    ct = ip.user_ns["ct_limit"]
    over = [d for d in ct.diagnostics if d.rule == "out-of-memory"]
    check(len(over) == 1 and "would run out of memory" in over[0].message,
          "memory_limit: the finding ahead of time, the cell having run")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--cpu", action="store_true",
                    help="a dry run on the CPU (live-array lane) that checks this script")
    a = ap.parse_args()
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as e:
        gpus, why = [], str(e).splitlines()[0]
    else:
        why = "jax.devices('gpu') is empty"
    source = "memory_stats"
    if a.cpu:
        gpus, source = jax.devices("cpu"), "live_arrays"
    if not gpus:
        print(f"skipped: no GPU ({why}); jax {jax.__version__} runs on {jax.devices()[0].platform}")
        return 0
    dev = gpus[0]
    stats = dev.memory_stats() or {}
    print(f"jax {jax.__version__}, {dev.device_kind} ({dev.platform}:{dev.id}), "
          f"bytes_limit {stats.get('bytes_limit', 0) / 2**30:.1f} GiB")
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_cell("%load_ext jaxviz")
    ip.run_cell("import time, jax, jax.numpy as jnp\n"
                "donating = jax.jit(lambda x: x * 0.5 + 1.0, donate_argnums=0)\n"
                "plain = jax.jit(lambda x: x * 0.5 + 1.0)\n")
    t0 = time.perf_counter()
    live_cells(ip, dev, a, source)
    run_loop(dev, a)
    out_of_memory(ip, a)
    print(f"\n{len(failures)} failed; {time.perf_counter() - t0:.1f} s")
    for f in failures:
        print(f"  FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

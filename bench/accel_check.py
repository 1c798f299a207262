"""The accelerator checks (issues 9 and 44), as one prepared script for a TPU or a GPU,
whichever JAX sees (a few minutes on one TPU v5e chip): prints each figure and PASS / FAIL,
exits 1 when a check fails, and skips cleanly (exit 0, with the reason) when JAX sees no
accelerator.

1. live memory during a default `%%jaxtrace` cell (IPython's real shell): the
   `memory_stats` lane samples while the cell runs, one call mark per jitted call;
2. donation halves the peak of a 1 GiB `x = f(x)` loop: bytes_in_use's peak over the cell's
   start, from the cell's own calls (no hidden runs), with and without `donate_argnums`
   (expected ~1 |x| and ~2 |x|), beside the compiled peak the same cell's memory tab shows
   (jaxviz.memory.peaks) and a `run_trace` loop's allocator figures (peak_bytes_in_use);
3. out of memory: a cell whose jitted function needs 1 TiB fails with XLA's real
   RESOURCE_EXHAUSTED (a TPU raises it at compile time), and its text twin shows the
   out-of-memory finding with the largest buffers and their lines;
   `jaxviz.options.memory_limit` finds the same ahead of time;
4. no hidden compile, and dispatch at the plain loop's speed: a 12-layer d=512 transformer
   step, jitted with donation and called once before, then 60 steps plain and traced
   (default flags, `-q`): the traced cell compiles none of the user's programs, its host
   loop costs about what the plain one does, and no NaN check copies a user's array to the
   host; with long kernels the host loop still finishes well before the device does.

    python bench/accel_check.py [--mib 1024] [--steps 20] [--cpu]

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
        # the bytes in use before the cell: the chart's first sample comes at the cell's
        # first jitted call (the watch asks JAX nothing before), when x is already made
        before = (dev.memory_stats() or {}).get("bytes_in_use", 0) if not a.cpu else sum(
            x.nbytes for x in jax.live_arrays())
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
        peaks[tag] = max(v for _t, v in vals) - before
        print(f"  {tag} donation: lane {lanes[0].label!r}, {len(vals)} samples "
              f"({len(during) / max(mem.seconds, 1e-9):.0f}/s while the cell ran), "
              f"{len(mem.calls)} call marks, peak over the bytes before the cell "
              f"{peaks[tag] / 2**20:.0f} MiB "
              f"({peaks[tag] / x_bytes:.2f} |x|), {mem.seconds:.2f} s")
        check(len(during) >= 5, f"{tag}: samples arrived while the cell ran ({len(during)})")
        said = bool(getattr(mem, "unmarked", ())) and sys.version_info < (3, 12)
        check(
            len(mem.calls) >= a.steps or said,
            f"{tag}: a call mark per jitted call, or the chart says which it did not mark "
            f"and why ({len(mem.calls)} marks; {mem.calls_note() if said else ''})",
        )
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
        check(bool(d.related) and d.related[0][1] in (3, 4), f"with its line ({d.related[:1]})")
    check("ran out of device memory" in text, "the text twin shows the finding")
    import jaxviz

    n = a.mib * (1 << 20) // 4
    with jaxviz.options.using(memory_limit=(a.mib << 20) // 2):
        ip.run_cell(LIMIT.format(n=n))
    ct = ip.user_ns["ct_limit"]
    over = [d for d in ct.diagnostics if d.rule == "out-of-memory"]
    check(len(over) == 1 and "would run out of memory" in over[0].message,
          "memory_limit: the finding ahead of time, the cell having run")


STEP_SETUP = """
import sys, time
sys.path.insert(0, {root!r})
import jax, jax.numpy as jnp
from tools.models import transformer_args, transformer
params, xb = transformer_args({layers}, {d}, 128)
def _step(params, x):
    l, g = jax.value_and_grad(transformer)(params, x)
    return jax.tree.map(lambda p, g: p - 1e-3 * g, params, g), l
step = jax.jit(_step, donate_argnums=(0,))
params, loss = step(params, xb)
jax.block_until_ready(params)
@jax.jit
def long(x):
    for _ in range(8):
        x = jnp.tanh(x @ x) * 0.5
    return x
m = jnp.ones(({n}, {n}), jnp.bfloat16) * 0.01
jax.block_until_ready(long(m))
"""
LOOP60 = """for _ in range(60):
    params, loss = step(params, xb)
t_host = time.perf_counter()
jax.block_until_ready(loss)
"""
LONG = """t0 = time.perf_counter()
for _ in range(20):
    m = long(m)
t_host = time.perf_counter() - t0
jax.block_until_ready(m)
t_all = time.perf_counter() - t0
"""


def dispatch(ip, a) -> None:
    print(f"\n[4] a {a.layers}-layer d={a.d} transformer step with donation: hidden compiles, "
          "dispatch, host copies")
    from jax._src import pjit

    import jaxviz._compat as compat

    compiles: list[tuple[str, float, dict]] = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda ev, secs, **kw: compiles.append((ev, secs, kw)) if "backend_compile" in ev else None
    )
    root = __file__.rsplit("/bench/", 1)[0]
    t0 = time.perf_counter()
    n = 512 if a.cpu else 4096  # (the long kernels: ~0.15 s of a TPU v5e's 20 calls)
    out = ip.run_cell(STEP_SETUP.format(root=root, layers=a.layers, d=a.d, n=n))
    check(out.success, f"the step compiled and ran once ({time.perf_counter() - t0:.1f} s)")
    fun = ip.user_ns["_step"]
    reads: list[tuple] = []
    host_parts = compat.host_parts

    def counted(x):  # (an array on the CPU is read where it is: no copy)
        if isinstance(x, jax.Array) and not compat.on_host(x):
            reads.append(x.shape)
        return host_parts(x)

    compat.host_parts = counted
    times: dict[str, list[float]] = {}
    try:
        # alternated, five rounds: the plain loop's own time varies by +-15% from one cell
        # to the next on a TPU host; "--no-run -q" has no memory chart (no sampler thread)
        for flags in ("PLAIN", "", "-q", "--no-run -q") * 5 + ("PLAIN",):
            seen: list[bool] = []
            orig = pjit._run_python_pjit
            pjit._run_python_pjit = lambda *args: (seen.append(args[2] is fun), orig(*args))[1]
            del compiles[:]
            try:
                t0 = time.perf_counter()
                body = LOOP60 if flags == "PLAIN" else f"%%jaxtrace {flags} --text\n" + LOOP60
                out = ip.run_cell(body)
                wall = time.perf_counter() - t0
            finally:
                pjit._run_python_pjit = orig
            host = ip.user_ns["t_host"] - t0
            times.setdefault(flags, []).append(host)
            names = sorted({str(kw.get("fun_name", "?")) for _e, _s, kw in compiles})
            print(f"  {flags or 'default':8} cell {wall:.3f} s, host loop {host * 1e3:.1f} ms, "
                  f"Python-path calls of the step {sum(seen)}, compiles {len(compiles)} {names}")
            check(out.success, f"{flags or 'default'}: the cell ran")
            if flags != "PLAIN":
                mine = [n for n in names if "_step" in n]
                check(not mine, f"{flags or 'default'}: the step was not compiled again ({mine})")
    finally:
        compat.host_parts = host_parts
    check(reads == [], f"no NaN check copied a user's array to the host ({len(reads)} reads)")
    plain = min(times["PLAIN"])
    for flags in ("", "-q", "--no-run -q"):
        ratio = min(times[flags]) / plain
        med = statistics.median(times[flags][1:]) / statistics.median(times["PLAIN"])
        print(f"  host loop traced / plain, {flags or 'default'}: {ratio:.2f}x (best of each), "
              f"{med:.2f}x (medians, the first traced cell left out)")
        if flags != "--no-run -q":
            check(med <= 1.1, f"{flags or 'default'}: dispatch within 1.1x of the plain loop")
    for flags in ("PLAIN", ""):
        ip.run_cell(LONG if flags == "PLAIN" else "%%jaxtrace -q\n" + LONG)
        host, total = ip.user_ns["t_host"], ip.user_ns["t_all"]
        print(f"  long kernels, {flags or 'default'}: host loop {host * 1e3:.1f} ms of "
              f"{total * 1e3:.1f} ms")
        check(host < 0.5 * total, f"{flags or 'traced'}: the host loop runs ahead of the device")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--only", choices=("live", "run", "oom", "dispatch"), default=None,
                    help="run one section of the check")
    ap.add_argument("--cpu", action="store_true",
                    help="a dry run on the CPU (live-array lane) that checks this script")
    a = ap.parse_args()
    accels = [d for d in jax.devices() if d.platform != "cpu"]
    source = "memory_stats"
    if a.cpu:
        accels, source = jax.devices("cpu"), "live_arrays"
    if not accels:
        print(f"skipped: no TPU or GPU; jax {jax.__version__} runs on {jax.devices()[0].platform}")
        return 0
    dev = accels[0]
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
    for name, section in (
        ("live", lambda: live_cells(ip, dev, a, source)),
        ("run", lambda: run_loop(dev, a)),
        ("oom", lambda: out_of_memory(ip, a)),
        ("dispatch", lambda: dispatch(ip, a)),
    ):
        if a.only in (None, name):
            section()
    print(f"\n{len(failures)} failed; {time.perf_counter() - t0:.1f} s")
    for f in failures:
        print(f"  FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

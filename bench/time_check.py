"""The checks of issue 47 (where the time goes) as one prepared script: each figure the issue
asks for, and PASS / FAIL per check; exit 1 when a check fails. Runs on the TPU (about a
minute, most of it compiling) and on CPU (smaller shapes, the same checks).

1. the 12-layer transformer train step and the scan RNN (tools/memory_models.py), each
   profiled with `Trace.profile(steps)`: attribution >= 95% to a line or a named category,
   the totals against the sum of the op events within 1%, the top lines and kernels;
2. a step with one deliberately oversized matmul: its line on top;
3. a loop of tiny jitted calls (`trace_cell(..., profile=True)`, as %%jaxtrace --profile):
   dispatch-bound; the compile time of its function, with its name and line;
4. a loop of large bf16 matmuls (8192^3 on the TPU): device-bound, with achieved TFLOP/s;
   and the profiled cell's own time against the same cell without --profile.

    python bench/time_check.py            # on the TPU: PYTHONPATH=$PWD:$PYTHONPATH
    python bench/time_check.py --cpu      # the same checks, small shapes, on CPU
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

import jax
import jax.numpy as jnp

import jaxviz
from jaxviz._compat import profiler as _profiler
from jaxviz.profile.report import fmt_rate, fmt_us
from tools.memory_models import rnn_grad, transformer_step

failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"  {'PASS' if ok else 'FAIL'}: {what}", flush=True)
    if not ok:
        failures.append(what)


def accounting(r, what: str) -> None:
    lines_us = sum(x.us for x in r.lines)
    gap = abs(lines_us - r.events_us) / r.events_us if r.events_us else 1.0
    print(f"  {r.events} op events, device time {fmt_us(r.total_us)} over {r.steps} steps; "
          f"events summed {fmt_us(r.events_us)}; lines + categories {fmt_us(lines_us)} "
          f"(gap {gap:.3%}); jaxviz's reading {r.profile_seconds:.2f} s")
    check(r.attributed_share >= 0.95,
          f"{what}: {r.attributed_share:.1%} of device time to a line or a named category (>= 95%)")
    check(gap <= 0.01, f"{what}: totals reconcile with the op events within 1% ({gap:.3%})")
    print("  top lines:")
    for x in r.lines[:6]:
        est = "~" if x.estimated else " "
        print(f"    {est}{fmt_us(x.per_step_us):>10}/step {x.share:6.1%}  {x.label}  "
              f"{x.text.strip()[:60]}")
    print("  top kernels:")
    for k in r.kernels[:5]:
        lines = ", ".join(f"{label} {f:.0%}" for label, f in k.lines[:3])
        per_call = fmt_us(k.us / max(k.calls, 1))
        print(f"    {k.name} [{k.kind}] {per_call}/call {k.share:.0%}: {lines}")
    for m in r.modules:
        if m.flops_per_s:
            peak = f" of {fmt_rate(m.peak_flops_per_s)}" if m.peak_flops_per_s else ""
            print(f"  {m.trace or m.name}: {fmt_rate(m.flops_per_s)} achieved{peak}")
    for n in r.notes:
        print(f"  note: {n}")


def profile_kept(trace, fun, args, steps: int):
    """Trace.profile's report, its trace directory kept (for XProf's own reading)."""
    from jaxviz.profile.session import build_report, programs_of

    jax.block_until_ready(fun(*args))
    d = tempfile.mkdtemp()
    _profiler.start(d)
    out = None
    for _ in range(steps):
        out = fun(*args)
    jax.block_until_ready(out)
    _profiler.stop()
    programs, notes = programs_of([trace])
    return build_report(trace.name, _profiler.read_trace(d), programs, [], {}, notes), d


def xprof_total(logdir: str, r) -> None:
    """XProf's op_profile of the same trace (when the xprof wheel is installed): its device
    time against jaxviz's, within 2%."""
    import glob
    import json

    try:
        from xprof.convert import raw_to_tool_data  # type: ignore[import-not-found]
    except Exception as e:
        print(f"  SKIP: XProf's op_profile: xprof is not installed here ({type(e).__name__})")
        return
    try:
        paths = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
        data, _ = raw_to_tool_data.xspace_to_tool_data(paths, "op_profile", {})
        prof = json.loads(data.decode() if isinstance(data, bytes) else data)
        root = prof.get("byProgramExcludeIdle") or prof.get("byProgram") or {}
        total_ps = float((root.get("metrics") or {}).get("rawTime") or 0)
        idle = [c for c in root.get("children", []) if str(c.get("name", "")).upper() == "IDLE"]
        total_ps -= sum(float((c.get("metrics") or {}).get("rawTime") or 0) for c in idle)
    except Exception as e:
        print(f"  SKIP: XProf's op_profile could not be read ({type(e).__name__}: {e!s:.200})")
        return
    xprof_us = total_ps / 1e6
    gap = abs(xprof_us - r.total_us) / xprof_us if xprof_us else 1.0
    print(f"  XProf's op_profile: {fmt_us(xprof_us)} of device time; jaxviz {fmt_us(r.total_us)}")
    check(gap <= 0.02, f"transformer: jaxviz's total within 2% of XProf's op_profile ({gap:.2%})")


def raw_sample() -> None:
    """What the profiler writes here: processes, threads, a few op events (for the record)."""
    f = jax.jit(lambda a: jnp.tanh(a @ a))
    a = jnp.ones((256, 256))
    f(a).block_until_ready()
    d = tempfile.mkdtemp()
    _profiler.start(d)
    f(a).block_until_ready()
    _profiler.stop()
    t = _profiler.read_trace(d)
    print(f"  platform {t.platform}, {len(t.ops)} op events, {len(t.runs)} module calls")
    import gzip
    import json

    with gzip.open(_profiler.perfetto_file(d), "rt") as f:
        events = json.load(f)["traceEvents"]
    procs = sorted({str(e["args"].get("name")) for e in events
                    if e.get("ph") == "M" and e.get("name") == "process_name"})
    threads = sorted({str(e["args"].get("name")) for e in events
                      if e.get("ph") == "M" and e.get("name") == "thread_name"})
    print(f"  processes {procs[:6]}; threads {threads[:10]}")
    sample = next((e for e in events if e.get("ph") == "X" and (e.get("args") or {}).get(
        "device_duration_ps")), None)
    if sample is not None:
        print(f"  a device op event: {json.dumps(sample)[:400]}")
    for e in t.ops[:4]:
        print(f"    op {e.module} {e.op} {e.dur:.1f} us lane={e.lane!r} category={e.category!r}")
    for r in t.runs[:2]:
        print(f"    run {r.module} {r.dur:.1f} us lane={r.lane!r}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="small shapes (a dry run on CPU)")
    ap.add_argument("--steps", type=int, default=5)
    opts = ap.parse_args()
    platform = jax.devices()[0].platform
    small = opts.cpu or platform == "cpu"
    print(f"jax {jax.__version__} on {platform} ({jax.devices()[0].device_kind})")
    print("\n== the profiler's events here")
    raw_sample()

    print("\n== 1. the 12-layer transformer train step")
    d, t = (64, 16) if small else (512, 512)
    step, args = transformer_step(layers=12, d=d, t=t)
    r, logdir = profile_kept(jaxviz.trace(step, *args), step, args, opts.steps)
    accounting(r, "transformer")
    xprof_total(logdir, r)
    top = r.lines[0]
    check(not top.category and top.file.endswith("models.py"),
          f"transformer: the top line is the model's own ({top.label})")

    print("\n== 1b. the scan RNN (its gradient)")
    hidden, n = (256, 64) if small else (1024, 256)
    f, args = rnn_grad(hidden=hidden, steps=n)
    r = jaxviz.trace(f, *args).profile(steps=opts.steps)
    accounting(r, "scan RNN")
    lines = {x.line for x in r.lines[:2] if not x.category}
    check(bool(lines & {52, 54}), f"scan RNN: the scan's lines on top ({sorted(lines)})")

    print("\n== 2. one oversized matmul")
    big_n = 768 if small else 8192
    src = (
        "import jax, jax.numpy as jnp\n"
        "@jax.jit\n"
        "def step(w, big, x):\n"
        "    h = jnp.tanh(x @ w) * 2 + 1\n"
        "    y = big @ big\n"
        "    return h.sum() + y.sum()\n"
        f"w = jnp.ones((256, 256)); big = jnp.ones(({big_n}, {big_n}), jnp.bfloat16)\n"
        "x = jnp.ones((256, 256))\n"
        "for i in range(5):\n"
        "    r = step(w, big, x)\n"
    )
    ct = jaxviz.trace_cell(src, profile=True)
    r = ct.profile
    accounting(r, "oversized matmul")
    check(r.lines[0].text.strip() == "y = big @ big",
          f"oversized matmul: its line on top ({r.lines[0].label}: {r.lines[0].share:.0%})")

    print("\n== 3. a loop of tiny jitted calls")
    src = (
        "import jax, jax.numpy as jnp\n"
        "f = jax.jit(lambda x: x * 2 + 1)\n"
        "x = jnp.ones(4)\n"
        "for i in range(500):\n"
        "    x = f(x)\n"
    )
    ct = jaxviz.trace_cell(src, profile=True)
    tl = ct.profile.timeline
    print(f"  {tl.message if tl else 'no timeline'}")
    check(tl is not None and tl.verdict == "dispatch-bound", "tiny calls: dispatch-bound")
    c = next((c for c in ct.profile.compiles if c.name == "<lambda>"), None)
    if c is not None:
        print(f"  compile of {c.name} at {c.where}: {c.total_s:.3f} s "
              f"(tracing {c.tracing_s:.3f}, lowering {c.lowering_s:.3f}, XLA {c.compile_s:.3f})")
    check(c is not None and c.where.endswith(":5"), "tiny calls: compile time with name and line")

    print("\n== 4. a loop of large bf16 matmuls")
    n = 1024 if small else 8192
    setup = (
        "import jax, jax.numpy as jnp\n"
        "mm = jax.jit(lambda a, b: (a @ b).astype(jnp.bfloat16))\n"
        f"a = jnp.ones(({n}, {n}), jnp.bfloat16) * 0.001\n"
        f"b = jnp.ones(({n}, {n}), jnp.bfloat16) * 0.001\n"
        "c = mm(a, b); _ = c.block_until_ready()\n"
    )
    loop = "for i in range(10):\n    c = mm(a, b)\n_ = c.block_until_ready()\n"
    ns: dict = {"__name__": "__main__"}
    jaxviz.trace_cell(setup, ns)  # compiled once: the two cells below run the same steps
    plain_s, prof_s, ct = [], [], None
    for _ in range(2):  # interleaved, the faster of two each
        plain_s.append(jaxviz.trace_cell(loop, ns).cost.cell_seconds)
        ct = jaxviz.trace_cell(loop, ns, profile=True)
        prof_s.append(ct.cost.cell_seconds)
    r = ct.profile
    tl = r.timeline
    mod = next((m for m in r.modules if m.trace == "<lambda>"), None)
    rate = mod.flops_per_s if mod else None
    print(f"  {tl.message if tl else 'no timeline'}")
    print(f"  achieved {fmt_rate(rate) if rate else '?'} ({2 * n**3 / 1e12:.3f} TFLOP a call)"
          + (f", peak {fmt_rate(mod.peak_flops_per_s)}" if mod and mod.peak_flops_per_s else ""))
    check(tl is not None and tl.verdict == "device-bound", "large matmuls: device-bound")
    check(rate is not None and rate > 0, "large matmuls: achieved FLOP/s reported")
    ratio = min(prof_s) / min(plain_s)
    print(f"  the cell's own steps: {min(prof_s):.3f} s profiled vs {min(plain_s):.3f} s "
          f"without --profile ({ratio:.2f}x); the profiler's start and stop "
          f"{r.profiler_seconds:.2f} s, jaxviz's reading {r.profile_seconds:.2f} s")
    check(ratio <= 1.2 or small, f"profiled cell within 1.2x of the same cell plain ({ratio:.2f}x)")

    print(f"\n{'ALL PASS' if not failures else f'{len(failures)} FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    status = main()
    print(f"({time.perf_counter() - t0:.0f} s)")
    sys.exit(status)

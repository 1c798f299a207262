"""Benchmark: the compiled program's memory without running it (jaxviz.memory.buffers).

Prints, on the 12-layer transformer train step (tools/memory_models.py) and the other
workloads: the share of the peak's bytes attributed to a user line or an argument path,
the simulated peak against XLA's memory_analysis (arguments + outputs + temporaries -
aliased), and the analysis time (parsing the optimised HLO, simulating the schedule,
attributing) per 1k equations, against the XLA compile of the same program measured in the
same run (the baseline). The issue's targets: coverage >= 90%, agreement within 5%,
analysis <= 0.5 s per 1k equations. Never asserts.

    python bench/bench_buffers.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import jaxviz                                            # noqa: E402
from jaxviz.memory.buffers import analyze               # noqa: E402
from jaxviz.memory.compile import compile_with_executable  # noqa: E402
from tools.memory_models import mlp_step, rnn_grad, transformer_step  # noqa: E402

WORKLOADS = [
    ("transformer train step, 12 layers", lambda: transformer_step(12, 64, 16)),
    ("transformer train step, 4 layers, remat", lambda: transformer_step(4, 128, 256, remat=True)),
    ("mlp train step", mlp_step),
    ("scan rnn gradient", rnn_grad),
]


def main(repeat: int) -> None:
    for name, build in WORKLOADS:
        f, args = build()
        t = jaxviz.trace(f, *args)
        cr, _, compiled = compile_with_executable(t)
        times, r = [], None
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = analyze(t, cr, compiled)
            times.append(time.perf_counter() - t0)
        assert r is not None
        med = statistics.median(times)
        per_k = med / max(r.n_eqns, 1) * 1000
        t0 = time.perf_counter()
        full = t.memory(what_if=True)
        what_if = time.perf_counter() - t0
        print(f"== {name}: {r.n_eqns:,} equations, {len(r.timeline):,} scheduled instructions")
        print(f"  named coverage {r.named_fraction:.1%} of the peak's bytes   (issue wants >= 90%)")
        print(f"  simulated peak {r.peak_bytes:,} B, XLA {r.xla_total:,} B: "
              f"{r.reconciled:+.2%}   (issue wants within 5%)")
        if r.platform != "cpu":
            print(f"  (on {r.platform}, memory_analysis' temporaries differ from XLA's buffer "
                  "assignment, the reference: python bench/accel_memory_check.py)")
        print(f"  analysis {med * 1e3:.1f} ms = {per_k:.3f} s per 1k equations   "
              f"(issue wants <= 0.5 s); XLA compile {cr.compile_seconds * 1e3:.0f} ms: "
              f"analysis / compile = {med / cr.compile_seconds:.3f}")
        print(f"  Trace.memory() with the donation what-if: {what_if:.2f} s "
              f"({len(full.donations)} arguments, {what_if / cr.compile_seconds:.1f}x one compile)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    main(ap.parse_args().repeat)

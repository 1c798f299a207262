"""A default `%%jaxtrace` cell (the view, the cell's own memory chart, no hidden runs) vs the
same cell plain, on the cell that defines and calls six small jitted step functions.

Target (issue 9, "no hidden runs by default"): <= 1.3x the plain cell's wall time (before:
6.3x, when every captured function ran again on synthesised inputs after the cell; that is
now `--compare`, printed beside it for reference). IPython's real shell, plain and traced
alternating, best of N; the cells' `result:` lines must be equal both ways.

The default cell also explains each of the cell's own jitted functions' compiled memory
(jaxviz.memory.peaks: JAX's cached executable, analysis only); "compiled memory off" is the
same cell with `jaxviz.options.compiled_memory_budget = 0`, so the difference is that
section's cost.

Measured in IPython's shell without a kernel: the memory watch (sampler thread, array log,
call marks) and the graph view's HTML are built; the chart widget, which needs a kernel's
comm, is not.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._timing import best, report  # noqa: E402
from bench.bench_cells import CELLS, COMMON, results, run, shell  # noqa: E402

TARGET = 1.3
REPEAT = 7


def main() -> None:
    import jax

    import jaxviz

    (name, setup, body) = next(c for c in CELLS if c[0].startswith("5 six jitted"))
    ip = shell()
    run(ip, COMMON + setup)
    modes = {
        "plain": "",
        "default %%jaxtrace": "%%jaxtrace\n",
        "default, compiled memory off": "%%jaxtrace\n",
        "%%jaxtrace --no-run -q": "%%jaxtrace --no-run -q\n",
        "%%jaxtrace --compare": "%%jaxtrace --compare\n",
    }
    budget = jaxviz.options.compiled_memory_budget

    def timed(m: str, head: str) -> list:
        off = m == "default, compiled memory off"
        with jaxviz.options.using(compiled_memory_budget=0 if off else budget):
            return run(ip, head + body)

    outs = {m: results(timed(m, head)) for m, head in modes.items()}  # untimed, warm
    assert len({tuple(v) for v in outs.values()}) == 1, f"results differ: {outs}"
    times: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(REPEAT):  # alternating: noise hits every mode alike
        for m, head in modes.items():
            times[m].append(best(lambda m=m, h=head: timed(m, h), repeat=1))
    plain = min(times["plain"])
    print(f"cell: {name}")
    for m in modes:
        if m != "plain":
            target = TARGET if m == "default %%jaxtrace" else None
            report(f"{m} / plain", min(times[m]), plain, target=target)
    off = min(times["default, compiled memory off"])
    report("default / compiled memory off (the section's cost)", min(times["default %%jaxtrace"]), off)
    print(f"python {sys.version.split()[0]}, jax {jax.__version__}")


if __name__ == "__main__":
    main()

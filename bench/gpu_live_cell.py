"""A default %%jaxtrace cell on a GPU: live memory_stats() while the cell runs, and donation
halving the peak of a 1 GiB `x = f(x)` loop, measured from the cell's own calls (no hidden
runs).

Runs two cells in IPython's real shell, each `x = f(x)` for --steps steps with a short sleep
per step (so the sampler sees the loop as it goes): one with `donate_argnums=0`, one without.
Prints, per cell: the lanes (on a GPU, `memory_stats` bytes_in_use), the samples taken while
the cell ran and their rate, the call marks, the peak of bytes_in_use over its value at the
cell's start, and the ratio without / with donation (expected ~2x: 1 |x| with, 2 |x|
without). Skips cleanly (exit 0, with the reason) when JAX sees no GPU.

    python bench/gpu_live_cell.py [--mib 1024] [--steps 20]
"""
from __future__ import annotations

import argparse
import sys

import jax

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

CELL = """%%jaxtrace --text -o ct_{tag}
x = jnp.zeros(({n},), jnp.float32)
for _ in range({steps}):
    x = {fn}(x)
    x.block_until_ready()
    time.sleep(0.02)
del x
"""


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
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_cell("%load_ext jaxviz")
    ip.run_cell("import time, jax, jax.numpy as jnp\n"
                "donating = jax.jit(lambda x: x * 0.5 + 1.0, donate_argnums=0)\n"
                "plain = jax.jit(lambda x: x * 0.5 + 1.0)\n")
    n = a.mib * (1 << 20) // 4
    dev = gpus[0]
    print(f"jax {jax.__version__}, {dev.device_kind}, x f32[{n}] = {a.mib} MiB, {a.steps} steps")
    peaks = {}
    # (--text: no kernel here, so no chart widget; the cell's memory record is the same)
    for tag, fn in (("with", "donating"), ("without", "plain")):
        ip.run_cell(CELL.format(tag=tag, n=n, steps=a.steps, fn=fn))
        ct = ip.user_ns[f"ct_{tag}"]
        (mem,) = [m.cell for m in ct.memory if m.cell is not None]
        lanes = [ln for ln in mem.lanes if ln.source == source]
        assert lanes, f"no {source} lane: {mem.lanes}"
        lane = mem.lanes.index(lanes[0])
        vals = [(t, v) for t, li, v in mem.samples if li == lane]
        start = vals[0][1]
        during = [t for t, _v in vals if 0 < t < mem.seconds]
        peaks[tag] = max(v for _t, v in vals) - start
        print(f"{tag} donation: lane {lanes[0].label!r}, {len(vals)} samples "
              f"({len(during) / max(mem.seconds, 1e-9):.0f}/s while the cell ran), "
              f"{len(mem.calls)} call marks, peak over start {peaks[tag] / 2**20:.0f} MiB "
              f"({peaks[tag] / (a.mib << 20):.2f} |x|), {mem.seconds:.2f} s")
    print(f"donation ratio (peak without / with): {peaks['without'] / max(peaks['with'], 1):.2f}x "
          f"(expected ~2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

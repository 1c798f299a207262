"""A %%jaxtrace cell's cost with many live JAX arrays (issue 45, item 2), in IPython's shell.

A notebook holding ~150k live arrays (an optimizer's per-step metrics, a dataset kept as
arrays) paid ~10 us per live array for every traced cell, `lr = 0.01` included (1.5 s at
150k), spent by the default cell's memory watch. Target: a trivial cell with 150k live arrays
costs <= 20 ms more than the same cell plain, measured in the same run (printed, never
asserted). Also printed, without a target: a cell that touches a device (`y = x + 1`, its
live-array lane looks at the arrays once), and the first traced cell of the session (the
watch meets the 150k arrays for the first time).

`python bench/bench_live_arrays.py [N]` (N live arrays, 150000 by default).
"""

import contextlib
import io
import statistics
import sys
import time

import jax

sys.path.insert(0, ".")
from IPython.testing.globalipapp import start_ipython

from bench._timing import alternating

N = int(sys.argv[1]) if len(sys.argv) > 1 else 150_000
TARGET_MS = 20.0

ip = start_ipython()
ip.run_cell("%load_ext jaxviz")
ip.run_cell(f"""
import jax, jax.numpy as jnp, numpy as np
x = jnp.ones((1000,))
metrics = [jax.device_put(np.float32(i)) for i in range({N})]
""")
n_live = len(jax.live_arrays())


def timed(src: str) -> float:
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        r = ip.run_cell(src)
    dt = time.perf_counter() - t0
    if not r.success:
        raise RuntimeError(f"cell failed: {r.error_in_exec or r.error_before_exec}")
    return dt


first = timed("%%jaxtrace\ny = x + 1\n")  # the watch's first look at the session's arrays
for name, body in [
    ("trivial cell `lr = 0.01`", "lr = 0.01\n"),
    ("a cell touching a device `y = x + 1`", "y = x + 1\n"),
]:
    cells = [lambda b=body: timed(b), lambda b=body: timed("%%jaxtrace\n" + b)]
    for c in cells:  # first uses
        c()
    plain, traced = alternating(cells, repeat=15)
    diff_ms = statistics.median(t - p for t, p in zip(traced, plain)) * 1e3
    verdict = ""
    if name.startswith("trivial"):
        verdict = "  ok" if diff_ms <= TARGET_MS else f"  OVER target +{TARGET_MS:g} ms"
    print(
        f"%%jaxtrace - plain, {n_live:,} live arrays, {name:38s} "
        f"+{diff_ms:7.1f} ms paired median (plain {min(plain) * 1e3:6.1f} ms, traced "
        f"{min(traced) * 1e3:6.1f} ms best){verdict}",
        flush=True,
    )
print(f"  the session's first traced cell (the watch meets the arrays): {first * 1e3:.0f} ms")
print(f"  python {sys.version.split()[0]}, jax {jax.__version__}")

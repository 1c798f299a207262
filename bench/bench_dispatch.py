"""Importing jaxviz (and loading the extension) must not change dispatch time while no cell
is traced: a jitted call and eager lax.add(1, 2), measured in fresh processes."""
import subprocess
import sys

PROG = r"""
import sys, time, gc
import jax, jax.numpy as jnp
from jax import lax
if sys.argv[1] == "jaxviz":
    import jaxviz
    from IPython.testing.globalipapp import start_ipython
    ip = start_ipython(); ip.run_cell("%load_ext jaxviz")
    ip.run_cell("%%jaxtrace -q\nimport jax.numpy as jnp\njnp.ones(3) + 1\n")   # one traced cell, then none
f = jax.jit(lambda x: x + 1)
x = jnp.ones(4); f(x); lax.add(1, 2)
def t(fn, n):
    best = 1e9
    for _ in range(7):
        gc.collect(); t0 = time.perf_counter()
        for _ in range(n): fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best
print(t(lambda: f(x), 20000) * 1e6, t(lambda: lax.add(1, 2), 3000) * 1e6)
"""


def measure(mode):
    out = subprocess.run([sys.executable, "-c", PROG, mode], capture_output=True, text=True, check=True)
    return [float(v) for v in out.stdout.split()[-2:]]


runs = {m: [measure(m) for _ in range(3)] for m in ("plain", "jaxviz")}
for k, name in enumerate(["jitted call", "lax.add(1, 2)"]):
    plain = min(r[k] for r in runs["plain"])
    ours = min(r[k] for r in runs["jaxviz"])
    print(f"{name + ' dispatch, jaxviz imported / not':58s} {ours:7.2f} us / {plain:7.2f} us = {ours / plain:5.2f}x (target: 1.00x within noise)")

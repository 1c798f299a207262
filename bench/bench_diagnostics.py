"""Diagnostics cost: jaxviz.trace and trace_cell with the diagnostics vs without them.

Issue 4's budget: with nothing wrong, diagnostics add <= 20% to jaxviz.trace (caches cleared
for both). Also printed: a 1000-jitted-call cell (the observer's share of the magic's
overhead) and a cell that draws random numbers at top level (kept off the fast path).
"""
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, ".")
import jaxviz  # noqa: E402
import jaxviz.diagnostics.check as diags  # noqa: E402
import jaxviz.diagnostics.observer as observer  # noqa: E402
from bench._timing import best, report  # noqa: E402
from tools.models import transformer, transformer_args  # noqa: E402

real_trace, real_cell, real_obs = diags.diagnose_trace, diags.diagnose_cell, observer.default_observers


def without_diagnostics(on: bool) -> None:
    diags.diagnose_trace = (lambda t: []) if on else real_trace
    diags.diagnose_cell = (lambda c, ns=None: []) if on else real_cell
    observer.default_observers = (lambda f: []) if on else real_obs


def timed(fn, repeat=3):
    without_diagnostics(True)
    base = best(fn, repeat=repeat, setup=jax.clear_caches)
    without_diagnostics(False)
    ours = best(fn, repeat=repeat, setup=jax.clear_caches)
    return ours, base


fn, args = jax.value_and_grad(transformer), transformer_args()
ours, base = timed(lambda: jaxviz.trace(fn, *args))
report("jaxviz.trace 12-layer transformer vjp: with / without", ours, base, target=1.2)

mlp = """
import jax, jax.numpy as jnp
f = jax.jit(lambda w, x: jnp.tanh(x @ w))
w = jnp.ones((32, 32)); x = jnp.ones((8, 32))
for _ in range(1000):
    y = f(w, x)
_ = y.block_until_ready()
"""
ours, base = timed(lambda: jaxviz.trace_cell(mlp))
report("trace_cell 1000 jitted calls: with / without", ours, base, target=1.2)

rng = """
import jax
key = jax.random.PRNGKey(0)
for i in range(100):
    key, sub = jax.random.split(key)
    x = jax.random.normal(sub, (16,))
_ = x.block_until_ready()
"""
ours, base = timed(lambda: jaxviz.trace_cell(rng))
report("trace_cell 100 top-level split+normal: with / without", ours, base)

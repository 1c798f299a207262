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
import jaxviz.api as api  # noqa: E402
from jaxviz.capture.recorder import Recorder  # noqa: E402
from bench._timing import best, report  # noqa: E402
from tools.models import transformer, transformer_args  # noqa: E402

# The seam: the names jaxviz.api looks up when it runs the pipeline. Without diagnostics, the
# checks return nothing and a cell records with no observer (jaxviz.api.recorder makes a
# CellObserver per cell otherwise). Each stand-in counts its calls, so a restructuring that
# moves the lookups elsewhere stops the bench instead of timing diagnostics twice.
REAL = {name: getattr(api, name) for name in ("diagnose_trace", "diagnose_cell", "recorder")}
used = dict.fromkeys(REAL, 0)


def _count(name, result):
    def stand_in(*args, **kwargs):
        used[name] += 1
        return result(*args, **kwargs)
    return stand_in


NONE = {"diagnose_trace": _count("diagnose_trace", lambda t: []),
        "diagnose_cell": _count("diagnose_cell", lambda cell, namespace=None, observer=None: []),
        "recorder": _count("recorder", lambda filename, namespace=None: (Recorder(filename), None))}


def without_diagnostics(on: bool) -> None:
    for name in REAL:
        setattr(api, name, NONE[name] if on else REAL[name])


def timed(fn, repeat=3, seams=("diagnose_trace",)):
    """Best times with and without the diagnostics; `seams`: the stand-ins fn must go through."""
    before = dict(used)
    without_diagnostics(True)
    try:
        base = best(fn, repeat=repeat, setup=jax.clear_caches)
    finally:
        without_diagnostics(False)
    missed = [name for name in seams if used[name] == before[name]]
    if missed:
        raise SystemExit(f"bench_diagnostics: {', '.join(missed)} never called through jaxviz.api: "
                         f"the 'without' run still ran the diagnostics; update the seam")
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
cell_seams = ("diagnose_cell", "recorder")        # a cell: diagnose_cell runs the trace checks
ours, base = timed(lambda: jaxviz.trace_cell(mlp), seams=cell_seams)
report("trace_cell 1000 jitted calls: with / without", ours, base, target=1.2)

rng = """
import jax
key = jax.random.PRNGKey(0)
for i in range(100):
    key, sub = jax.random.split(key)
    x = jax.random.normal(sub, (16,))
_ = x.block_until_ready()
"""
ours, base = timed(lambda: jaxviz.trace_cell(rng), seams=cell_seams)
report("trace_cell 100 top-level split+normal: with / without", ours, base)

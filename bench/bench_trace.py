"""jaxviz.trace vs jax.jit(f).trace alone (caches cleared for both), and model build per eqn.

Targets (issue 2): <= 1.5x on a 12-layer transformer value_and_grad (~2.6k eqns) and on a
synthetic 20k-equation function; building the model <= 10 us per equation.
"""
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, ".")
import jaxviz  # noqa: E402
from bench._timing import best, report  # noqa: E402
from tools.models import transformer, transformer_args, wide  # noqa: E402
from jaxviz.graph.build import build_graph  # noqa: E402

cases = [
    ("12-layer transformer value_and_grad", jax.value_and_grad(transformer), transformer_args()),
    ("synthetic 20k-equation function", wide, (jnp.ones(8),)),
]
for name, fn, args in cases:
    base = best(lambda: jax.jit(fn).trace(*args), repeat=3, setup=jax.clear_caches)
    ours = best(lambda: jaxviz.trace(fn, *args), repeat=3, setup=jax.clear_caches)
    jaxpr = jax.jit(fn).trace(*args).jaxpr
    builds = []
    for _ in range(3):                  # the first pays for JAX's code locations once per process
        t0 = time.perf_counter()
        g = build_graph(jaxpr, name)
        builds.append(time.perf_counter() - t0)
    print(f"-- {name}: {g.n_eqns} eqns, JSON {len(g.to_json()) / 1e6:.2f} MB "
          f"({len(g.to_json()) / sum(len(b.nodes) for b in g.bodies):.0f} bytes per node)")
    report("jaxviz.trace / jit(f).trace", ours, base, target=1.5)
    print(f"{'build the model, per equation (best of 3; first)':58s} "
          f"{min(builds) / g.n_eqns * 1e6:9.1f} us; {builds[0] / g.n_eqns * 1e6:.1f} us "
          f"(target <= 10 us)")

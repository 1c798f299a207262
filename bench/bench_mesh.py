"""Benchmark: a sharded program's analysis (jaxviz.mesh) on 8 CPU devices.

Prints, on the 12-layer transformer training step on a 2-D (data x model) mesh
(tools/sharded.py): the memory analysis of its compiled program with the collectives, the
replicated arguments and the per-device parts (what `Trace.memory()` does past the compile),
per 1k equations (the issue's target: <= 0.5 s per 1k equations), the share of it the
collectives take, and whether jaxviz's collectives are the compiled HLO's, one for one.
Never asserts.

    python bench/bench_mesh.py [--repeat 3] [--layers 12]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import jax                                               # noqa: E402

import jaxviz                                            # noqa: E402
from jaxviz import _compat                               # noqa: E402
from jaxviz.memory.buffers import analyze                # noqa: E402
from jaxviz.memory.compile import compile_with_executable  # noqa: E402
from jaxviz.mesh import Facts, collectives               # noqa: E402
from tools import sharded                                # noqa: E402

_OPS = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*? (all-reduce|all-gather|reduce-scatter|"
                  r"all-to-all|collective-permute)(?:-start)?\(", re.M)


def main(repeat: int, layers: int) -> None:
    mesh = sharded.make_mesh()
    params, x = sharded.args(mesh, layers=layers)
    f = jax.jit(sharded.train_step)
    t = jaxviz.trace(f, params, x)
    cr, _, compiled = compile_with_executable(t)
    times, r = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = analyze(t, cr, compiled)
        times.append(time.perf_counter() - t0)
    assert r is not None and cr.mesh is not None
    med = statistics.median(times)
    module = _compat.parse_hlo_module(cr.hlo)
    facts = Facts(cr.mesh, [(d.path, d.type, d.sharding) for d in cr.donations],
                  [(o.path, o.sharding) for o in cr.outputs])
    ct = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        cs = collectives(module, t.graph, facts)
        ct.append(time.perf_counter() - t0)
    hlo = sorted(m.group(1) for m in _OPS.finditer(cr.hlo))
    mine = sorted(c.name for c in r.collectives)
    print(f"== sharded transformer train step, {layers} layers, {cr.mesh.legend}: "
          f"{r.n_eqns:,} equations, {len(r.timeline):,} scheduled instructions")
    print(f"  memory analysis with the mesh {med * 1e3:.1f} ms = "
          f"{med / max(r.n_eqns, 1) * 1000:.3f} s per 1k equations   (issue wants <= 0.5 s); "
          f"XLA compile {cr.compile_seconds * 1e3:.0f} ms")
    print(f"  of which the collectives (a module already parsed) "
          f"{statistics.median(ct) * 1e3:.1f} ms for {len(cs)}")
    print(f"  collectives named {len(mine)}, in the compiled HLO {len(hlo)}: "
          f"{'one for one' if mine == hlo else 'DIFFER'}; replicated arguments "
          f"{len(r.replicated)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--layers", type=int, default=12)
    a = ap.parse_args()
    main(a.repeat, a.layers)

"""The collectives of eager work on 8 CPU devices (a child process: the suite keeps its
device count): jnp functions and an eager shard_map at a cell's top level, no jax.jit. Each
collective is named at the user's line with its kind, bytes, axes and cause, read from the
programs JAX compiled while the cell ran (jaxviz.mesh.eager), in the text twin, the CLI and
the notebook view's payload; none on one device."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.mesh.test_cli_mesh import run_cli

CELL = """import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
x = jax.device_put(jnp.ones((1024, 512)), NamedSharding(mesh, P(None, "x")))
w = jax.device_put(jnp.ones((512, 256)), NamedSharding(mesh, P("x", None)))
s = jnp.sum(x)
y = x @ w
t = jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P(None, "x"),
                  out_specs=P())(x)
step = jax.jit(lambda a, b: a @ b)
z = step(x, w)
"""

CHILD = """import json, os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jaxviz
from jaxviz.view.payload import build_payload
src = sys.argv[1]
out = []
for run in range(2):  # the second: every program is JAX's cached one (on_reused)
    ct = jaxviz.trace_cell(src)
    assert ct.error is None, ct.error
    payload = build_payload(ct.traces, memory_reports=[*ct.compiled, *ct.eager_collectives])
    eager = [e for e in payload.get("compiled_memory", []) if e["steps"] == 0]
    out.append({
        "eager": [[e.program, e.line, e.mesh.legend,
                   [[c.kind, c.bytes, list(c.axes), c.line, c.cause, c.reason, c.op]
                    for c in e.collectives]] for e in ct.eager_collectives],
        "compiled": [[r.name, len(r.collectives)] for r in ct.compiled],
        "entries": [[e["trace"], e["index"], [c["line"] for c in e["collectives"]],
                     [c["node_ids"] for c in e["collectives"]],
                     payload["traces"][e["index"]]["name"] if e["index"] is not None else None]
                    for e in eager],
        "text": str(ct),
    })
print(json.dumps(out))
"""


def _child(src: str) -> list:
    p = subprocess.run([sys.executable, "-c", CHILD, src], capture_output=True, text=True,
                       timeout=600, env={**os.environ, "PYTHONWARNINGS": "ignore"})  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _by_line(eager: list) -> dict:
    return {c[3]: (prog, c) for prog, _line, _mesh, cs in eager for c in cs}


def test_eager_ops_collectives_are_named_at_their_lines_with_their_causes():
    first, again = _child(CELL)
    for run in (first, again):
        got = _by_line(run["eager"])
        # run again, the jnp functions' first calls take JAX's Python path, which hands back
        # the program compiled before (on_reused); jax 0.12's eager shard_map body runs a
        # jit of JAX's own that its C++ fast path serves unseen: the statement's programs
        # are those of its last run (mesh.eager._MEMO)
        assert sorted(got) == [6, 7, 8], run["eager"]
        prog, (kind, nbytes, axes, _l, cause, reason, _op) = got[6]
        assert (prog, kind, nbytes, axes, cause) == ("_reduce_sum", "all-reduce", 4, ["x"],
                                                     "reduced")
        assert "reduces a dimension sharded over `x`" in reason
        prog, (kind, nbytes, axes, _l, cause, reason, _op) = got[7]
        # x @ w contracts the dimension sharded over x: each device's f32[1024,256] summed
        assert (prog, kind, nbytes, axes, cause) == ("matmul", "all-reduce", 1024 * 256 * 4, ["x"],
                                                     "contracting")
        _prog, (kind, nbytes, axes, _l, cause, reason, _op) = got[8]
        assert (kind, nbytes, axes, cause) == ("all-reduce", 1024 * 64 * 4, ["x"], "shard_map")
        assert "`psum` in a shard_map at line 8" in reason
        # the user's own jit's collective is its compiled report's, not listed again
        assert run["compiled"] == [["<lambda>", 1]]
        assert all(e[0] != "<lambda>" for e in run["eager"])
        # the notebook view: an entry per program, under the trace that ran it, its op's node
        entries = {tuple(e[2]): e for e in run["entries"]}
        assert set(entries) == {(6,), (7,), (8,)}
        assert entries[(6,)][4] == "_reduce_sum" and entries[(7,)][4] == "matmul"
        # jax 0.12 stages the eager shard_map's body in the statement's trace; 0.10.2 nowhere
        # the capture sees (its entry is in the memory tab, selecting no node)
        body = entries[(8,)][4]
        assert body is None or body.startswith("line 8: t = jax.shard_map")
        assert all(e[3][0] for e in run["entries"] if e[1] is not None)  # selects its node
        text = run["text"]
        assert "collectives of eager ops (the programs JAX compiled for them while the cell " \
               "ran) on mesh x=8 (Auto), largest first (3," in text
        assert "dot_general: the product at line 7 contracts a dimension sharded over `x`" in text


def test_cli_names_eager_collectives_with_memory_and_text(tmp_path):
    for flags in (("--text",), ("--memory",)):
        out = run_cli(tmp_path, *flags, source=CELL)
        assert sum(s.startswith("collectives of eager ops") for s in out.splitlines()) == 1, out
        line = next(s for s in out.splitlines() if "[matmul]" in s)
        assert "all-reduce" in line and "over x" in line and "step.py:7" in line


def test_a_single_device_eager_cell_has_no_collectives_section():
    src = ("import jax.numpy as jnp\nx = jnp.ones((256, 128))\ns = jnp.sum(x)\n"
           "y = x @ jnp.ones((128, 64))\n")  # fmt: skip
    p = subprocess.run([sys.executable, "-c",
                        "import sys, jaxviz; ct = jaxviz.trace_cell(sys.argv[1]); "
                        "print(len(ct.eager_collectives)); print(str(ct))", src],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines()[0] == "0"
    assert "collectives" not in p.stdout


WSC = """import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
x = jax.device_put(jnp.ones((1024, 512)), NamedSharding(mesh, P(None, "x")))
r = jax.device_put(x, NamedSharding(mesh, P()))
r2 = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P("x")))
"""


def test_an_eager_constraint_is_named_as_the_line_calls_it():
    """An eager with_sharding_constraint runs JAX's `_identity_fn` onto the new sharding:
    its all-to-all is the constraint's at its line, not a device_put's (the device_put
    above it copies without a program)."""
    (run, _again) = _child(WSC)
    got = _by_line(run["eager"])
    assert sorted(got) == [6], run["eager"]
    prog, (kind, nbytes, axes, _l, cause, reason, op) = got[6]
    assert (prog, kind, axes, cause) == ("_identity_fn", "all-to-all", ["x"], "constraint")
    assert reason == "with_sharding_constraint to P('x') at line 6"

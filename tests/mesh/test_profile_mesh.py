"""--profile on a sharded step (8 CPU devices, a child process): each collective's device time
is its own row at the line of the op it serves, not folded into that line's compute."""
from __future__ import annotations

import json
import os
import subprocess
import sys

STEP = '''import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
@jax.jit
def step(w1, w2, x):
    h = jax.nn.gelu(x @ w1)
    return h @ w2
put = lambda a, *s: jax.device_put(a, NamedSharding(mesh, P(*s)))
w1, w2 = put(jnp.ones((256, 1024)), None, "model"), put(jnp.ones((1024, 256)), "model", None)
x = put(jnp.ones((64, 256)), "data")
for _ in range(3):
    y = step(w1, w2, x)
'''
# a 2-D step whose constraint has XLA gather w2 whole for the product at line 7: XLA keeps no
# source for those all-gathers (memory and collectives name them by the op reading them)
GATHER = '''import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
def block(x, w1, w2):
    h = jax.nn.gelu(x @ w1)
    h = jax.lax.with_sharding_constraint(h, NamedSharding(mesh, P("data", None)))
    return x + h @ w2
@jax.jit
def step(w1, w2, x):
    return jax.value_and_grad(lambda w1, w2: (block(x, w1, w2) ** 2).mean(), argnums=(0, 1))(w1, w2)
put = lambda a, *s: jax.device_put(a, NamedSharding(mesh, P(*s)))
w1, w2 = put(jnp.ones((256, 1024)), None, "model"), put(jnp.ones((1024, 256)), "model", None)
x = put(jnp.ones((128, 256)), "data")
for _ in range(3):
    y = step(w1, w2, x)
'''

CHILD = r'''
import os, json, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jaxviz
src = """@SRC@"""
ct = jaxviz.trace_cell(src, filename="<step>", profile=True)
r = ct.profile
if len(sys.argv) > 1:  # the saved page, for the time tab in a browser (tests/browser)
    jaxviz.save_html(ct, sys.argv[1])
from jaxviz.view.timetab import profile_entry
tab = [[x["label"], x["bytes"], x["calls"], x["us"]] for x in profile_entry(r)["lines"]]
print(json.dumps({"error": repr(ct.error), "total": r.total_us, "text": str(r), "tab": tab,
                  "lines": [[l.label, l.line, l.us, l.category, list(l.prims)] for l in r.lines]}))
'''


def profiled(*argv: str, src: str = STEP) -> dict:
    """The child's profile of the sharded step `src` (argv: a path to save its page at)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("XLA_FLAGS", None)
    r = subprocess.run([sys.executable, "-c", CHILD.replace("@SRC@", src), *argv], capture_output=True, text=True,
                       timeout=600, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_collectives_time_is_its_own_row_at_its_line():
    out = profiled()
    assert out["error"] == "None"
    rows = {label: (line, us, cat, prims) for label, line, us, cat, prims in out["lines"]}
    # the second product (line 7) contracts the `model`-sharded features: its all-reduce
    assert "all-reduce at <step>:7" in rows, list(rows)
    line, us, cat, prims = rows["all-reduce at <step>:7"]
    assert (line, cat, prims) == (7, False, ["all-reduce"]) and us > 0
    # the line's compute is a row of its own, without the collective's kernels
    assert "all-reduce" not in rows["<step>:7 (step)"][3]
    # its bytes a call (the result on each device: f32[32,256] of the 64 x 256 batch's half)
    # and the bandwidth it achieved, in the text twin
    row = next(t for t in out["text"].splitlines() if "all-reduce at <step>:7" in t)
    assert "32.0 KiB a call, " in row and row.endswith("GB/s achieved"), row
    assert sum(us for _, us, _, _ in rows.values()) == __import__("pytest").approx(out["total"])
    # the time tab's row carries what its bytes and bandwidth columns show (timetab.js)
    (tab,) = [x for x in out["tab"] if x[0] == "all-reduce at <step>:7"]
    assert tab[1] / tab[2] == 32 * 1024 and tab[3] > 0
    # every figure adds up the 8 devices' events, and the report says so
    assert ("note: `step` ran on 8 devices: each figure here adds up all 8 devices' time"
            in out["text"]), out["text"][-1500:]


def test_a_gather_xla_kept_no_source_for_is_its_own_row_at_the_line_reading_it():
    out = profiled(src=GATHER)
    assert out["error"] == "None"
    rows = {label: (line, us, cat, prims) for label, line, us, cat, prims in out["lines"]}
    # w2 gathered whole for `h @ w2` (line 7): its own row there, as the memory tab names it,
    # not folded into line 7's compute (its time there: 28% of the step, jax 0.12.1)
    assert "all-gather at <step>:7" in rows, list(rows)
    assert rows["all-gather at <step>:7"][1] > 0
    # and no compute row holds a collective's kernels
    kinds = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
    folded = {k: v[3] for k, v in rows.items() if " at " not in k and any(p in kinds for p in v[3])}
    assert not folded, folded


def test_eager_ops_collectives_time_is_their_own_rows_at_their_lines():
    """jnp.sum, x @ w and an eager shard_map's psum on 8 devices, no jax.jit: each
    all-reduce's device time is its own row at its line with its bytes, not folded into the
    line's compute (the programs JAX compiled for the ops, jaxviz.mesh.eager)."""
    from tests.mesh.test_eager_collectives import CELL

    out = profiled(src=CELL)
    assert out["error"] == "None"
    rows = {label: (line, us, cat, prims) for label, line, us, cat, prims in out["lines"]}
    for line in (6, 7, 8):
        assert f"all-reduce at <step>:{line}" in rows, list(rows)
        assert rows[f"all-reduce at <step>:{line}"][3] == ["all-reduce"]
    # the product's line keeps its compute, without the all-reduce's kernel
    assert "all-reduce" not in rows["<step>:7"][3]
    tab = {x[0]: x for x in out["tab"]}
    row = tab["all-reduce at <step>:7"]
    assert row[1] / row[2] == 1024 * 256 * 4 and row[3] > 0   # f32[1024,256] on each device
    text = next(t for t in out["text"].splitlines() if "all-reduce at <step>:7" in t)
    assert "1.0 MiB a call, " in text and text.endswith("GB/s achieved"), text
    # the shard_map's other programs (same name, no collective) still go to their line
    assert not any(label.startswith("eager op (jit__unnamed") for label in rows), list(rows)


# a step whose first call has another signature than the next two (its bf16 input, then its
# own f32 output; a Levanter-style step's params came back P('data', 'model') where they went
# in as P('data', 'model', None)), after a line that called jax.random's sampler in a loop:
# the loop is the step's 3 calls, not the sampler's 5 (that step read "14 steps" of _normal)
RETRACED = '''import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
ws = [jax.random.normal(jax.random.key(i), (256, 256)) for i in range(5)]
step = jax.jit(lambda a, w: jnp.tanh(a @ w) @ w.T)
a = jax.device_put(jnp.ones((256, 256), jnp.bfloat16), NamedSharding(mesh, P("x")))
for _ in range(3):
    a = step(a, ws[0])
'''


def test_a_steps_calls_of_two_signatures_at_one_line_are_one_loop():
    out = profiled(src=RETRACED)
    assert out["error"] == "None"
    head = out["text"].splitlines()[0]
    assert ", 3 steps (" in head, head

"""`python -m jaxviz FILE` on a sharded script (8 CPU devices: the child's XLA_FLAGS): each
list of the compiled program (its collectives, its replicated arguments) printed once, and
the text twin's node lines with each value's layout as XLA compiled it."""
from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
@jax.jit
def step(w1, w2, x):
    h = jnp.tanh(x @ w1)
    return jax.lax.with_sharding_constraint(h @ w2, NamedSharding(mesh, P())) * 2.0
put = lambda a, *s: jax.device_put(a, NamedSharding(mesh, P(*s)))
w1, w2 = put(jnp.ones((256, 1024)), None, "model"), put(jnp.ones((1024, 256)), "model", None)
y = step(w1, w2, put(jnp.ones((64, 256)), "data"))
"""


def run_cli(tmp_path, *flags: str, source: str = SCRIPT) -> str:
    script = tmp_path / "step.py"
    script.write_text(source)
    env = {**os.environ, "PYTHONWARNINGS": "ignore",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}  # fmt: skip
    p = subprocess.run([sys.executable, "-m", "jaxviz", str(script), *flags], cwd=tmp_path,
                       capture_output=True, text=True, timeout=600, env=env)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_text_and_memory_list_the_collectives_once_in_the_memory_report(tmp_path):
    out = run_cli(tmp_path, "--text", "--memory").splitlines()
    heads = [i for i, s in enumerate(out) if "collectives on mesh data=2 x model=4" in s]
    assert len(heads) == 1, "\n".join(out)
    report = next(i for i, s in enumerate(out) if s.startswith("memory of step (one call"))
    assert heads[0] > report  # in the full report, with the buffers it explains
    assert sum(s.lstrip().startswith("replicated: ") for s in out) == 1
    assert not any(s.startswith("compiled memory (") for s in out)  # no second summary


def test_text_alone_keeps_its_summary_of_the_collectives(tmp_path):
    out = run_cli(tmp_path, "--text").splitlines()
    assert sum("collectives on mesh data=2 x model=4" in s for s in out) == 1
    assert any(s.startswith("compiled memory (") for s in out)


def test_text_node_lines_say_each_values_layout_as_compiled(tmp_path):
    out = run_cli(tmp_path, "--text").splitlines()
    body = out[next(i for i, s in enumerate(out) if s.startswith("jit step(")):]
    types = [(s.split(" = ")[1].split()[0], s.split(" : ")[1].split("  ")[0].strip())
             for s in body[:12] if " = " in s and " : " in s]  # fmt: skip
    assert ("dot_general", "f32[64@data,1024@model]") in types  # x @ w1: batch, features split
    assert ("tanh", "f32[64@data,1024@model]") in types
    assert ("mul", "f32[64,256] (replicated)") in types        # after the constraint to P()
    note = next(s for s in body if s.startswith("  note: @"))
    assert "each equation's as XLA compiled it" in note and "(replicated)" in note


# a function called under one mesh, then the script sets another (JAX's shard_map tutorial
# does so from section to section): its program is read under the mesh it was called with
TWO_MESHES = """import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P
jax.set_mesh(jax.make_mesh((8,), ("x",)))
@jax.jit
@jax.shard_map(in_specs=P("x"), out_specs=P())
def total(a):
    return jax.lax.psum(a, "x")
y = total(jax.device_put(jnp.ones(64), P("x")))
jax.set_mesh(jax.make_mesh((4,), ("y",), devices=jax.devices()[:4]))
"""


def test_a_function_called_under_an_earlier_mesh_has_its_collectives(tmp_path):
    out = run_cli(tmp_path, "--text", "--memory", source=TWO_MESHES)
    assert "memory of total: not available" not in out, out[-3000:]
    assert "collectives on mesh x=8" in out
    (line,) = [s for s in out.splitlines() if " all-reduce " in s]
    assert "step.py:7 (total)" in line and "`psum` in a shard_map at line 7" in line



# the same, called inside a mesh's `with` block (jax.set_mesh's, and the deprecated
# `with mesh:`), analysed after the block is left
IN_BLOCKS = """import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
@jax.jit
def f(a):
    return jax.lax.with_sharding_constraint(jnp.sin(a), P())
with mesh:
    y = f(jax.device_put(jnp.ones((64, 8)), NamedSharding(mesh, P("x"))))
with jax.set_mesh(mesh):
    @jax.jit
    def g(a):
        return jax.lax.with_sharding_constraint(jnp.cos(a), P())
    z = g(jax.device_put(jnp.ones((64, 8)), P("x")))
"""


def test_functions_called_inside_a_meshs_with_block_have_their_collectives(tmp_path):
    out = run_cli(tmp_path, "--memory", source=IN_BLOCKS)
    assert "not available" not in out, out[-3000:]
    rows = [s.split("step.py:")[-1] for s in out.splitlines() if "all-gather          over x" in s]
    assert rows == ["6 (f)  sin: with_sharding_constraint to P() at line 6",
                    "12 (g)  cos: with_sharding_constraint to P() at line 12"], out[-3000:]


# JAX's sharding tutorial sets its 8 CPU devices itself, before JAX's backends start
OWN_DEVICES = """import jax, jax.numpy as jnp
jax.config.update("jax_num_cpu_devices", 8)
jax.set_mesh(jax.make_mesh((8,), ("x",)))
@jax.jit
def total(a):
    return a.sum()
print(len(jax.devices()), total(jax.device_put(jnp.ones(64), jax.P("x"))))
"""


def test_profile_waits_for_a_script_that_sets_its_own_devices(tmp_path):
    (tmp_path / "step.py").write_text(OWN_DEVICES)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    p = subprocess.run([sys.executable, "-m", "jaxviz", "step.py", "--text", "--profile"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={**env, "PYTHONWARNINGS": "ignore"})  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines()[0] == "8 64.0"  # as `python step.py` prints
    assert "collectives on mesh x=8" in p.stdout
    assert "step.py: device time " in p.stdout  # profiled from its first JAX work


# an optimizer's step count made on one device (uncommitted), the rest on the mesh: the
# step's second call gets it back replicated, and JAX traces again (a Levanter-style step
# with optax's adamw, whose reason led with 16 params 'changed' from P('data', 'model', None)
# to P('data', 'model'): the same layout)
COUNT = """import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
step = jax.jit(lambda c, w: (c + 1, w * 2))
c = jnp.zeros((), jnp.int32)
w = jax.device_put(jnp.ones((64, 8)), NamedSharding(mesh, P("x", None)))
for _ in range(3):
    c, w = step(c, w)
"""


def test_a_step_count_made_off_the_mesh_gets_the_sharding_fix(tmp_path):
    out = run_cli(tmp_path, source=COUNT)
    (line,) = [s for s in out.splitlines() if "info: recompile" in s]
    assert "`c` changed sharding: none (uncommitted) -> NamedSharding(P())" in line, line
    # w's layout did not change (its spec only lost its trailing None): said after, as such
    assert line.index("`c` changed") < line.index("`w` changed"), line
    assert ("`w` changed sharding: NamedSharding(P('x', None)) -> NamedSharding(P('x')) "
            "(the same layout)") in line, line
    fix = out[out.index(line):].splitlines()[1:4]
    assert "Give the first call its arguments as the step returns them" in fix[0], fix
    assert "with jax.set_mesh(mesh):" in "\n".join(out[out.index(line):].splitlines()[:5])


def test_the_sharding_fix_makes_the_step_trace_once(tmp_path):
    # the hint's fix, applied: the count made under the mesh is traced with once
    fixed = COUNT.replace("c = jnp.zeros((), jnp.int32)",
                          "with jax.set_mesh(mesh):\n    c = jnp.zeros((), jnp.int32)")
    out = run_cli(tmp_path, source=fixed)
    assert "recompile" not in out and "jit <lambda>(" in out, out[-2000:]
    assert sum(s.lstrip().startswith("jit <lambda>(") for s in out.splitlines()) == 1

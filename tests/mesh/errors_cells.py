"""Sharding errors in cells, on 8 CPU devices (a child of tests/mesh/test_errors.py)."""
import os, json, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jaxviz
CELLS = {
"typeerr": '''import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P, AxisType
mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
with jax.set_mesh(mesh):
    a = jax.device_put(jnp.ones((64, 32)), P("data", "model"))
    b = jax.device_put(jnp.ones((32, 16)), P("model", None))
    @jax.jit
    def f(a, b):
        h = jnp.sin(a)
        return h @ b
    y = f(a, b)
''',
"typeerr_default": '''import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P
mesh = jax.make_mesh((2, 4), ("data", "model"))
with jax.set_mesh(mesh):
    a = jax.device_put(jnp.ones((64, 32)), P("data", "model"))
    b = jax.device_put(jnp.ones((32, 16)), P("model", None))
    @jax.jit
    def f(a, b):
        h = jax.lax.with_sharding_constraint(jnp.sin(a), P("data", "model"))
        return h @ b
    y = f(a, b)
''',
"in_specs": '''import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P, AxisType
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
x = jnp.ones((12, 4))
y = jax.shard_map(lambda v: v * 2, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(x)
''',
"device_put": '''import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
x = jax.device_put(jnp.ones((12, 4)), NamedSharding(mesh, P("x")))
''',
"device_put_rank": '''import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
mesh = jax.make_mesh((4, 2), ("batch", "model"), axis_types=(AxisType.Auto,) * 2)
params = [(jnp.ones((8, 8)), jnp.ones(8))]
params = jax.device_put(params, NamedSharding(mesh, P(None, "model")))
''',
"gather": '''import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
@jax.jit
def f(a):
    h = jnp.tanh(a) * 2.0
    h = jax.lax.with_sharding_constraint(h, NamedSharding(mesh, P()))
    return h.sum(axis=1)
y = f(jax.device_put(jnp.ones((4096, 1024)), NamedSharding(mesh, P("x"))))
''',
"loop": '''import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
@jax.jit
def f(w, x):
    def body(h, _):
        h = jax.lax.with_sharding_constraint(jnp.tanh(h), NamedSharding(mesh, P("x")))
        h = jax.lax.with_sharding_constraint(h @ w, NamedSharding(mesh, P(None, "x")))
        return h, None
    return jax.lax.scan(body, x, None, length=6)[0]
y = f(jax.device_put(jnp.ones((512, 512)), NamedSharding(mesh, P())),
      jax.device_put(jnp.ones((512, 512)), NamedSharding(mesh, P(None, "x"))))
''',
"fed_back": '''import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
S = lambda *s: NamedSharding(mesh, P(*s))
step = jax.jit(lambda h: jnp.tanh(h) * 2, in_shardings=S("x"), out_shardings=S(None, "x"))
h = jax.device_put(jnp.ones((1024, 1024)), S("x"))
for i in range(4):
    h = step(h)
''',
"not_fed_back": '''import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
S = lambda *s: NamedSharding(mesh, P(*s))
step = jax.jit(lambda h: jnp.tanh(h) * 2, in_shardings=S("x"))
y = step(jax.device_put(jnp.ones((1024, 1024)), S(None, "x")))
''',
}
out = {}
# a notebook's mesh made in one cell, the failing product in the next
ns = {}
jaxviz.trace_cell('''import jax, jax.numpy as jnp
from jax.sharding import PartitionSpec as P
mesh = jax.make_mesh((2, 4), ("data", "model"))
''', ns, filename="<mesh cell>")
ct = jaxviz.trace_cell('''with jax.set_mesh(mesh):
    a = jax.device_put(jnp.ones((64, 32)), P("data", "model"))
    b = jax.device_put(jnp.ones((32, 16)), P("model", None))
    y = jax.jit(lambda a, b: a @ b)(a, b)
''', ns, filename="<product cell>")
out["two_cells"] = {"error": type(ct.error).__name__,
                    "found": [[d.rule, d.line, d.message, d.hint] for d in ct.diagnostics]}
for k, src in CELLS.items():
    ct = jaxviz.trace_cell(src, filename=f"<{k}>")
    out[k] = {"error": type(ct.error).__name__, "found": [[d.rule, d.line, d.message, d.hint] for d in ct.diagnostics],
              "traces": [t.signature + " | " + t.name for t in ct.traces],
              "notes": [line for t in ct.traces for line in str(t).splitlines() if line.startswith("  note: @")]}
print(json.dumps(out))

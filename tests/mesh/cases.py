"""A child process's sharded programs on 8 CPU devices (run by tests/mesh/test_collectives.py:
the suite's own process keeps its usual device count). Prints one JSON object: for each case,
jaxviz's collectives and the compiled HLO's collective instructions."""
import json
import os
import re
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxviz  # noqa: E402
from jaxviz.mesh.findings import collective_findings  # noqa: E402
from tools import sharded  # noqa: E402

mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
S = lambda *s: NamedSharding(mesh, P(*s))  # noqa: E731
shard_map = jax.shard_map


def wsc(a):
    d = jnp.sin(a) + 1.0
    e = jax.lax.with_sharding_constraint(d, S())  # constraint
    return e * 2


def contract(a, b):
    return a @ b  # contract


# a library's layer (an installed package's file: flax's Linear.__call__) runs the product
_LIB = os.path.join(__import__("tempfile").mkdtemp(), "site-packages")
os.makedirs(_LIB)
with open(os.path.join(_LIB, "vizlib_layers.py"), "w") as _f:
    _f.write("def dense(a, b):\n    return a @ b\n")
sys.path.insert(0, _LIB)
import vizlib_layers  # noqa: E402


def lib_contract(a, b):
    return vizlib_layers.dense(a, b) * 2.0  # lib_contract


def reduced(a):
    return a.sum(axis=0)  # reduce


def out_reshard(a):
    return a * 2  # output


def sm_psum(a):
    return shard_map(lambda x: jax.lax.psum(x, "x"),  # psum
                     mesh=mesh, in_specs=P("x"), out_specs=P())(a)  # fmt: skip


def sm_pmean(a):
    return shard_map(lambda x: jax.lax.pmean(x, "x"),  # pmean
                     mesh=mesh, in_specs=P("x"), out_specs=P())(a)  # fmt: skip


def sm_gather(a):
    return shard_map(lambda x: jax.lax.all_gather(x, "x", tiled=True),  # gather
                     mesh=mesh, in_specs=P("x"), out_specs=P("x"))(a)  # fmt: skip


def sm_permute(a):
    perm = [(i, (i + 1) % 8) for i in range(8)]
    return shard_map(lambda x: jax.lax.ppermute(x, "x", perm),  # permute
                     mesh=mesh, in_specs=P("x"), out_specs=P("x"))(a)  # fmt: skip


def sm_all_to_all(a):
    return shard_map(lambda x: jax.lax.all_to_all(x, "x", 1, 0, tiled=True),  # a2a
                     mesh=mesh, in_specs=P("x"), out_specs=P("x"))(a)  # fmt: skip


def sm_scatter(a):
    return shard_map(lambda x: jax.lax.psum_scatter(x, "x", tiled=True),  # scatter
                     mesh=mesh, in_specs=P("x"), out_specs=P("x"))(a)  # fmt: skip


def sm_gather_grad(a):  # the backward pass transposes the all_gather into a psum_scatter
    def loss(a):
        g = shard_map(lambda x: jax.lax.all_gather(x, "x", tiled=True),  # gather grad
                      mesh=mesh, in_specs=P("x"), out_specs=P("x"))(a)  # fmt: skip
        return (g ** 2).sum()
    return jax.grad(loss)(a)


def replicated_weight(w, v, x):
    h = jnp.tanh(x @ w)
    return (h @ v).sum()  # gathers v


def scanned(w, x):
    def body(h, _):
        return jnp.tanh(h @ w), None  # in the loop
    h, _ = jax.lax.scan(body, x, None, length=5)
    return h


def back_and_forth(a):
    def body(i, h):
        h = jax.lax.with_sharding_constraint(jnp.sin(h), S("x"))  # there
        return jax.lax.with_sharding_constraint(jnp.cos(h), S(None, "x"))  # and back
    return jax.lax.fori_loop(0, 10, body, a)


def back_and_forth_scan(a):
    def body(h, _):
        h = jax.lax.with_sharding_constraint(h * 2.0, S(None, "x"))  # scan there
        return jax.lax.with_sharding_constraint(h + 1.0, S("x")), None  # scan back
    return jax.lax.scan(body, a, None, length=6)[0]


def reshard_once(a):
    def body(i, h):
        return jax.lax.with_sharding_constraint(jnp.cos(h), S(None, "x"))  # once
    return jax.lax.fori_loop(0, 10, body, a)


# JAX's "Distributed arrays and automatic parallelization" tutorial's MLP, its weights' output
# features split over `model`, the batch over `batch` (code nobody here wrote, kept as it is)
def predict(params, inputs):
    for W, b in params:
        outputs = jnp.dot(inputs, W) + b
        inputs = jnp.maximum(outputs, 0)  # relu
    return outputs


def tutorial_loss(params, batch):
    inputs, targets = batch
    predictions = predict(params, inputs)
    return jnp.mean(jnp.sum((predictions - targets)**2, axis=-1))


def tutorial_step(params, batch):
    grads = jax.grad(tutorial_loss)(params, batch)
    return [(W - 0.1 * dW, b - 0.1 * db) for (W, b), (dW, db) in zip(params, grads)]


def tutorial_args():
    m2 = jax.make_mesh((4, 2), ("batch", "model"), axis_types=(AxisType.Auto,) * 2)
    sizes = [784, 128, 128, 128, 8]
    put = lambda a, *spec: jax.device_put(a, NamedSharding(m2, P(*spec)))  # noqa: E731
    params = [(put(jnp.ones((i, o)) / i, None, "model"), put(jnp.ones(o), "model"))
              for i, o in zip(sizes[:-1], sizes[1:])]
    return params, (put(jnp.ones((128, 784)), "batch"), put(jnp.ones((128, 8)), "batch"))


# a 2-D mesh step whose gradient all-reduces XLA combines into one with the loss's mean:
# jax 0.12.1 names it "jit(f)/(transpose(jvp())/dot_general:...:jvp()/reduce_sum)"
def combined_step(params, x):
    def loss(params, x):
        for p in params:
            h = jax.nn.gelu(x @ p["w1"])
            h = jax.lax.with_sharding_constraint(h, NamedSharding(MESH2, P("data", None)))
            x = x + h @ p["w2"]  # w2 whole
        return (x ** 2).mean()
    value, grads = jax.value_and_grad(loss)(params, x)
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads), value


MESH2 = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


def combined_args():
    put = lambda a, *spec: jax.device_put(a, NamedSharding(MESH2, P(*spec)))  # noqa: E731
    params = [{"w1": put(jnp.ones((256, 1024)), None, "model"), "w2": put(jnp.ones((1024, 256)), "model", None)}
              for _ in range(2)]
    return params, put(jnp.ones((128, 256)), "data")


# explicit mesh axes: the user asks for the layout with jax.reshard (JAX's sharding tutorial's
# way); XLA's all-gather carries the metadata of the `add` before it (jax 0.12) or its own
MESH_E = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Explicit,))


def user_reshard(a):
    b = jnp.sin(a) + 1.0
    return jax.reshard(b, NamedSharding(MESH_E, P())) * 2  # reshard


def fsdp(w, x):  # a Levanter-style FSDP weight: the gather's readers keep its path only
    return jnp.einsum("bse,ehd->bshd", x, w)  # fsdp


def _to(a, *spec):  # a helper holding the constraint, used at several lines (Levanter's shard)
    return jax.lax.with_sharding_constraint(a, S(*spec))  # helper


def helper_wsc(a):
    d = jnp.sin(a) + 1.0
    e = _to(d)  # asks P()
    return _to(e * 2, "x")


def single(a):
    return jnp.sin(a) @ a


A = jnp.ones((1024, 1024))
CASES = {
    "wsc": (jax.jit(wsc), lambda: (jax.device_put(A, S("x")),)),
    "contract": (jax.jit(contract), lambda: (jax.device_put(A, S(None, "x")), jax.device_put(A, S("x")))),
    "lib_contract": (jax.jit(lib_contract), lambda: (jax.device_put(A, S(None, "x")), jax.device_put(A, S("x")))),
    "reduced": (jax.jit(reduced), lambda: (jax.device_put(A, S("x")),)),
    "out_reshard": (jax.jit(out_reshard, out_shardings=S(None, "x")), lambda: (jax.device_put(A, S("x")),)),
    "sm_psum": (jax.jit(sm_psum), lambda: (jax.device_put(A, S("x")),)),
    "sm_pmean": (jax.jit(sm_pmean), lambda: (jax.device_put(A, S("x")),)),
    "sm_gather": (jax.jit(sm_gather), lambda: (jax.device_put(A, S("x")),)),
    "sm_permute": (jax.jit(sm_permute), lambda: (jax.device_put(A, S("x")),)),
    "sm_all_to_all": (jax.jit(sm_all_to_all), lambda: (jax.device_put(A, S("x")),)),
    "sm_scatter": (jax.jit(sm_scatter), lambda: (jax.device_put(A, S("x")),)),
    "sm_gather_grad": (jax.jit(sm_gather_grad), lambda: (jax.device_put(jnp.ones((1024, 64)), S("x")),)),
    "single": (jax.jit(single), lambda: (jnp.ones((256, 256)),)),
    "helper_wsc": (jax.jit(helper_wsc), lambda: (jax.device_put(A, S("x")),)),
    "fsdp": (jax.jit(fsdp), lambda: (jax.device_put(jnp.ones((256, 8, 32)), S("x")),
                                     jax.device_put(jnp.ones((16, 64, 256)), S("x")))),
    "user_reshard": (jax.jit(user_reshard), lambda: (jax.device_put(A, NamedSharding(MESH_E, P("x"))),)),
    "tutorial": (jax.jit(tutorial_step), tutorial_args),
    "scanned": (jax.jit(scanned), lambda: (jax.device_put(A, S("x")),
                                           jax.device_put(jnp.ones((64, 1024)), S(None, "x")))),
    "replicated": (jax.jit(replicated_weight), lambda: (
        jax.device_put(jnp.ones((4096, 4096)), S()), jax.device_put(jnp.ones((4096, 256)), S("x")),
        jax.device_put(jnp.ones((2048, 4096)), S("x")))),
    "back_and_forth": (jax.jit(back_and_forth), lambda: (jax.device_put(A, S("x")),)),
    "back_and_forth_scan": (jax.jit(back_and_forth_scan), lambda: (jax.device_put(A, S("x")),)),
    "reshard_once": (jax.jit(reshard_once), lambda: (jax.device_put(A, S("x")),)),
    "combined": (jax.jit(combined_step), combined_args),
    "transformer": (jax.jit(sharded.train_step), lambda: sharded.args(sharded.make_mesh())),
}  # fmt: skip

_OPS = re.compile(
    r"^\s*(?:ROOT )?%?([\w.\-]+) = .*? (all-reduce|all-gather|reduce-scatter|all-to-all|"
    r"collective-permute)(?:-start)?\(", re.M)


def main(names):
    out = {}
    for name in names or CASES:
        f, make = CASES[name]
        args = make()
        t = jaxviz.trace(f, *args)
        r = t.memory(what_if=False)
        hlo = f.lower(*args).compile().as_text()
        out[name] = {
            "hlo": sorted([m.group(1), m.group(2)] for m in _OPS.finditer(hlo)),
            "collectives": [
                {"name": c.name, "kind": c.kind, "bytes": c.bytes, "axes": list(c.axes),
                 "op": c.op, "line": c.line, "cause": c.cause, "reason": c.reason,
                 "cause_line": c.cause_line, "node_ids": list(c.node_ids),
                 "cause_ids": list(c.cause_ids), "inside": c.inside, "times": c.times}
                for c in r.collectives
            ],  # fmt: skip
            "findings": [[f.variant, list(f.where), f.message, list(f.node_ids)]
                         for f in collective_findings([r])],
            "mesh": r.mesh.legend if r.mesh is not None else None,
            "replicated": [[x.path, x.bytes, x.copies, x.total, x.sharded, list(x.over), x.sentence()]
                           for x in r.replicated],
            "buffers": [[b.where, b.type, b.whole, b.part] for b in r.buffers],
            "text": str(r),
            "signature": t.signature,
            "tab_types": [b["type"] for b in __import__("jaxviz.view.compiled", fromlist=["x"])
                          .compiled_entry(r)["buffers"]],
            "notes": [line for line in str(t).splitlines() if line.startswith("  note: @")],
            "layouts": {ref: [typ, t.graph.bodies[int(ref.split(":")[0])].nodes[
                int(ref.split(":")[1])].op] for ref, typ in r.layouts},
            "out_layouts": [typ for ref, typ in r.layouts if t.graph.bodies[int(ref.split(":")[0])].nodes[
                int(ref.split(":")[1])].kind == "out"],
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])

"""A sharded training step on a 2-D (`data` x `model`) mesh, Megatron-style, shared by the
tests, the benchmark and docs/sharding.md: the batch is split over `data`; each block's
first matmuls (wq, wk, wv, w1) split their output features over `model`, the second ones
(wo, w2) their input features, so each block's two contractions over `model` end in an
all-reduce, and the gradients of the weights are summed over `data`.

Mesh axes are Auto (GSPMD / Shardy propagate the shardings; jax 0.12's `jax.make_mesh`
defaults to Explicit, so the axis types are passed).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def make_mesh(data=2, model=4):
    return jax.make_mesh((data, model), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


def layernorm(x, g):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g


def block(x, p, heads=4):
    b, t, d = x.shape
    h = layernorm(x, p["g1"])
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    split = lambda a: a.reshape(b, t, heads, d // heads)  # noqa: E731
    s = jnp.einsum("bthd,bshd->bhts", split(q), split(k)) / jnp.sqrt(d / heads)
    o = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(s, -1), split(v)).reshape(b, t, d)
    x = x + o @ p["wo"]
    h = jax.nn.gelu(layernorm(x, p["g2"]) @ p["w1"])
    return x + h @ p["w2"]


def loss(params, x):
    for p in params["blocks"]:
        x = block(x, p)
    return (x**2).mean()


def train_step(params, x, lr=1e-2):
    grads = jax.grad(loss)(params, x)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


SPECS = {"wq": P(None, "model"), "wk": P(None, "model"), "wv": P(None, "model"),
         "wo": P("model", None), "w1": P(None, "model"), "w2": P("model", None),
         "g1": P(), "g2": P()}  # fmt: skip


def args(mesh, layers=2, d=64, batch=8, t=16, key=0):
    """(params, x) placed on `mesh`: params by SPECS, x's batch over `data`."""
    ks = iter(jax.random.split(jax.random.key(key), layers * 6))
    shapes = {"wq": (d, d), "wk": (d, d), "wv": (d, d), "wo": (d, d), "w1": (d, 4 * d),
              "w2": (4 * d, d)}  # fmt: skip
    blocks = []
    for _ in range(layers):
        p = {k: jax.random.normal(next(ks), s) * 0.02 for k, s in shapes.items()}
        p.update(g1=jnp.ones(d), g2=jnp.ones(d))
        blocks.append({k: jax.device_put(v, NamedSharding(mesh, SPECS[k])) for k, v in p.items()})
    x = jax.device_put(jnp.ones((batch, t, d)), NamedSharding(mesh, P("data")))
    return {"blocks": blocks}, x

"""JAX workloads shared by the benchmarks and tests: a transformer, a synthetic wide function."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b


def attention(x, p, heads):
    t, d = x.shape
    q, k, v = (x @ p["wq"]), (x @ p["wk"]), (x @ p["wv"])
    split = lambda a: a.reshape(t, heads, d // heads).transpose(1, 0, 2)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    s = jnp.einsum("htd,hsd->hts", q, k) / jnp.sqrt(d / heads)
    s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e9)
    o = jnp.einsum("hts,hsd->htd", jax.nn.softmax(s, -1), v)
    return o.transpose(1, 0, 2).reshape(t, d) @ p["wo"]


def block(x, p, heads=4):
    x = x + attention(layernorm(x, p["g1"], p["b1"]), p, heads)
    h = jax.nn.gelu(layernorm(x, p["g2"], p["b2"]) @ p["w1"])
    return x + h @ p["w2"]


def transformer(params, x):
    for p in params["blocks"]:
        x = block(x, p)
    return (layernorm(x, params["gf"], params["bf"]) ** 2).mean()


def transformer_params(layers=12, d=64, key=0):
    ks = jax.random.split(jax.random.key(key), layers * 6)
    def w(i, shape):
        return jax.random.normal(ks[i], shape) * 0.02
    blocks = []
    for l in range(layers):
        i = l * 6
        blocks.append(dict(wq=w(i, (d, d)), wk=w(i + 1, (d, d)), wv=w(i + 2, (d, d)),
                           wo=w(i + 3, (d, d)), w1=w(i + 4, (d, 4 * d)), w2=w(i + 5, (4 * d, d)),
                           g1=jnp.ones(d), b1=jnp.zeros(d), g2=jnp.ones(d), b2=jnp.zeros(d)))
    return dict(blocks=blocks, gf=jnp.ones(d), bf=jnp.zeros(d))


def transformer_args(layers=12, d=64, t=16):
    return transformer_params(layers, d), jnp.ones((t, d))


def wide(x, n=20_000):
    """A flat chain of n elementwise equations (a synthetic 20k-equation jaxpr)."""
    for i in range(n // 2):
        x = jnp.sin(x) * 1.0001
    return x


def transformer_train_step(params, x, lr=1e-3):
    """One SGD step of `transformer`: forward, backward, update (jit it to trace)."""
    loss, grads = jax.value_and_grad(transformer)(params, x)
    new = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return loss, new

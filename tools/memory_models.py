"""Compiled-memory workloads shared by tests/test_buffers.py and bench/bench_buffers.py:
an MLP train step, a transformer train step (optionally with remat), a scan RNN's gradient.
Each builder returns (jitted step, args)."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tools.models import block, transformer, transformer_args


def mlp_step(width=512, batch=256, layers=3):
    ks = jax.random.split(jax.random.key(0), layers)
    params = [dict(w=jax.random.normal(k, (width, width)) * 0.02, b=jnp.zeros(width))
              for k in ks]

    def loss(params, x):
        for p in params:
            x = jnp.tanh(x @ p["w"] + p["b"])
        return (x ** 2).mean()

    @jax.jit
    def step(params, x):
        l, g = jax.value_and_grad(loss)(params, x)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, g), l

    return step, (params, jnp.ones((batch, width)))


def transformer_step(layers=12, d=64, t=16, remat=False):
    params, x = transformer_args(layers, d, t)
    blk = jax.checkpoint(block) if remat else block

    def loss(params, x):
        for p in params["blocks"]:
            x = blk(x, p)
        return (x ** 2).mean()

    fwd = transformer if not remat else loss

    @jax.jit
    def step(params, x):
        l, g = jax.value_and_grad(fwd)(params, x)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, g), l

    return step, (params, x)


def rnn_grad(hidden=256, steps=64):
    def rnn(w, xs):
        def cell(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h
        return jax.lax.scan(cell, jnp.zeros(xs.shape[1]), xs)[1].sum()

    return jax.jit(jax.grad(rnn)), (jnp.ones((hidden, hidden)) * 0.01,
                                    jnp.ones((steps, hidden)))

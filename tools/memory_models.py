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


def transformer_step_donated(layers=12, d=512, t=256):
    """The 12-layer d=512 transformer train step of issue 44, its params donated."""
    params, x = transformer_args(layers, d, t)

    def step(params, x):
        l, g = jax.value_and_grad(transformer)(params, x)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, g), l

    return jax.jit(step, donate_argnums=0), (params, x)


def scan_grad(steps=256, batch=256, hidden=1024):
    """The gradient of a 256-step scan (1 GiB at its peak): its residuals are stacked by
    the loop, in buffers XLA writes with no source of their own."""
    def f(w, xs):
        def cell(h, x):
            h = jnp.tanh(h @ w + x)
            return h, None
        return jax.lax.scan(cell, jnp.zeros((batch, hidden)), xs)[0].sum()

    return jax.jit(jax.grad(f)), (jnp.ones((hidden, hidden)) * 0.01,
                                  jnp.ones((steps, batch, hidden)))


def small_params_step(n=400):
    """A step over 400 small f32[3,5] parameters: on a TPU, tiles pad each to 2 KiB."""
    ps = [jnp.ones((3, 5)) for _ in range(n)]

    @jax.jit
    def step(ps, x):
        return [p - 0.1 * x * p for p in ps], sum((p * x).sum() for p in ps)

    return step, (ps, jnp.float32(2.0))


def aux_outer_grad(n=4096):
    """A gradient with has_aux that returns the 64 MiB outer product made at one line as its
    aux output (issue 54's held-out kind: a multi-output fusion writes it and the grad)."""

    def loss(w, x):
        outer = jnp.outer(x, x)
        return (w * outer).sum() * 2.0, outer

    return jax.jit(jax.grad(loss, has_aux=True)), (jnp.ones((n, n)), jnp.ones(n))


# A 4-layer MLP's training step with momentum, params and opt_state donated, set up and
# called once: the source of a notebook cell (the live memory watch's donated loop, shared by
# tests/test_watch.py, tests/browser/test_memory_tab.py and tools/accelerator_watch.py).
# `held`: the bytes params and opt_state hold, which the live lane must never drop below.
DONATED_SETUP = """import jax, jax.numpy as jnp
L, D = 4, 512
def init(k):
    ks = jax.random.split(k, L)
    return [(jax.random.normal(k_, (D, D)) / D**0.5, jnp.zeros(D)) for k_ in ks]
def loss(p, x):
    for w, b in p:
        x = jnp.tanh(x @ w + b)
    return jnp.mean(x**2)
def _step(p, o, x):
    l, g = jax.value_and_grad(loss)(p, x)
    o = jax.tree.map(lambda m, g: 0.9 * m + g, o, g)
    return jax.tree.map(lambda p, m: p - 0.01 * m, p, o), o, l
step = jax.jit(_step, donate_argnums=(0, 1))
params = init(jax.random.key(0))
opt_state = jax.tree.map(jnp.zeros_like, params)
x = jnp.ones((256, D))
params, opt_state, l = step(params, opt_state, x)
jax.block_until_ready(params)
held = sum(a.nbytes for a in jax.tree.leaves((params, opt_state)))
"""

"""A run loop's inputs (jaxviz.memory.run): how a trace is called, its dynamic argument
leaves, which outputs feed which inputs back (`x = f(x)`) and so which arguments a loop may
donate, and the arrays made for it (copies of the user's, or zeros and valid PRNG keys of the
traced shapes, dtypes and shardings)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxviz import _compat
from jaxviz.memory.compile import compile_with_executable


def _zeros(shape: tuple, dtype: Any, sharding: Any) -> jax.Array:
    impl = _compat.key_impl(dtype)
    if impl is not None:  # a valid typed key, not zeros
        k = jax.random.key(0, impl=impl)
        k = jax.random.split(k, shape) if shape else k
        return jax.device_put(k, sharding) if sharding is not None else k
    return jnp.zeros(shape, dtype, device=sharding)


def copy_array(x: Any) -> jax.Array:
    """A fresh buffer with the same value and sharding (the user's arrays stay untouched)."""
    if isinstance(x, jax.Array):
        return _COPY(x)
    return jnp.asarray(x)


_COPY = jax.jit(jnp.copy)


class CallPlan:
    """How one trace is called: dynamic leaves, feedback pairs, donation choices."""

    def __init__(self, trace: Any, args: tuple, kwargs: dict) -> None:
        self.trace = trace
        self.base, lowered, compiled = compile_with_executable(trace)
        self.compiled = compiled  # reused by the run with the function's own donation
        self.in_tree = jax.tree_util.tree_structure(lowered.args_info)
        self.in_info = jax.tree_util.tree_leaves(lowered.args_info)
        self.out_info = jax.tree_util.tree_leaves(lowered.out_info)
        self.n_pos = len(lowered.args_info[0])
        ins = jax.tree_util.tree_leaves(compiled.input_shardings)
        self.in_sh = ins if len(ins) == len(self.in_info) else [None] * len(self.in_info)
        opts = _compat.jit_options(trace.fun) or {}
        n = len(trace.args_spec)
        self.static = {i % n for i in opts.get("static_argnums", ()) if n and -n <= i < n}
        self.static_names = set(opts.get("static_argnames", ()))
        self.user_leaves = self._user_leaves(args, kwargs) if (args or kwargs) else None
        self.feedback = self._feedback()
        # argument position of each flat leaf (-1: keyword argument)
        self.leaf_arg = [
            p[1].idx if getattr(p[0], "idx", None) == 0 else -1
            for p, _ in jax.tree_util.tree_flatten_with_path(lowered.args_info)[0]
        ]
        self.positions = [i for i in range(n) if i not in self.static][: self.n_pos]

    def _user_leaves(self, args: tuple, kwargs: dict) -> list:
        dyn = tuple(a for i, a in enumerate(args) if i not in self.static)
        kw = {k: v for k, v in kwargs.items() if k not in self.static_names}
        leaves = self.in_tree.flatten_up_to((dyn, kw))  # type: ignore[attr-defined]
        return [jax.tree_util.tree_leaves(x)[0] if not hasattr(x, "shape") else x for x in leaves]

    def _feedback(self) -> dict[int, int]:
        """{input leaf: output leaf} for outputs fed back into inputs (`x = f(x)`)."""
        pairs: dict[int, int] = {}
        used: set[int] = set()
        out_paths = [o.path for o in self.base.outputs]
        for i, d in enumerate(self.base.donations):  # what XLA aliased first
            if d.aliased_to in out_paths:
                k = out_paths.index(d.aliased_to)
                pairs[i] = k
                used.add(k)
        for i, a in enumerate(self.in_info):
            if i in pairs:
                continue
            same = [
                k
                for k, o in enumerate(self.out_info)
                if k not in used and tuple(o.shape) == tuple(a.shape) and o.dtype == a.dtype
            ]
            if same:
                k = i if i in same else same[0]
                pairs[i] = k
                used.add(k)
        return pairs

    def auto_donate(self) -> tuple[int, ...]:
        """Argument positions whose every leaf is fed back: safe to donate in a loop."""
        out = []
        for k, pos in enumerate(self.positions):
            leaves = [i for i, a in enumerate(self.leaf_arg) if a == k]
            if leaves and all(i in self.feedback for i in leaves):
                out.append(pos)
        return tuple(out)

    def own_donate(self) -> tuple[int, ...]:
        opts = _compat.jit_options(self.trace.fun) or {}
        return tuple(opts.get("donate_argnums", ()))

    def make_inputs(self) -> list:
        if self.user_leaves is not None:
            return [copy_array(x) for x in self.user_leaves]
        return [_zeros(tuple(a.shape), a.dtype, sh) for a, sh in zip(self.in_info, self.in_sh)]

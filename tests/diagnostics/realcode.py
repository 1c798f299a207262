"""A real-code false-positive gate: correct programs in the style of real JAX libraries.

The diagnostics must be something a user can leave on. This module holds correct programs,
each a notebook's cells (`Program.cells`), written the way code built on optax, equinox and
flax is written, and the small libraries they use, written here in those libraries' image
(none of optax, equinox or flax is installed, nor copied):

  * `optax`: GradientTransformation(init, update), scale_by_adam, scale, scale_by_schedule,
    trace (momentum), add_decayed_weights, clip_by_global_norm, chain, apply_updates, adam,
    adamw, sgd, schedules;
  * `eqx`: Module (a frozen dataclass that is a pytree; any field may hold a non-array, e.g.
    a function), is_array / is_inexact_array, partition / combine, filter_jit (the array
    leaves are traced, every other leaf is static; donate="none" / "all" / "warn"),
    filter_value_and_grad, apply_updates, nn.Linear, nn.MLP;
  * `nnx`: Module (an object graph of Variables), Param, RngKey, RngStream / Rngs (a key
    stream that splits a fresh key per call), Linear, Dropout, split / merge / update,
    Module.train() / eval().

The libraries are module code (a file, as a site-packages library would be); the programs
import them. tests/diagnostics/test_realcode.py runs each program's cells through
`jaxviz.trace_cell` in one namespace, as a notebook would, and asserts: the cells ran, no
warning or error was reported, each info finding is in the program's allow-list (`info`)
with the reason it is true, and the program's numbers (the name `result`) are the ones a
plain `exec` of the same cells gives.

On the fixed evaluation key (`fixed_eval_key`): a key passed to the same pure function on
every call is a fixed seed for that function, chosen so that every evaluation draws the same
noise and scores are comparable across training (common random numbers). The calls differ
in their other arguments (the parameters), and their outputs are collected, not fed back
into the next call. Key reuse is a bug when two consumptions are meant to be independent:
two different samplers on one key, one function called twice with the same arguments and
key (`a = sample(key); b = sample(key)`: two equal "samples"), or a loop that carries its
state through the call and was meant to draw fresh noise each step
(`params = train_step(params, key, batch)`: the same dropout mask every step). So a correct
jaxviz says nothing at warning level about the fixed evaluation key; an info finding would be
allowed only if its fact is true ("every call of eval_loss drew the same noise from eval_key").
"""

from __future__ import annotations

import dataclasses
import functools
import types
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import random

from tests.diagnostics.corpus import HEADER

__all__ = ["HEADER", "PROGRAMS", "Allowed", "Program", "eqx", "nnx", "optax", "perturbations"]


# ================================================================================================
# optax-like: gradient transformations
# ================================================================================================


class GradientTransformation(NamedTuple):
    """A pair of pure functions: init(params) -> state; update(updates, state, params) ->
    (updates, state)."""

    init: Callable
    update: Callable


class EmptyState(NamedTuple):
    pass


class ScaleByAdamState(NamedTuple):
    count: jax.Array  # int32 scalar
    mu: Any
    nu: Any


class ScaleByScheduleState(NamedTuple):
    count: jax.Array


class TraceState(NamedTuple):
    trace: Any


def _safe_increment(count):
    limit = jnp.iinfo(jnp.int32).max
    return jnp.where(count < limit, count + 1, limit)


def _zeros_like_tree(tree):
    return jax.tree.map(jnp.zeros_like, tree)


def scale_by_adam(b1=0.9, b2=0.999, eps=1e-8):
    def init_fn(params):
        return ScaleByAdamState(
            jnp.zeros([], jnp.int32), _zeros_like_tree(params), _zeros_like_tree(params)
        )

    def update_fn(updates, state, params=None):
        del params
        mu = jax.tree.map(lambda g, m: (1 - b1) * g + b1 * m, updates, state.mu)
        nu = jax.tree.map(lambda g, v: (1 - b2) * (g * g) + b2 * v, updates, state.nu)
        count = _safe_increment(state.count)
        c1 = 1 - b1 ** count.astype(jnp.float32)
        c2 = 1 - b2 ** count.astype(jnp.float32)
        updates = jax.tree.map(lambda m, v: (m / c1) / (jnp.sqrt(v / c2) + eps), mu, nu)
        return updates, ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init_fn, update_fn)


def scale(step_size):
    def init_fn(params):
        del params
        return EmptyState()

    def update_fn(updates, state, params=None):
        del params
        return jax.tree.map(lambda g: step_size * g, updates), state

    return GradientTransformation(init_fn, update_fn)


def scale_by_schedule(schedule):
    def init_fn(params):
        del params
        return ScaleByScheduleState(jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None):
        del params
        step_size = schedule(state.count)
        updates = jax.tree.map(lambda g: jnp.asarray(step_size, g.dtype) * g, updates)
        return updates, ScaleByScheduleState(_safe_increment(state.count))

    return GradientTransformation(init_fn, update_fn)


def scale_by_learning_rate(learning_rate):
    if callable(learning_rate):
        return scale_by_schedule(lambda count: -learning_rate(count))
    return scale(-learning_rate)


def trace(decay, nesterov=False):
    def init_fn(params):
        return TraceState(_zeros_like_tree(params))

    def update_fn(updates, state, params=None):
        del params
        new = jax.tree.map(lambda g, t: g + decay * t, updates, state.trace)
        out = jax.tree.map(lambda g, t: g + decay * t, updates, new) if nesterov else new
        return out, TraceState(new)

    return GradientTransformation(init_fn, update_fn)


def add_decayed_weights(weight_decay):
    def init_fn(params):
        del params
        return EmptyState()

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("add_decayed_weights needs the params")
        return jax.tree.map(lambda g, p: g + weight_decay * p, updates, params), state

    return GradientTransformation(init_fn, update_fn)


def global_norm(tree):
    return jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(tree)))


def clip_by_global_norm(max_norm):
    def init_fn(params):
        del params
        return EmptyState()

    def update_fn(updates, state, params=None):
        del params
        g_norm = global_norm(updates)
        trigger = g_norm < max_norm
        # Like optax: the division is computed for every leaf and discarded by the select
        updates = jax.tree.map(
            lambda t: jnp.where(trigger, t, (t / g_norm.astype(t.dtype)) * max_norm), updates
        )
        return updates, state

    return GradientTransformation(init_fn, update_fn)


def chain(*transforms):
    def init_fn(params):
        return tuple(t.init(params) for t in transforms)

    def update_fn(updates, state, params=None):
        new_state = []
        for t, s in zip(transforms, state):
            updates, s = t.update(updates, s, params)
            new_state.append(s)
        return updates, tuple(new_state)

    return GradientTransformation(init_fn, update_fn)


def apply_updates(params, updates):
    return jax.tree.map(
        lambda p, u: jnp.asarray(p + u).astype(jnp.asarray(p).dtype), params, updates
    )


def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8):
    return chain(scale_by_adam(b1, b2, eps), scale_by_learning_rate(learning_rate))


def adamw(learning_rate, weight_decay=1e-4, b1=0.9, b2=0.999, eps=1e-8):
    return chain(
        scale_by_adam(b1, b2, eps),
        add_decayed_weights(weight_decay),
        scale_by_learning_rate(learning_rate),
    )


def sgd(learning_rate, momentum=None):
    parts = [trace(momentum)] if momentum else []
    return chain(*parts, scale_by_learning_rate(learning_rate))


def linear_schedule(init_value, end_value, transition_steps):
    def schedule(count):
        frac = jnp.clip(count / transition_steps, 0.0, 1.0)
        return init_value + frac * (end_value - init_value)

    return schedule


def warmup_cosine_decay_schedule(init_value, peak_value, warmup_steps, decay_steps, end_value=0.0):
    def schedule(count):
        count = count.astype(jnp.float32)
        warm = init_value + (peak_value - init_value) * count / warmup_steps
        frac = jnp.clip((count - warmup_steps) / (decay_steps - warmup_steps), 0.0, 1.0)
        cos = end_value + 0.5 * (peak_value - end_value) * (1 + jnp.cos(jnp.pi * frac))
        return jnp.where(count < warmup_steps, warm, cos)

    return schedule


optax = types.SimpleNamespace(
    GradientTransformation=GradientTransformation,
    EmptyState=EmptyState,
    ScaleByAdamState=ScaleByAdamState,
    scale_by_adam=scale_by_adam,
    scale=scale,
    scale_by_schedule=scale_by_schedule,
    scale_by_learning_rate=scale_by_learning_rate,
    trace=trace,
    add_decayed_weights=add_decayed_weights,
    global_norm=global_norm,
    clip_by_global_norm=clip_by_global_norm,
    chain=chain,
    apply_updates=apply_updates,
    adam=adam,
    adamw=adamw,
    sgd=sgd,
    linear_schedule=linear_schedule,
    warmup_cosine_decay_schedule=warmup_cosine_decay_schedule,
)


# ================================================================================================
# equinox-like: modules are pytrees, filtered transformations
# ================================================================================================


def _field(*, static=False, **kwargs):
    """A Module field; static=True keeps it in the pytree's structure, not in its leaves."""
    return dataclasses.field(metadata={"static": static}, **kwargs)


class Module:
    """Subclasses become frozen dataclasses registered as pytrees: every field is a child
    (arrays, functions, floats alike) except fields marked field(static=True)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True)(cls)
        fields = dataclasses.fields(cls)
        dyn = tuple(f.name for f in fields if not f.metadata.get("static", False))
        sta = tuple(f.name for f in fields if f.metadata.get("static", False))

        def flatten(obj):
            return (
                tuple(getattr(obj, n) for n in dyn),
                tuple(getattr(obj, n) for n in sta),
            )

        def unflatten(aux, children):
            obj = object.__new__(cls)
            for n, v in zip(dyn, children):
                object.__setattr__(obj, n, v)
            for n, v in zip(sta, aux):
                object.__setattr__(obj, n, v)
            return obj

        jax.tree_util.register_pytree_node(cls, flatten, unflatten)


def is_array(x):
    return isinstance(x, (jax.Array, np.ndarray, np.generic))


def is_inexact_array(x):
    return is_array(x) and jnp.issubdtype(x.dtype, jnp.inexact)


def _is_none(x):
    return x is None


def partition(tree, filter_spec):
    """(the leaves filter_spec accepts, the others), each with None in the other's places."""
    dynamic = jax.tree.map(lambda x: x if filter_spec(x) else None, tree)
    static = jax.tree.map(lambda x: None if filter_spec(x) else x, tree)
    return dynamic, static


def combine(*trees):
    def first(*xs):
        return next((x for x in xs if x is not None), None)

    return jax.tree.map(first, *trees, is_leaf=_is_none)


class _StaticOut:
    """A value carried in the pytree structure (no leaves): how filter_jit returns the
    non-array part of an output from a jitted function."""

    def __init__(self, value):
        self.value = value


jax.tree_util.register_pytree_node(
    _StaticOut, lambda s: ((), s.value), lambda value, _: _StaticOut(value)
)


class _Hashable:
    """The static part of the arguments, hashed by its flattened structure and leaves."""

    def __init__(self, tree):
        self.leaves, self.treedef = jax.tree.flatten(tree)
        self.tree = tree

    def __hash__(self):
        return hash((self.treedef, tuple(self.leaves)))

    def __eq__(self, other):
        return (
            isinstance(other, _Hashable)
            and self.treedef == other.treedef
            and self.leaves == other.leaves
        )


def filter_jit(fun=None, *, donate="none"):
    """jax.jit on the array leaves of the arguments; every other leaf (functions, floats,
    strings, static fields) is static. donate: "none"; "all" (donate every array argument,
    and silence JAX's warning about buffers it could not use); "warn" (donate every array
    argument, and let JAX warn)."""
    if fun is None:
        return functools.partial(filter_jit, donate=donate)
    if donate not in ("none", "all", "warn"):
        raise ValueError(f"donate={donate!r}")

    def call(dynamic, static):
        args, kwargs = combine(dynamic, static.tree)
        out = fun(*args, **kwargs)
        dyn_out, static_out = partition(out, is_array)
        return dyn_out, _StaticOut(static_out)

    call.__name__ = getattr(fun, "__name__", "call")
    call.__qualname__ = getattr(fun, "__qualname__", "call")
    jitted = jax.jit(call, static_argnums=1, donate_argnums=0 if donate != "none" else ())

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        dynamic, static = partition((args, kwargs), is_array)
        if donate == "all":
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
                dyn_out, static_out = jitted(dynamic, _Hashable(static))
        else:
            dyn_out, static_out = jitted(dynamic, _Hashable(static))
        return combine(dyn_out, static_out.value)

    return wrapper


def filter_value_and_grad(fun, *, has_aux=False):
    """value_and_grad with respect to the floating-point array leaves of the first argument;
    the gradient has None in the other leaves' places."""

    def wrapper(x, *args, **kwargs):
        diff, nondiff = partition(x, is_inexact_array)

        def inner(d):
            return fun(combine(d, nondiff), *args, **kwargs)

        return jax.value_and_grad(inner, has_aux=has_aux)(diff)

    return wrapper


def eqx_apply_updates(model, updates):
    """model + updates where updates has an array; the rest of the model as it is."""

    def add(u, p):
        return p if u is None else p + u

    return jax.tree.map(add, updates, model, is_leaf=_is_none)


class Linear(Module):
    weight: jax.Array
    bias: jax.Array

    @classmethod
    def make(cls, in_features, out_features, *, key):
        wkey, bkey = random.split(key)
        lim = 1 / np.sqrt(in_features)
        return cls(
            random.uniform(wkey, (out_features, in_features), minval=-lim, maxval=lim),
            random.uniform(bkey, (out_features,), minval=-lim, maxval=lim),
        )

    def __call__(self, x):
        return self.weight @ x + self.bias


class MLP(Module):
    layers: tuple
    activation: Callable  # a leaf that is a function: filter_jit keeps it static
    final_activation: Callable
    width: int = _field(static=True, default=0)

    @classmethod
    def make(cls, in_size, out_size, width, depth, *, key, activation=jax.nn.relu):
        sizes = [in_size] + [width] * depth + [out_size]
        keys = random.split(key, len(sizes) - 1)
        layers = tuple(Linear.make(a, b, key=k) for a, b, k in zip(sizes[:-1], sizes[1:], keys))
        return cls(layers, activation, lambda x: x, width)

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.final_activation(self.layers[-1](x))


eqx = types.SimpleNamespace(
    Module=Module,
    field=_field,
    is_array=is_array,
    is_inexact_array=is_inexact_array,
    partition=partition,
    combine=combine,
    filter_jit=filter_jit,
    filter_value_and_grad=filter_value_and_grad,
    apply_updates=eqx_apply_updates,
    nn=types.SimpleNamespace(Linear=Linear, MLP=MLP),
)


# ================================================================================================
# flax-NNX-like: modules are object graphs of Variables; Rngs are key streams
# ================================================================================================


class Variable:
    """A mutable box for one array, a pytree with one child."""

    def __init__(self, value):
        self.value = value

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        jax.tree_util.register_pytree_node(
            cls, lambda v: ((v.value,), None), lambda _, children: cls(children[0])
        )


class Param(Variable):
    pass


class RngKey(Variable):
    pass


def _is_graph_child(v):
    if isinstance(v, (Variable, NnxModule)):
        return True
    return isinstance(v, (list, tuple)) and any(_is_graph_child(x) for x in v)


class NnxModule:
    """Subclasses are pytrees over their attributes: Variables, sub-modules and lists of
    them are children; every other attribute (rates, flags) is structure."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)

        def flatten(obj):
            names = sorted(vars(obj))
            dyn = tuple(n for n in names if _is_graph_child(vars(obj)[n]))
            sta = tuple((n, vars(obj)[n]) for n in names if n not in dyn)
            return tuple(vars(obj)[n] for n in dyn), (dyn, sta)

        def unflatten(aux, children):
            dyn, sta = aux
            obj = object.__new__(cls)
            obj.__dict__.update(zip(dyn, children))
            obj.__dict__.update(sta)
            return obj

        jax.tree_util.register_pytree_node(cls, flatten, unflatten)

    def iter_modules(self):
        yield self
        for v in vars(self).values():
            for m in v if isinstance(v, (list, tuple)) else [v]:
                if isinstance(m, NnxModule):
                    yield from m.iter_modules()

    def set_attributes(self, **attrs):
        for m in self.iter_modules():
            for k, v in attrs.items():
                if hasattr(m, k):
                    setattr(m, k, v)

    def train(self):
        self.set_attributes(deterministic=False)

    def eval(self):
        self.set_attributes(deterministic=True)


class RngStream(NnxModule):
    """A key stream: each call splits the stream's key and returns a fresh one."""

    def __init__(self, key):
        self.key = RngKey(key)

    def __call__(self):
        self.key.value, sub = random.split(self.key.value)
        return sub

    def fork(self):
        """A new independent stream (for a module that keeps its own)."""
        return RngStream(self())


class Rngs(NnxModule):
    """Named key streams: Rngs(params=0, dropout=1); rngs.params() is a fresh key."""

    def __init__(self, **seeds):
        for name, seed in seeds.items():
            setattr(self, name, RngStream(random.key(seed)))


class NnxLinear(NnxModule):
    def __init__(self, din, dout, *, rngs):
        lim = 1 / np.sqrt(din)
        self.kernel = Param(random.uniform(rngs.params(), (din, dout), minval=-lim, maxval=lim))
        self.bias = Param(jnp.zeros((dout,)))

    def __call__(self, x):
        return x @ self.kernel.value + self.bias.value


class Dropout(NnxModule):
    """Zeroes a fraction `rate` of its input while training, with a fresh key each call from
    its own stream (forked from rngs.dropout; flax NNX shares the Rngs object instead, which
    this pytree-based mock cannot do without two copies drawing the same keys)."""

    def __init__(self, rate, *, rngs):
        self.rate = rate
        self.deterministic = False
        self.rngs = rngs.dropout.fork()

    def __call__(self, x):
        if self.deterministic or self.rate == 0.0:
            return x
        keep = random.bernoulli(self.rngs(), 1.0 - self.rate, x.shape)
        return jnp.where(keep, x / (1.0 - self.rate), 0.0)


class GraphDef(NamedTuple):
    treedef: Any
    kinds: tuple


def _is_variable(x):
    return isinstance(x, Variable)


def nnx_split(module):
    """(graphdef, params, rest): the structure, the Param values, the other Variables' values
    (each a flat list with None in the other's places)."""
    variables, treedef = jax.tree.flatten(module, is_leaf=_is_variable)
    kinds = tuple(type(v) for v in variables)
    params = [v.value if k is Param else None for v, k in zip(variables, kinds)]
    rest = [None if k is Param else v.value for v, k in zip(variables, kinds)]
    return GraphDef(treedef, kinds), params, rest


def nnx_merge(graphdef, params, rest):
    """A new module from split's parts."""
    values = [p if k is Param else r for k, p, r in zip(graphdef.kinds, params, rest)]
    return jax.tree.unflatten(graphdef.treedef, [k(v) for k, v in zip(graphdef.kinds, values)])


def nnx_update(module, params, rest):
    """Writes split's parts back into the module's Variables, in place."""
    variables = jax.tree.leaves(module, is_leaf=_is_variable)
    for v, p, r in zip(variables, params, rest):
        v.value = p if isinstance(v, Param) else r


nnx = types.SimpleNamespace(
    Module=NnxModule,
    Variable=Variable,
    Param=Param,
    RngKey=RngKey,
    RngStream=RngStream,
    Rngs=Rngs,
    Linear=NnxLinear,
    Dropout=Dropout,
    split=nnx_split,
    merge=nnx_merge,
    update=nnx_update,
)


# ================================================================================================
# jaxopt-like: perturbed optimizers (a custom_jvp whose primal and JVP rule sample one key)
# ================================================================================================


def make_perturbed_argmax(argmax_fun: Callable, num_samples: int = 50, sigma: float = 0.1):
    """A differentiable argmax by perturbation: the primal averages argmax_fun over Gumbel
    noise drawn from `rng`; its JVP rule draws the same noise from the same `rng` (the
    estimator needs the primal's samples), as jaxopt's make_perturbed_argmax does."""

    @jax.custom_jvp
    def forward_pert(inputs, rng):
        samples = random.gumbel(rng, (num_samples,) + inputs.shape)
        return jnp.mean(jax.vmap(argmax_fun)(inputs + sigma * samples), axis=0)

    def pert_jvp(tangent, _, inputs, rng):
        samples = random.gumbel(rng, (num_samples,) + inputs.shape)
        output_pert = jax.vmap(argmax_fun)(inputs + sigma * samples)
        nabla_z = samples * 1.0 - jnp.exp(-samples)  # -d/dz log p(z) of a Gumbel
        tangent_flat = jnp.einsum(
            "nd,ne,e->d",
            jnp.reshape(output_pert, (num_samples, -1)),
            jnp.reshape(nabla_z, (num_samples, -1)),
            jnp.reshape(tangent, (-1,)),
        ) / (num_samples * sigma)
        return jnp.reshape(tangent_flat, inputs.shape)

    forward_pert.defjvps(pert_jvp, None)
    return forward_pert


perturbations = types.SimpleNamespace(make_perturbed_argmax=make_perturbed_argmax)


# ================================================================================================
# The programs
# ================================================================================================


@dataclasses.dataclass(frozen=True)
class Allowed:
    """An info finding a correct program may get: its rule, a piece of the code of the line
    it is at, and why the finding's fact is true."""

    rule: str
    code: str
    why: str


@dataclasses.dataclass(frozen=True)
class Program:
    cells: tuple[str, ...]  # notebook cells, run in order in one namespace (HEADER before each)
    info: tuple[Allowed, ...] = ()  # the info findings that may appear, each true
    min_devices: int = 1  # skipped with fewer devices
    what: str = ""  # one line: what the program is


PROGRAMS: dict[str, Program] = {}

# --- optax: a step made by a factory per optimizer config ----------------------------------------
PROGRAMS["optax_factory_step"] = Program(
    what="optax-like adam / adamw (warmup-cosine schedule) / sgd chains; a factory jits one "
    "train step per optimizer, each kept under its own name",
    cells=(
        """
from tests.diagnostics.realcode import optax

def loss_fn(params, batch):
    x, y = batch
    pred = jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"]
    return jnp.mean((pred - y) ** 2)

def make_train_step(loss_fn, optimizer):
    @jax.jit
    def train_step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return train_step

def init_params(key):
    k1, k2 = random.split(key)
    return {"w1": random.normal(k1, (3, 16)) * 0.5, "b1": jnp.zeros(16),
            "w2": random.normal(k2, (16, 1)) * 0.25}
""",
        """
key = random.key(0)
key, k_data, k_init = random.split(key, 3)
x = random.normal(k_data, (64, 3))
y = jnp.sin(x).sum(axis=1, keepdims=True)
params0 = init_params(k_init)

adam = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(3e-2))
schedule = optax.warmup_cosine_decay_schedule(0.0, 3e-2, warmup_steps=2, decay_steps=8)
adamw = optax.adamw(schedule, weight_decay=1e-3)
sgd = optax.sgd(0.1, momentum=0.9)
step_adam = make_train_step(loss_fn, adam)
step_adamw = make_train_step(loss_fn, adamw)
step_sgd = make_train_step(loss_fn, sgd)

finals = {}
runs = [("adam", adam, step_adam), ("adamw", adamw, step_adamw), ("sgd", sgd, step_sgd)]
for name, optimizer, step in runs:
    params, opt_state = params0, optimizer.init(params0)
    for i in range(8):
        params, opt_state, loss = step(params, opt_state, (x, y))
    finals[name] = loss
result = finals
""",
    ),
)

# --- optax: a hyperparameter sweep, one jitted step per learning rate --------------------------
PROGRAMS["optax_lr_sweep"] = Program(
    what="a learning-rate sweep: each config builds its optimizer and its jitted step in a "
    "factory, and trains it for several steps",
    info=(
        Allowed(
            "recompile",
            "params, opt_state, loss = step(params, opt_state, x, y)",
            "each config's step is a new function (the learning rate is a constant in it), "
            "traced once per config: true, and meant in a sweep",
        ),
    ),
    cells=(
        """
from tests.diagnostics.realcode import optax

def make_step(learning_rate):
    optimizer = optax.sgd(learning_rate, momentum=0.9)
    def loss_fn(w, x, y):
        return jnp.mean((x @ w - y) ** 2)
    @jax.jit
    def step(w, opt_state, x, y):
        loss, g = jax.value_and_grad(loss_fn)(w, x, y)
        updates, opt_state = optimizer.update(g, opt_state, w)
        return optax.apply_updates(w, updates), opt_state, loss
    return optimizer, step

k1, k2 = random.split(random.key(1))
x = random.normal(k1, (32, 4))
y = x @ jnp.array([1.0, -2.0, 0.5, 3.0]) + 0.01 * random.normal(k2, (32,))
sweep = {}
for lr in [0.1, 0.03, 0.01]:
    optimizer, step = make_step(lr)
    params = jnp.zeros(4)
    opt_state = optimizer.init(params)
    for _ in range(10):
        params, opt_state, loss = step(params, opt_state, x, y)
    sweep[lr] = loss
best_lr = min(sweep, key=lambda lr: float(sweep[lr]))
result = (sweep, best_lr)
""",
    ),
)

# --- equinox: filter_jit, a Module with a function leaf, a training loop -----------------------
PROGRAMS["eqx_filter_jit"] = Program(
    what="equinox-like MLP Module (activation functions as leaves) trained with filter_jit + "
    "filter_value_and_grad + optax-like adam; filter_jit evaluate and predict",
    cells=(
        """
from tests.diagnostics.realcode import eqx, optax

def loss_fn(model, x, y):
    pred = jax.vmap(model)(x)
    return jnp.mean((pred - y) ** 2)

optimizer = optax.adam(1e-2)

@eqx.filter_jit
def make_step(model, opt_state, x, y):
    loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
    params = eqx.partition(model, eqx.is_inexact_array)[0]
    updates, opt_state = optimizer.update(grads, opt_state, params)
    model = eqx.apply_updates(model, updates)
    return loss, model, opt_state

@eqx.filter_jit
def evaluate(model, x, y):
    return loss_fn(model, x, y)

@eqx.filter_jit
def predict(model, x):
    return jax.vmap(model)(x)
""",
        """
data_key, model_key = random.split(random.key(42))
x = random.normal(data_key, (50, 2))
y = jnp.stack([x[:, 0] * x[:, 1], jnp.cos(x[:, 0])], axis=1)
model = eqx.nn.MLP.make(2, 2, width=16, depth=2, key=model_key, activation=jax.nn.gelu)
opt_state = optimizer.init(eqx.partition(model, eqx.is_inexact_array)[0])
losses = []
for step in range(6):
    loss, model, opt_state = make_step(model, opt_state, x, y)
    losses.append(loss)
final = evaluate(model, x, y)
preds = predict(model, x[:4])
result = (jnp.stack(losses), final, preds, model.layers[0].weight)
""",
    ),
)

# --- equinox: donate="all" on a train state that is the only argument -----------------------
PROGRAMS["eqx_donate_state"] = Program(
    what="equinox-like TrainState Module (model, opt_state, step, data key) donated whole with "
    "filter_jit(donate='all'); each step's batch is drawn from fold_in(key, step)",
    cells=(
        """
from tests.diagnostics.realcode import eqx, optax

class TrainState(eqx.Module):
    model: eqx.nn.MLP
    opt_state: tuple
    step: jax.Array
    data_key: jax.Array

optimizer = optax.sgd(5e-2, momentum=0.9)

def target(x):
    return jnp.sin(3 * x)

@eqx.filter_jit(donate="all")
def train_step(state):
    x = random.uniform(random.fold_in(state.data_key, state.step), (32, 1), minval=-1, maxval=1)
    def loss_fn(model):
        return jnp.mean((jax.vmap(model)(x) - target(x)) ** 2)
    loss, grads = eqx.filter_value_and_grad(loss_fn)(state.model)
    params = eqx.partition(state.model, eqx.is_inexact_array)[0]
    updates, opt_state = optimizer.update(grads, state.opt_state, params)
    model = eqx.apply_updates(state.model, updates)
    return TrainState(model, opt_state, state.step + 1, state.data_key), loss
""",
        """
model_key, data_key = random.split(random.key(7))
model = eqx.nn.MLP.make(1, 1, width=8, depth=1, key=model_key, activation=jnp.tanh)
state = TrainState(model, optimizer.init(eqx.partition(model, eqx.is_inexact_array)[0]),
                   jnp.zeros((), jnp.int32), data_key)
history = []
for _ in range(5):
    state, loss = train_step(state)
    history.append(float(loss))
result = (history, state.step, state.model.layers[-1].bias)
""",
    ),
)

# --- flax NNX: Dropout with its own key stream, split/merge around jit -------------------------
PROGRAMS["nnx_dropout_mlp"] = Program(
    what="flax-NNX-like MLP with Dropout holding a key stream (a fresh split per call), trained "
    "with split/merge around a jitted step; eval() turns dropout off",
    cells=(
        """
from functools import partial
from tests.diagnostics.realcode import nnx

class MLP(nnx.Module):
    def __init__(self, din, dhidden, dout, *, rngs):
        self.linear1 = nnx.Linear(din, dhidden, rngs=rngs)
        self.dropout1 = nnx.Dropout(0.2, rngs=rngs)
        self.linear2 = nnx.Linear(dhidden, dhidden, rngs=rngs)
        self.dropout2 = nnx.Dropout(0.2, rngs=rngs)
        self.out = nnx.Linear(dhidden, dout, rngs=rngs)

    def __call__(self, x):
        x = self.dropout1(jax.nn.relu(self.linear1(x)))
        x = self.dropout2(jax.nn.relu(self.linear2(x)))
        return self.out(x)

@partial(jax.jit, static_argnums=0)
def train_step(graphdef, params, rest, x, y):
    def loss_fn(params):
        model = nnx.merge(graphdef, params, rest)
        loss = jnp.mean((model(x) - y) ** 2)
        return loss, nnx.split(model)[2]
    (loss, rest), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    params = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
    return params, rest, loss

@partial(jax.jit, static_argnums=0)
def predict(graphdef, params, rest, x):
    return nnx.merge(graphdef, params, rest)(x)
""",
        """
model = MLP(4, 32, 1, rngs=nnx.Rngs(params=0, dropout=1))
xs = random.normal(random.key(100), (64, 4))
ys = jnp.sum(xs ** 2, axis=1, keepdims=True)
graphdef, params, rest = nnx.split(model)
losses = []
for _ in range(5):
    params, rest, loss = train_step(graphdef, params, rest, xs, ys)
    losses.append(loss)
nnx.update(model, params, rest)
model.eval()
eval_graphdef, params, rest = nnx.split(model)
preds = predict(eval_graphdef, params, rest, xs[:8])
result = (jnp.stack(losses), preds)
""",
    ),
)

# --- flax linen: init/apply with an rngs dict, eval_shape before init with the same key --------
PROGRAMS["linen_dropout_apply"] = Program(
    what="flax-linen-like init/apply: eval_shape(init, key) for shapes, then init with the same "
    "key; a dropout key split off per step, fold_in per layer",
    cells=(
        """
from functools import partial

class MLPDef:
    def __init__(self, sizes, rate):
        self.sizes, self.rate = sizes, rate

    def init(self, key, x):
        keys = random.split(key, len(self.sizes))
        sizes = [x.shape[-1]] + list(self.sizes)
        return [{"kernel": random.normal(k, (a, b)) / jnp.sqrt(a), "bias": jnp.zeros(b)}
                for k, a, b in zip(keys, sizes[:-1], sizes[1:])]

    def apply(self, params, x, *, train=False, rngs=None):
        for i, layer in enumerate(params):
            x = x @ layer["kernel"] + layer["bias"]
            if i < len(params) - 1:
                x = jax.nn.relu(x)
                if train:
                    k = random.fold_in(rngs["dropout"], i)
                    keep = random.bernoulli(k, 1 - self.rate, x.shape)
                    x = jnp.where(keep, x / (1 - self.rate), 0.0)
        return x

model = MLPDef([32, 32, 3], rate=0.1)

@jax.jit
def train_step(params, x, labels, dropout_key):
    def loss_fn(params):
        logits = model.apply(params, x, train=True, rngs={"dropout": dropout_key})
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, 3), -1))
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss

@jax.jit
def accuracy(params, x, labels):
    return jnp.mean(jnp.argmax(model.apply(params, x), -1) == labels)
""",
        """
key = random.key(0)
key, init_key, data_key = random.split(key, 3)
x = random.normal(data_key, (96, 5))
labels = jnp.argmax(x[:, :3], axis=-1)
shapes = jax.eval_shape(model.init, init_key, x[:1])
n_params = sum(np.prod(s.shape) for s in jax.tree.leaves(shapes))
params = model.init(init_key, x[:1])
for step in range(6):
    key, dropout_key = random.split(key)
    params, loss = train_step(params, x, labels, dropout_key)
acc = accuracy(params, x, labels)
result = (int(n_params), loss, acc)
""",
    ),
)

# --- a training loop with a fixed evaluation key -------------------------------------------------
PROGRAMS["fixed_eval_key"] = Program(
    what="a VAE-style stochastic objective: fresh keys for every train step, one fixed eval key "
    "for every evaluation (common random numbers, so eval scores compare)",
    info=(
        Allowed(
            "key-reuse",
            "eval_losses.append(eval_loss(params, eval_key, x_val))",
            "every call of eval_loss draws the same noise from eval_key: true, and the point "
            "of a fixed evaluation key (an info fact, never a warning)",
        ),
    ),
    cells=(
        """
latent = 2

def encode(params, x):
    h = jnp.tanh(x @ params["enc"])
    return h[:, :latent], h[:, latent:]

def neg_elbo(params, key, x):
    mean, log_std = encode(params, x)
    eps = random.normal(key, mean.shape)
    z = mean + jnp.exp(log_std) * eps
    recon = z @ params["dec"]
    kl = 0.5 * jnp.sum(jnp.exp(2 * log_std) + mean ** 2 - 1 - 2 * log_std, axis=-1)
    return jnp.mean(jnp.sum((recon - x) ** 2, axis=-1) + kl)

@jax.jit
def train_step(params, key, x):
    loss, grads = jax.value_and_grad(neg_elbo)(params, key, x)
    return jax.tree.map(lambda p, g: p - 0.02 * g, params, grads), loss

eval_loss = jax.jit(neg_elbo)
""",
        """
key = random.key(0)
key, k_enc, k_dec, k_data, k_val = random.split(key, 5)
params = {"enc": 0.3 * random.normal(k_enc, (6, 2 * latent)),
          "dec": 0.3 * random.normal(k_dec, (latent, 6))}
x_train = random.normal(k_data, (128, 6))
x_val = random.normal(k_val, (32, 6))
eval_key = random.key(1234)  # fixed on purpose: every evaluation sees the same noise
eval_losses = []
for step in range(9):
    key, step_key = random.split(key)
    params, loss = train_step(params, step_key, x_train)
    if step % 3 == 0:
        eval_losses.append(eval_loss(params, eval_key, x_val))
result = (jnp.stack(eval_losses), loss)
""",
    ),
)

# --- a data-loading loop: numpy batches through jnp.asarray ------------------------------------
PROGRAMS["numpy_data_loader"] = Program(
    what="a numpy data pipeline (shuffle, batch, drop_last for training) feeding a jitted step "
    "with jnp.asarray; evaluation keeps the last, smaller batch",
    info=(
        Allowed(
            "recompile",
            "eval_step(w, jnp.asarray(xb), jnp.asarray(yb))",
            "the last evaluation batch is smaller (18 rows, not 32), so eval_step is traced once "
            "more for its shape: true, and meant (one more shape is info by design)",
        ),
    ),
    cells=(
        """
rng = np.random.default_rng(0)
w_true = rng.normal(size=(8,)).astype(np.float32)
X = rng.normal(size=(256, 8)).astype(np.float32)
Y = X @ w_true + 0.1 * rng.normal(size=(256,)).astype(np.float32)
X_test = rng.normal(size=(50, 8)).astype(np.float32)
Y_test = X_test @ w_true

def batches(X, Y, batch_size, rng=None, drop_last=True):
    idx = np.arange(len(X))
    if rng is not None:
        rng.shuffle(idx)
    for start in range(0, len(X), batch_size):
        b = idx[start:start + batch_size]
        if drop_last and len(b) < batch_size:
            return
        yield X[b], Y[b]

@jax.jit
def train_step(w, xb, yb):
    loss, g = jax.value_and_grad(lambda w: jnp.mean((xb @ w - yb) ** 2))(w)
    return w - 0.1 * g, loss

@jax.jit
def eval_step(w, xb, yb):
    return jnp.sum((xb @ w - yb) ** 2)
""",
        """
w = jnp.zeros(8)
epoch_losses = []
for epoch in range(3):
    total = 0.0
    for xb, yb in batches(X, Y, 32, rng=rng):
        w, loss = train_step(w, jnp.asarray(xb), jnp.asarray(yb))
        total += float(loss)
    epoch_losses.append(total)
sse = sum(float(eval_step(w, jnp.asarray(xb), jnp.asarray(yb)))
          for xb, yb in batches(X_test, Y_test, 32, drop_last=False))
w_np = np.asarray(w)
result = (epoch_losses, sse / len(X_test), w_np)
""",
    ),
)

# --- vmap / grad exploration ---------------------------------------------------------------------
PROGRAMS["vmap_grad_explore"] = Program(
    what="notebook exploration: grad of grad, vmap of grad, jacfwd/jacrev/hessian, jvp, "
    "linearize, vjp, an ensemble initialised with vmap over split keys",
    cells=(
        """
def f(x):
    return jnp.sin(x) * x ** 2

xs = jnp.linspace(-2.0, 2.0, 9)
slope = jax.vmap(jax.grad(f))(xs)
curvature = jax.vmap(jax.grad(jax.grad(f)))(xs)

def g(v):
    return jnp.stack([v[0] * v[1], jnp.exp(v[2]) - v[0], jnp.tanh(v).sum()])

v = jnp.array([0.5, -1.0, 0.25])
J_fwd = jax.jacfwd(g)(v)
J_rev = jax.jacrev(g)(v)
y, tangent = jax.jvp(g, (v,), (jnp.ones(3),))
y_lin, g_lin = jax.linearize(g, v)
y_vjp, g_vjp = jax.vjp(g, v)
cotangent, = g_vjp(jnp.array([1.0, 0.0, -1.0]))
""",
        """
def loss(w, x, y):
    return jnp.mean((jnp.tanh(x @ w) - y) ** 2)

H = jax.hessian(loss)(jnp.full(3, 0.1), jnp.eye(3), jnp.ones(3))

def init(key):
    return random.normal(key, (3,)) * 0.1

ensemble = jax.vmap(init)(random.split(random.key(3), 5))
x = random.normal(random.key(4), (10, 3))
y = jnp.tanh(x.sum(axis=1))
per_member = jax.jit(jax.vmap(jax.grad(loss), in_axes=(0, None, None)))(ensemble, x, y)
per_example = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(ensemble[0], x[:, None, :], y[:, None])
result = (slope, curvature, J_fwd - J_rev, tangent, g_lin(jnp.ones(3)), cotangent, H,
          per_member, per_example)
""",
    ),
)

# --- a lax.scan RNN ------------------------------------------------------------------------------
PROGRAMS["scan_gru"] = Program(
    what="a GRU over lax.scan, vmapped over a batch, trained with jit(value_and_grad); sampling "
    "carries the key through the scan",
    cells=(
        """
from functools import partial

def gru_cell(p, h, x):
    z = jax.nn.sigmoid(x @ p["Wz"] + h @ p["Uz"])
    r = jax.nn.sigmoid(x @ p["Wr"] + h @ p["Ur"])
    n = jnp.tanh(x @ p["Wn"] + (r * h) @ p["Un"])
    return (1 - z) * n + z * h

def run(p, xs):
    def step(h, x):
        h = gru_cell(p, h, x)
        return h, h @ p["out"]
    _, ys = lax.scan(step, jnp.zeros(p["Uz"].shape[0]), xs, unroll=2)
    return ys

def loss(p, xs, ys):
    return jnp.mean((jax.vmap(run, in_axes=(None, 0))(p, xs) - ys) ** 2)

@jax.jit
def train_step(p, xs, ys):
    l, g = jax.value_and_grad(loss)(p, xs, ys)
    return jax.tree.map(lambda a, b: a - 0.1 * b, p, g), l

@partial(jax.jit, static_argnums=3)
def sample(p, key, x0, length):
    def step(carry, _):
        key, h, x = carry
        key, sub = random.split(key)
        h = gru_cell(p, h, x)
        y = h @ p["out"] + 0.05 * random.normal(sub, (1,))
        return (key, h, jnp.broadcast_to(y, x.shape)), y
    _, ys = lax.scan(step, (key, jnp.zeros(p["Uz"].shape[0]), x0), length=length)
    return ys
""",
        """
H, D = 12, 2
names = ["Wz", "Wr", "Wn", "Uz", "Ur", "Un", "out"]
shapes = [(D, H)] * 3 + [(H, H)] * 3 + [(H, 1)]
keys = random.split(random.key(0), len(names) + 1)
p = {n: 0.3 * random.normal(k, s) for n, k, s in zip(names, keys[:-1], shapes)}
t = jnp.linspace(0, 4 * jnp.pi, 20)
phase = random.uniform(keys[-1], (8, 1))
xs = jnp.stack([jnp.sin(t + phase), jnp.cos(t + phase)], axis=-1)
ys = jnp.sin(t + phase + 0.3)[..., None]
for _ in range(4):
    p, l = train_step(p, xs, ys)
path = sample(p, random.key(9), jnp.zeros(D), 10)
result = (l, path)
""",
    ),
)

# --- a sharded data-parallel step on a mesh ------------------------------------------------------
PROGRAMS["sharded_step"] = Program(
    what="data parallelism: a mesh over all devices, batch sharded on 'data', params "
    "replicated, jit with in/out shardings and a donated param tree",
    min_devices=2,
    cells=(
        """
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("data",))
replicated = NamedSharding(mesh, P())
by_batch = NamedSharding(mesh, P("data"))

def loss_fn(params, x, y):
    h = jax.nn.relu(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)

def step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads), loss

p_step = jax.jit(step, in_shardings=(replicated, by_batch, by_batch),
                 out_shardings=(replicated, replicated), donate_argnums=0)
""",
        """
n = len(jax.devices())
k1, k2, k3 = random.split(random.key(0), 3)
params = jax.device_put({"w1": 0.3 * random.normal(k1, (4, 16)),
                         "w2": 0.3 * random.normal(k2, (16, 1))}, replicated)
x = jax.device_put(random.normal(k3, (8 * n, 4)), by_batch)
y = jax.device_put(jnp.sum(x, axis=1, keepdims=True), by_batch)
for _ in range(4):
    params, loss = p_step(params, x, y)
result = (loss, jax.device_get(params["w2"]))
""",
    ),
)

# --- remat ---------------------------------------------------------------------------------------
PROGRAMS["remat_policies"] = Program(
    what="rematerialisation: jax.checkpoint with a saveable-dots policy, checkpoint_name with "
    "save_only_these_names, remat with a static argument, a checkpointed scan body",
    cells=(
        """
from functools import partial
from jax.ad_checkpoint import checkpoint_name

@partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
def mlp_block(p, x):
    h = jax.nn.gelu(x @ p["w1"])
    return x + h @ p["w2"]

@partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("attn"))
def attn_block(p, x):
    s = checkpoint_name(jax.nn.softmax(x @ x.T / jnp.sqrt(x.shape[-1])), "attn")
    return x + s @ (x @ p["wv"])

@partial(jax.remat, static_argnums=(2,))
def repeated(p, x, n):
    for _ in range(n):
        x = jnp.tanh(x @ p["wr"])
    return x

def model(stack, extra, x):
    def body(x, p):
        return jax.checkpoint(lambda x: attn_block(p, mlp_block(p, x)), prevent_cse=False)(x), None
    x, _ = lax.scan(body, x, stack)
    return jnp.mean(repeated(extra, x, 3) ** 2)
""",
        """
d = 8
ks = random.split(random.key(5), 5)
stack = {"w1": 0.2 * random.normal(ks[0], (3, d, 2 * d)),
         "w2": 0.2 * random.normal(ks[1], (3, 2 * d, d)),
         "wv": 0.2 * random.normal(ks[2], (3, d, d))}
extra = {"wr": 0.3 * random.normal(ks[3], (d, d))}
x = random.normal(ks[4], (6, d))
value, (g_stack, g_extra) = jax.jit(jax.value_and_grad(model, argnums=(0, 1)))(stack, extra, x)
result = (value, g_stack, g_extra)
""",
    ),
)

# --- lax.cond / lax.switch branches with keys ----------------------------------------------------
PROGRAMS["cond_branch_keys"] = Program(
    what="data augmentation: keys split per example, lax.cond / lax.switch branches each "
    "drawing from their key, a train flag as a traced bool for dropout",
    cells=(
        """
def augment(key, x):
    k_flip, k_choice, k_noise = random.split(key, 3)
    x = lax.cond(random.bernoulli(k_flip, 0.5), lambda x: x[::-1], lambda x: x, x)
    branches = [
        lambda k, x: x + 0.1 * random.normal(k, x.shape),
        lambda k, x: x * random.uniform(k, x.shape, minval=0.9, maxval=1.1),
        lambda k, x: jnp.roll(x, random.randint(k, (), 0, x.shape[0])),
    ]
    return lax.switch(random.randint(k_choice, (), 0, 3), branches, k_noise, x)

def dropout(key, x, rate, train):
    def on(x):
        keep = random.bernoulli(key, 1 - rate, x.shape)
        return jnp.where(keep, x / (1 - rate), 0.0)
    return lax.cond(train, on, lambda x: x, x)

@jax.jit
def forward(w, key, xs, train):
    k_aug, k_drop = random.split(key)
    xs = jax.vmap(augment)(random.split(k_aug, xs.shape[0]), xs)
    h = dropout(k_drop, jnp.tanh(xs @ w), 0.25, train)
    return h.sum(axis=1)
""",
        """
key = random.key(11)
key, kw, kx = random.split(key, 3)
w = random.normal(kw, (6, 4))
xs = random.normal(kx, (5, 6))
train_outs = []
for step in range(3):
    key, sub = random.split(key)
    train_outs.append(forward(w, sub, xs, True))
key, sub = random.split(key)
eval_out = forward(w, sub, xs, False)
result = (jnp.stack(train_outs), eval_out)
""",
    ),
)

# --- donate_argnums on a train state, every donated buffer reusable ------------------------------
PROGRAMS["donate_train_state"] = Program(
    what="a NamedTuple TrainState donated with donate_argnums=0 (every buffer has an output to "
    "land in), rebound each step; the best params copied out; keys fold_in(base, step) "
    "per step at the top level",
    cells=(
        """
from functools import partial
from typing import NamedTuple

class TrainState(NamedTuple):
    step: jax.Array
    params: dict
    mu: dict
    nu: dict

def loss_fn(params, x, y, key):
    keep = random.bernoulli(key, 0.9, (x.shape[0], 1))
    pred = jnp.where(keep, x @ params["w"] + params["b"], 0.0)
    return jnp.mean((pred - jnp.where(keep, y, 0.0)) ** 2)

@partial(jax.jit, donate_argnums=0)
def train_step(state, x, y, key):
    loss, g = jax.value_and_grad(loss_fn)(state.params, x, y, key)
    step = state.step + 1
    mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, state.mu, g)
    nu = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, state.nu, g)
    t = step.astype(jnp.float32)
    params = jax.tree.map(
        lambda p, m, v: p - 0.05 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8),
        state.params, mu, nu)
    return TrainState(step, params, mu, nu), loss
""",
        """
kx, kw = random.split(random.key(3))
x = random.normal(kx, (40, 5))
y = x @ jnp.arange(1.0, 6.0)[:, None]
params = {"w": 0.1 * random.normal(kw, (5, 1)), "b": jnp.zeros(1)}
zeros = jax.tree.map(jnp.zeros_like, params)
state = TrainState(jnp.zeros((), jnp.int32), params, zeros, jax.tree.map(jnp.zeros_like, params))
base_key = random.key(99)
best_loss, best_params = float("inf"), None
for i in range(6):
    state, loss = train_step(state, x, y, random.fold_in(base_key, i))
    if float(loss) < best_loss:
        best_loss = float(loss)
        best_params = jax.tree.map(jnp.copy, state.params)
final = loss_fn(state.params, x, y, random.fold_in(base_key, 1000))
result = (best_loss, best_params, final, state.step)
""",
    ),
)

# --- MCMC: chains vmapped over split keys, keys carried through scan -----------------------------
PROGRAMS["mcmc_chains"] = Program(
    what="random-walk Metropolis: keys carried through lax.scan, four chains vmapped over "
    "split keys, initial points from another split",
    cells=(
        """
def log_prob(x):
    return -0.5 * jnp.sum(x ** 2) - 0.1 * jnp.sum(x ** 4)

def run_chain(key, x0, n_steps, scale):
    def step(carry, _):
        key, x, lp = carry
        key, k_prop, k_acc = random.split(key, 3)
        prop = x + scale * random.normal(k_prop, x.shape)
        lp_prop = log_prob(prop)
        accept = jnp.log(random.uniform(k_acc)) < lp_prop - lp
        x = jnp.where(accept, prop, x)
        lp = jnp.where(accept, lp_prop, lp)
        return (key, x, lp), (x, accept)
    _, (xs, acc) = lax.scan(step, (key, x0, log_prob(x0)), None, length=n_steps)
    return xs, acc.mean()

sample = jax.jit(jax.vmap(run_chain, in_axes=(0, 0, None, None)), static_argnums=(2,))
""",
        """
key = random.key(2024)
k_init, k_run = random.split(key)
x0 = random.normal(k_init, (4, 2)) * 2.0
xs, acceptance = sample(random.split(k_run, 4), x0, 50, 0.8)
result = (xs.mean(axis=(0, 1)), acceptance)
""",
    ),
)

# --- flax TrainState: a struct dataclass with static apply_fn / tx, an rng carried in it ---------
PROGRAMS["flax_trainstate"] = Program(
    what="flax-like struct.dataclass TrainState (apply_fn and tx static, a dropout rng split "
    "inside the step), apply_gradients, donated with donate_argnums=0",
    cells=(
        """
import dataclasses
from functools import partial
from typing import Any, Callable
from tests.diagnostics.realcode import optax

def struct_dataclass(cls):
    cls = dataclasses.dataclass(frozen=True)(cls)
    data = [f.name for f in dataclasses.fields(cls) if f.metadata.get("pytree_node", True)]
    meta = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("pytree_node", True)]
    jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
    return cls

def static_field():
    return dataclasses.field(metadata={"pytree_node": False})

@struct_dataclass
class TrainState:
    step: jax.Array
    params: Any
    opt_state: Any
    rng: jax.Array
    apply_fn: Callable = static_field()
    tx: Any = static_field()

    @classmethod
    def create(cls, *, apply_fn, params, tx, rng):
        return cls(jnp.zeros((), jnp.int32), params, tx.init(params), rng, apply_fn, tx)

    def apply_gradients(self, *, grads, **changes):
        updates, opt_state = self.tx.update(grads, self.opt_state, self.params)
        return dataclasses.replace(self, step=self.step + 1, opt_state=opt_state,
                                   params=optax.apply_updates(self.params, updates), **changes)

def apply_fn(params, x, *, dropout_rng=None):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    if dropout_rng is not None:
        h = jnp.where(random.bernoulli(dropout_rng, 0.9, h.shape), h / 0.9, 0.0)
    return h @ params["w2"]

@partial(jax.jit, donate_argnums=0)
def train_step(state, batch):
    rng, dropout_rng = random.split(state.rng)
    def loss_fn(params):
        pred = state.apply_fn(params, batch["x"], dropout_rng=dropout_rng)
        return jnp.mean((pred - batch["y"]) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads, rng=rng), loss

@jax.jit
def eval_step(state, batch):
    return jnp.mean((state.apply_fn(state.params, batch["x"]) - batch["y"]) ** 2)
""",
        """
root = random.key(0)
k_params, k_data, k_dropout = random.split(root, 3)
k1, k2 = random.split(k_params)
params = {"w1": 0.4 * random.normal(k1, (3, 24)), "b1": jnp.zeros(24),
          "w2": 0.2 * random.normal(k2, (24, 1))}
x = random.normal(k_data, (48, 3))
batch = {"x": x, "y": jnp.prod(x, axis=1, keepdims=True)}
state = TrainState.create(apply_fn=apply_fn, params=params,
                          tx=optax.adamw(1e-2, weight_decay=1e-4), rng=k_dropout)
for _ in range(5):
    state, loss = train_step(state, batch)
val = eval_step(state, batch)
result = (loss, val, state.step, state.params["w2"])
""",
    ),
)

# --- MC-dropout evaluation: a fixed eval key split the same way at every evaluation ------------
PROGRAMS["mc_dropout_eval"] = Program(
    what="MC-dropout uncertainty: each evaluation splits the fixed eval key into the same 8 "
    "sample keys and vmaps a dropout forward pass over them; training keys split per step",
    info=(
        Allowed(
            "key-reuse",
            "sample_keys = random.split(eval_key, 8)",
            "every evaluation splits eval_key into the same 8 keys, which reach only "
            "mc_predict (its params change, its results are collected): true, and meant (the "
            "same dropout masks at each evaluation make the uncertainty estimates comparable)",
        ),
    ),
    cells=(
        """
def forward(params, key, x, rate=0.3):
    h = jnp.tanh(x @ params["w1"])
    keep = random.bernoulli(key, 1 - rate, h.shape)
    return jnp.where(keep, h / (1 - rate), 0.0) @ params["w2"]

@jax.jit
def train_step(params, key, x, y):
    loss, g = jax.value_and_grad(lambda p: jnp.mean((forward(p, key, x) - y) ** 2))(params)
    return jax.tree.map(lambda p, g: p - 0.05 * g, params, g), loss

@jax.jit
def mc_predict(params, keys, x):
    preds = jax.vmap(forward, in_axes=(None, 0, None))(params, keys, x)
    return preds.mean(axis=0), preds.std(axis=0)
""",
        """
key = random.key(5)
key, k1, k2, kx = random.split(key, 4)
params = {"w1": 0.5 * random.normal(k1, (2, 32)), "w2": 0.2 * random.normal(k2, (32, 1))}
x = random.normal(kx, (64, 2))
y = jnp.sin(x[:, :1]) * x[:, 1:]
x_val = x[:16]
eval_key = random.key(2)
uncertainty = []
for step in range(6):
    key, sub = random.split(key)
    params, loss = train_step(params, sub, x, y)
    if step % 2 == 1:
        sample_keys = random.split(eval_key, 8)
        mean, std = mc_predict(params, sample_keys, x_val)
        uncertainty.append(std.mean())
result = (jnp.stack(uncertainty), mean)
""",
    ),
)

# --- LLM-style sampling: top-k filtering puts -inf in the logits, on purpose ----------------------
PROGRAMS["topk_sampling"] = Program(
    what="autoregressive sampling: top-k filtering sets the other logits to -inf (kept, with "
    "their -inf log-probabilities), a fresh key per token from split",
    cells=(
        """
vocab, d = 12, 8

def logits_fn(params, token):
    return jnp.tanh(params["embed"][token]) @ params["unembed"]

@jax.jit
def top_k_filter(logits, k):
    kth = jnp.sort(logits)[-k]
    return jnp.where(logits < kth, -jnp.inf, logits)

@jax.jit
def sample_next(params, key, token, temperature):
    logits = top_k_filter(logits_fn(params, token) / temperature, 4)
    return random.categorical(key, logits), jax.nn.log_softmax(logits)
""",
        """
k_e, k_u, key = random.split(random.key(8), 3)
params = {"embed": random.normal(k_e, (vocab, d)), "unembed": random.normal(k_u, (d, vocab))}
token = jnp.int32(0)
tokens, logprobs = [], []
for _ in range(6):
    key, sub = random.split(key)
    token, logprob = sample_next(params, sub, token, 0.8)
    tokens.append(int(token))
    logprobs.append(logprob)
filtered = top_k_filter(logits_fn(params, token), 4)
result = (tokens, jnp.stack(logprobs), filtered)
""",
    ),
)

# --- logging from inside jit: jax.debug.print and a host callback collecting metrics --------------
PROGRAMS["debug_callbacks"] = Program(
    what="logging from a jitted train step: jax.debug.print every step and jax.debug.callback "
    "appending the loss to a host-side list (its prints compared too)",
    cells=(
        """
metrics = []

def log_metrics(step, loss):
    metrics.append((int(step), float(loss)))

@jax.jit
def train_step(w, step, x, y):
    loss, g = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    jax.debug.print("step {s}: loss {l:.4f}", s=step, l=loss)
    jax.debug.callback(log_metrics, step, loss)
    return w - 0.1 * g
""",
        """
x = random.normal(random.key(1), (20, 3))
y = x @ jnp.array([0.5, -1.0, 2.0])
w = jnp.zeros(3)
for step in range(4):
    w = train_step(w, step, x, y)
jax.effects_barrier()
result = (w, metrics)
""",
    ),
)

# --- NaN as the missing-value marker of the input data -------------------------------------------
PROGRAMS["missing_data_nan"] = Program(
    what="a dataset with NaN marking missing targets (as pandas/numpy data has): masked loss "
    "with isnan and a safe where, nanmean baseline; every computed value is finite",
    cells=(
        """
rng = np.random.default_rng(3)
X_np = rng.normal(size=(60, 4)).astype(np.float32)
Y_np = (X_np @ np.array([1.0, 0.5, -1.0, 2.0], np.float32)).astype(np.float32)
Y_np[rng.random(60) < 0.25] = np.nan  # missing observations

@jax.jit
def masked_loss(w, x, y):
    observed = ~jnp.isnan(y)
    y_safe = jnp.where(observed, y, 0.0)
    err = jnp.where(observed, x @ w - y_safe, 0.0)
    return jnp.sum(err ** 2) / jnp.maximum(observed.sum(), 1)

grad_step = jax.jit(lambda w, x, y: w - 0.1 * jax.grad(masked_loss)(w, x, y))
""",
        """
x = jnp.asarray(X_np)
y = jnp.asarray(Y_np)
baseline = jnp.nanmean(y)
w = jnp.zeros(4)
for _ in range(20):
    w = grad_step(w, x, y)
filled = jnp.where(jnp.isnan(y), x @ w, y)
result = (masked_loss(w, x, y), baseline, filled)
""",
    ),
)

# --- ahead-of-time compilation for a benchmark ---------------------------------------------------
PROGRAMS["aot_benchmark"] = Program(
    what="a benchmark: jit(step).lower(...).compile(), cost analysis, then the compiled "
    "executable called in a timing loop with block_until_ready",
    cells=(
        """
import time

def step(w, x):
    return w - 0.01 * jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w)

w = jnp.ones((64, 64)) * 0.01
x = jnp.ones((32, 64))
lowered = jax.jit(step).lower(w, x)
compiled = lowered.compile()
cost = compiled.cost_analysis()
times = []
for _ in range(3):
    t0 = time.perf_counter()
    w = jax.block_until_ready(compiled(w, x))
    times.append(time.perf_counter() - t0)
result = w
""",
    ),
)


# --- a fixed evaluation key closed over by a jitted evaluate (a flax MNIST example's shape) ----
PROGRAMS["closed_eval_key"] = Program(
    what="a classifier: fresh keys for each training step's dropout, one fixed evaluation key "
    "that the jitted evaluate closes over and splits at every call; the scores are collected",
    info=(
        Allowed(
            "key-reuse",
            "random.split(test_rng)",
            "evaluate draws the same numbers from test_rng at each call: true, and what a "
            "fixed evaluation key is for (its scores compare); the results are only collected",
        ),
    ),
    cells=(
        """
test_rng = random.key(1)  # fixed prng key for evaluation

def predict(params, x, key, rate):
    h = jnp.tanh(x @ params["w1"])
    keep = random.bernoulli(key, 1.0 - rate, h.shape)
    return jnp.where(keep, h / (1.0 - rate), 0.0) @ params["w2"]

def loss_fn(params, x, y, key, rate):
    return jnp.mean((predict(params, x, key, rate) - y) ** 2)

@jax.jit
def train_step(params, x, y, key):
    grads = jax.grad(loss_fn)(params, x, y, key, 0.2)
    return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)

@jax.jit
def evaluate(params, x, y):
    eval_rng, _ = random.split(test_rng)
    return loss_fn(params, x, y, eval_rng, 0.0)
""",
        """
key = random.key(0)
key, k1, k2, kx = random.split(key, 4)
params = {"w1": 0.3 * random.normal(k1, (5, 8)), "w2": 0.3 * random.normal(k2, (8, 2))}
x = random.normal(kx, (64, 5))
y = jnp.stack([x[:, 0] - x[:, 1], x[:, 2]], axis=1)
scores = []
for epoch in range(3):
    key, step_key = random.split(key)
    params = train_step(params, x, y, step_key)
    scores.append(evaluate(params, x, y))
result = jnp.stack(scores)
""",
    ),
)

# --- one test problem from one key for two solvers (a lineax / optimistix benchmark) ------------
PROGRAMS["solver_benchmark_same_problem"] = Program(
    what="a benchmark: a well-conditioned linear system built from a key by make_problem, "
    "solved by a direct and an iterative solver, each rebuilding the problem from the same key",
    info=(
        Allowed(
            "key-reuse",
            "iterative = solve_iterative(key)",
            "both solvers draw their problem from the same key through make_problem: true, "
            "and the point (one test problem for both)",
        ),
    ),
    cells=(
        """
def make_problem(key, n=16):
    ka, kb = random.split(key)
    a = random.normal(ka, (n, n)) / jnp.sqrt(n)
    return a @ a.T + n * jnp.eye(n), random.normal(kb, (n,))

@jax.jit
def solve_direct(key):
    a, b = make_problem(key)
    return jnp.linalg.solve(a, b)

@jax.jit
def solve_iterative(key):
    a, b = make_problem(key)
    return jax.scipy.sparse.linalg.cg(lambda v: a @ v, b, tol=1e-10)[0]
""",
        """
key = random.key(42)
direct = solve_direct(key)
iterative = solve_iterative(key)
result = (direct, jnp.max(jnp.abs(direct - iterative)))
""",
    ),
)

# --- jaxopt's perturbations: a custom_jvp whose primal and JVP rule sample one key -------------
PROGRAMS["perturbed_argmax"] = Program(
    what="a perturbed (differentiable) argmax in jaxopt's image: its value and its gradient "
    "through a custom_jvp whose primal and JVP rule sample the same key, eagerly and jitted",
    info=(
        Allowed(
            "key-reuse",
            "pert_argmax(theta, rng)",
            "the custom_jvp's primal and its JVP rule sample the same key: true, and by "
            "design (the estimator needs the primal's noise)",
        ),
    ),
    cells=(
        """
from tests.diagnostics.realcode import perturbations

def one_hot_argmax(x):
    return jax.nn.one_hot(jnp.argmax(x), x.shape[0])

pert_argmax = perturbations.make_perturbed_argmax(one_hot_argmax, num_samples=50, sigma=0.5)
rng = random.key(0)
target = jnp.array([0.0, 1.0, 0.0])

def loss(theta):
    return jnp.sum((pert_argmax(theta, rng) - target) ** 2)

loss_and_grad = jax.jit(jax.value_and_grad(loss))
""",
        """
theta = jnp.array([0.3, 0.2, 0.25])
value, grad = loss_and_grad(theta)
grad_eager = jax.grad(loss)(theta)
result = (value, grad, grad_eager)
""",
    ),
)

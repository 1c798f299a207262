"""Recompile findings that say enough and hint at the fix that fits (issue 45, items 7, 8,
14 and 15): a static argument whose class compares by identity, the hints of an
int-then-float number, an int-then-float array and a shape change, a library function
jitted through a new `functools.partial` at each iteration, a static function that changed
beside another argument, and two pytrees shown where they differ."""

from __future__ import annotations

import warnings

import jaxviz
from jaxviz.diagnostics.rules import RULES

HEAD = "import functools, dataclasses\nimport jax, jax.numpy as jnp\n"
HINT = RULES["recompile"]


def recompiles(source: str, name: str) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ct = jaxviz.trace_cell(HEAD + source, filename=f"<{name}>")
    assert ct.error is None, ct.error
    return [d for d in ct.diagnostics if d.rule == "recompile"]


def one(source: str, name: str):
    found = recompiles(source, name)
    assert len(found) == 1, [d.format() for d in found]
    return found[0]


def test_a_static_class_without_eq_is_named_with_the_trace_count():
    d = one("""
class Hparams:
    def __init__(self, lr):
        self.lr = lr
@functools.partial(jax.jit, static_argnames=("hp",))
def step(x, hp):
    return x - hp.lr * x
x = jnp.ones(3)
for i in range(4):
    x = step(x, Hparams(0.1))
""", "identity")
    assert "(4 traces in this cell" in d.message, d.message
    assert "the static argument `hp` is a new `Hparams` object at each call" in d.message
    assert "defines no `__eq__`/`__hash__`" in d.message and "by identity" in d.message
    assert "object at 0x" not in d.message  # no repr cut mid-address
    assert d.hint == HINT.hint_for("static-identity")
    assert "dataclasses.dataclass(frozen=True)" in d.hint and "before the loop" in d.hint


def test_a_frozen_dataclass_static_argument_is_traced_once():
    assert recompiles("""
@dataclasses.dataclass(frozen=True)
class Hparams:
    lr: float
@functools.partial(jax.jit, static_argnames=("hp",))
def step(x, hp):
    return x - hp.lr * x
x = jnp.ones(3)
for i in range(4):
    x = step(x, Hparams(0.1))
""", "frozen") == []


def test_each_change_gets_the_hint_that_fits():
    found = recompiles("""
@jax.jit
def scale(x, lr):
    return x * lr
for step in range(3):
    y = scale(jnp.ones(3), 2 ** -step)
@jax.jit
def total(x):
    return x.sum()
a = total(jnp.array([1, 2, 3]))
b = total(jnp.array([1., 2., 3.]))
@jax.jit
def batch_loss(b):
    return (b ** 2).mean()
for n in (8, 8, 5):
    l = batch_loss(jnp.ones((n, 2)))
""", "hints")
    by_line = {d.line: d for d in found}
    assert set(by_line) == {8, 13, 18}, [d.format() for d in found]
    assert "`lr` was a Python int, then a Python float" in by_line[8].message
    assert by_line[8].hint == HINT.hint_for("python-number") and "2.0 ** -step" in by_line[8].hint
    assert "`x` changed dtype: i32[3] -> f32[3]" in by_line[13].message
    assert by_line[13].hint == HINT.hint_for("dtype") and "dtype=jnp.float32" in by_line[13].hint
    assert "`b` changed shape: f32[8,2] -> f32[5,2]" in by_line[18].message
    assert by_line[18].hint == HINT.hint_for("shape")
    for d in found:
        assert "lambda" not in d.hint, d.hint  # not the "new lambda" hint


def test_a_library_function_jitted_through_a_new_partial_each_iteration():
    """jax.jit(partial(gmres, ...)) rebuilt in a loop: 5 traces in 5 iterations."""
    d = one("""
from jax.scipy.sparse.linalg import gmres
A = jnp.eye(4) * 2.0
b = jnp.ones(4)
for i in range(5):
    solve = jax.jit(functools.partial(gmres, lambda v: A @ v, tol=1e-6))
    x, info = solve(b)
""", "gmres")
    assert d.line == 9 and d.severity == "warning"
    assert "gmres is traced again at each call here (5 traces" in d.message, d.message
    assert "new functools.partial object at each call" in d.message
    assert d.hint == HINT.hint  # jit it once


def test_a_static_function_that_changed_is_named_beside_the_other_argument():
    d = one("""
from jax.tree_util import Partial
@jax.jit
def run(op, x):
    return op(x)
def double(v): return v * 2
def triple(v): return v * 3
a = run(Partial(double), jnp.ones(3))
b = run(Partial(triple), jnp.ones(4))
""", "partial")
    assert "`op` (a `Partial`) changed its static fields: `double` -> `triple`" in d.message
    assert "`x` changed shape: f32[3] -> f32[4]" in d.message, d.message
    assert "PyTreeDef" not in d.message


def test_two_pytrees_are_shown_where_they_first_differ():
    d = one("""
@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Layer:
    w: jax.Array
    b: jax.Array | None
@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Model:
    layers: list
    head: Layer
@jax.jit
def fwd(m, x):
    return x * 2
full = [Layer(jnp.ones(2), jnp.ones(2)) for _ in range(6)]
y1 = fwd(Model(full, Layer(jnp.ones(2), None)), 1.0)
y2 = fwd(Model(full[:5] + [Layer(jnp.ones(2), None)], Layer(jnp.ones(2), None)), 1.0)
""", "tree")
    assert "`m.layers[5].b` was an array, then None" in d.message, d.message
    assert "PyTreeDef" not in d.message
    assert d.hint == HINT.hint_for("structure")

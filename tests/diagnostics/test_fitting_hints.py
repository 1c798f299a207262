"""Hints and shapes that fit the user's code (issue 45, items 8 and 9): `lax.dynamic_slice`
is not offered a `mode=` it does not have; a donated array read after a call whose result has
its own name is told to read the old value first or not to donate, not to rebind; an
out-of-bounds index inside `jax.vmap` names the user's unbatched shape."""

from __future__ import annotations

import warnings

import pytest

import jaxviz
from jaxviz.diagnostics.rules import RULES

HEAD = "import jax, jax.numpy as jnp\nfrom jax import lax\n"


def found(source: str, name: str, rule: str) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX's own donation notes
        ct = jaxviz.trace_cell(HEAD + source, filename=f"<{name}>")
    return [d for d in ct.diagnostics if d.rule == rule]


def test_dynamic_slice_is_not_offered_mode():
    (d,) = found(
        "z = jax.jit(lambda x: lax.dynamic_slice(x, (5,), (3,)))(jnp.arange(6.0))\n",
        "slice",
        "out-of-bounds",
    )
    assert "a slice of 3 starting at 5 does not fit axis 0 of size 6 (f32[6])" in d.message
    assert d.hint == RULES["out-of-bounds"].hint_for("slice")
    assert "mode=" not in d.hint.split("(dynamic_slice has no mode=")[1]
    assert "jnp.pad" in d.hint


def test_a_gather_keeps_the_mode_hint():
    (d,) = found("y = jax.jit(lambda x: x.at[7].set(1.))(jnp.zeros(5))\n", "scatter",
                 "out-of-bounds")
    assert d.hint == RULES["out-of-bounds"].hint and "mode='drop'" in d.hint


@pytest.mark.parametrize(
    "call",
    ["jax.vmap(last)(jnp.ones((2, 6)))", "jax.jit(jax.vmap(jax.vmap(last)))(jnp.ones((3, 2, 6)))"],
    ids=["eager-vmap", "jit-vmap-vmap"],
)
def test_an_index_under_vmap_names_the_user_s_shape(call):
    (d,) = found(f"def last(window):\n    return window[-7]\ny = {call}\n", "vmap",
                 "out-of-bounds")
    assert d.line == 4
    assert "index -7 is out of bounds for axis 0 of size 6 (f32[6])" in d.message, d.message
    assert "f32[2,6]" not in d.message and "f32[3,2,6]" not in d.message


def test_reading_the_old_value_after_donating_it_is_told_to_read_it_first():
    (d,) = found(
        "step = jax.jit(lambda p: p * 0.9, donate_argnums=0)\n"
        "params = jnp.ones(4)\n"
        "new = step(params)\n"
        "change = new - params\n",
        "old",
        "use-after-donate",
    )
    assert d.line == 6 and "`params` (f32[4]) was donated" in d.message
    assert d.hint == RULES["use-after-donate"].hint_for("old-value")
    assert "rebind" not in d.hint.lower() and "without donate_argnums" in d.hint


def test_a_dropped_result_is_told_to_rebind():
    (d,) = found(
        "step = jax.jit(lambda p: p * 0.9, donate_argnums=0)\n"
        "params = jnp.ones(4)\n"
        "step(params)\n"
        "total = params.sum()\n",
        "dropped",
        "use-after-donate",
    )
    assert d.hint == RULES["use-after-donate"].hint and "params = step(params)" in d.hint

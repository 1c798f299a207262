"""Messages that keep the fix in view: short argument lists, places named as the user
names them, the real reason a donation is unusable, jaxviz's notes in its own views; NaN
rule gaps (deliberate fill values, jax_debug_nans); the out-of-bounds rule."""
from __future__ import annotations

import warnings

import jaxviz

PARAMS = """
params = {"embed": jnp.ones(3), "head": jnp.ones(2),
          "layers": [{"attn": {"wq": jnp.ones(2), "wo": jnp.ones(2)}, "mlp": jnp.ones(2)}
                     for _ in range(14)]}
"""


def cell(source: str, name: str = "cell"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX's own donation UserWarning
        return jaxviz.trace_cell("import jax, jax.numpy as jnp\n" + source,
                                 filename=f"<{name}>")


def only(ct, rule: str):
    found = [d for d in ct.diagnostics if d.rule == rule]
    assert len(found) == 1, [d.format() for d in ct.diagnostics]
    return found[0]


# --- 7a: a long list of argument paths folds ---------------------------------------------------

def test_long_argument_lists_fold_by_their_root():
    ct = cell(PARAMS + """
@jax.jit
def loss(params, x):
    total = sum(jnp.sum(p) for p in jax.tree_util.tree_leaves(params))
    if total + x > 0:
        return total
    return -total
loss(params, 1.0)
""", "fold")
    d = only(ct, "tracer-bool")
    assert "it depends on arguments params (44 arrays) and x)" in d.message, d.message
    assert "params['layers'][0]" not in d.message
    assert "good: y = jnp.where(x > 0, x, 0.0)" in str(ct)          # the hint stays in view


def test_short_argument_lists_stay_as_they_are():
    ct = cell("""
def pick(p):
    if p["a"].sum() + p["b"][1].sum() > 0:
        return 1.0
    return 0.0
jax.jit(pick)({"a": jnp.ones(2), "b": [jnp.ones(2), jnp.ones(2)]})
""", "short")
    d = only(ct, "tracer-bool")
    assert "it depends on arguments p['a'] and p['b'][1])" in d.message, d.message


# --- 7b: jaxviz.trace in a notebook names the cell -----------------------------------------------

def test_trace_in_a_plain_cell_names_cells_as_the_user_does(ip, capsys):
    ip.run_cell("import jax, jax.numpy as jnp, jaxviz", store_history=True)
    n = ip.execution_count
    ip.run_cell("def f(x):\n    if x > 0:\n        return x\n    return -x\n", store_history=True)
    ip.run_cell("t = jaxviz.trace(f, 1.0)\nprint(t)\n", store_history=True)
    printed = capsys.readouterr().out
    assert f"cell [{n}]:2: error: tracer-bool: `if x > 0:`" in printed, printed
    (d,) = ip.user_ns["t"].diagnostics
    assert d.format().startswith(f"cell [{n}]:2: error: tracer-bool")
    from jaxviz.view.payload import build_payload
    t = ip.user_ns["t"]
    payload = build_payload([t], t.diagnostics)
    assert payload["traces"][0]["diagnostics"][0]["filename"] == f"cell [{n}]"


# --- 7c: the real reason a donation is unusable ---------------------------------------------------

def test_donation_unusable_names_the_argument_that_took_the_output():
    ct = cell("""
def add(x, y):
    return x + y
x, y = jnp.ones((2, 3)), jnp.ones((2, 3))
z = jax.jit(add, donate_argnums=(0, 1))(x, y)
""", "donate")
    d = only(ct, "donation-unusable")
    assert d.line == 6
    assert "`y` (f32[2,3]) is donated to add but cannot be reused: `x` already takes the " \
           "only f32[2,3] output" in d.message, d.message
    assert "no output has its shape" not in d.message

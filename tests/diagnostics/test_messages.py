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


# --- 7d: jaxviz's notes go to its view and text twin, not the cell's stdout ----------------------

def test_not_run_notes_are_in_the_view_not_the_cells_output(ip, capsys):
    from IPython.core.displaypub import CapturingDisplayPublisher

    from tests.test_widget_payload import decode_fragment
    ip.run_cell("import jax, jax.numpy as jnp\nfrom jax import lax\n"
                "@jax.jit\ndef halve(n):\n"
                "    return lax.while_loop(lambda c: c > 1, lambda c: c // 2, n)\n")
    capsys.readouterr()
    pub, ip.display_pub = ip.display_pub, CapturingDisplayPublisher()
    try:
        r = ip.run_cell("%%jaxtrace -o ct --compare\nprint('user output')\nk = halve(64)\n")
        outputs = list(ip.display_pub.outputs)
    finally:
        ip.display_pub = pub
    assert r.success
    assert capsys.readouterr().out == "user output\n"                # nothing of jaxviz's
    ct = ip.user_ns["ct"]
    note = ct.memory_of("halve").note
    assert note.startswith("not run on synthesised inputs: its while_loop could run forever")
    assert f"memory:\n  halve: {note}" in str(ct)                     # the text twin
    (view,) = outputs
    assert f"halve: {note}" in view["data"]["text/plain"]
    (entry,) = decode_fragment(view["data"]["text/html"])["memory"]   # the memory tab
    assert entry == {"trace": "halve", "live": "", "summary": None, "note": note}


# --- 8a: a NaN the program chose (a fill value) is no finding -------------------------------------

def test_a_nan_fill_value_is_the_programs_own_constant():
    ct = cell("""
y = jnp.arange(10.).at[11].get(mode='fill', fill_value=jnp.nan)
f = jax.jit(lambda x: x.at[11].get(mode='fill', fill_value=jnp.nan) * 2)
z = f(jnp.arange(10.))
w = jnp.arange(10.).at[12].get(mode='fill', fill_value=-jnp.inf)
""", "fill")
    assert ct.error is None and ct.diagnostics == [], [d.format() for d in ct.diagnostics]
    ct = cell("""
f = jax.jit(lambda x: x.at[11].get(mode='fill', fill_value=0.) + jnp.log(x - 20.))
z = f(jnp.arange(10.))
""", "fill_and_log")
    d = only(ct, "nan")                     # a NaN the program did not choose still is one
    assert d.line == 3 and "NaN from `log`" in d.message, d.message


# --- 8a': the fix the hint shows fits the finding: overflow, or masking a gradient ------------

def test_the_nan_hint_fits_how_the_value_went_bad():
    from jaxviz.diagnostics.rules import RULES

    rule = RULES["nan"]
    overflow = cell("""
@jax.jit
def attend(q, k):
    s = (q @ k.T).astype(jnp.bfloat16)
    e = jnp.exp(s * 8.0)
    return e / e.sum(axis=-1, keepdims=True)
p = attend(jnp.ones((4, 16)) * 2.0, jnp.ones((4, 16)) * 2.0)
inf = jnp.exp(jnp.linspace(0.0, 100.0, 4))
""", "overflow")
    found = {d.line: d for d in overflow.diagnostics if d.rule == "nan"}
    assert set(found) == {7, 9}, [d.format() for d in overflow.diagnostics]
    assert "`exp` at" in found[7].message and found[7].severity == "error", found[7].message
    assert found[9].severity == "warning", found[9].format()  # an Inf from finite values
    assert found[7].hint == found[9].hint == rule.hint_for("overflow")
    assert "jax.nn.softmax" in found[7].hint
    domain = cell("r = jnp.sqrt(jnp.linspace(-1.0, 1.0, 4))\n", "domain")  # no Inf on the way
    assert only(domain, "nan").hint == rule.hint_for("domain")  # keep the input >= 0
    grad = cell("""
def norm(x):
    return jnp.sqrt(jnp.sum(x ** 2))
g = jax.grad(norm)(jnp.zeros(3))
""", "grad")
    assert only(grad, "nan").hint == rule.hint  # masking: the gradient's fix


# --- 8b: jax_debug_nans' FloatingPointError is a nan finding at the user's line -------------------

def test_jax_debug_nans_stop_names_the_op_and_the_line():
    import jax
    before = jax.config.jax_debug_nans
    jax.config.update("jax_debug_nans", True)
    try:
        ct = cell("""
def spread(x):
    y = -3 * x ** 2
    return jnp.log(y)
f = jax.jit(spread)
out = f(5.)
""", "debug_nans")
        issue = cell("y = jax.jit(lambda x: jnp.log(-3 * x ** 2))(5.)\n", "debug_nans_issue")
        eager = cell("""
x = jnp.float32(-3.)
y = jax.lax.log(x)
""", "debug_nans_eager")
    finally:
        jax.config.update("jax_debug_nans", before)
    assert isinstance(ct.error, FloatingPointError)         # the cell fails as without jaxviz
    d = only(ct, "nan")
    assert (d.filename, d.line, d.severity) == ("<debug_nans>", 5, "error")
    assert d.message.startswith(
        "`return jnp.log(y)`: NaN from `log` of a negative value here (in spread)")
    assert "jax_debug_nans stopped the call with FloatingPointError" in d.message
    assert d.related == (("<debug_nans>", 7, "called here"),)
    d = only(issue, "nan")                                  # the issue's own example
    assert d.line == 2 and "NaN from `log` of a negative value here (in <lambda>)" in d.message
    assert isinstance(eager.error, FloatingPointError)
    d = only(eager, "nan")                                  # an eager op: JAX's own frames
    assert (d.line, d.severity) == (4, "error")
    assert d.message.startswith("`y = jax.lax.log(x)`: NaN from `log` of a negative value here: "
                                "jax_debug_nans "
                                "stopped the program with FloatingPointError")


# --- 10: out-of-bounds ----------------------------------------------------------------------------

def node_op(t, node_id: str) -> str:
    body, node = (int(p) for p in node_id.split(":"))
    return t.graph.bodies[body].nodes[node].op


def test_out_of_bounds_indices_known_at_trace_time():
    import jax.numpy as jnp

    from jaxviz.diagnostics.diagnostic import RULES
    assert "out-of-bounds" in RULES

    def read(x):
        return x[10]

    def write(x):
        return x.at[7].set(1.)

    t = jaxviz.trace(read, jnp.arange(5.))
    (d,) = t.diagnostics
    assert (d.rule, d.severity, d.line) == ("out-of-bounds", "warning",
                                            read.__code__.co_firstlineno + 1)
    assert d.message == ("`return x[10]`: index 10 is out of bounds for axis 0 of size 5 "
                         "(f32[5]) in read: JAX does not raise; `dynamic_slice` clamps it, so "
                         "this reads element 4.")
    assert "bad:  x = jnp.zeros(5); x = x.at[7].set(1.)" in d.hint
    assert [node_op(t, n) for n in d.node_ids] == ["dynamic_slice"]
    t = jaxviz.trace(write, jnp.arange(5.))
    (d,) = t.diagnostics
    assert "index 7 is out of bounds for axis 0 of size 5 (f32[5]) in write: JAX does not " \
           "raise; `scatter` drops the update, so it changes nothing." in d.message
    assert [node_op(t, n) for n in d.node_ids] == ["scatter"]


def test_out_of_bounds_in_a_cell_eager_and_jitted():
    ct = cell("""
x = jnp.arange(5.)
a = x[10]
b = x.at[7].set(1.)
f = jax.jit(lambda v: v[jnp.array([8, 9])])
c = f(x)
""", "oob")
    got = [(d.rule, d.line) for d in ct.diagnostics]
    assert got == [("out-of-bounds", 6), ("out-of-bounds", 4), ("out-of-bounds", 5)], got
    by_line = {d.line: d for d in ct.diagnostics}
    assert "`gather` clamps it, so this reads element 4" in by_line[6].message
    assert "`dynamic_slice` clamps it" in by_line[4].message
    ops = {d.line: node_op(next(t for t in ct.traces if d in t.diagnostics), d.node_ids[0])
           for d in ct.diagnostics}
    assert ops == {4: "dynamic_slice", 5: "scatter", 6: "gather"}   # each trace's indexing node


def test_no_out_of_bounds_for_in_range_negative_traced_or_chosen_modes():
    ct = cell("""
x = jnp.arange(5.)
a = x[-1] + x[-5] + x[4]
b = x.at[-1].set(0.).at[4].add(1.)
c = x.at[7].get(mode='fill')
d = x.at[7].set(1., mode='drop')
e = x.at[11].get(mode='fill', fill_value=jnp.nan)
@jax.jit
def g(v, i):
    return v[-1] + v[i] + v.at[9].get(mode='clip') + v[jnp.array([0, -5])].sum()
h = g(x, 7)
k = x.at[jnp.array([0, 5])].add(1.)                  # one padding index among in-range ones
""", "oob_clean")
    assert ct.error is None and ct.diagnostics == [], [d.format() for d in ct.diagnostics]

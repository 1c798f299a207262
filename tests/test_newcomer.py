"""The small things a newcomer reads (issue 46), where no browser is needed: a long signature
folded by aval, idle devices folded in the chart's summary, donation told with the graph's
output names, an eager statement's inputs without made-up names, a failing cell's traceback
line, and no project text citing files outside the project."""
from __future__ import annotations

import pathlib
import re
import types

import jax
import jax.numpy as jnp

import jaxviz
from jaxviz.capture.cell import magic_line_back
from jaxviz.format import fold_avals
from jaxviz.view.chart import lane_summary
from jaxviz.view.text import trace_header

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_a_long_signature_is_folded_by_aval():
    assert fold_avals(["~f32[3,5]"] * 400 + ["f32[2,3]"]) == "400 x ~f32[3,5], f32[2,3]"
    assert fold_avals(["f32[3]", "f32[4]"], ["x", "w"]) == "x: f32[3], w: f32[4]"
    # a step over 400 parameters: its header is one short line
    params = [jnp.ones((3, 5)) for _ in range(400)]
    t = jaxviz.trace(jax.jit(lambda ps, x: sum(p.sum() for p in ps) * x), params, jnp.ones((2, 3)))
    head = trace_header(t)
    assert "400 x f32[3,5], f32[2,3]" in head and head.count("f32[3,5]") == 1, head[:300]
    # a short one keeps its names
    t2 = jaxviz.trace(jax.jit(lambda x, w: x @ w), jnp.ones((2, 3)), jnp.ones((3, 4)))
    assert "(x: f32[2,3], w: f32[3,4])" in trace_header(t2)


def test_the_chart_summary_folds_devices_that_held_nothing():
    lane = lambda i, src="live_arrays": types.SimpleNamespace(  # noqa: E731
        id=f"cpu:{i}" if src != "rss" else "rss", label=f"cpu:{i} live JAX arrays" if src != "rss" else "RSS", source=src)
    lanes = [lane(i) for i in range(8)] + [lane(0, "rss")]
    peaks = {"cpu:0": 80.0, "rss": 2.0**20, **{f"cpu:{i}": 0.0 for i in range(1, 8)}}
    assert lane_summary(lanes, peaks) == "cpu:0 live JAX arrays: peak 80 B, RSS: peak 1.0 MiB; 7 more devices: no arrays"
    assert lane_summary(lanes[:1], {"cpu:0": 0.0}) == "cpu:0 live JAX arrays: peak 0 B"


def test_the_chart_summary_folds_devices_whose_peaks_agree():
    lane = lambda i, src="live_arrays": types.SimpleNamespace(  # noqa: E731
        id=f"cpu:{i}" if src != "rss" else "rss", label=f"cpu:{i} live JAX arrays" if src != "rss" else "RSS", source=src)
    lanes = [lane(i) for i in range(8)] + [lane(0, "rss")]
    mib = 2.0**20
    # a data-parallel step: every device held the same (the default one a few scalars more)
    peaks = {"rss": 600 * mib, **{f"cpu:{i}": 5.6 * mib for i in range(8)}}
    peaks["cpu:0"] += 8
    assert lane_summary(lanes, peaks) == "cpu:0-7 live JAX arrays: peak 5.6 MiB each, RSS: peak 600.0 MiB"
    # the arrays made on the default device before device_put: it stands apart
    peaks["cpu:0"] = 4.8 * mib
    assert lane_summary(lanes, peaks) == (
        "cpu:0 live JAX arrays: peak 4.8 MiB, cpu:1-7 live JAX arrays: peak 5.6 MiB each, RSS: peak 600.0 MiB")
    # with their readings: equal peaks reached along different curves stay apart, as in the chart
    peaks["cpu:0"] = 5.6 * mib
    readings = {f"cpu:{i}": [0.0, 5.6 * mib] for i in range(8)} | {"cpu:0": [1.0 * mib, 5.6 * mib]}
    assert lane_summary(lanes, peaks, readings) == (
        "cpu:0 live JAX arrays: peak 5.6 MiB, cpu:1-7 live JAX arrays: peak 5.6 MiB each, RSS: peak 600.0 MiB")
    peaks["cpu:0"] = 4.8 * mib
    peaks.update({"cpu:2": 0.0, "cpu:4": 0.0, "cpu:6": 0.0})
    assert lane_summary(lanes, peaks) == ("cpu:0 live JAX arrays: peak 4.8 MiB, cpu:1 … cpu:7 (4 devices) "
                                          "live JAX arrays: peak 5.6 MiB each, RSS: peak 600.0 MiB; 3 more devices: no arrays")


DONATE = '''import jax, jax.numpy as jnp
from functools import partial
@partial(jax.jit, donate_argnums=(0,))
def step(params, opt, x):
    g = jax.tree.map(lambda p: p * x.sum(), params)
    return jax.tree.map(lambda p, q: p - q, params, g), opt + 1, (x ** 2).sum()
params = {"w": jnp.ones((64, 64)), "b": jnp.ones(64)}
opt = jnp.zeros((64, 64))
params, opt, loss = step(params, opt, jnp.ones(3))
'''


def test_donation_names_the_outputs_as_the_graph_does():
    ct = jaxviz.trace_cell(DONATE)
    (t,) = [t for t in ct.traces if t.name == "step"]
    outs = [t.graph.body.nodes[i].op for i in t.graph.body.outputs]
    assert outs == ["params['b']", "params['w']", "opt", "loss"]
    r = t.compile()
    assert [o.path for o in r.outputs] == outs
    by_arg = {d.path: d for d in r.donations}
    assert by_arg["params['w']"].aliased_to == "params['w']"
    assert by_arg["opt"].hint == "donate it to let opt reuse its buffer"
    assert "out[" not in str(r)
    # a function traced outside a cell has no caller's names: its outputs keep their paths
    plain = jaxviz.trace(jax.jit(lambda x: (x + 1, x * 2), donate_argnums=0), jnp.ones(4)).compile()
    assert [o.path for o in plain.outputs] == ["out[0]", "out[1]"]


def test_an_eager_statements_inputs_are_not_named_in0():
    ct = jaxviz.trace_cell("import jax.numpy as jnp\nx = jnp.ones(4)\ny = jnp.sin(x) * 2\n")
    eager = [t for t in ct.traces if t.kind == "eager"]
    assert eager
    for t in eager:
        names = [t.graph.body.nodes[i].op for i in t.graph.body.inputs]
        assert not any(re.fullmatch(r"in\d+", n or "") for n in names), names


def test_a_traceback_line_is_the_magic_as_written():
    stb = ["\x1b[31mValueError\x1b[0m  Traceback",
           "Cell In[3], line 3\n\x1b[92m      1\x1b[39m \x1b[38mget_ipython\x1b[39m()\x1b[38m.\x1b[39mrun_line_magic("
           "\x1b[38m'\x1b[39mjaxtrace\x1b[38m'\x1b[39m, \x1b[38m'\x1b[39m-q\x1b[38m'\x1b[39m)\n      2 z = 1\n"]
    out = magic_line_back(stb, "%%jaxtrace -q")
    assert out[0] == stb[0]
    assert out[1].split("\n")[1] == "      1 %%jaxtrace -q"
    assert out[1].split("\n")[2] == "      2 z = 1"
    assert magic_line_back(stb, "") == stb


def test_no_project_text_cites_a_file_outside_the_project():
    """notebooks, docs, the README and jaxviz's docstrings name only files a clone has."""
    texts = [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("docs/*.md"), ROOT / "README.md",
             *ROOT.glob("jaxviz/**/*.py")]
    cited = [(p.relative_to(ROOT), m.group(0)) for p in texts
             for m in re.finditer(r"shared/[A-Za-z_]+\.md", p.read_text())]
    assert cited == []


DONATING = '''import jax, jax.numpy as jnp
from functools import partial
@partial(jax.jit, donate_argnums=(0, 1))
def step(w, m, x):
    g = x.T @ jnp.tanh(x @ w)
    return w - 0.1 * g, 0.9 * m + g
w, m = step(jnp.ones((512, 512)), jnp.zeros((512, 512)), jnp.ones((256, 512)))
'''


def test_the_out_of_memory_hint_fits_the_step_as_written():
    """A step that donates both its state arguments is not told to donate them; the finding
    gives the bytes at the peak by category, which its five largest buffers do not add up to."""
    with jaxviz.options.using(memory_limit=1 << 20):
        ct = jaxviz.trace_cell(DONATING)
    (d,) = [d for d in ct.diagnostics if d.rule == "out-of-memory"]
    assert "donate_arg" not in d.hint, d.hint
    assert "`w`, `m` are donated already" in d.hint
    assert "By category: " in d.message and "donated argument 2.0 MiB (2)" in d.message
    # the memory tab's first lines say the same: donated now, nothing more to donate
    t = next(t for t in ct.traces if t.name == "step")
    from jaxviz.memory.report import summary_lines
    lines = summary_lines(t.memory(what_if=False))
    assert lines[1][0].startswith("donating `w`, `m` saves ") and "now" in lines[1][0]
    assert lines[2][0] == "donating more would save nothing"


TREE_MAP = '''import jax, jax.numpy as jnp
def adam_update(p, g, m):
    m = 0.9 * m + 0.1 * g
    return p - 0.01 * m, m
def layer(p, x):
    return jax.nn.relu(x @ p["w"] + p["b"])
@jax.jit
def step(params, grads, ms, layers, x):
    for p in layers:
        x = layer(p, x)
    return jax.tree.map(adam_update, params, grads, ms), x
params = {"a": jnp.ones(3), "b": jnp.ones((2, 2)), "c": [jnp.ones(4), jnp.ones(5)]}
layers = [{"w": jnp.ones((4, 4)), "b": jnp.ones(4)} for _ in range(3)]
out = step(params, params, params, layers, jnp.ones((2, 4)))
'''


def test_a_per_leaf_call_is_named_by_its_leaf_a_layer_by_its_index():
    """`jax.tree.map(adam_update, params, ...)` calls adam_update once per leaf: each call is
    labelled by the leaf it updates (`adam_update['c'][0]`), not `adam_update[2]`; a loop over
    layers keeps `layer[1]` (the layer's leaves differ only in the layer's index)."""
    ct = jaxviz.trace_cell(TREE_MAP)
    (t,) = [t for t in ct.traces if t.name == "step"]
    labels = [g.label for b in t.graph.bodies for g in b.groups]
    assert [x for x in labels if x.startswith("adam_update")] == [
        "adam_update['a']", "adam_update['b']", "adam_update['c'][0]", "adam_update['c'][1]"]
    assert [x for x in labels if x.startswith("layer")] == ["layer[0]", "layer[1]", "layer[2]"]

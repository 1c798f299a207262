"""jaxviz.compare: the diff model and its text twin, on real traces of two MLPs."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest

import jaxviz
from jaxviz.format import fmt_bytes, human
from jaxviz.graph.compare import diff_graphs, uses

B, D_IN, D_OUT = 8, 4, 2


def layer(p, x):
    return jax.nn.relu(x @ p["w"] + p["b"])


def mlp(params, x):
    for p in params:
        x = layer(p, x)
    return x


def params(*hidden):
    widths = (D_IN, *hidden, D_OUT)
    return [{"w": jnp.ones((a, b)), "b": jnp.ones(b)} for a, b in zip(widths[:-1], widths[1:])]


def traced(*hidden):
    return jaxviz.trace(mlp, params(*hidden), jnp.ones((B, D_IN)))


@pytest.fixture(scope="module")
def wider():
    """The first hidden layer 16 -> 32 wide; the rest as it was."""
    a, b = traced(16, 16), traced(32, 16)
    return a, b, jaxviz.compare(a, b)


def _own_cost(t, path):
    """FLOPs of the leaf equations under `path`, read off the trace's own graph."""
    return sum(u.node.flops * u.times for u in uses(t.graph)
               if u.leaf and (u.path == path or u.path.startswith(path + " > ")))


def test_groups_say_which_layers_changed_and_by_how_much(wider):
    a, b, c = wider
    status = {g.path: g.status for g in c.diff.groups}
    assert status == {"mlp": "changed", "mlp > layer[0]": "changed",
                      "mlp > layer[1]": "changed", "mlp > layer[2]": "same"}
    for g in c.diff.groups:
        assert g.flops_a == _own_cost(a, g.path) and g.flops_b == _own_cost(b, g.path)
    g0 = c.diff.group("mlp > layer[0]")
    # x @ w: 2*B*D_IN*width; + b and relu: B*width each
    assert g0.flops_b - g0.flops_a == (2 * B * D_IN + 2 * B) * (32 - 16)
    g2 = c.diff.group("mlp > layer[2]")
    assert (g2.flops_a, g2.bytes_a) == (g2.flops_b, g2.bytes_b) and g2.changed == 0


def test_changed_nodes_carry_their_types_and_params(wider):
    _, _, c = wider
    d = c.diff
    assert d.count("added") == d.count("removed") == 0
    assert {n.path for n in d.nodes} == {"mlp > layer[0]", "mlp > layer[1]"}
    (dot0,) = [n for n in d.nodes if n.path == "mlp > layer[0]" and n.op == "dot_general"]
    assert (dot0.ins_a, dot0.ins_b) == (("f32[8,4]", "f32[4,16]"), ("f32[8,4]", "f32[4,32]"))
    assert (dot0.out_a, dot0.out_b) == (("f32[8,16]",), ("f32[8,32]",))
    (bc,) = [n for n in d.nodes if n.path == "mlp > layer[0]" and n.op == "broadcast_in_dim"]
    assert any("16" in p for p in bc.params_a) and any("32" in p for p in bc.params_b)
    # layer[1] reads the wider activations; its output is as it was
    (dot1,) = [n for n in d.nodes if n.path == "mlp > layer[1]"]
    assert dot1.op == "dot_general" and dot1.out_a == dot1.out_b == ("f32[8,16]",)
    assert dot1.ins_b == ("f32[8,32]", "f32[32,16]")
    assert d.same + len(d.nodes) == len(uses(c.a.graph))


def test_text_twin_lists_the_differences(wider):
    _, _, c = wider
    text = str(c)
    g0 = c.diff.group("mlp > layer[0]")
    flops = (f"FLOPs {human(g0.flops_a, 'FLOP')} -> {human(g0.flops_b, 'FLOP')} "
             f"(+{human(g0.flops_b - g0.flops_a, 'FLOP')}, x{g0.flops_b / g0.flops_a:.2f})")
    assert f"changed  mlp > layer[0]: {flops}" in text, text
    assert f"bytes {fmt_bytes(g0.bytes_a)} -> {fmt_bytes(g0.bytes_b)}" in text
    assert "same: mlp > layer[2]" in text
    assert "dot_general (line " in text and "out f32[8,16] -> f32[8,32]" in text
    assert "in f32[8,16], f32[16,16] -> f32[8,32], f32[32,16]" in text
    assert text.splitlines()[0].startswith("jaxviz compare: a = mlp(")
    assert f"{len(c.diff.nodes)} equations differ ({len(c.diff.nodes)} changed, 0 added" in text


def test_an_added_layer_is_added(wider):
    a = wider[0]
    c = jaxviz.compare(a, traced(16, 16, 8))
    status = {g.path: g.status for g in c.diff.groups}
    assert status["mlp > layer[3]"] == "added" and status["mlp > layer[0]"] == "same"
    assert {n.status for n in c.diff.nodes if n.path == "mlp > layer[3]"} == {"added"}
    assert all(n.a is None and n.b is not None for n in c.diff.nodes if n.status == "added")
    assert "added    mlp > layer[3]: FLOPs 0 FLOP -> " in str(c)
    back = jaxviz.compare(traced(16, 16, 8), a)
    assert {g.path: g.status for g in back.diff.groups}["mlp > layer[3]"] == "removed"


def test_the_same_trace_has_no_differences(wider):
    a = wider[0]
    c = jaxviz.compare(a, traced(16, 16))
    assert not c.diff.nodes and {g.status for g in c.diff.groups} == {"same"}
    assert "the same graph" in str(c)
    assert set(c.diff.marks_a.values()) == {"same"}


def test_nodes_match_by_call_path_when_lines_moved():
    src = ("import jax, jax.numpy as jnp\n"
           "{pad}@jax.jit\n"
           "def f(x):\n"
           "    y = jnp.sin(x)\n"
           "    return jnp.cos(y) * {k}\n"
           "f(jnp.ones(3))\n")
    a = jaxviz.trace_cell(src.format(pad="", k=2)).traces[0]
    b = jaxviz.trace_cell(src.format(pad="# a comment\n\n", k=2)).traces[0]
    d = diff_graphs(a.graph, b.graph)
    assert not d.nodes and d.same == a.graph.n_eqns
    sin_a = next(n for _, n in a.graph.eqns() if n.op == "sin")
    sin_b = next(n for _, n in b.graph.eqns() if n.op == "sin")
    assert sin_b.loc.line == sin_a.loc.line + 2
    assert (0, sin_a.id, 0, sin_b.id) in d.pairs


def test_marks_colour_the_changed_groups(wider):
    _, _, c = wider
    p = c.payload()
    json.dumps(p, allow_nan=False)
    for side, graph in (("a", c.a.graph), ("b", c.b.graph)):
        marks = p["diff"]["marks"][0 if side == "a" else 1]
        by_label = {g.label: marks[f"{graph.root}:g{g.id}"] for g in graph.body.groups}
        assert by_label == {"layer[0]": "changed", "layer[1]": "changed", "layer[2]": "same"}
    assert p["kind"] == "compare" and p["a"]["traces"][0]["name"] == "mlp"
    assert p["text"] == str(c)
    assert [n["status"] for n in p["diff"]["nodes"]] == [n.status for n in c.diff.nodes]


def test_compare_says_what_it_needs():
    with pytest.raises(TypeError, match="two jaxviz.Trace objects"):
        jaxviz.compare("mlp", "mlp")
    ct = jaxviz.trace_cell("import jax, jax.numpy as jnp\n"
                           "f = jax.jit(lambda x: x * 2)\ng = jax.jit(lambda x: x + 1)\n"
                           "f(jnp.ones(2)); g(jnp.ones(2))\n")
    with pytest.raises(TypeError, match="pick one"):
        jaxviz.compare(ct, ct)


def test_payload_has_the_declared_keys(wider):
    import collections

    from jaxviz import schema
    from tests.test_schema import check
    seen = collections.defaultdict(set)
    a = wider[0]
    for c in (wider[2], jaxviz.compare(a, traced(16, 16, 8)), jaxviz.compare(traced(16, 16, 8), a)):
        check(c.payload(), schema.ComparePayload, "compare", seen)
    for td in (schema.ComparePayload, schema.DiffEntry, schema.NodeDiffEntry, schema.GroupDiffEntry):
        assert seen[td] == td.__required_keys__ | td.__optional_keys__


_CELL = ("import jax, jax.numpy as jnp\n"
         "{pad}"
         "@jax.jit\n"
         "def {name}(w, x):\n"
         "    h = jax.nn.relu(x @ w)\n"
         "    return jnp.tanh(h @ w.T).sum() * {k}\n"
         "{name}(jnp.ones((4, {width})), jnp.ones((2, 4)))\n")


def test_a_renamed_version_matches_by_structure():
    """A notebook keeps both versions under different names (`step`, `step_v2`), in two
    cells: they match equation by equation, as the same function would."""
    a = jaxviz.trace_cell(_CELL.format(pad="\n" * 20, name="step", width=8, k=2)).traces[0]
    b = jaxviz.trace_cell(_CELL.format(pad="", name="step_v2", width=8, k=2)).traces[0]
    c = jaxviz.compare(a, b)
    assert not c.diff.nodes and c.diff.same == a.graph.n_eqns > 4
    assert "the same graph" in str(c) and "b's step_v2 matched as a's step" in str(c)
    # a change in the renamed version is one changed equation, not all added and removed
    b2 = jaxviz.trace_cell(_CELL.format(pad="", name="step_v2", width=8, k=3)).traces[0]
    c2 = jaxviz.compare(a, b2)
    assert [(n.status, n.op) for n in c2.diff.nodes] == [("changed", "mul")]
    assert str(c2).splitlines()[0].endswith(
        f"1 equation differs (1 changed, 0 added, 0 removed), {a.graph.n_eqns - 1} the same")
    # each side's line in its own file: not "line 25 -> 5", which reads as a move
    n = c2.payload()["diff"]["nodes"][0]
    assert n["file_a"] and n["file_b"] and n["file_a"] != n["file_b"]
    assert f"({n['file_a']} line 25, {n['file_b']} line 5) changed" in str(c2)
    # a wider hidden layer in the renamed version: the matmuls changed, nothing added
    b3 = jaxviz.trace_cell(_CELL.format(pad="", name="step_v2", width=16, k=2)).traces[0]
    c3 = jaxviz.compare(a, b3)
    assert {n.status for n in c3.diff.nodes} == {"changed"}
    assert {g.path for g in c3.diff.groups} == {g.path for g in c.diff.groups}


_FFN = """import jax, jax.numpy as jnp
@jax.jit
def {name}(w, x):
{pad}    h = jnp.tanh(x @ w['a']{k})
    return (h @ w['b']).sum()
{name}({{'a': jnp.ones((8, 16)), 'b': jnp.ones((16, 4))}}, jnp.ones((2, 8)))
"""


def test_two_cells_line_numbers_do_not_pair_unrelated_equations():
    """Two versions in two cells, b's one line lower: b's first matmul is on line 5, as a's
    second. A line number pairs equations only within one file: the matmuls were paired
    crosswise ('dot_general (cell [8] line 2, cell [10] line 4) changed', twice) where one
    mul was added (found in a notebook, issue 57's check)."""
    a = jaxviz.trace_cell(_FFN.format(name="ffn", pad="", k="")).traces[0]
    b = jaxviz.trace_cell(_FFN.format(name="ffn_v2", pad="    # scaled\n", k=" * 2.0")).traces[0]
    c = jaxviz.compare(a, b)
    assert [(n.status, n.op) for n in c.diff.nodes] == [("added", "mul")], str(c)
    assert c.diff.same == a.graph.n_eqns
    assert "1 equation differs (0 changed, 1 added, 0 removed)" in str(c).splitlines()[0]


def test_renamed_helpers_match_by_the_shape_of_their_call_paths():
    def dense(p, x):
        return jax.nn.relu(x @ p["w"] + p["b"])

    def net(params, x):
        for p in params:
            x = dense(p, x)
        return x

    a = traced(16, 16)
    b = jaxviz.trace(net, params(16, 32), jnp.ones((B, D_IN)))
    d = jaxviz.compare(a, b).diff
    assert d.count("added") == d.count("removed") == 0 and d.count("changed") > 0
    assert d.same > 0

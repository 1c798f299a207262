"""The graph model: structure, shared bodies, mapping across clusters, cost, JSON."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from jax import lax

import jaxviz
from jaxviz import _compat
from jaxviz.graph.build import build_graph


def recursive_eqn_count(j) -> int:
    n = 0
    for e in _compat.open_jaxpr(j).eqns:
        n += 1
        for s in _compat.sub_jaxprs(e):
            n += recursive_eqn_count(s.jaxpr)
    return n


def distinct_eqn_count(j, seen=None) -> int:
    seen = set() if seen is None else seen
    o = _compat.open_jaxpr(j)
    if id(o) in seen:
        return 0
    seen.add(id(o))
    n = len(o.eqns)
    for e in o.eqns:
        for s in _compat.sub_jaxprs(e):
            n += distinct_eqn_count(s.jaxpr, seen)
    return n


def nested(x, k):
    y = lax.scan(lambda c, xs: (c + xs, c * 2), x, jnp.ones((5, 3)))[0]
    z = lax.cond(y[0] > 0, lambda v: v + 1, lambda v: jnp.sin(v), y)
    w = lax.while_loop(lambda c: c[0] < 10, lambda c: c + 1, z)
    r = jax.checkpoint(lambda v: jnp.sin(v) * 2)(w)
    return r + jnp.array([1.0, 2.0, 3.0]), jax.random.split(k)


def test_node_count_equals_recursive_equation_count():
    t = jaxviz.trace(nested, jnp.ones(3), jax.random.key(0))
    assert t.error is None
    assert t.graph.n_eqns == recursive_eqn_count(t.jaxpr)
    eqn_nodes = sum(1 for b in t.graph.bodies for n in b.nodes if n.kind == "eqn")
    assert eqn_nodes == distinct_eqn_count(t.jaxpr)


def test_clusters_for_every_control_flow_primitive():
    t = jaxviz.trace(nested, jnp.ones(3), jax.random.key(0))
    roles = {s.role for b in t.graph.bodies for n in b.nodes for s in n.subs}
    assert {"scan", "branch 0", "branch 1", "cond", "body", "remat"} <= roles
    scan = next(n for n in t.graph.body.nodes if n.op == "scan")
    assert scan.subs[0].times == 5
    body = t.graph.bodies[scan.subs[0].body]
    # body inputs (carry, xs) are fed by the scan's inputs, outputs become its outputs
    assert len(scan.subs[0].in_map) == len(body.inputs)
    assert all(0 <= i < 2 for i in scan.subs[0].in_map)
    assert scan.subs[0].out_map == list(range(len(body.outputs)))
    cond = next(n for n in t.graph.body.nodes if n.op == "cond")
    assert all(0 not in s.in_map for s in cond.subs), "input 0 of cond is the index, no branch reads it"
    wh = next(n for n in t.graph.body.nodes if n.op == "while")
    assert wh.subs[0].out_map == [-1]


def test_shared_sub_jaxpr_stored_once():
    inner = jax.jit(lambda v: jnp.tanh(v) * 2)

    def f(x):
        for _ in range(12):
            x = inner(x)
        return x

    t = jaxviz.trace(f, jnp.ones(4))
    jits = [n for n in t.graph.body.nodes if n.op == "jit"]
    assert len(jits) == 12
    assert len({n.subs[0].body for n in jits}) == 1
    assert len(t.graph.bodies) == 2
    assert t.graph.n_eqns == 12 * 3
    # each use maps the body's input to the jit's input 0
    assert all(n.subs[0].in_map == [0] for n in jits)


def test_constants_literals_and_weak_types():
    big = np.ones((256, 256), np.float32)

    def f(x):
        return x * 2.0 + big

    t = jaxviz.trace(f, jnp.ones((256, 256)))
    consts = [n for n in t.graph.body.nodes if n.kind == "const"]
    assert len(consts) == 1 and consts[0].nbytes == big.nbytes
    lits = [n for n in t.graph.body.nodes if n.kind == "lit"]
    assert [n.value for n in lits] == ["2.0"]
    w = jaxviz.trace(lambda s: s * 2, 3.0)
    assert w.graph.body.nodes[w.graph.body.inputs[0]].out == ["~f32[]"]


def test_source_locations_and_inherited_locations():
    def f(x):
        y = jnp.sin(x)            # first line of body: f's line + 1
        return lax.fori_loop(0, 3, lambda i, c: c + y, x)

    t = jaxviz.trace(f, jnp.ones(3))
    first = f.__code__.co_firstlineno
    sin = next(n for n in t.graph.body.nodes if n.op == "sin")
    assert (sin.loc.line, sin.loc.fn) == (first + 1, "f")
    assert sin.loc.file == __file__
    # every equation, in every body, has a location (JAX-made ones inherit their caller's)
    assert all(n.loc is not None for b in t.graph.bodies for n in b.nodes if n.kind == "eqn")


def test_name_stack_and_call_path_groups():
    def layer(x):
        with jax.named_scope("dense"):
            return jnp.tanh(x @ x)

    def model(x):
        for _ in range(4):
            x = layer(x)
        return x

    t = jaxviz.trace(model, jnp.ones((3, 3)))
    body = t.graph.body
    tanh = [n for n in body.nodes if n.op == "tanh"]
    assert all(n.ns == "dense" for n in tanh)
    assert [n.path for n in tanh] == [f"model > layer[{i}]" for i in range(4)]
    top = [g for g in body.groups if g.parent == -1]
    assert [g.label for g in top] == ["layer[0]", "layer[1]", "layer[2]", "layer[3]"]
    assert top[0].repeats == 4 and all(g.repeat_of == top[0].id for g in top[1:])


def test_cost_rules():
    t = jaxviz.trace(lambda a, b: a @ b, jnp.ones((8, 16)), jnp.ones((16, 4)))
    dot = next(n for n in t.graph.body.nodes if n.op == "dot_general")
    assert dot.flops == 2 * 8 * 16 * 4
    assert dot.bytes == 4 * (8 * 16 + 16 * 4 + 8 * 4)
    s = jaxviz.trace(lambda c: lax.scan(lambda c, _: (jnp.sin(c), None), c, None, length=7)[0],
                     jnp.ones(10))
    scan = next(n for n in s.graph.body.nodes if n.op == "scan")
    assert scan.flops == 7 * s.graph.bodies[scan.subs[0].body].flops == 70
    conv = jaxviz.trace(lambda x, w: lax.conv(x, w, (1, 1), "VALID"),
                        jnp.ones((1, 3, 8, 8)), jnp.ones((5, 3, 3, 3)))
    c = next(n for n in conv.graph.body.nodes if n.op == "conv_general_dilated")
    assert c.flops == 2 * (1 * 5 * 6 * 6) * 3 * 3 * 3


def test_json_is_deterministic_compact_and_complete():
    from tools.models import transformer, transformer_args
    args = transformer_args(layers=2)
    a = jaxviz.trace(jax.value_and_grad(transformer), *args).graph.to_json()
    b = jaxviz.trace(jax.value_and_grad(transformer), *args).graph.to_json()
    assert a == b
    d = json.loads(a)
    n_nodes = sum(len(body["nodes"]) for body in d["bodies"])
    assert len(a) / n_nodes <= 240
    for body in d["bodies"]:
        ids = [n["id"] for n in body["nodes"]]
        assert ids == list(range(len(ids)))
        for src, dst, typ, port, sport in body["edges"]:
            assert 0 <= src < len(ids) and 0 <= dst < len(ids) and isinstance(typ, str)
        for n in body["nodes"]:
            if "loc" in n:
                assert 0 <= n["loc"][0] < len(d["files"])
            for s in n.get("subs", []):
                assert 0 <= s["body"] < len(d["bodies"])


# --- property test: random nests of jit / scan / cond / while / remat ----------------------

def _wrap(kind: str, f):
    if kind == "jit":
        return jax.jit(f)
    if kind == "scan":
        return lambda x: lax.scan(lambda c, _: (f(c), None), x, None, length=2)[0]
    if kind == "cond":
        return lambda x: lax.cond(x.sum() > 0, f, lambda v: v - 1.0, x)
    if kind == "while":
        return lambda x: lax.while_loop(lambda c: c[1] < 2, lambda c: (f(c[0]), c[1] + 1), (x, 0))[0]
    if kind == "remat":
        return jax.checkpoint(f)
    raise AssertionError(kind)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from(["jit", "scan", "cond", "while", "remat"]),
                         min_size=0, max_size=3), min_size=1, max_size=3))
def test_property_random_nests(nests):
    def make(kinds):
        f = lambda v: jnp.sin(v) * 2.0  # noqa: E731
        for k in kinds:
            f = _wrap(k, f)
        return f

    fs = [make(k) for k in nests]

    def prog(x):
        for f in fs:
            x = f(x)
        return x

    t = jaxviz.trace(prog, jnp.ones(3))
    assert t.error is None
    assert t.graph.n_eqns == recursive_eqn_count(t.jaxpr)
    for b in t.graph.bodies:
        for n in b.nodes:
            for s in n.subs:
                sub = t.graph.bodies[s.body]
                assert len(s.in_map) == len(sub.inputs) and len(s.out_map) == len(sub.outputs)
                n_in = sum(1 for e in b.edges if e.dst == n.id)
                assert all(-1 <= i < n_in for i in s.in_map)
    json.loads(t.graph.to_json())


def test_siblings_with_the_same_ops_fold_whatever_their_shapes():
    """An MLP's layers of several widths, a tree_map over parameters: `layer x3`."""
    def layer(x, w):
        return jnp.tanh(x @ w)

    def mlp(x, ws):
        for w in ws:
            x = layer(x, w)
        return x

    ws = [jnp.ones((4, 8)), jnp.ones((8, 16)), jnp.ones((16, 2))]
    top = [g for g in jaxviz.trace(mlp, jnp.ones((2, 4)), ws).graph.body.groups if g.parent == -1]
    assert [g.label for g in top] == ["layer[0]", "layer[1]", "layer[2]"]
    assert top[0].repeats == 3 and all(g.repeat_of == top[0].id for g in top[1:])


def test_backward_pass_groups_mirror_the_forward_calls():
    """grad of a loop of calls: each call's backward is one group, labelled after its call
    (they run in reverse order), not split where the replay's bytecode offsets go down."""
    def block(x, w):
        return jnp.tanh(x @ w)

    def loss(ws, x):
        for w in ws:
            x = block(x, w)
        return (x ** 2).mean()

    body = jaxviz.trace(jax.grad(loss), [jnp.ones((4, 4))] * 3, jnp.ones((2, 4))).graph.body
    top = [g.label for g in body.groups if g.parent == -1]
    assert top == ["block[0]", "block[1]", "block[2]",
                   "block[2] backward", "block[1] backward", "block[0] backward"]
    tanh = [n for n in body.nodes if n.op == "tanh"]
    assert all(body.groups[n.group].label.startswith("block[") for n in tanh)


def test_a_loop_inside_one_call_is_not_a_second_call():
    """`for layer in layers` inside mlp comes back to mlp's first op: still one mlp call;
    calls made from the caller's loop stay apart (test_name_stack_and_call_path_groups)."""
    def mlp(ws, x):
        for w in ws[:-1]:
            x = jnp.tanh(x @ w)
        return x @ ws[-1]

    def loss(ws, x):
        return (mlp(ws, x) ** 2).mean()

    body = jaxviz.trace(jax.value_and_grad(loss), [jnp.ones((4, 4))] * 3, jnp.ones((2, 4))).graph.body
    labels = sorted(g.label for g in body.groups)
    assert labels == ["mlp", "mlp backward"], labels


def test_wrapper_calls_from_a_loop_are_separate_calls():
    """`for _ in range(4): x = block_logged(x)`, block_logged calling block once: four
    block_logged calls (folded `block_logged x4`), each with its block, in the forward and
    the backward pass; a wrapper whose own loop calls block stays one call."""
    def block(x):
        return jnp.tanh(x @ x.T) @ x

    def block_logged(x):
        y = block(x)
        return y

    def twice(x):
        for _ in range(2):
            x = block(x)
        return x

    def loss(x):
        for _ in range(4):
            x = block_logged(x)
        return twice(x).sum()

    body = jaxviz.trace(jax.grad(loss), jnp.ones((4, 4))).graph.body
    top = [g for g in body.groups if g.parent == -1]
    fwd = [g for g in top if g.fn == "block_logged"]
    assert [g.label for g in fwd] == [f"block_logged[{i}]" for i in range(4)]
    assert fwd[0].repeats == 4 and all(g.repeat_of == fwd[0].id for g in fwd[1:])
    assert all([c.fn for c in body.groups if c.parent == g.id] == ["block"] for g in fwd)
    assert sum(1 for g in top if g.fn == "block_logged backward") == 4
    # twice's two blocks come from its own loop: one twice call
    assert [g.label for g in top if g.fn == "twice"] == ["twice"]
    inner = [c.label for c in body.groups if c.parent == next(g.id for g in top if g.fn == "twice")]
    assert inner == ["block[0]", "block[1]"]

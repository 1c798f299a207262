"""Every finding of a cell leads to its node (issue 57, item 1): a NaN to the op that made
it, a key consumed twice to the ops that consume it, a leaked tracer to the equation (or the
input) it is, each listed by that trace (its tab counts it); a recompile by its later trace."""
from __future__ import annotations

import jaxviz

CELL = '''import jax, jax.numpy as jnp
leaked, kept = [], {}
@jax.jit
def f(x):
    leaked.append(x)
    y = x * 2.0
    kept["y"] = y
    return jnp.log(x - 1.0)
key = jax.random.key(0)
a = jax.random.normal(key, (3,))
b = jax.random.normal(key, (3,))
n = f(jnp.zeros(3))
for i in range(3):
    g = jax.jit(lambda z: z * 2)(jnp.ones(i + 1))
'''


def _node(t, nid):
    b, n = map(int, nid.split(":"))
    return t.graph.bodies[b].nodes[n]


def test_each_runtime_finding_points_at_its_node_and_is_listed_by_its_trace():
    ct = jaxviz.trace_cell(CELL)
    by_rule = {}
    for d in ct.diagnostics:
        by_rule.setdefault(d.rule, []).append(d)
    assert sorted(by_rule) == ["key-reuse", "leaked-tracer", "nan", "recompile"], ct.diagnostics
    home = {id(d): t for t in ct.traces for d in t.diagnostics}
    for d in ct.diagnostics:
        assert id(d) in home or any(d == x for t in ct.traces for x in t.diagnostics), d
    traces = {d.trace: t for t in ct.traces for d in t.diagnostics}
    nan = by_rule["nan"][0]
    assert nan.trace == "f" and [_node(traces["f"], i).op for i in nan.node_ids] == ["log"]
    key = by_rule["key-reuse"][0]
    ops = {_node(traces[key.trace], i).op for i in key.node_ids}
    assert ops == {"random_bits"}, ops
    leaks = sorted(by_rule["leaked-tracer"], key=lambda d: d.line)
    got = [[(_node(traces["f"], i).kind, _node(traces["f"], i).op) for i in d.node_ids] for d in leaks]
    # the input `x` (stored at line 5), then `x * 2.0` (made at line 6)
    assert got == [[("in", "x")], [("eqn", "mul")]], got
    rec = by_rule["recompile"][0]
    assert any(rec in t.diagnostics for t in ct.traces if t.name == rec.trace)

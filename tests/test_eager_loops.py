"""Eager statements in long Python loops: recorded op by op for their first runs, then
counted (the capture's cost per op falls to a few microseconds), with exact call counts on
both Python paths (CALL events on >= 3.12; JAX's fast path for summarised statements on 3.11).
"""

from __future__ import annotations

import jaxviz
from jaxviz.capture.eager import EAGER_RUNS_RECORDED

N = 200
LOOP = f"""
import jax, jax.numpy as jnp
k = jax.random.PRNGKey(42)
@jax.jit
def f(x):
    return x * 2
for i in range({N}):
    k1, k2 = jax.random.split(k)
    u = jax.random.uniform(k2)
    v = f(u)
    w = jnp.sin(v) + 1
    k = k1
"""


def _by_line(ct) -> dict[int, list]:
    out: dict[int, list] = {}
    for t in ct.traces:
        for _file, line, n in t.call_sites:
            out.setdefault(line, []).append((t.kind, t.name, n))
    return out


def test_a_loops_statements_are_counted_exactly_and_say_they_were_summarised():
    ct = jaxviz.trace_cell(LOOP)
    assert ct.error is None and not ct.diagnostics
    lines = _by_line(ct)
    assert ("jit", "f", N) in lines[10]  # the user's jit, every call counted
    assert any(k == "eager" and n == N for k, _, n in lines[8])  # split
    assert any(k == "jit" and name == "_uniform" and n == N for k, name, n in lines[9])
    split = next(t for t in ct.traces if t.kind == "eager" and "split" in t.name)
    assert split.calls == N
    (note,) = [n for n in split.notes if "counted" in n]
    assert f"ran {N:,} times" in note and f"after {EAGER_RUNS_RECORDED} runs alike" in note


def test_a_short_loop_is_recorded_whole():
    ct = jaxviz.trace_cell(LOOP.replace(f"range({N})", f"range({EAGER_RUNS_RECORDED - 2})"))
    split = next(t for t in ct.traces if t.kind == "eager" and "split" in t.name)
    assert split.calls == EAGER_RUNS_RECORDED - 2 and not split.notes


def test_key_reuse_in_a_long_loop_is_still_found_at_its_line():
    src = """
import jax
key = jax.random.PRNGKey(0)
xs = []
for i in range(300):
    xs.append(jax.random.normal(key, (3,)))
"""
    ct = jaxviz.trace_cell(src)
    reuse = [d for d in ct.diagnostics if d.rule == "key-reuse"]
    assert reuse and reuse[0].line == 6, [d.format() for d in ct.diagnostics]


def test_a_nan_made_late_in_an_eager_loop_is_reported_where_it_was_kept():
    src = """
import jax.numpy as jnp
x = jnp.ones(3)
for i in range(100):
    x = x * 1e8           # Inf from the 5th run on
    y = x - x             # then NaN
"""
    ct = jaxviz.trace_cell(src)
    nan = [d for d in ct.diagnostics if d.rule == "nan"]
    assert nan and nan[0].line == 6, [d.format() for d in ct.diagnostics]


def test_a_loop_whose_shapes_change_is_not_summarised():
    src = """
import jax.numpy as jnp
for n in range(1, 40):
    y = jnp.sin(jnp.ones(n))
"""
    ct = jaxviz.trace_cell(src)
    sins = [t for t in ct.traces if t.kind == "jit" and t.name == "sin"]
    assert sorted(t.signature for t in sins) == sorted(f"f32[{n}]" for n in range(1, 40))
    assert not any("counted" in n for t in ct.traces for n in t.notes)


def test_a_busy_jit_call_site_is_counted_exactly_or_says_it_was_not():
    src = """
import jax, jax.numpy as jnp
@jax.jit
def step(w):
    return w * 0.5 + 1
w = jnp.ones(4)
for _ in range(100):
    w = step(w)
"""
    import sys

    from jaxviz.capture.recorder import JIT_CALLS_WATCHED

    ct = jaxviz.trace_cell(src)
    t = ct["step"]
    if hasattr(sys, "monitoring"):  # Python >= 3.12: CALL events count fast-path calls
        assert t.calls == 100 and not t.calls_uncounted
        assert "100 calls" in str(ct)
    else:  # 3.11: the site's later calls ran on JAX's fast path, unseen
        assert JIT_CALLS_WATCHED <= t.calls < 100 and t.calls_uncounted
        assert f"{t.calls}+ calls" in str(ct)

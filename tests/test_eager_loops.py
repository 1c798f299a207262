"""Eager statements in long Python loops: recorded op by op for their first runs, then
counted (the capture's cost per op falls to a few microseconds), with exact call counts on
both Python paths (CALL events on >= 3.12; JAX's fast path for summarised statements on 3.11).
"""

from __future__ import annotations

import re
import sys

import jax.numpy as jnp
import pytest

import jaxviz
from jaxviz.capture.cell import capture, register_source, run_source
from jaxviz.capture.eager import EAGER_RUNS_RECORDED
from jaxviz.capture.policy import COUNTS_EVERY_CALL, JIT_CALLS_WATCHED
from jaxviz.capture.recorder import Recorder

# Python 3.11: a summarised statement's jax.random calls run on JAX's fast path, unseen (no
# CALL events), so the keys its later runs consume are followed on >= 3.12 only
_KEYS_FOLLOWED_IN_COUNTED_RUNS = pytest.mark.skipif(
    not hasattr(sys, "monitoring"),
    reason="Python 3.11: a summarised statement's jax.random calls run on JAX's fast path, "
    "unseen (no CALL events); their keys are followed on >= 3.12",
)

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
    # the user's jit: every call counted (3.11: with its summarised statement's runs), or
    # its call site's first JIT_CALLS_WATCHED, then "16+" (3.12: the site's events are off)
    f = ct["f"]
    if f.calls_uncounted:
        assert JIT_CALLS_WATCHED <= f.calls <= N and f"{f.calls}+ calls" in str(ct)
    else:
        assert f.calls == N and f"{N} calls" in str(ct)
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
    ct = jaxviz.trace_cell(src)
    t = ct["step"]
    if COUNTS_EVERY_CALL:  # Python 3.11's call counter: every call, on the fast path too
        assert t.calls == 100 and not t.calls_uncounted
        assert "100 calls (line 8 x100)" in str(ct), str(ct)
        return
    # the site's calls after the first JIT_CALLS_WATCHED are not watched (3.12: their CALL
    # events are off; 3.11 without the call counter: JAX's fast path), and the trace says so
    assert JIT_CALLS_WATCHED <= t.calls < 100 and t.calls_uncounted
    assert f"{t.calls}+ calls" in str(ct)


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_with_the_live_chart_every_call_is_counted_and_marked():
    # the live memory chart marks each call (Recorder.calls): every CALL event stays on
    src = "w = jnp.ones(4)\nfor _ in range(100):\n    w = step(w)\n"
    ns = {"jnp": jnp}
    exec("import jax\n@jax.jit\ndef step(w):\n    return w * 0.5 + 1\n", ns)
    register_source("<chart cell>", src)
    rec = Recorder("<chart cell>", namespace=ns)
    rec.calls = []
    staged, error = capture(lambda: run_source(src, ns, "<chart cell>"), rec)
    (s,) = [s for s in staged if s.name == "step"]
    assert error is None and s.calls == 100 and not s.calls_uncounted
    assert len(rec.calls) == 100


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_an_observer_that_needs_no_more_of_a_functions_calls_is_no_longer_told():
    # on_call's True (a single process's StepClock: it times none of them) takes the observer
    # off that function's calls at the place; the others are told each call; the calls are
    # all counted and marked (the place's count kept by its memo, written back at exit)
    class Told:
        def __init__(self, enough: bool) -> None:
            self.enough, self.calls = enough, 0

        def on_call(self, jitted, arg0, frame, slot=None):
            self.calls += 1
            return self.enough

    src = "w = jnp.ones(4)\nfor _ in range(30):\n    w = step(w)\n"
    ns = {"jnp": jnp}
    exec("import jax\n@jax.jit\ndef step(w):\n    return w * 0.5 + 1\n", ns)
    register_source("<told cell>", src)
    once, each = Told(True), Told(False)
    rec = Recorder("<told cell>", observers=[once, each], namespace=ns)
    rec.calls = []
    staged, error = capture(lambda: run_source(src, ns, "<told cell>"), rec)
    (s,) = [s for s in staged if s.name == "step"]
    assert error is None and s.calls == 30 and not s.calls_uncounted
    assert len(rec.calls) == 30
    assert each.calls == 30
    assert once.calls == 2  # the place's first call (the full event), then its first repeat


def test_a_one_call_statement_in_a_loop_is_one_run_per_iteration():
    # all its ops come from one bytecode place; the call's CALL event tells the runs apart
    # (Python < 3.12: the frame the statement called, a new one at each run)
    src = """
import numpy as np, jax.numpy as jnp
a = np.ones((8, 4), np.float32)
for i in range(100):
    y = jnp.asarray(a)
"""
    ct = jaxviz.trace_cell(src)
    (t,) = [t for t in ct.traces if t.kind == "eager" and "asarray" in t.name]
    assert t.calls == 100, t.calls  # (before: one run of 100 ops, "1 call")
    assert any("ran 100 times" in n for n in t.notes), t.notes


def test_a_one_call_statement_whose_callee_makes_several_ops_is_one_run_per_call():
    # the callee's ops all belong to its call: 3 ops a run, 40 runs (not one op a run)
    src = """
import numpy as np, jax.numpy as jnp
from jax import lax
def prep(b):
    x = lax.tanh(jnp.asarray(b))
    return lax.mul(x, x)
a = np.ones((8, 4), np.float32)
for i in range(40):
    y = prep(a)
"""
    ct = jaxviz.trace_cell(src)
    (t,) = [t for t in ct.traces if t.kind == "eager" and "prep" in t.name]
    assert t.calls == 40, t.calls
    ops = [n.op for n in t.graph.body.nodes if n.kind == "eqn"]
    assert ops.count("tanh") == 1 and ops.count("mul") == 1, ops


@pytest.mark.skipif(hasattr(sys, "monitoring"), reason="Python < 3.12: no CALL events")
def test_python_311_a_tracers_frames_are_left_alone():
    # the new-call mark is the callee frame's f_trace: under sys.settrace (a debugger,
    # coverage) jaxviz sets none, and the tracer's own stays
    seen: list = []

    def tracer(frame, event, arg):
        if frame.f_code.co_name == "prep":
            seen.append(frame.f_trace)
        return tracer

    src = """
import numpy as np, jax.numpy as jnp
def prep(b):
    x = jnp.asarray(b)
    return jnp.tanh(x)
a = np.ones((8, 4), np.float32)
for i in range(3):
    y = prep(a)
"""
    sys.settrace(tracer)
    try:
        ct = jaxviz.trace_cell(src)
    finally:
        sys.settrace(None)
    assert ct.error is None
    assert seen and all(f in (None, tracer) for f in seen), seen


def test_jaxs_own_call_sites_are_watched_for_their_first_calls():
    # an array operator calls a jnp jit from JAX's own code: after its first calls there,
    # the place is not watched (its calls are "16+"); the cell's numbers are its own
    src = """
import jax.numpy as jnp
y = jnp.zeros(3)
x = jnp.ones(3)
for i in range(100):
    y = x * 2.0 + y
total = float(y.sum())
"""
    from jax._src import pjit

    ns: dict = {}
    python_path: list = []
    orig = pjit._run_python_pjit
    pjit._run_python_pjit = lambda *a: (python_path.append(a[0].params["name"]), orig(*a))[1]
    try:
        ct = jaxviz.trace_cell(src, ns)
    finally:
        pjit._run_python_pjit = orig
    assert ns["total"] == 600.0
    # its later calls run on JAX's fast path (3.11: a library's jit after its first call)
    assert python_path.count("multiply") <= 2, python_path
    mul = ct["multiply"]
    assert mul.calls_uncounted and 1 <= mul.calls < 100, mul.calls  # its place serves + too
    assert f"{mul.calls}+ calls" in str(ct)


def test_a_key_consumed_late_in_a_summarised_loop_and_reused_after_it_is_found():
    # jax.random's samplers call their jit from one place of JAX's, in a loop's statement
    # that is summarised after its first runs: the keys its later runs consume are still
    # recorded, so reusing one after the loop is found there
    src = """
import jax
ks = [jax.random.PRNGKey(i) for i in range(40)]
xs = [jax.random.normal(k, (3,)) for k in ks]
y = jax.random.normal(ks[30], (3,))
"""
    ct = jaxviz.trace_cell(src)
    reuse = [d for d in ct.diagnostics if d.rule == "key-reuse"]
    assert [d.line for d in reuse] == [5], [d.format() for d in ct.diagnostics]


@_KEYS_FOLLOWED_IN_COUNTED_RUNS
def test_a_key_reused_after_a_summarised_loop_is_found_at_its_line():
    src = """
import jax
key = jax.random.PRNGKey(0)
for i in range(100):
    key, sub = jax.random.split(key)
    x = jax.random.uniform(sub)
y = jax.random.uniform(sub)
"""
    ct = jaxviz.trace_cell(src)
    reuse = [d for d in ct.diagnostics if d.rule == "key-reuse"]
    assert [d.line for d in reuse] == [7], [d.format() for d in ct.diagnostics]


@_KEYS_FOLLOWED_IN_COUNTED_RUNS
def test_keys_a_summarised_loops_last_run_consumed_are_named_with_the_line_that_did():
    # a counted run's consumptions are noted at the places its first consumptions there
    # had (KeyLedger.consume_at): each of the three, reused after the loop, names its own
    src = """
import jax
key = jax.random.PRNGKey(0)
for i in range(100):
    key, sub = jax.random.split(key)
    old = key
    x = jax.random.uniform(sub)
    key = jax.random.fold_in(key, i)
    parent = jax.random.PRNGKey(i)
    a, b = jax.random.split(parent)
y = jax.random.uniform(sub)
z = jax.random.split(old)
w = jax.random.normal(parent)
"""
    ct = jaxviz.trace_cell(src)
    reuse = {d.line: d for d in ct.diagnostics if d.rule == "key-reuse"}
    assert sorted(reuse) == [11, 12, 13], [d.format() for d in ct.diagnostics]
    firsts = {line: [r[1] for r in d.related] for line, d in reuse.items()}
    assert firsts == {11: [7], 12: [8], 13: [10]}, firsts
    assert "by uniform on line 7" in reuse[11].message
    assert "by random.split on line 10" in reuse[13].message, reuse[13].message


def test_a_statement_restaged_again_keeps_its_own_lines_and_numbers():
    # eager statements re-staged from what an earlier cell staged alike: each keeps its own
    # lines, and a statement that differs only in a number is staged with its own number
    from jax import lax

    def cell(src):
        ct = jaxviz.trace_cell(src, {"lax": lax, "x": jnp.arange(3.0)})
        (t,) = [t for t in ct.traces if t.kind == "eager"]
        return t, str(ct)

    a, _ = cell("y = lax.mul(x, 2.0)\n")
    b, text_b = cell("\n\ny = lax.mul(x, 2.0)\n")
    c, text_c = cell("y = lax.mul(x, 3.0)\n")
    assert [n.loc.line for n in a.graph.body.nodes if n.kind == "eqn"] == [1]
    assert [n.loc.line for n in b.graph.body.nodes if n.kind == "eqn"] == [3]
    assert "2.0" in text_b and "3.0" in text_c and "2.0" not in text_c, text_c
    # ops alike but for a param (integer_pow's y): each statement is staged with its own,
    # also when the other was staged in between
    for n in (2, 3, 2, 3):
        t, _ = cell(f"y = lax.integer_pow(x, {n})\n")
        assert [p for node in t.graph.body.nodes for p in node.params] == [f"y={n}"]
        assert f"integer_pow[y={n}]" in str(t.jaxpr), t.jaxpr


def test_a_late_nan_is_found_after_a_cell_whose_eager_ops_called_the_same_operators():
    # jax.random's ops run `<`, `+` on arrays inside their own evaluation: the places of
    # those operators are turned off while jaxviz watches them there, and must be on again
    # for the next cell's own `x * 1e8` (CALL events stay off from one cell to the next)
    jaxviz.trace_cell(LOOP.replace(f"range({N})", f"range({EAGER_RUNS_RECORDED - 2})"))
    src = """
import jax.numpy as jnp
x = jnp.ones(3)
for i in range(100):
    x = x * 1e8
    y = x - x
"""
    ct = jaxviz.trace_cell(src)
    nan = [d for d in ct.diagnostics if d.rule == "nan"]
    assert nan and nan[0].line == 6, [d.format() for d in ct.diagnostics]


GENERATOR_LOOPS = """
import jax, jax.numpy as jnp, numpy as np
def batches(n):
    key = jax.random.PRNGKey(0)
    for i in range(n):
        key, sub = jax.random.split(key)
        yield jnp.asarray(np.full(4, i, np.float32)) + jax.random.uniform(sub)
@jax.jit
def step(w, x):
    return w + x.sum()
w = jnp.zeros(())
for x in batches(200):
    w = step(w, x)
g = batches(10**6)
for i in range(200):
    y = next(g)
g2 = batches(10**6)
for i in range(40):
    ys = [next(g2) for _ in range(5)]
total = float(w) + float(y.sum()) + float(ys[-1].sum())
"""


def test_a_loop_resuming_a_generator_that_makes_eager_ops_is_counted_per_resumption():
    # a data loader's pattern (optax's meta-learning notebook: `[next(g) for i in range(N)]`
    # in a training loop): each resumption of the generator is a run of the cell's
    # statement, as a call is. Before, no call of the cell's frame told them apart: one
    # endless run, every op recorded (2.6x the plain cell on that notebook), none counted,
    # and on Python 3.11 the next line's new jit took the last resumption off the count
    ct = jaxviz.trace_cell(GENERATOR_LOOPS)
    assert ct.error is None and not ct.diagnostics
    by_line = {}
    for t in ct.traces:
        if t.kind == "eager":
            by_line.setdefault(t.call_sites[0][1], []).append(t)
    # `for x in batches(200)`, `y = next(g)`, `ys = [next(g2) for _ in range(5)]` (Python
    # 3.11: the comprehension is a function of its own; its resumptions are runs too, as
    # on 3.12, which inlines it: 17 recorded, not 17 executions of 5)
    for line, runs in ((12, 200), (16, 200), (19, 200)):
        assert sum(t.calls for t in by_line[line]) == runs
        (counted,) = [t for t in by_line[line] if t.notes]
        assert f"ran {counted.calls:,} times" in counted.notes[0]
        assert f"after {EAGER_RUNS_RECORDED} runs alike" in counted.notes[0]
        n = int(re.search(r"counted the other ([\d,]+)", counted.notes[0])[1].replace(",", ""))
        assert counted.calls - n <= EAGER_RUNS_RECORDED + 2, counted.notes
    uniform = ct["_uniform"]  # (Python 3.11: counted with the runs, said to be a bound)
    assert uniform.calls == 600 and (not uniform.calls_uncounted or not hasattr(sys, "monitoring"))


@_KEYS_FOLLOWED_IN_COUNTED_RUNS
def test_a_key_consuming_steps_calls_are_counted_at_each_place_and_their_keys_followed():
    # a sampler's step(key, x) takes a fresh key at each call and keeps JAX's fast path; its
    # calls at one place, and a helper's calling it for two of the cell's lines, are each
    # counted exactly, on their own signatures, and the keys they consume stay followed
    src = """
import jax, jax.numpy as jnp
@jax.jit
def step(k, x):
    return x + jax.random.normal(k, x.shape)
def helper(k, x):
    return step(k, x)
base = jax.random.key(0)
xs = (jnp.zeros(3), jnp.zeros(5))
for i in range(120):
    k = jax.random.fold_in(base, i)
    z = step(k, xs[0])
    a = helper(jax.random.fold_in(base, 1000 + i), xs[1])
    b = helper(jax.random.fold_in(base, 2000 + i), xs[1])
again = step(k, xs[0])
"""
    ct = jaxviz.trace_cell(src)
    by_line = _by_line(ct)
    assert [n for kind, name, n in by_line[12] if name == "step"] == [120], by_line
    assert [n for kind, name, n in by_line[7] if name == "step"] == [240], by_line
    assert [n for kind, name, n in by_line[15] if name == "step"] == [1], by_line
    assert not any(t.calls_uncounted for t in ct.traces if t.name == "step"), str(ct)[:400]
    reuse = [d for d in ct.diagnostics if d.rule == "key-reuse"]
    assert [d.line for d in reuse] == [15], [d.format() for d in ct.diagnostics]


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_new_place_of_a_step_whose_signatures_share_a_key_first_is_counted_on_its_own():
    # step(key, x): the CALL event sees the key only, the same for both of x's shapes. A
    # place that calls it after both were seen is counted on the signature its own call
    # has (before: on the last one learned, x: f32[5] for both lines)
    src = """
import jax, jax.numpy as jnp
@jax.jit
def step(k, x):
    return x + jax.random.normal(k, x.shape)
base = jax.random.key(0)
xs = (jnp.zeros(3), jnp.zeros(5))
for i in range(120):
    k = jax.random.fold_in(base, i)
    z = step(k, xs[i // 60])
again = step(jax.random.fold_in(base, 1000), xs[0])
again5 = step(jax.random.fold_in(base, 1001), xs[1])
"""
    ct = jaxviz.trace_cell(src)
    steps = [t for t in ct.traces if t.name == "step"]
    lines = {t.signature: {line for _f, line, _n in t.call_sites} for t in steps}
    assert lines == {"key<fry>[], f32[3]": {10, 11}, "key<fry>[], f32[5]": {10, 12}}, lines

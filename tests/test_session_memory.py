"""A long session's kernel does not grow: what a kept trace holds, and what the magic lets go.

The figures (MB per kept CellTrace, a 40-cell soak in real kernels) are bench/bench_soak.py's;
these tests check the mechanisms behind them on real traces.
"""

from __future__ import annotations

import gc
import weakref

import jax
import jax.numpy as jnp
import pytest

import jaxviz
from jaxviz.config import options
from jaxviz.view.session import Kept
from jaxviz.view.widget import GraphWidget

SRC = """
import jax, jax.numpy as jnp
@jax.jit
def step(x, y):
    return jnp.tanh(x @ y) * 2
x = jnp.ones((8, 8))
out = step(x, x)
"""


def test_a_kept_cell_trace_does_not_keep_a_redefined_function_alive():
    ns: dict = {}
    ct = jaxviz.trace_cell(SRC, namespace=ns)
    t = ct["step"]
    old = weakref.ref(ns["step"])
    assert t.fun is ns["step"]  # still defined: the user's own jitted function
    exec(SRC, ns)  # the cell's definition run again: a new `step`
    gc.collect()
    assert old() is None, "the trace kept the old jitted function (and its executable) alive"
    assert t.fun is None


def test_a_trace_keeps_its_equations_but_not_jaxs_jaxpr_object():
    f = jax.jit(lambda x: jnp.sin(x) + 1)
    t = jaxviz.trace(f, jnp.ones(3))
    jaxs = f.trace(jnp.ones(3)).jaxpr
    assert t.jaxpr is not jaxs
    ops = [e.primitive.name for e in jaxviz._compat.open_jaxpr(t.jaxpr).eqns]
    assert ops == [e.primitive.name for e in jaxviz._compat.open_jaxpr(jaxs).eqns] == ["sin", "add"]
    sin = next(n for n in t.graph.body.nodes if n.kind == "eqn" and n.op == "sin")
    assert t.eqn(0, sin.id).primitive.name == "sin"  # the view's selection still maps to JAX's


def test_compile_and_run_answer_after_the_function_is_gone():
    def make():
        return jax.jit(lambda x, s: (x * s + 1, x.sum()), donate_argnums=0)

    t = jaxviz.trace(make(), jnp.zeros((64,)), 2.0)  # the jitted object is dropped at once
    gc.collect()
    assert t.fun is None
    report = t.compile()
    assert [d.path for d in report.donations] == ["x", "s"]  # the parameters' own names
    assert report.donations[0].donated and report.donations[0].aliased_to == "out[0]"
    assert not report.donations[1].donated
    run = t.run(steps=2, compare=False)
    (r,) = run.runs
    assert len(r.step_times) == 2 and r.donated == ("x",)  # x is donated, as the jit said


def test_compile_of_an_eager_statement_says_what_to_do():
    ct = jaxviz.trace_cell("import jax.numpy as jnp\ny = jnp.sin(jnp.ones(3))\n")
    with pytest.raises(ValueError, match="no jitted function to compile"):
        ct.traces[0].compile()


def _widgets(n: int) -> list[GraphWidget]:
    t = jaxviz.trace(jax.jit(lambda x: x * 2), jnp.ones(2))
    return [GraphWidget([t], payload={}) for _ in range(n)]


def test_the_session_keeps_the_newest_cells_views_and_lets_go_of_older_ones():
    kept = Kept()
    ws = _widgets(4)
    with options.using(keep_cells=2):
        for w in ws:
            kept.add(None, [w])
    assert [bool(w.traces) for w in ws] == [False, False, True, True]
    assert all(w.comm is not None for w in ws)  # let go of, not closed: the drawing stays
    assert len(kept.cells) == 2  # cells without an id are forgotten once let go of


def test_cells_that_showed_nothing_outside_a_notebook_leave_nothing_kept():
    # -q in IPython's shell: no widgets, no cell id; the session's list does not grow
    kept = Kept()
    for _ in range(100):
        kept.add(None, [])
    kept.add(None, _widgets(1))
    assert len(kept.cells) == 1


def test_a_rerun_cell_closes_its_previous_runs_widgets():
    kept = Kept()
    first, second, other = _widgets(3)
    kept.add("cell-a", [first])
    kept.add("cell-b", [other])
    kept.add("cell-a", [second])  # the same notebook cell, run again
    assert first.comm is None and not first.traces
    assert second.comm is not None and second.traces and other.traces
    assert list(kept.cells) == ["cell-b", "cell-a"]


def test_a_stored_cell_keeps_its_traces_past_the_cap():
    kept = Kept()
    stored, *rest = _widgets(3)
    with options.using(keep_cells=1):
        kept.add("s", [stored], stored=True)
        for i, w in enumerate(rest):
            kept.add(f"c{i}", [w])
    assert stored.traces and not rest[0].traces and rest[1].traces


def test_the_magic_reads_the_notebook_cell_id(ip):
    from jaxviz.view.session import cell_id as _cell_id

    assert _cell_id(ip) is None  # a shell outside a notebook: no ids
    ip.parent_header = {"header": {}, "metadata": {"cellId": "1f2e"}}  # as ipykernel sets it
    try:
        assert _cell_id(ip) == "1f2e"
    finally:
        del ip.parent_header


# --- the cost a cell paid, as the view states it ----------------------------------------------


def test_a_cell_states_what_jaxviz_added_to_its_time():
    src = (
        "import jax, jax.numpy as jnp\n"
        "k = jax.random.PRNGKey(0)\n"
        "for i in range(300):\n"
        "    k, s = jax.random.split(k)\n"
        "    y = jnp.sin(jax.random.uniform(s, (4,)))\n"
    )
    ct = jaxviz.trace_cell(src)
    c = ct.cost
    assert c is not None
    assert 0 < c.capture_seconds < c.cell_seconds and c.analysis_seconds > 0
    text = str(c)
    assert text.startswith("jaxviz added ") and "capturing" in text and "analysing" in text
    assert text in str(ct)  # the text twin says it too


def test_the_magic_measures_the_cell_it_ran(ip, dispatch_state):
    ip.run_cell("import jax, jax.numpy as jnp\nf = jax.jit(lambda x: x + 1)\n")
    ip.run_cell("%%jaxtrace -q -o ct\nimport time\nfor _ in range(50):\n    y = f(jnp.ones(3))\ntime.sleep(0.2)\n")
    c = ip.user_ns["ct"].cost
    assert c.cell_seconds >= 0.2  # the user's own time is the cell's, not jaxviz's
    assert c.capture_seconds < c.cell_seconds - 0.15


# --- a jitted function made anew at each iteration (issue 45, item 5) -------------------------


def test_a_jit_made_anew_per_iteration_is_shown_as_two_traces(ip):
    # each iteration's new jitted lambda was its own trace (323 in a real notebook), each
    # with its graph, kept by the view and the session (+176 to +706 MB in a kernel)
    ip.run_cell("import jax, jax.numpy as jnp\nx = jnp.ones((8, 8))\n")
    r = ip.run_cell(
        "%%jaxtrace -o ct --no-run\n"
        "for i in range(30):\n"
        "    f = jax.jit(lambda x: jnp.tanh(x @ x) * i + 1)\n"
        "    y = f(x)\n"
    )
    assert r.success
    ct = ip.user_ns["ct"]
    assert [t.name for t in ct.traces] == ["<lambda>", "<lambda>"]
    assert [t.calls for t in ct.traces] == [29, 1]
    assert all(t.notes and t.notes[-1].startswith("30 look-alike traces") for t in ct.traces)
    (rec,) = [d for d in ct.diagnostics if d.rule == "recompile"]
    assert "30 traces" in rec.message
    i, j = rec.compare  # the finding's pair points at the two kept traces
    assert (i, j) == (0, 1)
    assert "jaxviz.compare(ct[0], ct[1])" in str(ct)
    assert str(jaxviz.compare(ct[i], ct[j]))


def test_traces_of_other_shapes_are_not_folded():
    src = (
        "import jax, jax.numpy as jnp\nf = jax.jit(lambda x: x * 2)\n"
        "for n in range(1, 6):\n    y = f(jnp.ones(n))\n"
    )
    ct = jaxviz.trace_cell(src)
    sigs = sorted(t.signature for t in ct.traces if t.kind == "jit" and t.name == "<lambda>")
    assert sigs == sorted(f"f32[{n}]" for n in range(1, 6))
    assert not any("look-alike" in n for t in ct.traces for n in t.notes)

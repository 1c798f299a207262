"""jaxviz.distributed without processes: program signatures of real jaxprs and their first
difference, findings merged once, the straggler, the text of a merged report. (The runs
with real processes are tests/test_multiprocess.py; these run where sockets do not.)"""
from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp

from jaxviz.distributed.exchange import Gathered
from jaxviz.distributed.merge import merge
from jaxviz.distributed.programs import first_difference, signature
from jaxviz.distributed.summary import ProcessSummary
from jaxviz.view.processes import merged_html, merged_text


def _sig(f, *args):
    closed = jax.make_jaxpr(f)(*args)
    return signature("f", closed, ("x",), (__file__, 7), True, 0)


def test_the_first_equation_whose_result_differs_is_named_at_its_line():
    def make(n):
        def f(x):
            y = jnp.sin(x)
            z = y[:n]  # the line that makes the programs differ
            return z * 2
        return f
    a, b = _sig(make(4), jnp.ones(8)), _sig(make(6), jnp.ones(8))
    assert a["hash"] != b["hash"] and a["inputs"] == ["x: f32[8]"]
    d = first_difference(a, b, ("process 0", "process 3"))
    assert d is not None
    line = next(i for i, x in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1)
                if "the line that makes" in x)
    assert (d.file, d.line) == (__file__, line)
    assert "f32[4] on process 0, f32[6] on process 3" in d.what
    assert first_difference(a, _sig(make(4), jnp.ones(8)), ("process 0", "process 1")) is None


def test_an_argument_s_shape_is_named_at_the_call():
    a, b = _sig(jnp.sin, jnp.ones(8)), _sig(jnp.sin, jnp.ones(12))
    d = first_difference(a, b, ("process 0", "process 1"))
    assert d.what == "argument x is f32[8] on process 0, f32[12] on process 1"
    assert (d.file, d.line) == (__file__, 7)


def _summary(p, n, starts, finding=True):
    f = {"rule": "key-reuse", "severity": "warning", "message": f"m{p}", "file": f"/p{p}/t.py",
         "line": 5, "code": "", "hint": "Split the key:\n    bad: x"}
    return ProcessSummary(
        process=p, processes=n, host="h", devices=[f"cpu:{p}"], platform="cpu",
        findings=[f] if finding else [], compiled=[{"name": "step", "peak": 1000 * (p + 1)}],
        step={"name": "step", "seconds": 0.3, "calls": len(starts), "starts": starts})


def _step_program(spans: bool) -> dict:
    """The programs process 0 read: `step` on processes 0-2, spanning them or not."""
    closed = jax.make_jaxpr(jnp.sin)(jnp.ones(8))
    sig = signature("step", closed, ("x",), (__file__, 7), spans, 0)
    return {("step", 0): {p: sig for p in range(3)}}


def test_findings_once_the_straggler_and_the_missing_process_in_the_text():
    base = [100.0, 100.3, 100.6, 100.9]
    late = [t + 0.29 for t in base]
    s = {0: _summary(0, 4, base), 1: _summary(1, 4, late), 2: _summary(2, 4, base, False)}
    r = merge(Gathered(s, {0: 900, 1: 1100, 2: 800}, [3], 5.0, 5.0), [], _step_program(True))
    assert [f.processes for f in r.findings] == [(0, 1)]  # one finding, from two processes
    assert r.stragglers == [1] and r.missing == [3]
    text = merged_text(r)
    assert "t.py:5: warning: key-reuse: m0 [on processes 0, 1 (of 4)]" in text
    assert "process 3  MISSING: sent nothing in 5 s" in text
    assert "straggler: process 1 starts each call of step 290.0 ms after the earliest" in text
    assert "largest: process 2," in text  # its compiled peak, 3000 B
    assert "<" not in merged_html(r).split("<pre>")[1].split("</pre>")[0].replace("&lt;", "")


def test_a_step_each_process_runs_alone_names_no_straggler():
    # a step on each process's own devices (no collective in it): the processes keep the
    # offset they started with, and nobody waits for the late one. `python -m jaxviz` on two
    # processes whose loop drew jax.random.normal each step named process 0 the straggler,
    # "6.1 ms after the earliest, 12889% of the median step"
    base = [100.0, 100.3, 100.6, 100.9]
    late = [t + 0.29 for t in base]
    s = {0: _summary(0, 2, base), 1: _summary(1, 2, late)}
    r = merge(Gathered(s, {}, [], 0.0, 5.0), [], _step_program(False))
    assert r.stragglers == [] and "straggler" not in merged_text(r)
    assert merge(Gathered(s, {}, [], 0.0, 5.0), [], _step_program(True)).stragglers == [1]


def test_processes_starting_within_noise_are_no_stragglers():
    base = [100.0, 100.3, 100.6, 100.9]
    jitter = [100.0, 100.302, 100.6, 100.903]  # 2-3 ms late at some calls, on time at one
    s = {0: _summary(0, 2, base), 1: _summary(1, 2, jitter)}
    assert merge(Gathered(s, {}, [], 0.0, 5.0), [], {}).stragglers == []


def test_a_summary_round_trips_through_json():
    s = _summary(1, 2, [1.0, 2.0, 3.0])
    assert ProcessSummary.from_json(s.to_json()) == s


def test_a_cell_s_view_opens_with_the_merged_section_escaped():
    from jaxviz.view.html import mimebundle

    s = {0: _summary(0, 2, [1.0, 2.0, 3.0]), 1: _summary(1, 2, [1.0, 2.0, 3.0])}
    s[1].findings[0]["message"] = "<script>alert(1)</script>"
    s[0].findings[0]["message"] = "<script>alert(1)</script>"
    r = merge(Gathered(s, {0: 1, 1: 1}, [], 0.0, 5.0), [], {})
    bundle = mimebundle([], [], "the cell's text", processes=r)
    html = bundle["text/html"]
    assert html.startswith('<details open class="jaxviz-processes">')
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert bundle["text/plain"].startswith("jaxviz: 2 processes, merged on process 0")

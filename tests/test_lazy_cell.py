"""`%%jaxtrace -q` computes nothing nobody asked for (issue 56 item 1).

A -q cell displays nothing: without -o nobody can read its CellTrace, so none of it is
built; with `-o ct` its analysis (graphs, diagnostics, compiled memory) runs when the record
is first read. What the cell's namespace held as it ended is read then, at its end: a later
cell that rebinds the names changes nothing in the findings. `--text`, the default view and
`trace_cell` stay synchronous and complete. Through IPython's real shell, both JAX versions.
"""
from __future__ import annotations

import jaxviz
from jaxviz import api
from jaxviz.diagnostics import check

# a NaN a later, unchecked call made: read from the name `w` when the cell ends
DIVERGES = """
@jax.jit
def step(w, lr):
    grow = w * lr
    return grow - grow * 0.5

w = jnp.ones((4,))
for i in range(50):
    w = step(w, 1e3)
"""


def _counted(monkeypatch) -> list[str]:
    ran: list[str] = []
    diagnose = check.diagnose_cell

    def counted(*args, **kwargs):
        ran.append("diagnose_cell")
        return diagnose(*args, **kwargs)

    monkeypatch.setattr(api, "diagnose_cell", counted)
    return ran


def test_a_quiet_cell_without_o_analyses_nothing(ip, monkeypatch):
    ran = _counted(monkeypatch)
    built = []
    monkeypatch.setattr(api, "cell_end", lambda *a, **k: built.append(1) or check.cell_end(*a, **k))
    ip.run_cell("import jax, jax.numpy as jnp")
    r = ip.run_cell("%%jaxtrace -q\n" + DIVERGES)
    assert r.success and ran == [] and built == []


def test_a_quiet_cells_record_is_analysed_when_first_read(ip, monkeypatch):
    ran = _counted(monkeypatch)
    ip.run_cell("import jax, jax.numpy as jnp")
    r = ip.run_cell("%%jaxtrace -q -o ct\n" + DIVERGES)
    assert r.success
    ct = ip.user_ns["ct"]
    assert not ct.analysed and ran == []
    ip.run_cell("w = jnp.zeros(4)")  # the name that held the NaN, rebound
    (d,) = [d for d in ct.diagnostics if d.rule == "nan"]  # read as the cell ended
    assert ct.analysed and ran == ["diagnose_cell"]
    assert "`w` holds NaN after the cell" in d.message, d.message
    assert ct.traces[0].name == "step" and ct.traces[0].graph.n_eqns > 0
    assert ct.analysis_error is None
    # the same findings as the cell analysed at its end (--text: at once)
    r = ip.run_cell("%%jaxtrace --text -o now\n" + DIVERGES)
    now = ip.user_ns["now"]
    assert now.analysed
    assert [(d.rule, d.line) for d in now.diagnostics] == [(d.rule, d.line) for d in ct.diagnostics]


def test_a_failing_analysis_is_kept_not_raised_into_the_reader(ip, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in jaxviz")

    ip.run_cell("import jax, jax.numpy as jnp")
    ip.run_cell("%%jaxtrace -q -o ct\n" + DIVERGES)
    monkeypatch.setattr(api, "diagnose_cell", broken)
    ct = ip.user_ns["ct"]
    assert ct.diagnostics == [] and ct.traces[0].name == "step"
    assert isinstance(ct.analysis_error, RuntimeError)
    assert "could not finish this cell's analysis" in str(ct) and "a bug in jaxviz" in str(ct)


def test_trace_cell_is_analysed_at_once(monkeypatch):
    ran = _counted(monkeypatch)
    ct = jaxviz.trace_cell("import jax, jax.numpy as jnp\n" + DIVERGES, filename="<at once>")
    assert ct.analysed and ran == ["diagnose_cell"]

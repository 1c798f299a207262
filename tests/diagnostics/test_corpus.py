"""Every corpus case gives its rule at its line; every clean program gives nothing."""
from __future__ import annotations

import warnings

import pytest

import jaxviz
from tests.diagnostics.corpus import CASES, CLEAN, HEADER, expected
from tests.xla_figures import refused_allocation


def run(name: str, source: str):
    with warnings.catch_warnings():
        # JAX's own "Some donated buffers were not usable" is a UserWarning; pytest makes it an error
        warnings.simplefilter("ignore")
        return jaxviz.trace_cell(HEADER + source, filename=f"<case {name}>")


def test_corpus_size():
    assert len(CASES) >= 40 and len(CLEAN) >= 10
    from jaxviz.diagnostics.diagnostic import RULES
    # rules a one-device trace_cell cannot give, each tested where it can: a mesh of several
    # devices (tests/mesh), several processes (tests/test_multiprocess.py), IPython's %timeit
    # (tests/test_timeit.py)
    elsewhere = {"collective", "program-mismatch", "unwatched"}
    assert {expected(s)[0] for s in CASES.values()} == set(RULES) - elsewhere


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=refused_allocation) if n.startswith("oom_") else n for n in sorted(CASES)])
def test_case(name):
    rule, line = expected(CASES[name])
    ct = run(name, CASES[name])
    got = [(d.rule, d.line) for d in ct.diagnostics]
    assert (rule, line) in got, f"{name}: expected {rule} at line {line}, got {got}"
    d = next(d for d in ct.diagnostics if (d.rule, d.line) == (rule, line))
    assert d.filename == f"<case {name}>"
    assert d.code and d.code in d.message and d.hint
    assert d.code.split("#")[0].strip() in (HEADER + CASES[name]).splitlines()[line - 1]
    # nothing else is reported for a one-misuse cell, except what follows from it
    extra = [g for g in got if g[0] != rule]
    assert not extra, f"{name}: unexpected {extra}"


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_clean(name):
    ct = run(name, CLEAN[name])
    assert ct.error is None, repr(ct.error)
    assert ct.diagnostics == [], [d.format() for d in ct.diagnostics]

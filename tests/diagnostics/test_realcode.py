"""The real-code false-positive gate: correct programs in the style of optax, equinox and flax
code (tests/diagnostics/realcode.py) get no warning and no error, only true info findings,
and run with the same numbers as without jaxviz.

Each program's cells run through `jaxviz.trace_cell` in one namespace, as a notebook runs
them; the same cells also run with plain `exec` in a fresh namespace, and the value each
program leaves in `result` must be the same, bit for bit.

A false positive jaxviz gives today is marked below (FALSE_POSITIVES) as a strict xfail of
the check it breaks, naming the finding: the suite stays green, and the fix flips it.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import io
import os
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest

import jaxviz
from jaxviz.diagnostics.diagnostic import RULES
from tests.diagnostics.realcode import HEADER, PROGRAMS, Program

NAMES = sorted(PROGRAMS)
# for entries of FALSE_POSITIVES that show on one version only
PY311 = sys.version_info < (3, 12)
JAX010 = jax.__version_info__ < (0, 11)

# (program, check) -> (the false positive: rule, line and the finding's first line; the
# condition under which it shows). check: "quiet" (no warning or error), "info" (info true).
FALSE_POSITIVES: dict[tuple[str, str], tuple[str, bool]] = {}


def _fp_marks(name: str, check: str) -> list:
    """The strict xfail of `check` ("quiet" or "info") for a program with a known false
    positive."""
    fp = FALSE_POSITIVES.get((name, check))
    if fp is None:
        return []
    reason, condition = fp
    return [pytest.mark.xfail(condition, reason=f"false positive: {reason}", strict=True)]


def _params(check: str) -> list:
    return [pytest.param(n, marks=_fp_marks(n, check), id=n) for n in NAMES]


def _fresh() -> dict:
    return {"__name__": "__main__", "__builtins__": builtins}


def _skip_without_devices(prog: Program) -> None:
    n = len(jax.devices())
    if n < prog.min_devices:
        pytest.skip(
            f"needs {prog.min_devices} devices, {n} here (test_sharded_on_forced_cpu_devices "
            f"runs it on {prog.min_devices}+ CPU devices in a subprocess)"
        )


def _filename(name: str, i: int) -> str:
    return f"<realcode {name} cell {i + 1}>"


@functools.cache
def traced(name: str):
    """(CellTraces, result, warnings, stdout) of the program's cells run under jaxviz."""
    ns = _fresh()
    cts = []
    out = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
        warnings.simplefilter("always")
        for i, cell in enumerate(PROGRAMS[name].cells):
            cts.append(jaxviz.trace_cell(HEADER + cell, namespace=ns, filename=_filename(name, i)))
    caught_ = [f"{w.category.__name__}: {w.message}" for w in caught]
    return cts, ns.get("result"), caught_, out.getvalue()


@functools.cache
def plain(name: str):
    """(result, warnings, stdout) of the program's cells run with plain exec."""
    ns = _fresh()
    out = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
        warnings.simplefilter("always")
        for i, cell in enumerate(PROGRAMS[name].cells):
            exec(compile(HEADER + cell, f"<plain {name} cell {i + 1}>", "exec"), ns)
    return ns["result"], [f"{w.category.__name__}: {w.message}" for w in caught], out.getvalue()


def findings(name: str, severities: tuple[str, ...]) -> list:
    cts = traced(name)[0]
    return [d for ct in cts for d in ct.diagnostics if d.severity in severities]


def _code_at(d) -> str:
    if d.code:
        return d.code
    import linecache

    return linecache.getline(d.filename, d.line).strip() if d.filename and d.line else ""


# --- the corpus itself ---------------------------------------------------------------------------


def test_corpus_shape():
    assert len(PROGRAMS) >= 12
    for name, prog in PROGRAMS.items():
        assert prog.what, name
        sources = [HEADER + c for c in prog.cells]
        for a in prog.info:
            assert a.rule in RULES, (name, a.rule)
            assert a.why, (name, a)
            assert any(a.code in s for s in sources), f"{name}: allowed code {a.code!r} not in it"
        assert "result =" in prog.cells[-1], f"{name}: its last cell sets `result`"


@pytest.mark.parametrize("name", NAMES)
def test_plain_run_is_correct(name):
    """The program runs without jaxviz and JAX warns about nothing (every donation usable)."""
    _skip_without_devices(PROGRAMS[name])
    result, caught, _ = plain(name)
    assert result is not None
    assert caught == [], caught


# --- under jaxviz --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_cells_run(name):
    _skip_without_devices(PROGRAMS[name])
    cts, result, caught, _ = traced(name)
    for ct in cts:
        assert ct.error is None, f"{ct.filename}: {ct.error!r}"
    assert result is not None
    assert caught == [], f"warnings under jaxviz: {caught}"


@pytest.mark.parametrize("name", _params("quiet"))
def test_no_warning_or_error(name):
    _skip_without_devices(PROGRAMS[name])
    bad = findings(name, ("warning", "error"))
    assert bad == [], "\n".join(d.format() for d in bad)


@pytest.mark.parametrize("name", _params("info"))
def test_info_only_when_true(name):
    """Every info finding is in the program's allow-list, at the allowed line, by rule."""
    _skip_without_devices(PROGRAMS[name])
    allowed = PROGRAMS[name].info
    unexplained = [
        d
        for d in findings(name, ("info",))
        if not any(a.rule == d.rule and a.code in _code_at(d) for a in allowed)
    ]
    assert unexplained == [], "\n".join(d.format() for d in unexplained)


@pytest.mark.parametrize("name", NAMES)
def test_same_numbers_as_plain(name):
    """`result` is the same, bit for bit, and so is what the cells printed."""
    _skip_without_devices(PROGRAMS[name])
    _, got, _, got_out = traced(name)
    want, _, want_out = plain(name)
    assert got_out == want_out
    got_leaves, got_tree = jax.tree.flatten(got)
    want_leaves, want_tree = jax.tree.flatten(want)
    assert got_tree == want_tree
    for a, b in zip(got_leaves, want_leaves):
        assert type(a) is type(b), (type(a), type(b))
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b, equal_nan=True), (a, b)


@pytest.mark.slow
def test_sharded_on_forced_cpu_devices():
    """The multi-device programs, on 4 CPU devices in a subprocess (XLA's host device count
    is read once, when JAX starts)."""
    multi = [n for n in NAMES if PROGRAMS[n].min_devices > 1]
    if len(jax.devices()) >= max(PROGRAMS[n].min_devices for n in multi):
        pytest.skip("enough devices here: the programs ran in this process")
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    select = f"({' or '.join(multi)}) and not forced_cpu"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",  # (it warns under xdist, and warnings are errors here)
            "-rxs",
            os.path.abspath(__file__),
            "-k",
            select,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert "skipped" not in proc.stdout.splitlines()[-1], tail

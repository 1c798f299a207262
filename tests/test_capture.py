"""trace_cell: the cell runs as it always would, and every JAX computation is captured."""
from __future__ import annotations

import gc
import inspect
import sys
import weakref

import jax
import jax.numpy as jnp
import pytest

import jaxviz
from jaxviz.capture.policy import COUNTS_EVERY_CALL, JIT_CALLS_WATCHED

SETUP = """
import jax, jax.numpy as jnp
@jax.jit
def step(x, w):
    return jnp.tanh(x @ w)
"""


def fresh_ns():
    ns = {"__name__": "__main__"}
    exec(SETUP, ns)
    return ns


def test_cell_behaves_as_without_jaxviz(capsys, dispatch_state):
    cell = ("x = jnp.ones((4, 4)); w = jnp.eye(4) * 0.5\n"
            "for i in range(3):\n"
            "    x = step(x, w)\n"
            "print('sum', float(x.sum()))\n")
    plain = fresh_ns()
    exec(compile(cell, "<plain>", "exec"), plain)
    out_plain = capsys.readouterr().out
    ns = fresh_ns()
    ct = jaxviz.trace_cell(cell, ns)
    assert capsys.readouterr().out == out_plain
    assert ct.error is None
    assert bool((ns["x"] == plain["x"]).all())
    assert set(ns) == set(plain)


def test_calls_signatures_and_call_sites(dispatch_state):
    ns = fresh_ns()
    ns["step"](jnp.ones((4, 4)), jnp.ones((4, 4)))   # compiled and cached before the cell
    cell = ("a = jnp.ones((4, 4))\n"
            "for i in range(3):\n"
            "    a = step(a, a)\n"
            "b = step(jnp.ones((2, 2)), jnp.ones((2, 2)))\n"
            "c = step(a, a)\n")
    ct = jaxviz.trace_cell(cell, ns, filename="<cell 7>")
    steps = [t for t in ct.traces if t.name == "step"]
    assert [t.signature for t in steps] == ["f32[4,4], f32[4,4]", "f32[2,2], f32[2,2]"]
    if JIT_CALLS_WATCHED > 3 or COUNTS_EVERY_CALL:  # every call at each site: counted exactly
        assert [t.calls for t in steps] == [4, 1] and not steps[0].calls_uncounted
        assert sorted(steps[0].call_sites) == [("<cell 7>", 3, 3), ("<cell 7>", 5, 1)]
    else:  # Python 3.11: the loop's first JIT_CALLS_WATCHED calls, then JAX's fast path
        assert steps[0].calls_uncounted and steps[1].calls == 1
        sites = dict(((f, line), n) for f, line, n in steps[0].call_sites)
        assert sites[("<cell 7>", 3)] == JIT_CALLS_WATCHED, steps[0].call_sites
        assert JIT_CALLS_WATCHED <= steps[0].calls <= 4 and "+ calls" in str(ct)
    assert steps[1].call_sites == [("<cell 7>", 4, 1)]
    assert steps[0].graph.n_eqns == 2


@pytest.mark.skipif(hasattr(sys, "monitoring"), reason="Python < 3.12: no CALL events")
def test_python_311_a_busy_site_takes_the_fast_path_after_its_watched_calls(dispatch_state):
    """A loop's call site takes JAX's Python path for exactly its first JIT_CALLS_WATCHED
    calls, then the fast path (the entry the last watched call left is the fast one: the
    trace counts no call more than the watched ones), and the next cell sees it again.
    With the call counter (CPython 3.11), once, and in later cells not at all (an earlier
    cell saw its one signature: recorder._Known): every call is counted on the fast path."""
    ns = fresh_ns()
    cell = ("a = jnp.ones((4, 4))\n"
            "for i in range(10):\n"
            "    a = step(a, a)\n")
    if COUNTS_EVERY_CALL:  # once in the first cell; none after: its signature is known
        for want in (1, 0, 0):
            ct, python = _python_path_fun_calls(ns["step"].__wrapped__, cell, ns)
            (t,) = [t for t in ct.traces if t.name == "step"]
            assert (python, t.calls, t.calls_uncounted) == (want, 10, False)
            assert "10 calls (line 3 x10)" in str(ct) and t.graph.n_eqns == 2
        return
    for _ in range(2):
        ct = jaxviz.trace_cell(cell, ns, filename="<cell w>")
        (t,) = [t for t in ct.traces if t.name == "step"]
        assert t.calls == JIT_CALLS_WATCHED and t.calls_uncounted, (t.calls, t.call_sites)
        assert f"{JIT_CALLS_WATCHED}+ calls" in str(ct)


def test_functions_on_objects_libraries_and_eager_transformations(dispatch_state):
    ns = fresh_ns()
    cell = ("class M:\n"
            "    pass\n"
            "m = M(); m.f = step\n"
            "y = m.f(jnp.ones((2, 2)), jnp.ones((2, 2)))\n"
            "u = jax.random.uniform(jax.random.key(1), (3,))\n"
            "g = jax.grad(lambda v: jnp.sum(jnp.sin(v) ** 2))(jnp.ones(3))\n")
    ct = jaxviz.trace_cell(cell, ns)
    names = [t.name for t in ct.traces]
    assert "step" in names
    assert "_uniform" in names                       # jax.random.* are jitted
    grad = [t for t in ct.traces if t.kind == "eager" and t.call_sites[0][1] == 6]
    assert len(grad) == 1
    ops = [n.op for n in grad[0].graph.body.nodes if n.kind == "eqn"]
    assert "sin" in ops and "cos" in ops            # the forward and the derivative ran eagerly
    sin = next(n for n in grad[0].graph.body.nodes if n.op == "sin")
    assert sin.loc.line == 6


def test_a_plain_functions_parameters_are_read_off_its_code():
    # jax.grad's traces are named after the user's function and its parameters, asked of
    # each new lambda of a cell run again (a new code object each run): read off the code,
    # they are what inspect.signature says, names and kinds
    from jaxviz._compat.frames import parameters

    def f(a, b=1, /, c=2, *args, k, m=3, **kw):
        pass

    for fn in (f, lambda: 0, lambda s: s, lambda *a, k: 0, lambda x, **kw: 0):
        want = [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]
        assert [(p.name, p.kind) for p in parameters(fn)] == want


def test_cell_exception_is_recorded_not_raised(dispatch_state):
    ns = fresh_ns()
    ct = jaxviz.trace_cell("z = step(jnp.ones((2, 2)), jnp.ones((2, 2)))\n1/0\n", ns)
    assert isinstance(ct.error, ZeroDivisionError)
    assert [t.name for t in ct.traces if t.kind == "jit"] == ["step"]
    assert "z" in ns


def test_syntax_error_is_recorded():
    ct = jaxviz.trace_cell("x = (1,\n", {})
    assert isinstance(ct.error, SyntaxError)
    assert ct.traces == []


def test_keyboard_interrupt_restores_and_propagates(dispatch_state):
    ns = fresh_ns()
    with pytest.raises(KeyboardInterrupt):
        jaxviz.trace_cell("step(jnp.ones((2, 2)), jnp.ones((2, 2)))\nraise KeyboardInterrupt\n", ns)


def test_numbers_identical_and_fast_path_back_after_capture(dispatch_state):
    ns = fresh_ns()
    cell = "r = step(jnp.arange(16.).reshape(4, 4) / 16, jnp.eye(4))\n"
    jaxviz.trace_cell(cell, ns)
    plain = fresh_ns()
    exec(cell, plain)
    assert bool((ns["r"] == plain["r"]).all())
    # after the cell the jitted function is dispatched by C++ again: no Python hook runs
    from jax._src import pjit
    seen = []
    orig = pjit._run_python_pjit
    fun = ns["step"].__wrapped__
    pjit._run_python_pjit = lambda *a: (seen.append(a[2] is fun), orig(*a))[1]
    x = jnp.ones((4, 4))
    try:
        for _ in range(5):
            ns["step"](x, x)
    finally:
        pjit._run_python_pjit = orig
    assert sum(seen) <= 1   # at most the first call after the cell


def test_capture_keeps_no_user_arrays(dispatch_state):
    ns = fresh_ns()
    ct = jaxviz.trace_cell("big = jnp.ones((1000, 1000))\nout = step(big, big)\n", ns)
    refs = [weakref.ref(ns.pop("big")), weakref.ref(ns.pop("out"))]
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert len(ct.traces) >= 1


def test_nested_calls_are_equations_not_traces(dispatch_state):
    ns = fresh_ns()
    cell = ("@jax.jit\n"
            "def outer(x):\n"
            "    return step(x, x) + 1\n"
            "o = outer(jnp.ones((3, 3)))\n")
    ct = jaxviz.trace_cell(cell, ns)
    jits = [t for t in ct.traces if t.kind == "jit"]
    assert [t.name for t in jits] == ["outer"]
    assert "jit" in [n.op for n in jits[0].graph.body.nodes]


def test_text_twin_of_a_cell():
    ns = fresh_ns()
    ct = jaxviz.trace_cell("y = step(jnp.ones((2, 2)), jnp.ones((2, 2)))\n", ns, filename="<cell 1>")
    text = str(ct)
    assert text.splitlines()[0].startswith("jaxviz: ")
    assert "jit step(x: f32[2,2], w: f32[2,2]) · 1 call (line 1) · 2 eqns" in text


def test_jaxviz_failure_never_becomes_the_users(monkeypatch, dispatch_state):
    import jaxviz.capture.ledger as ledger
    import jaxviz.capture.recorder as cap

    def broken(*a, **k):
        raise RuntimeError("jaxviz bug")

    monkeypatch.setattr(ledger, "specs", broken)
    monkeypatch.setattr(cap.Recorder, "_record_eager", broken)
    ns = fresh_ns()
    ct = jaxviz.trace_cell("r = step(jnp.ones((2, 2)), jnp.ones((2, 2)))\ns = float(r.sum())\n", ns)
    assert ct.error is None
    assert ns["s"] == pytest.approx(4 * float(jnp.tanh(2.0)))


def test_static_argument_variants_and_jitted_methods_are_counted(dispatch_state):
    ns = fresh_ns()
    cell = ("from functools import partial\n"
            "@partial(jax.jit, static_argnames='act')\n"
            "def apply(x, act='relu'):\n"
            "    return jax.nn.relu(x) if act == 'relu' else jax.nn.gelu(x)\n"
            "class Model:\n"
            "    @partial(jax.jit, static_argnums=0)\n"
            "    def fwd(self, x):\n"
            "        return x * 2\n"
            "m = Model(); x = jnp.ones(3)\n"
            "for i in range(4):\n"
            "    apply(x, act='relu')\n"
            "    apply(x, act='gelu')\n"
            "    m.fwd(x)\n")
    ct = jaxviz.trace_cell(cell, ns, filename="<cell s>")
    jits = [t for t in ct.traces if t.kind == "jit" and t.user_code]
    applies = sorted((t for t in jits if t.name == "apply"), key=lambda t: t.call_sites[0][1])
    n = 4 if COUNTS_EVERY_CALL else min(4, JIT_CALLS_WATCHED)  # (else a site's first calls)
    assert [(t.calls, t.call_sites) for t in applies] == [
        (n, [("<cell s>", 11, n)]), (n, [("<cell s>", 12, n)])]
    assert [t.static for t in applies] == ["act='relu'", "act='gelu'"]
    assert "jit apply(x: f32[3]; act='gelu')" in str(ct)
    fwd = [t for t in jits if t.name == "fwd"]
    assert [(t.calls, t.call_sites) for t in fwd] == [(n, [("<cell s>", 13, n)])]


def test_two_jitted_methods_in_one_loop_are_each_counted_at_their_line(dispatch_state):
    """Jitted methods reached through their instance (jaxviz knows their function, not the
    jit): on Python 3.11 the last watched call of one empties only its own jit's entries,
    never the fast entry the other's last watched call left (that would count it again)."""
    ns = fresh_ns()
    cell = ("from functools import partial\n"
            "class Model:\n"
            "    @partial(jax.jit, static_argnums=0)\n"
            "    def fwd(self, x):\n"
            "        return x * 2\n"
            "    @partial(jax.jit, static_argnums=0)\n"
            "    def bwd(self, x):\n"
            "        return x - 1\n"
            "m = Model(); x = jnp.ones(3)\n"
            "for i in range(6):\n"
            "    m.fwd(x)\n"
            "    m.bwd(x)\n")
    for _ in range(2):  # (the second cell: both functions known, their entries emptied)
        ct = jaxviz.trace_cell(cell, ns, filename="<cell m>")
        n = 6 if COUNTS_EVERY_CALL else min(6, JIT_CALLS_WATCHED)
        got = sorted((t.name, t.calls, t.call_sites) for t in ct.traces if t.kind == "jit")
        assert got == [("bwd", n, [("<cell m>", 12, n)]), ("fwd", n, [("<cell m>", 11, n)])]


def test_failed_trace_in_a_cell_keeps_its_partial_graph(dispatch_state):
    ns = fresh_ns()
    cell = ("@jax.jit\n"
            "def f(x):\n"
            "    y = jnp.sin(x) * 2\n"
            "    if y.sum() > 0:\n"
            "        return y\n"
            "    return -y\n"
            "f(jnp.ones(3))\n")
    ct = jaxviz.trace_cell(cell, ns, filename="<cell p>")
    assert isinstance(ct.error, jax.errors.TracerBoolConversionError)
    t = ct.traces[0]
    assert t.name == "f" and t.error is ct.error
    ops = [n.op for n in t.graph.body.nodes if n.kind == "eqn"]
    assert ops[:2] == ["sin", "mul"] and "gt" in ops
    d = next(d for d in ct.diagnostics if d.rule == "tracer-bool")
    assert d.line == 4 and d.node_ids
    gt = [t.graph.bodies[int(b)].nodes[int(n)] for b, n in (i.split(":") for i in d.node_ids)]
    assert {n.op for n in gt} >= {"gt"} and all(n.loc.line == 4 for n in gt)
    assert d in t.diagnostics


def test_successful_traces_leave_no_partial_graph(dispatch_state):
    ns = fresh_ns()
    ct = jaxviz.trace_cell("y = step(jnp.ones((2, 2)), jnp.ones((2, 2)))\n"
                           "j = jax.make_jaxpr(jnp.sin)(1.0)\nraise ValueError('after')\n", ns)
    assert isinstance(ct.error, ValueError)
    assert all(t.error is None for t in ct.traces)


def _python_path_calls(fun, call, n=5) -> int:
    """How many of n calls of `call()` went through JAX's Python dispatch path for `fun`."""
    from jax._src import pjit

    seen = []
    orig = pjit._run_python_pjit
    pjit._run_python_pjit = lambda *a: (seen.append(a[2] is fun), orig(*a))[1]
    try:
        for _ in range(n):
            call()
    finally:
        pjit._run_python_pjit = orig
    return sum(seen)


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_cell_leaves_the_fast_path_of_functions_it_did_not_call(dispatch_state):
    ns = fresh_ns()
    x0 = jnp.ones(3)
    jnp.sin(x0)  # a library's jit, warm: its C++ dispatch entry serves the next call
    assert jnp.sin._cache_size() >= 1
    # a warm function called in the cell is still seen (its first call through Python)...
    cell = "for _ in range(3):\n    r = step(jnp.ones((2, 2)), jnp.eye(2))\n"
    for _ in range(2):
        ct = jaxviz.trace_cell(cell, ns)
        called = [(t.name, t.calls) for t in ct.traces if t.kind == "jit" and t.user_code]
        assert called == [("step", 3)]
    # ...one the cell did not call keeps its entry: the user's next call skips Python
    assert jnp.sin._cache_size() >= 1
    assert _python_path_calls(jnp.sin.__wrapped__, lambda: jnp.sin(x0)) == 0


def test_a_warm_function_called_only_by_map_in_the_cell_is_seen(dispatch_state):
    # no CALL event fires where C code (map) calls it: the cell's own functions are emptied
    ns = fresh_ns()
    exec("@jax.jit\ndef dbl(x):\n    return x * 2\nxs = [jnp.ones(3)] * 2\nlist(map(dbl, xs))\n", ns)
    ct = jaxviz.trace_cell("ys = list(map(dbl, xs))\n", ns)
    assert "dbl" in [t.name for t in ct.traces], [t.name for t in ct.traces]


def _python_path_fun_calls(fun, cell, ns) -> tuple:
    """The CellTrace of `cell` and how many of its calls went through JAX's Python path
    for `fun` (the user's function a jit wraps)."""
    from jax._src import pjit

    seen = []
    orig = pjit._run_python_pjit
    pjit._run_python_pjit = lambda *a: (seen.append(a[2] is fun), orig(*a))[1]
    try:
        ct = jaxviz.trace_cell(cell, ns)
    finally:
        pjit._run_python_pjit = orig
    return ct, sum(seen)


def _jits(ct):
    """The user's own jitted functions in the trace (not jnp.eye's)."""
    return [(t.name, t.calls, t.args_spec) for t in ct.traces if t.kind == "jit" and t.user_code]


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_function_an_earlier_cell_traced_keeps_the_fast_path(dispatch_state):
    ns = fresh_ns()
    cell = "x = jnp.ones((2, 2))\nfor _ in range(3):\n    x = step(x, jnp.eye(2))\n"
    ct, python = _python_path_fun_calls(ns["step"].__wrapped__, cell, ns)
    first = _jits(ct)
    assert first == [("step", 3, first[0][2])] and python == 1
    # the next cell's calls of the one signature the earlier cell saw: none through Python,
    # and the same trace (its jaxpr, its shapes, its calls counted)
    ct, python = _python_path_fun_calls(ns["step"].__wrapped__, cell, ns)
    assert python == 0
    assert _jits(ct) == first
    assert ct.traces[0].call_sites == [(ct.filename, 3, 3)]
    # another signature at the same place: seen on the Python path, counted as its own
    other = "for _ in range(2):\n    y = step(jnp.ones((3, 3)), jnp.eye(3))\n"
    ct, python = _python_path_fun_calls(ns["step"].__wrapped__, other, ns)
    assert python == 1 and [(n, c) for n, c, _ in _jits(ct)] == [("step", 2)]
    assert ct.traces[0].args_spec[0].shape == (3, 3)
    # an argument of the known shape, another type (weakly typed): the call misses the known
    # entry and comes through Python; only its own signature is in the trace
    ns2 = fresh_ns()
    jaxviz.trace_cell("a = step(jnp.ones((2, 2)), jnp.eye(2))\n", ns2)
    ct, python = _python_path_fun_calls(
        ns2["step"].__wrapped__, "b = step(jnp.full((2, 2), 2.0), jnp.eye(2))\n", ns2
    )
    assert python == 1
    assert [(n, c) for n, c, _ in _jits(ct)] == [("step", 1)], _jits(ct)
    assert not [d for d in ct.diagnostics if d.rule == "recompile"], ct.diagnostics


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_function_an_earlier_cell_traced_with_two_signatures_keeps_the_fast_path_for_both(
    dispatch_state,
):
    # a loop's last batch is smaller: two signatures, told apart by the first argument's
    # shape. The next cell's calls of both stay on the fast path, with the same traces and
    # counts, and no recompile; a third signature comes through Python, counted apart
    ns = fresh_ns()
    cell = "for n in (4, 4, 3):\n    y = step(jnp.ones((n, n)), jnp.eye(n))\n"
    ct, python = _python_path_fun_calls(ns["step"].__wrapped__, cell, ns)
    first = sorted(_jits(ct), key=lambda j: j[1])
    assert [(n, c, s[0].shape) for n, c, s in first] == [("step", 1, (3, 3)), ("step", 2, (4, 4))]
    assert python == 2
    ct, python = _python_path_fun_calls(ns["step"].__wrapped__, cell, ns)
    assert python == 0
    assert sorted(_jits(ct), key=lambda j: j[1]) == first
    assert not [d for d in ct.diagnostics if d.rule == "recompile"], ct.diagnostics
    # one signature only, then both and a third
    ct, python = _python_path_fun_calls(
        ns["step"].__wrapped__, "y = step(jnp.ones((3, 3)), jnp.eye(3))\n", ns
    )
    assert python == 0 and [(n, c) for n, c, _ in _jits(ct)] == [("step", 1)]
    assert _jits(ct)[0][2][0].shape == (3, 3)
    more = "for n in (4, 2, 3, 2):\n    y = step(jnp.ones((n, n)), jnp.eye(n))\n"
    ct, python = _python_path_fun_calls(ns["step"].__wrapped__, more, ns)
    assert python == 1
    shapes = sorted((s[0].shape, c) for _n, c, s in _jits(ct))
    assert shapes == [((2, 2), 2), ((3, 3), 1), ((4, 4), 1)], shapes


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_loops_weakly_typed_first_state_keeps_the_later_calls_on_the_fast_path(dispatch_state):
    # `w = jnp.full(..., 0.5)` is weakly typed, the step's outputs are not: one place calls
    # two signatures, the first call's and the others'. Told apart by the first argument,
    # each keeps the fast path after its first call (before, every later call took JAX's
    # Python path: one place of two signatures, its fast calls no one signature's)
    ns = fresh_ns()
    cell = "w = jnp.full((2, 2), 0.5)\nfor _ in range(12):\n    w = step(w, jnp.eye(2))\n"
    ct, python = _python_path_fun_calls(ns["step"].__wrapped__, cell, ns)
    weak = sorted((s[0].weak_type, c) for _n, c, s in _jits(ct))
    assert weak == [(False, 11), (True, 1)], weak
    assert python == 2
    # (the retrace the weak type costs is still found: the user's to fix)
    again = [d for d in ct.diagnostics if d.rule == "recompile"]
    assert len(again) == 1 and "weak type" in again[0].message, ct.diagnostics


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_librarys_jit_with_integer_results_keeps_the_fast_path_a_float_ones_does_not(
    dispatch_state,
):
    # jnp.equal's results cannot be NaN: an earlier cell's trace of its one signature serves
    # the next cell's first call, on JAX's fast path; jnp.sin's outputs are checked at its
    # first call in each cell (eager code's NaNs are found there), through Python
    ns = fresh_ns()
    exec("ids = jnp.arange(4)\nx = jnp.ones(4)\n", ns)
    cell = "m = jnp.equal(ids, 2)\ns = jnp.sin(x)\n"

    def traced():
        ct, eq = _python_path_fun_calls(jnp.equal.__wrapped__, cell, ns)
        shown = [(t.name, t.calls, [s[1:] for s in t.call_sites]) for t in ct.traces
                 if t.name == "equal"]
        return shown, eq, _python_path_fun_calls(jnp.sin.__wrapped__, cell, ns)[1]

    first, eq, sin = traced()
    assert first == [("equal", 1, [(1, 1)])] and (eq, sin) == (1, 1)
    again, eq, sin = traced()
    assert again == first and (eq, sin) == (0, 1)


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_known_function_handed_to_map_is_seen(dispatch_state):
    ns = fresh_ns()
    jaxviz.trace_cell("y = step(jnp.ones((2, 2)), jnp.eye(2))\n", ns)
    exec("from functools import partial\nxs = [jnp.ones((2, 2))] * 3\n", ns)
    ct = jaxviz.trace_cell("ys = list(map(step, xs, [jnp.eye(2)] * 3))\n", ns)
    assert [n for n, _c, _s in _jits(ct)] == ["step"]


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_known_function_after_jax_clear_caches_comes_through_python(dispatch_state):
    ns = fresh_ns()
    cell = "y = step(jnp.ones((2, 2)), jnp.eye(2))\n"
    ct = jaxviz.trace_cell(cell, ns)
    del ct
    jax.clear_caches()
    gc.collect()
    ns["step"](jnp.ones((2, 2)), jnp.eye(2))  # a plain call: one entry again
    ct, python = _python_path_fun_calls(ns["step"].__wrapped__, cell, ns)
    assert python == 1 and [(n, c) for n, c, _ in _jits(ct)] == [("step", 1)]


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_nan_from_a_known_functions_unchecked_call_is_found_at_its_line(dispatch_state):
    ns = fresh_ns()
    exec("@jax.jit\ndef lg(x):\n    return jnp.log(x)\nx = jnp.ones(4)\nxm = -x\n", ns)
    assert not jaxviz.trace_cell("y = lg(x)\n", ns).diagnostics
    ct, python = _python_path_fun_calls(ns["lg"].__wrapped__, "z = 1\ny = lg(xm)\n", ns)
    assert python == 0
    nans = [d for d in ct.diagnostics if d.rule == "nan"]
    assert [(d.line, d.severity) for d in nans] == [(2, "error")], ct.diagnostics
    assert "`y` holds NaN" in nans[0].message and "unchecked" in nans[0].message
    # a NaN the call's input held (data with a NaN) is no finding, as the first call's
    # check would have said
    exec("xn = jnp.full(4, jnp.nan).astype(x.dtype)\nassert not xn.weak_type\n", ns)
    ct, python = _python_path_fun_calls(ns["lg"].__wrapped__, "w = lg(xn)\n", ns)
    assert python == 0 and not [d for d in ct.diagnostics if d.rule == "nan"], ct.diagnostics


@pytest.mark.skipif(hasattr(sys, "monitoring"), reason="Python < 3.12: watched calls")
def test_a_loops_function_keeps_its_fast_entry_after_the_cell(dispatch_state):
    # its first watched call leaves no "never fast" entry (its entries were emptied while
    # it ran), so the cell's end does not drop the fast one its last watched call made:
    # the user's next plain call skips Python
    ns = fresh_ns()
    ct = jaxviz.trace_cell("for _ in range(5):\n    y = step(jnp.ones((2, 2)), jnp.eye(2))\n", ns)
    want = [("step", not COUNTS_EVERY_CALL)]  # (the call counter counts the fast calls too)
    assert [(t.name, t.calls_uncounted) for t in ct.traces if t.user_code] == want
    a, b = jnp.ones((2, 2)), jnp.eye(2)
    assert _python_path_calls(ns["step"].__wrapped__, lambda: ns["step"](a, b)) == 0


def test_eager_ops_keep_the_fast_path_of_jaxs_own_calls(dispatch_state):
    # an eager op runs a jitted primitive inside JAX; jaxviz does not watch it, so it may be
    # cached fast: its later applications skip JAX's Python dispatch path
    ns = fresh_ns()
    ns["x"] = jnp.ones(3)
    jaxviz.trace_cell("y = x\nfor _ in range(50):\n    y = jax.lax.add(y, 1.0)\n", ns)
    assert float(ns["y"][0]) == 51.0
    from jax._src import pjit

    seen = []
    orig = pjit._run_python_pjit
    pjit._run_python_pjit = lambda *a: (seen.append(a[1]), orig(*a))[1]
    try:
        jaxviz.trace_cell("z = x\nfor _ in range(50):\n    z = jax.lax.add(z, 1.0)\n", ns)
    finally:
        pjit._run_python_pjit = orig
    assert len(seen) <= 2, f"{len(seen)} of 50 eager adds went through JAX's Python path"


def test_a_cell_keeps_the_fast_path_of_jaxs_per_primitive_jits_and_sees_warm_ones(
    dispatch_state,
):
    # Each eager op runs a jit JAX made for its primitive; jaxviz sees the op at its bind,
    # so emptying those jits' C++ entries (as Python 3.11, with no CALL events, empties the
    # user's) would only send each op's first application in a cell through JAX's Python
    # path (~0.15 ms each: ~8 ms on an eager grad/vmap cell). The user's warm jit is seen.
    ns = fresh_ns()
    cell = ("x = jnp.linspace(0.0, 1.0, 5)\n"
            "y = jax.lax.sin(x) * 2.0 + jax.lax.cos(x)\n"
            "z = step(jnp.ones((2, 2)), jnp.eye(2))\n")
    exec(cell, ns)  # warm: every jit and primitive of the cell ran before, plainly
    from jax._src import pjit

    seen = []
    orig = pjit._run_python_pjit
    pjit._run_python_pjit = lambda *a: (seen.append(a[2]), orig(*a))[1]
    try:
        ct = jaxviz.trace_cell(cell, ns)
    finally:
        pjit._run_python_pjit = orig
    assert ct.error is None
    per_primitive = [f.__name__ for f in seen if getattr(f, "_apply_primitive", False)]
    assert not per_primitive, f"per-primitive jits through JAX's Python path: {per_primitive}"
    names = [t.name for t in ct.traces]
    assert "step" in names and "_linspace" in names, names
    assert any(t.kind == "eager" for t in ct.traces), names


def test_the_jits_plain_code_ran_between_cells_are_emptied_for_the_next_and_seen(
    dispatch_state,
):
    # A cell with no CALL events (Python 3.11) empties, at its start, the C++ entries of
    # the jits that may hold some: those whose Python path ran since they were last emptied
    # (dispatch._JitBook; the ~350 jits of jax.numpy are not touched each cell). The plain
    # code between two cells makes entries again, for the user's jit, a library's and a
    # jit made anew: each one is emptied, and the next cell sees all three.
    from jaxviz._compat import dispatch

    dispatch.forget_jits()  # a book opened now, outside any recording's hooks
    book = dispatch._jit_book()
    assert book is not None and book.tracking()
    ns = fresh_ns()
    cell = ("x = jnp.linspace(0.0, 1.0, 4)\n"
            "z = step(jnp.ones((2, 2)), jnp.eye(2))\n"
            "w = jax.jit(lambda v: v * 3.0)(x)\n")
    jaxviz.trace_cell(cell, ns)
    exec(cell, ns)  # plain, between the cells: entries made again

    def entries():  # each jit the book knows of, by its function's name
        out: dict[str, int] = {}
        for refs in list(book.by_fun.values()):
            for f in filter(None, (r() for r in refs)):
                name = getattr(dispatch.jit_wrapped_fun(f), "__name__", "")
                out[name] = out.get(name, 0) + max(0, dispatch.cache_entries(f))
        return out

    made = entries()
    assert dispatch.cache_entries(ns["step"]) == 1 and made["_linspace"] >= 1 and book.filled
    dispatch.clear_cpp_dispatch_caches()
    assert not book.filled and not any(entries().values())
    ct = jaxviz.trace_cell(cell, ns)
    names = [t.name for t in ct.traces]
    assert "step" in names and "_linspace" in names and "<lambda>" in names, names
    assert float(ns["w"][-1]) == 3.0


def test_the_plain_code_after_a_cell_keeps_the_fast_path_of_what_the_cell_ran(dispatch_state):
    # the C++ dispatch entries the cell's eager ops and its busy jitted call made serve the
    # user's next plain code: only those that say "never fast" are dropped (Python 3.11
    # dropped them all: a plain eager grad/vmap cell after a traced one took 1.4x as long)
    ns = fresh_ns()
    ns["x"] = jnp.ones(3)
    cell = "y = x\nfor _ in range(30):\n    y = jax.lax.add(y, 1.0)\n    z = step(y, y)\n"
    ct = jaxviz.trace_cell(cell, ns)
    assert ct.error is None and float(ns["y"][0]) == 31.0
    from jax._src import pjit

    seen = []
    orig = pjit._run_python_pjit
    pjit._run_python_pjit = lambda *a: (seen.append(a[2]), orig(*a))[1]
    try:
        exec(cell, ns)  # the same code, plain
    finally:
        pjit._run_python_pjit = orig
    assert float(ns["y"][0]) == 31.0
    own = ns["step"].__wrapped__  # its entries said "never fast" while watched: dropped
    assert not [f for f in seen if f is not own], f"JAX's own calls through Python: {seen}"
    assert len(seen) <= 1, f"{len(seen)} of 60 calls went through JAX's Python path"


def test_a_jit_made_anew_at_each_call_keeps_the_fast_path_and_its_count(dispatch_state):
    # `jax.jit(body)(i)` in a loop (JAX's docs' "jit called in a loop with caching"): a new
    # jitted object each call, which the function's C++ entries serve. Its first call in
    # the cell goes through Python, the others keep the fast path and are counted.
    ns = fresh_ns()
    src = ("def body(i):\n    return i + 1\n"
           "def loop(n):\n    i = 0\n    while i < n:\n        i = jax.jit(body)(i)\n    return i\n")
    exec(src, ns)
    ns["loop"](20)  # warm: compiled before the cell
    from jax._src import pjit

    seen = []
    orig = pjit._run_python_pjit
    pjit._run_python_pjit = lambda *a: (seen.append(a[2]), orig(*a))[1]
    try:
        ct = jaxviz.trace_cell("r = loop(20)\n", ns)
    finally:
        pjit._run_python_pjit = orig
    assert ct.error is None and int(ns["r"]) == 20
    own = [f for f in seen if f is ns["body"]]
    if hasattr(sys, "monitoring"):  # Python 3.11 watches a call site's first 4 calls
        # one per signature: `i` is a Python int at the first call, an array after
        assert len(own) == 2, f"{len(own)} of 20 calls went through JAX's Python path"
        # the new objects count as one function: its busy call site is "16+ calls"
        bodies = [t for t in ct.traces if t.name == "body"]
        total, more = sum(t.calls for t in bodies), any(t.calls_uncounted for t in bodies)
        assert total == 20 or (more and JIT_CALLS_WATCHED <= total < 20), (total, more)


def test_a_static_function_argument_is_shown_by_name_not_address(dispatch_state):
    src = """
import functools, jax, jax.numpy as jnp
def act(v):
    return v * 2
@functools.partial(jax.jit, static_argnums=1)
def apply(x, fn):
    return fn(x)
y = apply(jnp.ones(3), act)
"""
    ct = jaxviz.trace_cell(src)
    t = ct["apply"]
    assert t.static == "fn=act", t.static
    assert "0x" not in str(ct)


def test_one_place_calling_a_jit_with_two_signatures_counts_each_at_its_line(dispatch_state):
    """A helper's line that calls jax.random.normal for two shapes (an MLP's init): the same
    place, jit and first argument's type serve two signatures; each is called once there
    (counted before by the one called last: '2 calls' for one, no line for the other)."""
    ns = fresh_ns()
    cell = ("def init(key, sizes):\n"
            "    return [jax.random.normal(key, (m, n)) for m, n in zip(sizes[:-1], sizes[1:])]\n"
            "ps = init(jax.random.key(0), [4, 16, 1])\n"
            "qs = init(jax.random.key(1), [4, 16, 1])\n")
    ct = jaxviz.trace_cell(cell, ns, filename="<cell n>")
    normals = sorted((t for t in ct.traces if t.name == "_normal"), key=lambda t: t.signature)
    assert len(normals) == 2, [t.signature for t in normals]
    for t in normals:
        assert t.calls == 2 and t.call_sites == [("<cell n>", 2, 2)], (t.signature, t.call_sites)


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_place_whose_shapes_keep_changing_keeps_the_fast_path_with_lower_bounds(
        dispatch_state):
    """A loop over buckets (a shape changes at every step): the place's calls take the
    Python path for a while, then the fast path; each signature's count is then a lower
    bound ("+"), never another signature's calls. Alike when the first argument's shape
    tells the signatures apart: the place, turned off for one, counts none after it."""
    for args in ("jnp.ones((2, 2)), jnp.ones((2, 1 + i % 3))",   # the same first argument
                 "jnp.ones((1 + i % 3, 2)), jnp.eye(2)"):        # its shape changes
        ns = fresh_ns()
        cell = f"for i in range(60):\n    y = step({args})\n"
        ct = jaxviz.trace_cell(cell, ns, filename="<cell b>")
        steps = [t for t in ct.traces if t.name == "step"]
        counts = [(t.signature, t.calls, t.calls_uncounted) for t in steps]
        assert len(steps) == 3 and all(t.calls_uncounted for t in steps), counts
        assert all(1 <= t.calls <= 20 for t in steps) and sum(t.calls for t in steps) < 60, counts
        heads = [ln for ln in str(ct).splitlines() if ln.startswith("jit step(")]
        assert len(heads) == 3 and all("+ calls (line 2" in ln for ln in heads), heads


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_place_turned_off_for_one_jit_leaves_the_others_there_lower_bounds(dispatch_state):
    """One place calling two jits in turn: turned off after one's 16th call, it sees the
    other's no more either; both counts are lower bounds (before: '15 calls' for 20)."""
    ns = fresh_ns()
    exec("f1 = jax.jit(lambda v: v * 2)\nf2 = jax.jit(lambda v: v + 1)\nx = jnp.ones(3)\n", ns)
    ct = jaxviz.trace_cell("for i in range(40):\n    y = (f1, f2)[i % 2](x)\n", ns)
    jits = [(t.calls, t.calls_uncounted) for t in ct.traces if t.kind == "jit" and t.user_code]
    assert len(jits) == 2 and all(more and n < 20 for n, more in jits), jits


@pytest.mark.parametrize("batch", ["jnp.ones((n, 2))", "jnp.ones((n, 2)) + jnp.zeros((n, 2))"])
def test_a_ragged_last_batch_is_counted_as_a_lower_bound(dispatch_state, batch):
    """Epochs over batches whose last one is smaller: the small batch's signature is first
    called after the place went busy, then runs unseen; its count says so ('1+'). (Python
    3.11: the statement, summarised after 16 runs alike, is not anymore: its counted runs
    could not tell the small batch's calls from the others')"""
    ns = fresh_ns()
    cell = ("w = jnp.eye(2)\n"
            "for epoch in range(3):\n"
            "    for n in [4] * 16 + [3]:\n"
            f"        y = step({batch}, w)\n")
    ct = jaxviz.trace_cell(cell, ns, filename="<cell r>")
    steps = {t.signature: t for t in ct.traces if t.name == "step"}
    small, big = steps["f32[3,2], f32[2,2]"], steps["f32[4,2], f32[2,2]"]
    assert 1 <= small.calls <= 3 and (small.calls == 3 or small.calls_uncounted), (
        small.calls, small.calls_uncounted)
    assert big.calls <= 48 and (big.calls == 48 or big.calls_uncounted), (
        big.calls, big.calls_uncounted)


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_a_place_one_cell_turned_off_is_watched_again_in_the_next(dispatch_state):
    # CALL events turned off in one cell stay off (sys.monitoring keeps them so) unless
    # jaxviz turns them on again: the next cell must still see every call of its jits there
    ns = fresh_ns()
    exec(
        "def apply(f, v):\n    return f(v)\n"
        "fns = {'dbl': jax.jit(lambda v: v * 2)}\n"  # in no variable: not emptied at entry
        "x = jnp.ones(3)\nfns['dbl'](x)\n",  # warm: JAX's fast path serves it
        ns,
    )
    # a place in a user's function calls a builtin there (no JAX work), then a jit
    jaxviz.trace_cell("for _ in range(40):\n    r = apply(id, x)\n", ns)
    ct = jaxviz.trace_cell("for _ in range(5):\n    r = apply(fns['dbl'], x)\n", ns)
    calls = [(t.name, t.calls) for t in ct.traces if t.kind == "jit"]
    assert calls == [("<lambda>", 5)], calls


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
@pytest.mark.parametrize("rows", [4, 40])
def test_a_library_place_that_called_the_users_code_sees_a_jit_there_next(rows, dispatch_state):
    # numpy's apply_along_axis calls what it is handed: a plain function of the user's in
    # one cell, a jit in the next. The place's event stays on for its first calls (4 rows:
    # no place need be turned on again), or is turned off and on again before the next
    # cell (40 rows): either way the next cell sees each call of the jit there.
    ns = fresh_ns()
    exec(
        "import numpy as np\n"
        "fns = {'dbl': jax.jit(lambda v: v * 2)}\n"  # in no variable: not emptied at entry
        f"m = np.ones(({rows}, 3), np.float32)\nfns['dbl'](m[0])\n",  # warm
        ns,
    )
    jaxviz.trace_cell("r = np.apply_along_axis(lambda v: v + 1, 1, m)\n", ns)
    ct = jaxviz.trace_cell("r = np.apply_along_axis(fns['dbl'], 1, m)\n", ns)
    assert ct.error is None and float(ns["r"].sum()) == 6.0 * rows
    calls = [(t.name, t.calls, t.calls_uncounted) for t in ct.traces if t.kind == "jit"]
    assert [c[0] for c in calls] == ["<lambda>"], calls
    assert calls[0][1] == rows or (calls[0][2] and calls[0][1] >= JIT_CALLS_WATCHED), calls


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_between_cells_places_turn_off_once_and_unloading_frees_its_tools(ip):
    # Between traced cells jaxviz's held tool keeps its CALL events set: a plain cell's
    # places fire once each and are off for good, so a plain loop pays nothing per call;
    # the next traced cell still sees every call of a function defined before it
    from jaxviz.capture import events

    mon = sys.monitoring
    ip.run_cell("%%jaxtrace -q\nimport jax, jax.numpy as jnp\ny = jnp.ones(3) + 1\n")
    held = [i for i in range(6) if mon.get_tool(i) == "jaxviz"]
    assert [i for i in held if mon.get_events(i)] == [events.MONITOR.tool]
    seen: list = []
    idle = events.idle_call_event

    def counting(*a):
        seen.append(a[0].co_name)
        return idle(*a)

    ip.run_cell("@jax.jit\ndef dbl(v):\n    return v * 2\ndef steps(v):\n"
                "    for _ in range(5):\n        v = dbl(v)\n    return v\n")
    events.idle_call_event = counting
    try:
        mon.register_callback(events.MONITOR.tool, mon.events.CALL, counting)
        ip.run_cell("z = steps(jnp.ones(3))\nz = steps(z)\n")
    finally:
        events.idle_call_event = idle
        mon.register_callback(events.MONITOR.tool, mon.events.CALL, idle)
    assert seen.count("steps") == 2, seen  # steps' two places: `range(5)`, `dbl(v)`, once
    ip.run_cell("%%jaxtrace -q -o ct\nfor _ in range(3):\n    z = steps(z)\n")
    ct = ip.user_ns["ct"]
    assert [(t.name, t.calls) for t in ct.traces if t.kind == "jit"] == [("dbl", 15)]
    ip.run_cell("%unload_ext jaxviz")
    try:
        assert all(mon.get_tool(i) != "jaxviz" for i in range(6))
    finally:
        ip.run_cell("%load_ext jaxviz")


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_trace_cell_after_traced_cells_sees_places_a_plain_cell_turned_off(ip):
    # a plain cell turns the places of a user's function off (the magic's events stay set
    # between cells); trace_cell, run from a later plain cell, still counts each call there
    ip.run_cell("%%jaxtrace -q\nimport jax, jax.numpy as jnp, jaxviz\n_ = jnp.ones(2) + 1\n")
    ip.run_cell("@jax.jit\ndef tpl(v):\n    return v * 3\ndef thrice(v):\n"
                "    for _ in range(3):\n        v = tpl(v)\n    return v\n"
                "w = thrice(jnp.ones(2))\n")
    ip.run_cell("ct = jaxviz.trace_cell('for _ in range(2):\\n    w = thrice(w)\\n', globals())")
    ct = ip.user_ns["ct"]
    assert [(t.name, t.calls) for t in ct.traces if t.kind == "jit"] == [("tpl", 6)]
    ip.run_cell("%%jaxtrace -q -o ct\nw = thrice(w)\n")
    assert [(t.name, t.calls) for t in ip.user_ns["ct"].traces if t.kind == "jit"] == [("tpl", 3)]


def test_unloading_restores_jax_jits_factory(ip):
    # clear_cpp_dispatch_caches knows the live jits through a wrapper on jax.jit's factory
    # (installed at its first use): %unload_ext gives JAX its own back
    from jax._src import pjit

    from jaxviz import _compat

    _compat.clear_cpp_dispatch_caches()
    wrapped = pjit._cpp_pjit
    f = jax.jit(lambda x: x + 1)
    assert float(f(1.0)) == 2.0
    ip.run_cell("%unload_ext jaxviz")
    try:
        assert pjit._cpp_pjit is not wrapped
        assert pjit._cpp_pjit.__module__ == "jax._src.pjit"
        assert pjit._run_python_pjit.__module__ == "jax._src.pjit"  # (its tracker: gone)
        assert float(jax.jit(lambda x: x * 3)(2.0)) == 6.0
    finally:
        ip.run_cell("%load_ext jaxviz")


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_dataclass_generated_code_is_not_watched_each_cell_and_its_jit_calls_count(ip):
    # a dataclass's __init__ is code Python made with exec ("<string>", as the user's own
    # exec'd code): not the user's, so its places are not watched again each traced cell;
    # the jits its __post_init__ and its default_factory call are still counted
    from jaxviz.capture import events

    ip.run_cell(
        "%%jaxtrace -q\nimport dataclasses, jax, jax.numpy as jnp\n"
        "@jax.jit\ndef half(v):\n    return v / 2\n"
        "@jax.jit\ndef zeros():\n    return jnp.zeros(2)\n"
        "@dataclasses.dataclass\nclass Box:\n    v: jax.Array\n"
        "    z: jax.Array = dataclasses.field(default_factory=zeros)\n"
        "    def __post_init__(self):\n        self.v = half(self.v)\n"
        "b = Box(jnp.ones(2))\n"
    )
    for _ in range(2):
        ip.run_cell("b = Box(b.v)\n")  # plain: their places turn off
        ip.run_cell("%%jaxtrace -q -o ct\nfor _ in range(3):\n    b = Box(b.v)\n")
        calls = sorted((t.name, t.calls) for t in ip.user_ns["ct"].traces if t.kind == "jit")
        assert calls == [("half", 3), ("zeros", 3)]
    refs = list(events.MONITOR.revive.values())
    kept = [c for c in (w() for w in refs) if c is not None]
    # of such code, only Box's __init__ is kept: it calls the user's __post_init__
    box_init = ip.user_ns["Box"].__init__.__code__
    assert [c for c in kept if c.co_filename == "<string>"] == [box_init]
    assert ip.user_ns["b"].v.tolist() == [2.0**-9] * 2  # each Box halved it: 1 + 2 * (1 + 3)


@pytest.mark.skipif(not COUNTS_EVERY_CALL, reason="Python 3.11's call counter (3.12: CALL events)")
def test_python_311_the_call_counter_is_gone_after_the_cell_and_from_its_tracebacks():
    """The counter gives jit's type a Python __call__ for the cell: after it, even one that
    failed, the type is JAX's own again (its C slot and vectorcall flag). A call that JAX's
    C++ fast path stops (a donated buffer passed again) ends its traceback at the user's
    line, as without jaxviz: the counter's frame is unlinked."""
    import traceback

    from jaxviz._compat.calls import _HAVE_VECTORCALL, _flags_of
    from jaxviz._compat.frames import JIT_FUNCTION_TYPE
    from jaxviz.capture.cell import drop_hook_frames

    own = JIT_FUNCTION_TYPE.__dict__["__call__"]
    f = jax.jit(lambda x: x * 2, donate_argnums=0)
    f(jnp.ones(3))
    src = "y = f(jnp.ones(3))\nz = f(y)\nw = f(y)\n"

    def frames(e):
        return [(s.filename, s.lineno) for s in traceback.extract_tb(e.__traceback__)]

    plain: BaseException | None = None
    try:
        exec(compile(src, "<donated>", "exec"), {"f": f, "jnp": jnp})
    except Exception as e:
        plain = e
    assert plain is not None
    ct = jaxviz.trace_cell(src, {"f": f, "jnp": jnp}, filename="<donated>")
    assert type(ct.error) is type(plain) and str(ct.error) == str(plain)
    assert frames(ct.error)[-1][0].endswith("calls.py")  # the counter's frame, until unlinked
    assert drop_hook_frames(ct.error)
    assert frames(ct.error)[-1] == frames(plain)[-1] == ("<donated>", 3)
    assert JIT_FUNCTION_TYPE.__dict__["__call__"] is own
    assert _flags_of(JIT_FUNCTION_TYPE).value & _HAVE_VECTORCALL
    (t,) = [t for t in ct.traces if t.kind == "jit"]
    assert t.calls == 3, t.call_sites  # the failed call was made, as a CALL event says


def test_is_top_level_answers_as_jax_s_own_check():
    # _compat.is_top_level reads JAX's two thread-local trace states itself (JAX's
    # trace_state_clean goes through its TracingContext's properties: twice the time, at
    # each watched call and eager op): the same answer at top level, inside jit, vmap and
    # grad, and in a thread that never set them
    import threading

    from jax._src import core

    from jaxviz import _compat

    seen = []

    def probe(x=None):
        seen.append((_compat.is_top_level(), core.trace_state_clean()))
        return x

    probe()
    jax.jit(probe)(1.0)
    jax.vmap(probe)(jnp.ones(2))
    jax.grad(probe)(1.0)
    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    assert seen == [(True, True), (False, False), (False, False), (False, False), (True, True)]


def test_calls_of_another_thread_at_a_place_the_cell_repeats_are_not_the_cells():
    # a place of the user's whose call repeats keeps a memo of it (Place): another thread's
    # calls there are neither counted nor take the memo from the cell's next calls
    cell = (
        "import threading\n"
        "def apply(x):\n"
        "    return step(x, w)\n"
        "x = jnp.ones((4, 4)); w = jnp.eye(4) * 0.5\n"
        "for i in range(5):\n"
        "    x = apply(x)\n"
        "t = threading.Thread(target=lambda: [apply(x) for _ in range(7)])\n"
        "t.start(); t.join()\n"
        "for i in range(3):\n"
        "    x = apply(x)\n"
    )
    ct = jaxviz.trace_cell(cell, fresh_ns())
    assert ct.error is None
    assert ct["step"].calls == 8 and not ct["step"].calls_uncounted, str(ct)


SCAN_GRAD = """
import jax, jax.numpy as jnp
def loss(w, x, idx):
    def body(c, wi):
        return jnp.tanh(c @ wi)[:, idx], None
    return jax.lax.scan(body, x, w)[0].sum()
g = jax.jit(jax.grad(loss))(jnp.ones((3, 4, 4)), jnp.ones((2, 4)), jnp.arange(4))
total = float(g.sum())
"""


def test_a_gradient_of_a_scan_with_an_index_in_its_body_is_analysed(dispatch_state):
    # jax 0.12 transposes a scan with an FTPyTree as its `ft_in`, which has no `elts`: the
    # out-of-bounds check raised AttributeError out of trace_cell (and, in flax's GSPMD
    # guide under python -m jaxviz, out of the user's `train_step(...)`)
    ns: dict = {}
    ct = jaxviz.trace_cell(SCAN_GRAD, ns)
    exec(SCAN_GRAD, plain := {})
    assert ct.error is None and ns["total"] == plain["total"]
    assert ct.analysis_error is None, repr(ct.analysis_error)


def test_jaxvizs_own_failure_in_a_check_or_an_observer_never_reaches_the_user(
    dispatch_state, monkeypatch
):
    # whatever fails inside jaxviz, during the call (an observer's on_jit) or after it (the
    # cell's analysis), the cell's results are its own and trace_cell returns: the failure
    # is the record's note (`analysis_error`, said in the text), never the user's exception
    from jaxviz import _compat
    from jaxviz.diagnostics.observer import CellObserver

    def broken(*a, **k):
        raise AttributeError("jaxviz's own bug")

    monkeypatch.setattr(_compat, "scan_counts", broken)
    real = CellObserver.on_jit

    def on_jit(self, call, frame, run):
        out = real(self, call, frame, run)
        raise RuntimeError("an observer's bug after the call")

    monkeypatch.setattr(CellObserver, "on_jit", on_jit)
    ns: dict = {}
    ct = jaxviz.trace_cell(SCAN_GRAD, ns)
    exec(SCAN_GRAD, plain := {})
    assert ct.error is None and ns["total"] == plain["total"]
    assert isinstance(ct.analysis_error, AttributeError)
    from jaxviz.view.text import cell_text

    assert "could not finish this cell's analysis" in cell_text(ct) and "jaxviz's own bug" in cell_text(ct)
    # the user's own exception still reaches the user, unchanged
    bad = jaxviz.trace_cell("import jax, jax.numpy as jnp\njax.jit(lambda x: x @ x)(jnp.ones(3) + jnp.ones(4))\n")
    assert type(bad.error).__name__ == "TypeError", repr(bad.error)

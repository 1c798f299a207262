"""%timeit inside a traced cell times what a plain cell times (issue 45, item 3).

In JAX's "thinking in JAX" notebook a `%timeit` cell ran 31.9 s plain and 0.28 s traced:
%timeit picks its loop count from the time of its first 1, 10, 100, ... runs, and watched,
a statement's first calls cost more (the eager statement staged, JAX's Python path, the
first-call checks), so a traced %timeit chose other loop counts, and timed jaxviz's hooks.
Now jaxviz steps aside while IPython's %timeit / %%timeit run (Recorder.suspended): JAX's
dispatch inside them is JAX's own, and the capture goes on after them. Through IPython's
real shell, both JAX versions.
"""

from __future__ import annotations

SETUP = """
import jax, jax.numpy as jnp
from jax._src import core as _core, pjit as _pjit
def _dispatch():
    return (_pjit._run_python_pjit, _pjit._get_fastpath_data, _core.EvalTrace.process_primitive)
probe = []
f = jax.jit(lambda x: jnp.sin(x) * 2)
g = jax.jit(lambda x: x + 1)
x = jnp.ones(3)
f(x)
"""
# what a plain cell's JAX dispatch is once a traced cell has run (on Python 3.11 a
# recording installs a tracker of JAX's Python path for good: dispatch._JitBook)
PLAIN = "%%jaxtrace -q\nf(x)\n", "plain_dispatch = _dispatch()\n"


def _setup(ip) -> None:
    ip.run_cell(SETUP)
    for cell in PLAIN:
        ip.run_cell(cell)


def test_timeit_in_a_traced_cell_runs_on_jax_s_own_dispatch(ip, capsys, dispatch_state):
    _setup(ip)
    r = ip.run_cell(
        "%%jaxtrace -q -o ct\n"
        "_t = %timeit -o -q -n 20 -r 2 probe.append(_dispatch() == plain_dispatch); f(x)\n"
        "y = g(x)\n",
        store_history=True,
    )
    assert r.success, r.error_in_exec
    probe = ip.user_ns["probe"]
    assert len(probe) == 40 and all(probe), "jaxviz's hooks were in place inside %timeit"
    assert ip.user_ns["_t"].loops == 20
    ct = ip.user_ns["ct"]
    names = [t.name for t in ct.traces if t.kind == "jit"]
    assert "<lambda>" in names  # g, after the %timeit line: captured again
    assert all(t.calls <= 1 for t in ct.traces if t.kind == "jit"), [
        (t.name, t.calls) for t in ct.traces
    ]  # f's 40 timed calls are not the cell's
    capsys.readouterr()


def test_cell_timeit_under_jaxtrace_runs_on_jax_s_own_dispatch(ip, capsys, dispatch_state):
    _setup(ip)
    r = ip.run_cell(
        "%%jaxtrace -q\n%%timeit -n 5 -r 1\nprobe.append(_dispatch() == plain_dispatch)\nf(x)\n"
    )
    assert r.success, r.error_in_exec
    probe = ip.user_ns["probe"]
    assert len(probe) == 5 and all(probe)
    capsys.readouterr()


def test_timeit_outside_a_traced_cell_is_ipython_s_own(ip, capsys):
    """The wrapper is there only while a traced cell runs."""
    _setup(ip)
    ip.run_cell("%%jaxtrace -q\ny = g(x)\n")
    table = ip.magics_manager.magics["line"]
    assert table["timeit"].__func__.__module__ == "IPython.core.magics.execution"
    capsys.readouterr()


def test_a_function_first_called_in_timeit_is_captured_when_called_after(ip, capsys,
                                                                          dispatch_state):
    """Its fast entries from the %timeit do not hide its later calls (Python 3.11: they are
    emptied again when jaxviz steps back; 3.12: its CALL events still fire)."""
    _setup(ip)
    r = ip.run_cell(
        "%%jaxtrace -q -o ct\n"
        "h = jax.jit(lambda x: x * 3)\n"
        "_t = %timeit -o -q -n 10 -r 2 h(x)\n"
        "y = h(x)\n",
        store_history=True,
    )
    assert r.success, r.error_in_exec
    ct = ip.user_ns["ct"]
    calls = [t.calls for t in ct.traces if t.kind == "jit" and t.name == "<lambda>"]
    assert calls == [1], [(t.name, t.kind, t.calls) for t in ct.traces]
    capsys.readouterr()


def test_the_memory_watch_takes_no_samples_while_timeit_runs(ip, dispatch_state):
    # the default cell's live chart samples device memory from a thread (>= 100 Hz while the
    # cell sleeps): while %timeit times its statement nothing of jaxviz's competes with it,
    # so the samples leave a gap as long as the %timeit; they go on after it
    _setup(ip)
    r = ip.run_cell(
        "%%jaxtrace -o ct\n"
        "import time\n"
        "y = f(x); time.sleep(0.2)\n"
        "t_in = time.perf_counter()\n"
        "%timeit -q -n 400 -r 3 time.sleep(0.0005)\n"
        "t_out = time.perf_counter()\n"
        "time.sleep(0.2); y = f(x)\n"
    )
    assert r.success, r.error_in_exec
    (mem,) = [m.cell for m in ip.user_ns["ct"].memory if m.cell is not None]
    window = ip.user_ns["t_out"] - ip.user_ns["t_in"]
    times = sorted({t for t, _lane, _v in mem.samples})
    gap = max(b - a for a, b in zip(times, times[1:]))
    assert gap >= 0.8 * window, (gap, window)
    assert times[-1] - times[0] > window + 0.2             # sampled before and after it


def test_the_timeit_module_s_loop_is_a_library_s_place(ip, monkeypatch):
    # `min(timeit.repeat(lambda: f(x), number=1, repeat=10))` in a traced cell: timeit's
    # loop (code it makes with exec, file "<timeit-src>") was taken for the user's, and its
    # call of the user's lambda raised a watched CALL event at each run (~1 us, a third of
    # the watched call's cost); it is a library's place calling the user's code: watched
    # once, then off
    import sys

    import pytest

    from jaxviz.capture import calls

    if sys.version_info < (3, 12):
        pytest.skip("CALL events: Python >= 3.12")
    events: list[tuple] = []
    handler = calls.CallHandlers._on_call_event

    def counted(self, code, offset, *args, **kwargs):
        if code.co_filename == "<timeit-src>":
            events.append(offset)
        return handler(self, code, offset, *args, **kwargs)

    monkeypatch.setattr(calls.CallHandlers, "_on_call_event", counted)
    _setup(ip)
    r = ip.run_cell("%%jaxtrace -q -o ct\nimport timeit\n"
                    "best = min(timeit.repeat(lambda: g(x), number=1, repeat=10))\n")
    assert r.success
    assert events and len(events) == len(set(events)), events  # each of its places once
    (t,) = [t for t in ip.user_ns["ct"].traces if t.name == "<lambda>"]  # g: still counted
    assert t.calls == 10, t.calls


def test_a_misuse_only_inside_timeit_is_said_to_be_unwatched(ip, capsys, dispatch_state):
    # issue 54: a jit of a partial made per call (a recompile each time) that runs only inside
    # %timeit had no finding, and the cell did not say that the %timeit body went unwatched
    _setup(ip)
    r = ip.run_cell(
        "%%jaxtrace -q -o ct\n"
        "from functools import partial\n"
        "def scale(x, n):\n"
        "    return x * n\n"
        "%timeit -q -n 3 -r 1 jax.jit(partial(scale, n=3))(x)\n",
        store_history=True,
    )
    assert r.success, r.error_in_exec
    ct = ip.user_ns["ct"]
    (d,) = [d for d in ct.diagnostics if d.rule == "unwatched"]
    assert (d.severity, d.filename, d.line) == ("info", ct.filename, 5), d.format()
    assert "`%timeit -q -n 3 -r 1 jax.jit(partial(scale, n=3))(x)` ran with jaxviz stepped " \
           "aside" in d.message, d.message
    assert "neither recorded nor checked" in d.message
    assert not [t for t in ct.traces if t.kind == "jit"]  # nothing of it was recorded
    # the view says it too: the findings' payload and the text twin
    from jaxviz.view.payload import build_payload
    payload = build_payload(ct.traces, ct.diagnostics, {ct.filename: ct.source})
    assert any(e["rule"] == "unwatched" for e in payload["diagnostics"])
    assert "unwatched" in str(ct)
    # a %%timeit cell: its first line
    r = ip.run_cell("%%jaxtrace -q -o ct2\n%%timeit -n 2 -r 1\ny = x + 1\n", store_history=True)
    assert r.success, r.error_in_exec
    (d,) = [d for d in ip.user_ns["ct2"].diagnostics if d.rule == "unwatched"]
    assert "%%timeit -n 2 -r 1 (y = x + 1)" in d.message, d.message
    capsys.readouterr()

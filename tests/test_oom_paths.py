"""Out of memory on every path XLA reports it (issue 54): CPU's dispatch returns a result that
holds "Out of memory allocating ..." and raises it only at the result's first use, as INTERNAL
or RESOURCE_EXHAUSTED. The finding sits at the call that needs the memory, with a hint that
fits the function as written; an array that holds the error has no buffer, and the live lane
counts it as 0 bytes.

Nothing here allocates the sizes it names: XLA refuses the 596 GiB and 1 TiB buffers (the
inputs are 1.5 and 2 MiB)."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import pytest

import jaxviz
from jaxviz import _compat
from jaxviz.memory.live import HOLDS_ERROR, LiveArrays
from tests.xla_figures import ON_CPU, refused_allocation

pytestmark = pytest.mark.skipif(not ON_CPU, reason="CPU's deferred out-of-memory path")

OUTER = ("import jax, jax.numpy as jnp\n"
         "y = jax.jit(lambda x: jnp.outer(x, x).sort())(jnp.ones(400_000))\n")
READY = "while not y.is_ready():\n    pass\n"  # (the cell waits, never reading `y`)
ERROR = "RESOURCE_EXHAUSTED: Out of memory allocating 640000000000 bytes."

BIG = """import jax, jax.numpy as jnp

@jax.jit
def big(x):
    y = jnp.sort(x[:, None] * x[None, :], axis=0)
    return y.sum()

top = big(jnp.ones(1 << 19))
print(top)
"""


def _wait(x):
    """Until `x` is ready (its dispatch failed, or it ran), never reading it."""
    deadline = time.monotonic() + 60
    while not x.is_ready() and time.monotonic() < deadline:
        time.sleep(0.001)


def _live_peak(mem) -> float:
    """The peak of the live JAX arrays' lanes (not the process's RSS, which a CI run's
    process may take past 1 GiB on its own)."""
    live = {lane.id for lane in mem.lanes if lane.source == "live_arrays"}
    assert live, mem.lanes
    return max(v for k, v in mem.peaks().items() if k in live)


def _oom(ct):
    return [d for d in ct.diagnostics if d.rule == "out-of-memory"]


@refused_allocation
def test_a_result_that_holds_the_error_gets_the_finding_though_the_cell_ran():
    # issue 54, item 1: the cell "succeeds" (dispatch defers the error to the first use of
    # `y`) and there was no finding, while the chart showed 596 GiB live
    ct = jaxviz.trace_cell(OUTER)
    assert ct.error is None
    (d,) = _oom(ct)
    assert (d.line, d.trace) == (2, "<lambda>")
    assert "<lambda> needs more memory than this machine's RAM (" in d.message
    assert "its compiled peak is 596.0 GiB" in d.message
    # `y` holds the error once its dispatch has failed (on another thread, just after the
    # call returned): the cell waits for that, never reading `y`; jaxviz never waits
    ct = jaxviz.trace_cell(OUTER + READY)
    (d,) = _oom(ct)
    assert (d.line, d.severity, d.trace) == (2, "error", "<lambda>")
    assert "`y` holds XLA's error instead of values (RESOURCE_EXHAUSTED: Out of memory " \
           "allocating 640000000000 bytes.); the first use raises it" in d.message
    # the output is what does not fit: a forward-only function is told to return less
    assert "The outputs hold 596.0 GiB: return less" in d.hint
    assert "checkpoint" not in d.hint


@refused_allocation
def test_the_first_use_of_such_a_result_raises_internal_and_the_finding_is_at_the_call():
    # issue 54, item 2: `print(y[0, :3])` raised "INTERNAL: ... Out of memory allocating
    # 640000000000 bytes": no finding (only RESOURCE_EXHAUSTED was read as out of memory)
    ct = jaxviz.trace_cell(OUTER + "print(y[0, :3])\n")
    assert "INTERNAL" in str(ct.error) and "Out of memory allocating" in str(ct.error)
    (d,) = _oom(ct)
    assert (d.line, d.severity, d.trace) == (2, "error", "<lambda>")  # the call, not line 3
    assert "<lambda> ran out of device memory: its compiled peak is 596.0 GiB" in d.message
    assert d.related[0][:2] == (ct.filename, 3) and "the error surfaced here" in d.related[0][2]


@refused_allocation
def test_resource_exhausted_at_a_later_line_is_reported_at_the_call_with_a_fitting_hint():
    # issue 54, item 3: the finding sat at `print(top)`, told a forward-only function to
    # "jax.checkpoint the repeated blocks", and outlined the 2 MiB input like the 1 TiB op
    ct = jaxviz.trace_cell(BIG)
    assert "RESOURCE_EXHAUSTED" in str(ct.error)
    (d,) = _oom(ct)
    assert (d.line, d.trace) == (8, "big")                     # top = big(...), not print(top)
    assert d.message.startswith("`top = big(jnp.ones(1 << 19))`: big ran out of device memory")
    assert d.related[0][:2] == (ct.filename, 9) and "surfaced" in d.related[0][2]
    assert "checkpoint" not in d.hint
    assert d.hint.startswith("Temporaries hold 1.0 TiB: compute in pieces")
    t = ct["big"]
    body = t.graph.bodies[t.graph.root]
    outlined = [body.nodes[int(i.split(":")[1])] for i in d.node_ids]
    assert outlined and all(n.kind == "eqn" for n in outlined)  # the sort's product, not `x`
    assert [r[1:] for r in d.related[1:]] == [(5, "1.0 TiB temporary")]


def test_a_gradient_that_does_not_fit_is_told_to_checkpoint():
    # the checkpoint hint stays where a backward pass keeps activations
    from jaxviz.memory.oom import oom_hint

    def loss(w, x):
        h = jnp.tanh(x @ w)
        h = jnp.tanh(h @ w)
        return (h ** 2).sum()

    step = jax.jit(jax.grad(loss))
    step(jnp.ones((256, 256)), jnp.ones((4096, 256)))
    r = jaxviz.trace(step, jnp.ones((256, 256)), jnp.ones((4096, 256))).memory()
    assert any(b.category == "activation" for b in r.buffers)
    assert "jax.checkpoint the blocks that make them" in oom_hint(r)


@refused_allocation
def test_a_result_dropped_unread_still_gets_a_warning_at_its_call():
    # nothing raised and no name holds the result: the compiled peak says it cannot run here
    ct = jaxviz.trace_cell(
        "import jax, jax.numpy as jnp\nf = jax.jit(lambda x: jnp.outer(x, x).sort())\n"
        "f(jnp.ones(400_000))\nok = f(jnp.ones(3))\n"
    )
    (d,) = _oom(ct)
    assert (d.line, d.severity) == (3, "warning")
    assert "It cannot run here: XLA's out-of-memory error comes at its call" in d.message


def test_a_function_that_fits_gets_no_finding():
    ct = jaxviz.trace_cell("import jax, jax.numpy as jnp\ny = jax.jit(jnp.sort)(jnp.ones(1000))\n")
    assert not _oom(ct)


def _late_outer():
    """A jitted outer product whose input comes from a computation still running when the
    call returns (CPU runs it on its own thread): its result is not ready, then holds
    "Out of memory allocating 640000000000 bytes"."""
    slow = jax.jit(lambda a: jnp.tile(jnp.linalg.matrix_power(a, 1024)[0, :4], 100_000))
    outer = jax.jit(lambda x: jnp.outer(x, x).sort())
    a = jnp.ones((1024, 1024)) / 1024
    _wait(outer(slow(a)))  # (compiled, and run once: the next calls dispatch at once)
    return lambda: outer(slow(a))


@refused_allocation
def test_held_error_asks_without_waiting():
    y = jax.jit(lambda x: jnp.outer(x, x).sort())(jnp.ones(400_000))
    _wait(y)
    assert _compat.held_error(y) == ERROR
    assert _compat.held_error(jnp.ones(3)) == ""
    late = _late_outer()()
    assert _compat.held_error(late) is None                 # not ready: not known, not waited
    _wait(late)
    assert "Out of memory allocating 640000000000 bytes" in _compat.held_error(late)


@refused_allocation
def test_an_array_that_holds_an_error_counts_no_bytes():
    # issue 54, items 1 and 4: the lane read "now 596.0 GiB" and kept the array live on
    # every later chart
    tr = LiveArrays()
    dev = jax.devices()[0].id
    late = _late_outer()
    tr.look(True)
    base = tr.bytes_on(dev)
    y = jax.jit(lambda x: jnp.outer(x, x).sort())(jnp.ones(400_000))
    _wait(y)
    tr.look(True)
    assert tr.bytes_on(dev) - base < (1 << 20)
    # one not ready when first seen is asked again at the next looks; larger than the
    # machine's memory, it is not counted meanwhile (no such buffer can exist yet)
    z = late()
    tr.look(True)
    assert any(r() is z for r in tr.unready) and tr.bytes_on(dev) - base < (4 << 20)
    _wait(z)
    tr.look(True)
    assert tr.bytes_on(dev) - base < (4 << 20) and not tr.unready
    del y, z


@refused_allocation
def test_the_cells_chart_counts_no_bytes_for_it_then_or_later(ip):
    r = ip.run_cell("%%jaxtrace -o ct\n" + OUTER + READY)
    assert r.success
    (mem,) = [m.cell for m in ip.user_ns["ct"].memory if m.cell is not None]
    assert _live_peak(mem) < 1 << 30, mem.peaks()
    failed = [a for a in mem.arrays if a.type.endswith(HOLDS_ERROR)]
    assert [(a.type, a.nbytes) for a in failed] == [("float32[400000,400000]" + HOLDS_ERROR, 0)]
    ip.run_cell("%%jaxtrace -o ct2\nz = jnp.ones(4) + 1\n")   # a clean cell, `y` still held
    (mem2,) = [m.cell for m in ip.user_ns["ct2"].memory if m.cell is not None]
    assert _live_peak(mem2) < 1 << 30, mem2.peaks()
    ip.run_cell("del y")


@refused_allocation
def test_a_quiet_cell_analysed_when_read_finds_the_result_it_held_at_its_end(ip):
    # `-q -o ct` analyses when ct is first read (issue 56); the result that holds the error
    # is read from the names as the cell ended: rebound since, it still gets its finding
    r = ip.run_cell("%%jaxtrace -q -o ct\n" + OUTER + READY)
    assert r.success
    ip.run_cell("y = None")
    ct = ip.user_ns["ct"]
    (d,) = _oom(ct)
    assert (d.line, d.trace, d.severity) == (3, "<lambda>", "error"), d.format()  # (the magic: 1)
    assert "`y`" in d.message, d.message


@refused_allocation
def test_a_program_over_the_machines_memory_is_said_before_it_runs(capsys, tmp_path):
    """Issue 54: a warning before the run when a compiled peak exceeds the device's memory.
    The cell reads what was written to stderr during its call, before it touches the result:
    the line was there (said between XLA's compile and the run), at the cell's line, with
    the peak and the machine's size. A program that fits says nothing; a script under
    `python -m jaxviz` is told by its file and line."""
    cell = ("import contextlib, io\nimport jax, jax.numpy as jnp\n"
            "f = jax.jit(lambda x: jnp.outer(x, x).sort())\n"
            "small = f(jnp.ones(8))\n"
            "buf = io.StringIO()\n"
            "with contextlib.redirect_stderr(buf):\n"
            "    y = f(jnp.ones(400_000))\n"
            "said = buf.getvalue()\n" + READY)
    ns: dict = {}
    ct = jaxviz.trace_cell(cell, ns)
    assert ct.error is None, ct.error
    said = ns["said"]
    assert said.count("jaxviz: ") == 1, said
    assert "line 7: jit(<lambda>) needs 596.0 GiB at its compiled peak, more than this machine's" in said, said
    assert "its run will fail" in said
    assert "jaxviz:" not in capsys.readouterr().err   # f's small signature: nothing
    # compiled ahead of time, not run: nothing said (the user may only ask its memory)
    aot = jaxviz.trace_cell("import jax, jax.numpy as jnp\n"
                            "c = jax.jit(lambda x: jnp.outer(x, x).sort()).lower(jnp.ones(400_000)).compile()\n")
    assert aot.error is None and "jaxviz:" not in capsys.readouterr().err
    # a script: its name and line, on the CLI's stderr
    import subprocess
    import sys
    script = tmp_path / "big.py"
    script.write_text(OUTER + READY)
    out = subprocess.run([sys.executable, "-m", "jaxviz", str(script), "--text"],
                         capture_output=True, text=True, timeout=300)
    assert "jaxviz: big.py:2: jit(<lambda>) needs 596.0 GiB at its compiled peak" in out.stderr, out.stderr[-2000:]


@refused_allocation
def test_the_warning_before_the_run_names_a_notebook_cell_as_its_findings_do():
    """A kernel runs cell 7 from a file such as /tmp/ipykernel_81/2000347982.py, which
    %%jaxtrace labels `cell [7]`: the warning said `2000347982.py:2:` (issue 54's new-user
    session in JupyterLab), its finding `cell [7]:2`. Now both name the cell."""
    from jaxviz.graph.files import FILE_LABELS, register_file_label
    cell_file = "/tmp/ipykernel_81/2000347982.py"
    register_file_label(cell_file, "cell [7]")
    try:
        ns: dict = {}
        ct = jaxviz.trace_cell("import contextlib, io\nimport jax, jax.numpy as jnp\n"
                               "buf = io.StringIO()\n"
                               "with contextlib.redirect_stderr(buf):\n"
                               "    y = jax.jit(lambda x: jnp.outer(x, x).sort())(jnp.ones(400_000))\n"
                               "said = buf.getvalue()\n" + READY, ns, filename=cell_file)
    finally:
        FILE_LABELS.pop(cell_file, None)
    assert ct.error is None, ct.error
    said = ns["said"]
    assert "jaxviz: cell [7]:5: jit(<lambda>) needs 596.0 GiB at its compiled peak" in said, said


@refused_allocation
def test_a_slice_of_a_result_that_holds_the_error_is_no_second_program_over_memory():
    """`print(y[0, :3])` after the 596 GiB call (issue 54's cell): the slice's program counts
    the never-allocated 596 GiB `y` as its argument, and was said to need 596 GiB, 'its run
    will fail' (a second warning, for a program that allocates 12 bytes; its run fails with
    y's own error). Arguments that alone exceed the device's memory were never allocated: the
    program is judged by what it allocates itself. The call that needs the memory is said once."""
    cell = ("import contextlib, io\nimport jax, jax.numpy as jnp\n"
            "buf = io.StringIO()\n"
            "with contextlib.redirect_stderr(buf):\n"
            "    y = jax.jit(lambda x: jnp.outer(x, x).sort())(jnp.ones(400_000))\n"
            "    z = y[:2, :7]\n"
            "    while not z.is_ready():\n"
            "        pass\n"
            "said = buf.getvalue()\n")
    ns: dict = {}
    ct = jaxviz.trace_cell(cell, ns)
    assert ct.error is None, ct.error
    said = ns["said"]
    assert said.count("jaxviz: ") == 1 and "line 5: jit(<lambda>) needs 596.0 GiB" in said, said
    assert "slice" not in said, said
    del ns

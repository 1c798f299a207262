"""The default %%jaxtrace cell's live memory watch (jaxviz.memory.timeline, .sampler, .live):
it asks JAX nothing before the cell touches a device, pays for the arrays that changed, not
for every array alive, and its live-array lane holds what the user's names hold while a
donated loop runs. In IPython's real shell (a fresh process where JAX must be untouched)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

from jaxviz.capture.policy import COUNTS_EVERY_CALL
from jaxviz.memory.live import LiveArrays, tracker
from jaxviz.memory.sampler import Sampler
from tools import memory_models

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fresh_ipython(body: str) -> subprocess.CompletedProcess:
    """`body` run in a new Python process, with IPython's real shell as `ip` (jaxviz loaded);
    JAX on CPU, its backends not yet initialised (on a TPU host too: a child cannot open the
    chip this process holds). Where JAX and IPython are found stays on the path (a TPU
    host's PYTHONPATH names them)."""
    src = (
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython()\n"
        "ip.run_cell('%load_ext jaxviz')\n" + textwrap.dedent(body)
    )
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    env.pop("JAX_NUM_CPU_DEVICES", None)
    return subprocess.run(
        [sys.executable, "-c", src], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def test_a_config_cell_runs_as_it_does_plain():
    # issue 45, item 1: the watch initialised JAX's backends before the cell's first line, so
    # this raised "jax_num_cpu_devices config should be updated before backends are
    # initialized"; plainly it prints 8
    p = _fresh_ipython("""
        r = ip.run_cell(
            "%%jaxtrace\\n"
            "import jax\\n"
            "jax.config.update('jax_num_cpu_devices', 8)\\n"
            "print('devices:', len(jax.devices()))\\n"
        )
        print('error:', r.error_in_exec)
        r = ip.run_cell("%%jaxtrace -o ct\\nimport jax.numpy as jnp\\ny = jnp.ones((8, 1024))\\n")
        mem = [m.cell for m in ip.user_ns['ct'].memory if m.cell is not None][0]
        print('lanes:', len([ln for ln in mem.lanes if ln.source == 'live_arrays']))
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "devices: 8" in p.stdout and "error: None" in p.stdout, p.stdout[-3000:]
    assert "lanes: 8" in p.stdout  # the next cell's watch has the 8 devices' lanes


def test_a_cell_that_touches_no_device_asks_jax_nothing():
    # the watch starts only once the cell touches a device: a cell without JAX work leaves
    # JAX's backends as they were, and its chart says why it is empty
    p = _fresh_ipython("""
        from jaxviz import _compat
        r = ip.run_cell("%%jaxtrace -o ct --text\\nimport jax\\nlr = 0.01\\n")
        print('backends:', _compat.backends_ready())
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "backends: False" in p.stdout
    assert "nothing sampled: no JAX work seen in the cell" in p.stdout


def test_a_trivial_cell_does_not_look_at_the_arrays_alive(ip):
    # issue 45, item 2: each traced cell sized every live array again (~10 us each: 1.5 s a
    # cell with 150k alive). A cell with no device work looks at none (the cost is
    # bench/bench_live_arrays.py's); one that touches a device looks at JAX's list and sizes
    # only the arrays it has not seen
    ip.run_cell("import jax, jax.numpy as jnp\nmany = [jnp.full((3,), i) for i in range(2000)]\n")
    ip.run_cell("%%jaxtrace\ny = jnp.ones(4) + 1\n")  # the first look: all of them
    live = tracker()
    looks = live.looks
    ip.run_cell("%%jaxtrace\nlr = 0.01\n")
    assert live.looks == looks
    refs = {k: r for k, r in live.known.items()}
    ip.run_cell("%%jaxtrace\nz = y * 2\n")
    assert live.looks > looks
    kept = sum(1 for k, r in live.known.items() if refs.get(k) is r)
    assert kept >= 2000  # the same records: not sized again


def test_a_deleted_array_stays_counted_while_a_call_may_hold_it():
    # A look from another thread while the cell's thread is inside a donating call sees the
    # inputs deleted and the outputs not yet made: those bytes are held by the call. Such an
    # unsettled look keeps them; a settled one (the cell's thread, outside any call) does not
    tr = LiveArrays()
    dev = jax.devices()[0].id
    x = jnp.ones((256, 1024))  # 1 MiB
    tr.look(True)
    before = tr.bytes_on(dev)
    x.delete()  # gone while still referenced, as a donated input is
    tr.look(False)
    assert tr.bytes_on(dev) == before
    small = jnp.ones(3)  # a small new array is not the outputs that took them over
    tr.look(False)
    assert tr.bytes_on(dev) >= before
    tr.look(True)
    assert tr.bytes_on(dev) == before - (1 << 20) + small.nbytes
    del small


def test_freed_arrays_leave_the_count_and_nothing_is_kept_alive():
    import weakref

    gc.collect()  # (earlier tests' garbage: freed by the collect below, not by this test)
    tr = LiveArrays()
    dev = jax.devices()[0].id
    tr.look(True)
    base = tr.bytes_on(dev)
    a = jnp.ones((128, 1024))  # 512 KiB
    tr.look(True)
    assert tr.bytes_on(dev) == base + (512 << 10)
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None, "the tracker kept a user array alive"
    tr.look(True)
    assert tr.bytes_on(dev) == base


def test_the_rss_lane_is_shown_where_no_device_reports_memory_stats():
    (cpu,) = jax.devices("cpu")[:1]  # (a TPU host has JAX's CPU backend beside the chip)
    assert cpu.memory_stats() is None
    assert [ln.id for ln in Sampler([cpu]).lanes] == ["cpu:0", "rss"]
    assert [ln.id for ln in Sampler([cpu], rss=False).lanes] == ["cpu:0"]
    dev = jax.devices()[0]
    if dev.memory_stats() is not None:  # an accelerator: its own figures, and no RSS lane
        lanes = [(ln.id, ln.source) for ln in Sampler([dev]).lanes]
        assert lanes == [(f"{dev.platform}:{dev.id}", "memory_stats")]


class _Accelerator:
    """A stand-in for a device that reports memory_stats (no accelerator here; the TPU
    machine's check is tools/accelerator_watch.py)."""

    platform, id = "tpu", 0

    def memory_stats(self) -> dict:
        return {"bytes_in_use": 123 << 20, "bytes_limit": 16 << 30}


def test_on_an_accelerator_the_rss_lane_is_left_out_unless_asked_for():
    # issue 44, item 8: on a TPU host the process RSS reads 13-15 GiB of the runtime's
    # mappings from the start, nothing a cell moves
    s = Sampler([_Accelerator()])
    assert [(ln.id, ln.source) for ln in s.lanes] == [("tpu:0", "memory_stats")]
    s.sample(live=False)
    assert s.samples and s.samples[-1][1:] == (0, float(123 << 20))
    assert [ln.id for ln in Sampler([_Accelerator()], rss=True).lanes] == ["tpu:0", "rss"]


DONATED_LOOP = memory_models.DONATED_SETUP


def test_the_live_lane_holds_a_donated_loops_params(ip):
    # issue 44, item 8: during a donated training loop the lane fell to 0.06-0.12 of the
    # params' bytes (a look from the sampler's thread comes while the cell's thread waits in
    # a call: its inputs donated, its outputs not yet arrays), and a click listed scalars
    ip.run_cell(DONATED_LOOP)
    r = ip.run_cell(
        "%%jaxtrace -o ct\n"
        "import time\n"
        "t0 = time.time()\n"
        "while time.time() - t0 < 1.5:\n"
        "    params, opt_state, l = step(params, opt_state, x)\n"
        "jax.block_until_ready(params)\n"
    )
    assert r.success
    held = ip.user_ns["held"]
    (mem,) = [m.cell for m in ip.user_ns["ct"].memory if m.cell is not None]
    # the device's lane: its live JAX arrays on a CPU, the allocator's bytes_in_use on an
    # accelerator (memory_stats: the donated inputs' buffers are the outputs', held throughout)
    source = "live_arrays" if jax.devices()[0].memory_stats() is None else "memory_stats"
    (lane,) = [i for i, ln in enumerate(mem.lanes) if ln.source == source]
    readings = [v for _t, k, v in mem.samples if k == lane]
    assert len(readings) >= 3
    assert min(readings) >= held, [(round(t, 3), v / held) for t, k, v in mem.samples if k == lane]
    # a click halfway lists arrays of the params' and the optimizer state's types, as many
    # bytes as they hold
    alive = mem.alive_at(mem.seconds / 2)
    params_like = [a for a in alive if a.type in ("float32[512,512]", "float32[512]")]
    assert sum(a.nbytes for a in params_like) >= held, (mem.seconds, alive)


@pytest.mark.skipif(len(jax.devices()) > 1, reason="one CPU device assumed")
def test_arrays_alive_before_the_cell_are_listed_largest_first(ip):
    ip.run_cell(
        "import jax.numpy as jnp\n"
        "big = jnp.ones((512, 512))\n"
        "small = [jnp.full((2,), i) for i in range(50)]\n"
    )
    ip.run_cell("%%jaxtrace -o ct\ny = big + 1\n")
    (mem,) = [m.cell for m in ip.user_ns["ct"].memory if m.cell is not None]
    before = [a for a in mem.arrays if a.born == 0.0]
    assert before[0].type == "float32[512,512]" and before[0].nbytes == 1 << 20
    rest = [a for a in before if a.type.startswith("(")]
    assert len(rest) == 1 and "other arrays" in rest[0].type
    assert any(a.type == "float32[512,512]" and a.born > 0 for a in mem.arrays)  # y


def test_every_jitted_call_is_marked_or_the_chart_says_which_are_not(ip):
    # issue 44, item 7: a 20-call loop got 4 marks on Python 3.11, and the chart said
    # "4 jitted calls" as if that were all
    ip.run_cell("import jax, jax.numpy as jnp\nf = jax.jit(lambda x: x * 2)\nx = jnp.ones(3)\n")
    ip.run_cell("%%jaxtrace -o ct\nfor i in range(20):\n    x = f(x)\n")
    (mem,) = [m.cell for m in ip.user_ns["ct"].memory if m.cell is not None]
    note = mem.calls_note()
    if hasattr(sys, "monitoring") or COUNTS_EVERY_CALL:  # (3.11: the call counter)
        assert len(mem.calls) == 20 and not mem.unmarked
        assert note == "20 jitted calls marked at dispatch"
    else:  # Python 3.11 without the counter: the later calls run on JAX's fast path, unseen
        assert 1 <= len(mem.calls) < 20 and mem.unmarked == ("<lambda> (line 3)",)
        assert "later calls of <lambda> (line 3) ran unmarked and uncounted" in note
        assert "Python 3.11 has no sys.monitoring" in note
    assert note in str(mem)


def test_a_donated_chains_records_end_where_their_successors_are_seen():
    # A step donating its input at every call, looked at only before and after: the
    # generations between were never seen. The first one's record ends where the last is
    # first seen (a click in between lists one generation), not when the first was freed
    import time

    from jaxviz.memory.sampler import ArrayLog

    step = jax.jit(lambda p: p * 0.5, donate_argnums=0)
    tr, log = LiveArrays(), ArrayLog()
    tr.attach(log, time.perf_counter())
    p = jnp.ones((256, 1024))
    tr.look(True)  # the cell's first look: p listed as alive before the cell
    for _ in range(5):
        p = step(p)
    time.sleep(0.05)
    tr.look(True)
    tr.detach()
    first = [a for a in log.records if a.born == 0.0 and a.type == "float32[256,1024]"]
    last = [a for a in log.records if a.born > 0.0 and a.type == "float32[256,1024]"]
    assert len(first) == 1 and len(last) == 1
    assert first[0].gone == last[0].born >= 0.05


def test_fewer_bytes_came_than_went_the_last_to_go_end_where_the_new_are_seen():
    # `keep.append(step(x)); del keep[:-1]` between two looks: seven arrays went, one came.
    # As many bytes of the last to go as came end where the new one is first seen, so a moment
    # between the frees and that look still lists one array of the loop (the browser test's
    # click landed there one run in ten and listed none); the others end when they went
    import time

    from jaxviz.memory.sampler import ArrayLog

    step = jax.jit(lambda p: p * 0.5 + 1.0)
    x = jnp.ones((256, 1024))
    tr, log = LiveArrays(), ArrayLog()
    tr.attach(log, time.perf_counter())
    tr.look(True)  # the cell's first look: x listed as alive before the cell
    keep = [step(x) for _ in range(7)]
    jax.block_until_ready(keep)
    tr.look(True)
    keep.append(step(x))
    jax.block_until_ready(keep)
    del keep[:-1]
    time.sleep(0.05)
    tr.look(True)
    tr.detach()
    made = [a for a in log.records if a.born > 0.0 and a.type == "float32[256,1024]"]
    assert len(made) == 8
    old, new = made[:7], made[7]
    assert new.gone is None
    ended = sorted(a.gone for a in old)
    assert ended[-1] == new.born >= ended[0] + 0.04  # one ends where the new one is seen
    assert ended[-2] < new.born - 0.04  # the other six when they went
    gap = (ended[-2] + new.born) / 2
    alive = [a for a in log.records if a.born <= gap and (a.gone is None or a.gone > gap)]
    assert sum(a in made for a in alive) == 1


def test_arrays_freed_while_a_call_may_be_in_flight_are_not_called_donated():
    # issue 57, item 7: arrays freed between two looks taken while a call may be in flight
    # are held counted (a call in flight may read them); when they are let go they were
    # recorded as donated (`deleted`), and the chart marked donated inputs released (the
    # sandboxed chart's test saw 5 donated arrays for 1, one run in two under load)
    import time

    from jaxviz.memory.sampler import ArrayLog

    step = jax.jit(lambda p: p * 0.5 + 1.0)
    x = jnp.ones((256, 1024))
    tr, log = LiveArrays(), ArrayLog()
    tr.attach(log, time.perf_counter())
    tr.look(True)
    keep = [step(x) for _ in range(4)]
    jax.block_until_ready(keep)
    tr.look(True)
    keep.clear()             # freed, not donated
    tr.look(False)           # a call may be in flight: their bytes stay counted
    tr.look(True)
    tr.detach()
    made = [a for a in log.records if a.born > 0.0 and a.type == "float32[256,1024]"]
    assert len(made) == 4 and all(a.gone is not None for a in made)
    assert not any(a.deleted for a in made), made

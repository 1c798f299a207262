"""The cell's own memory (jaxviz.memory.timeline): calls as marks, arrays as lives, no arrays
kept, and the chart's self-contained saved copy."""
from __future__ import annotations

import base64
import gc
import json
import re
import time
import weakref
import zlib

import jax
import jax.numpy as jnp
import numpy as np

from jaxviz.capture.recorder import Recorder
from jaxviz.memory.sampler import ArrayLog
from jaxviz.memory.timeline import CellWatch
from jaxviz.view.chart import STATIC_POINTS, MemoryChart, _thin

MiB = 1 << 20


def _watched(body, **kw):
    rec = Recorder(__file__)
    updates = []
    watch = CellWatch(rec, on_update=lambda *a: updates.append(a), **kw)
    with watch, rec:
        body()
    return watch.stop(), updates, rec


def test_calls_are_marked_in_order_with_their_lines():
    f = jax.jit(lambda x: x + 1.0)
    g = jax.jit(lambda x: x * 2.0)
    x = jnp.ones(1000)

    def body():
        for _ in range(3):
            f(x)  # line A
            g(x)  # line B
            time.sleep(0.01)

    line_f = body.__code__.co_firstlineno + 2
    mem, updates, rec = _watched(body)
    assert [(c.name, c.line, c.file) for c in mem.calls] == [("<lambda>", line_f, ""), ("<lambda>", line_f + 1, "")] * 3
    assert all(a.t <= b.t for a, b in zip(mem.calls, mem.calls[1:]))
    assert 0 <= mem.calls[0].t <= mem.seconds
    # streamed while it ran: every mark reached on_update exactly once
    assert sum(len(u[1]) for u in updates) == len(mem.calls)
    assert rec.calls is None                     # the list (holding the functions) is let go


def test_recorder_keeps_no_call_list_unless_asked():
    rec = Recorder(__file__)
    with rec:
        jax.jit(lambda x: x - 1)(jnp.ones(3))
    assert rec.calls is None and rec.calls_dropped == 0


def test_arrays_live_and_die_without_being_kept():
    donate = jax.jit(lambda x: x * 2.0, donate_argnums=0)
    refs = []
    rec = Recorder(__file__)
    watch = CellWatch(rec)
    sample = watch.sampler.sample            # on demand, beside the thread: no timing luck

    def body():
        # (in a list: on Python 3.11 a snapshot of this frame's locals, taken by the capture,
        # may hold a plain local until the next snapshot; the list is emptied in place)
        box = [jnp.ones((512, 1024))]        # 2 MiB
        sample()
        kept = jnp.zeros((256, 1024))        # 1 MiB, passed to a donating call, still referenced
        sample()
        out = donate(kept)
        sample()
        refs.extend([weakref.ref(box[0]), weakref.ref(out)])
        box.clear()
        del out
        sample()
        assert kept.is_deleted()             # donated (CPU donates too, on both JAX versions)

    with watch, rec:
        body()
    mem = watch.stop()
    gc.collect()
    assert all(r() is None for r in refs), "the watch kept a user array alive"
    big = [a for a in mem.arrays if a.type == "float32[512,1024]"]
    assert big and big[0].nbytes == 2 * MiB and big[0].gone is not None and not big[0].deleted
    # the donated input: gone at the donating call while still referenced, so `deleted`
    donated = [a for a in mem.arrays if a.type == "float32[256,1024]" and a.deleted]
    assert len(donated) == 1 and donated[0].born < donated[0].gone
    # alive_at: the 2 MiB array is listed between its birth and its end, not after
    t_mid = (big[0].born + big[0].gone) / 2
    assert big[0] in mem.alive_at(t_mid) and big[0] not in mem.alive_at(big[0].gone + 1e-6)
    creator = mem.creator(big[0])
    assert creator is None or creator.t <= big[0].born


def test_the_array_log_is_bounded_and_says_so():
    log = ArrayLog(limit=2)
    recs = [log.born("int32[4]", 16, 0.1 * k) for k in range(5)]
    assert recs[2:] == [None] * 3
    assert len(log.records) == 2 and log.dropped == 3
    assert [r.type for r in log.records] == ["int32[4]", "int32[4]"]


def test_thinning_keeps_each_lanes_peak():
    t = np.linspace(0, 10, 50_000)
    v = np.sin(t) * 100
    v[12_345] = 1e6                                  # one spike
    data = np.stack([t, np.zeros_like(t), v], axis=1)
    thin = _thin(data, STATIC_POINTS)
    assert len(thin) <= STATIC_POINTS and thin[:, 2].max() == 1e6
    assert np.all(np.diff(thin[:, 0]) >= 0)


def _state_of(fragment: str) -> dict:
    m = re.search(r'<script type="application/json" id="[^"]+-data">(.*?)</script>', fragment, re.S)
    assert m
    return json.loads(zlib.decompress(base64.b64decode(json.loads(m.group(1))["state"])))


def test_saved_copy_carries_the_whole_chart():
    f = jax.jit(lambda x: x + 1.0)
    chart = MemoryChart(title="cell [1]")
    rec = Recorder(__file__)
    watch = CellWatch(rec, on_update=lambda s, m, b, g: chart.on_cell(s, m, b, g, 0))
    chart.start_cell(watch.lanes)
    with watch, rec:
        x = jnp.ones(1 << 18)
        for _ in range(4):
            x = f(x)
            time.sleep(0.02)
    mem = watch.stop()
    chart.finish_cell(mem)
    bundle = chart.static_bundle(str(mem))
    assert "memory while the cell ran" in bundle["text/plain"]
    state = _state_of(bundle["text/html"])
    assert state["traits"]["runs"][0]["label"] == "this cell"
    assert state["traits"]["phase"].startswith("done: 4 jitted calls")
    kinds = [m["msg"]["kind"] for m in state["messages"]]
    assert kinds[0] == "samples" and "marks" in kinds and "arrays" in kinds
    n = state["messages"][0]["msg"]["n"]
    rows = np.frombuffer(base64.b64decode(state["messages"][0]["buffers"][0])).reshape(-1, 3)
    assert len(rows) == n == len(mem.samples)
    marks = [m for msg in state["messages"] if msg["msg"]["kind"] == "marks" for m in msg["msg"]["marks"]]
    assert [m["name"] for m in marks] == ["<lambda>"] * 4
    # user text reaches the page only inside JSON with <, >, & escaped
    assert "</script><script>" not in bundle["text/html"].split("<script>", 1)[0]


def test_step_times_show_their_spread():
    from jaxviz.view.chart import step_spread
    assert step_spread([]) == "no steps"
    assert step_spread([0.001, 0.0011, 0.0012]) == "1.10 ms/step (min 1.00, max 1.20 ms)"
    assert step_spread([0.001, 0.0011, 0.003]) == "1.10 ms/step (min 1.00, max 3.00 ms, noisy)"


def test_saved_copy_bounds_the_arrays_it_lists(monkeypatch):
    import jaxviz.view.chart as chart_mod
    from jaxviz.memory.sampler import ArrayLife
    monkeypatch.setattr(chart_mod, "STATIC_ARRAYS", 3)
    chart = MemoryChart()
    lives = [ArrayLife(i, 0.1 * i, "float32[4]", 16) for i in range(5)]
    chart.on_cell([], [], lives[:2], [], 0)
    chart.on_cell([], [], lives[2:], [], 0)
    msgs = [m["msg"] for m in chart.state_for_page()["messages"] if m["msg"]["kind"] == "arrays"]
    assert [len(m["born"]) for m in msgs] == [2, 1]
    assert msgs[-1]["dropped"] == 2                  # the view says how many are not listed


def test_arrays_the_cells_globals_hold_are_named_by_their_path():
    """Arrays alive at a moment were 95 unnamed rows (issue 57, item 5): those the cell's
    globals hold when it ends are named by their path, and sent again with it; none is kept."""
    ns = {"__name__": "__main__"}
    rec = Recorder(__file__, namespace=ns)
    updates = []
    watch = CellWatch(rec, on_update=lambda *a: updates.append(a))
    sample = watch.sampler.sample

    def body():
        sample()                             # the first look: what is there is from before
        ns["params"] = {"blocks": [{"w1": jnp.ones((64, 128))}], "b": jnp.zeros(7)}
        ns["x"] = jnp.ones((3, 5))
        sample()
        ns["late"] = jnp.ones(11)            # made after the last look but one

    with rec:
        watch.start()
        body()
    mem = watch.stop()   # (as the cell's chart stops it: its sampler still running)
    names = {a.name for a in mem.arrays if a.name}
    assert {"params['blocks'][0]['w1']", "params['b']", "x", "late"} <= names, names
    # a record sent before it was named is sent again, named (its id the same)
    sent = {}
    for u in updates:
        for a in u[2]:
            sent[a.id] = a.name
    w1 = next(a for a in mem.arrays if a.name == "params['blocks'][0]['w1']")
    assert sent[w1.id] == w1.name
    refs = [weakref.ref(v) for v in (ns["x"], ns["late"])]
    ns.clear()
    gc.collect()
    assert all(r() is None for r in refs), "naming kept a user array alive"


def test_arrays_a_global_held_at_the_first_call_are_named_though_donated_then():
    """A donated training loop: the params from before the cell, held by `params` until the
    first call donates them, were listed unnamed ('before the first call', 26 rows '(no
    name)' in a transformer's loop, found in a notebook, issue 57's check): the cell's end
    names only what its globals hold then, the last step's params. Now the first jitted
    call names what the globals hold at that moment, before it runs."""
    # (a shape no other test makes: arrays other tests of this worker left alive count too)
    ns = {"__name__": "__main__", "params": {"w": jnp.ones((61, 67)), "b": jnp.zeros(67)}}
    jax.block_until_ready(ns["params"])
    step = jax.jit(lambda p: jax.tree.map(lambda v: v * 0.5, p), donate_argnums=0)
    rec = Recorder(__file__, namespace=ns)
    watch = CellWatch(rec)
    with rec:
        watch.start()
        for _ in range(3):
            ns["params"] = step(ns["params"])
    mem = watch.stop()
    ws = [a for a in mem.arrays if a.type == "float32[61,67]"]
    first = [a for a in ws if a.born == 0]
    last = [a for a in ws if a.gone is None]
    assert len(first) == 1 and first[0].gone is not None, ws   # gone in the cell
    assert first[0].name == "params['w']" and [a.name for a in last] == ["params['w']"], ws
    ns.clear()


def test_a_calls_mark_says_whether_its_function_donates():
    """The chart marks donated inputs only in a cell that called a donating function (issue 57,
    item 7: the marker and its legend showed in a cell without donation)."""
    plain = jax.jit(lambda x: x + 1.0)
    giving = jax.jit(lambda x: x * 2.0, donate_argnums=0)

    def body():
        plain(jnp.ones(8))
        giving(jnp.ones(8))

    mem, updates, _ = _watched(body)
    assert [(c.name, c.donates) for c in mem.calls] == [("<lambda>", False), ("<lambda>", True)]


def test_the_record_says_until_when_the_device_computed_the_calls_outputs():
    """Issue 54: a loop that runs ahead of the device had all its marks (its dispatches)
    early, and nothing said when the work ran. The sampler's looks see the latest outputs
    not computed yet, without waiting for them, and when none is left: the record, its
    note and the chart's messages say until when the device computed."""
    f = jax.jit(lambda a: jnp.tanh(a @ a))
    n = 1024 if jax.default_backend() == "cpu" else 8192  # (a TPU v5e's 1024 took ~10 us)
    x = jnp.ones((n, n)) / n
    f(x).block_until_ready()  # (compiled before the cell)
    chart = MemoryChart()
    rec = Recorder(__file__)
    watch = CellWatch(rec, on_update=lambda s, m, b, g: chart.on_cell(s, m, b, g, 0))
    watch.on_computing = chart.on_computing
    with watch, rec:
        y = x
        for _ in range(20):
            y = f(y)  # ~20 ms each on 2 CPU cores, or a TPU: dispatch returns at once
        end = time.monotonic() + 60
        while not y.is_ready() and time.monotonic() < end:  # (never waits on it)
            time.sleep(0.01)
        time.sleep(0.2)  # (the sampler's next looks)
    mem = watch.stop()
    assert len(mem.calls) == 20 and mem.computing[0][1] == 1, mem.computing
    last = mem.calls[-1].t
    until = mem.computed_until()
    assert until is not None and until > last and not mem.still_computing, (mem.computing, last)
    assert "the device computed their outputs until" in mem.calls_note(), mem.calls_note()
    sent = [m for m, _ in chart._history if m.get("kind") == "computing"]
    assert [c for m in sent for c in m["changes"]] == [list(c) for c in mem.computing]
    page = chart.state_for_page()["messages"]
    assert any(m["msg"]["kind"] == "computing" for m in page)
    del y

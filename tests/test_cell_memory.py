"""Each of a cell's own jitted functions' compiled memory, by default (jaxviz.memory.peaks):
in CellTrace.compiled, the memory tab's payload and the text twin; bounded, with what was
skipped said; the donation what-if only on --compare; the out-of-memory finding through
%%jaxtrace."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np

import jaxviz
from tests.conftest import on_accelerator
from tests.test_buffers import OOM_CELL
from tests.test_widget_payload import decode_fragment
from tests.xla_figures import refused_allocation

CELL = '''import jax, jax.numpy as jnp

@jax.jit
def step(w, x):
    h = jnp.tanh(x @ w)
    return w - 0.1 * (x.T @ h)

@jax.jit
def loss(w, x):
    return ((x @ w) ** 2).mean()

w = step(jnp.ones((256, 256)), jnp.ones((128, 256)))
l = loss(w, jnp.ones((128, 256)))
y = jnp.sin(w)
'''


def _payload(ct) -> dict:
    return decode_fragment(ct._repr_mimebundle_()["text/html"])


def test_a_cell_explains_its_own_jitted_functions_only():
    ct = jaxviz.trace_cell(CELL)
    assert ct.error is None
    assert [r.name for r in ct.compiled] == ["step", "loss"]     # not sin (a library jit), not eager
    assert ct.compiled_notes == []
    step = ct.compiled[0]
    assert step.donations == ()                                  # no what-if recompiles by default
    assert step.peak_bytes == max(step.timeline) > 0
    cats = {b.category for b in step.buffers}
    assert {"argument", "output"} <= cats
    (w,) = [b for b in step.buffers if b.where == "w"]
    assert (w.bytes, w.type) == (256 * 256 * 4, "f32[256,256]")
    t = ct["step"]
    ids = {f"{b.id}:{n.id}" for b in t.graph.bodies for n in b.nodes}
    assert all(b.node_ids and set(b.node_ids) <= ids for b in step.buffers)  # each row selects
    lined = [b for b in step.buffers if b.line]
    assert lined and {b.line for b in lined} <= {5, 6}           # the cell's own lines


def test_the_memory_tab_and_text_twin_carry_them():
    ct = jaxviz.trace_cell(CELL)
    p = _payload(ct)
    entries = {e["trace"]: e for e in p["compiled_memory"]}
    assert list(entries) == ["step", "loss"]
    e = entries["step"]
    assert e["peak_bytes"] == ct.compiled[0].peak_bytes and e["steps"] == len(ct.compiled[0].timeline)
    assert [b["where"] for b in e["buffers"]] == [b.where for b in ct.compiled[0].buffers]
    assert "compiled_notes" not in p
    text = str(ct)
    section = text[text.index("compiled memory (XLA's schedule"):].split("\n\n")[0]
    assert "  step: peak " in section and "  loss: peak " in section
    top = ct.compiled[0].buffers[0]
    assert f"{top.type:<14} {top.category:<16} {top.where}" in section
    assert "sin" not in section


def test_the_cost_is_bounded_and_what_was_skipped_is_said():
    with jaxviz.options.using(compiled_memory_max=1):
        ct = jaxviz.trace_cell(CELL)
    assert [r.name for r in ct.compiled] == ["step"]
    (note,) = ct.compiled_notes
    assert note.startswith("compiled memory not computed for loss (at most 1 function")
    assert "ct['loss'].memory()" in note
    assert _payload(ct)["compiled_notes"] == [note]
    assert f"note: {note}" in str(ct)
    with jaxviz.options.using(compiled_memory_budget=0):
        ct = jaxviz.trace_cell(CELL)
    assert (ct.compiled, ct.compiled_notes) == ([], [])
    assert "compiled_memory" not in _payload(ct)


def test_the_reports_hold_no_user_arrays():
    import gc
    import weakref

    ns: dict = {"__name__": "__main__"}
    ct = jaxviz.trace_cell(CELL, ns)
    ref = weakref.ref(ns["w"])
    del ns["w"]
    gc.collect()
    assert ref() is None and ct.compiled


def test_magic_default_compare_and_no_run(ip, capsys, dispatch_state):
    ip.run_cell("%%jaxtrace -q -o ct\n" + CELL)
    ct = ip.user_ns["ct"]
    assert [r.name for r in ct.compiled] == ["step", "loss"]
    assert all(r.donations == () for r in ct.compiled)
    np.testing.assert_allclose(ip.user_ns["l"], ((jnp.ones((128, 256)) @ ip.user_ns["w"]) ** 2).mean())
    ip.run_cell("%%jaxtrace -q --compare -o ct\n" + CELL)
    donations = {d.arg: d for d in ip.user_ns["ct"].compiled[0].donations}
    assert set(donations) == {"w", "x"} and donations["w"].saves is not None
    ip.run_cell("%%jaxtrace -q --no-run -o ct\n" + CELL)
    assert ip.user_ns["ct"].compiled == []
    capsys.readouterr()
    ip.run_cell("%%jaxtrace --text --no-run\nimport jax\nz = jax.jit(lambda a: a + 1)(1.0)\n")
    assert "compiled memory" not in capsys.readouterr().out
    ip.run_cell("%%jaxtrace --text\n" + CELL)
    out = capsys.readouterr().out
    assert "compiled memory (XLA's schedule" in out and "  step: peak " in out


LIMIT_CELL = '''import jax, jax.numpy as jnp

@jax.jit
def step(w, x):
    h = jnp.tanh(x @ w)
    return w - 0.1 * (x.T @ h)

w = step(jnp.ones((512, 512)), jnp.ones((256, 512)))
'''


def test_memory_limit_through_the_magic(ip, capsys, dispatch_state):
    with jaxviz.options.using(memory_limit=2 << 20):            # 2 MiB: the step needs 3
        r = ip.run_cell("%%jaxtrace --text -o ct\n" + LIMIT_CELL)
    assert r.success
    out = capsys.readouterr().out
    ct = ip.user_ns["ct"]
    (d,) = [d for d in ct.diagnostics if d.rule == "out-of-memory"]
    assert d.line == 9 and d.trace == "step"           # the call (the editor's line: %%jaxtrace is 1)
    assert "would run out of memory on a device of 2.0 MiB" in out
    assert "1.0 MiB f32[512,512] argument at w" in out            # the largest buffers, in the text
    assert d.related and all(ln in (6, 7) for _, ln, _ in d.related)   # and their lines
    p = _payload(ct)
    every = [x for t in p["traces"] for x in t["diagnostics"]] + p["diagnostics"]
    (pd,) = [x for x in every if x["rule"] == "out-of-memory"]
    assert pd["node_ids"] and "argument at w" in pd["message"]
    assert [e["trace"] for e in p["compiled_memory"]] == ["step"]   # its buffers in the memory tab


@refused_allocation
def test_resource_exhausted_through_the_magic_text_twin(ip, capsys, dispatch_state):
    cell = OOM_CELL.replace("big(jnp.ones(1 << 19))", "total = float(big(jnp.ones(1 << 19)))")
    r = ip.run_cell("%%jaxtrace --text -o ct\n" + cell)
    out = capsys.readouterr().out
    assert not r.success and "RESOURCE_EXHAUSTED" in str(r.error_in_exec)
    assert "1.0 TiB f32[524288,524288] temporary at " in out
    if on_accelerator():  # out of memory at compile time: the finding from XLA's dump
        assert "big ran out of device memory: its compiled peak is " in out
        return
    assert "big ran out of device memory: its compiled peak is 1.0 TiB" in out
    ct = ip.user_ns["ct"]
    (big,) = ct.compiled                                          # compiled, never run again
    assert big.buffers[0].bytes == 1 << 40 and big.buffers[0].line == 6
    assert "1.0 TiB  f32[524288,524288]" in out                   # the compiled-memory section


def test_a_cell_run_again_reuses_its_reports():
    ns: dict = {"__name__": "__main__"}
    first = jaxviz.trace_cell(CELL, ns)
    again = jaxviz.trace_cell("w = step(w, jnp.ones((128, 256)))\n", ns)
    assert again.compiled[0] is first.compiled[0]              # same function and signature
    other = jaxviz.trace_cell("w2 = step(jnp.ones((64, 64)), jnp.ones((8, 64)))\n", ns)
    assert other.compiled[0].buffers[0].type == "f32[64,64]"   # another signature: its own
    redefined = jaxviz.trace_cell(CELL.replace("0.1 *", "0.2 *"), ns)
    assert redefined.compiled[0] is not first.compiled[0]       # a new function: its own


def test_the_cli_page_and_text_carry_them_without_memory_flag(tmp_path):
    from tests.test_cli import run_cli

    p, _ = run_cli(tmp_path, CELL, "--html", "r.html", "--text")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "compiled memory (XLA's schedule" in p.stdout and "  step: peak " in p.stdout
    assert "donation" not in p.stdout.split("compiled memory (XLA's schedule")[1]   # no what-if
    payload = decode_fragment((tmp_path / "r.html").read_text())
    assert [e["trace"] for e in payload["compiled_memory"]] == ["step", "loss"]


def test_each_entry_names_the_trace_it_explains():
    ct = jaxviz.trace_cell(CELL + "w3 = step(jnp.ones((64, 64)), jnp.ones((8, 64)))\n")
    p = _payload(ct)
    names = [t["name"] for t in p["traces"]]
    steps = [e for e in p["compiled_memory"] if e["trace"] == "step"]
    assert len(steps) == 2 and [names[e["index"]] for e in steps] == ["step", "step"]
    assert steps[0]["index"] != steps[1]["index"]               # two signatures: two traces
    small = p["traces"][steps[1]["index"]]["graph"]
    assert "f32[64,64]" in json.dumps(small) and steps[1]["buffers"][0]["type"] == _label(ct)


def _label(ct) -> str:
    """The memory tab's type of the small step's `w`: "f32[64,64]" on CPU; where its
    compiled layout pads it to twice its elements or more, the padding said (a TPU's:
    "f32[64,64]: 32.0 KiB on this TPU (tiles of 8x128)")."""
    if jax.default_backend() == "cpu":
        return "f32[64,64]"
    from jaxviz._compat import entry_parameters
    from jaxviz.format import fmt_bytes
    t = [t for t in ct.traces if t.name == "step"][1]
    w = entry_parameters(t.fun.lower(*t.args_spec).compile().as_text())[0]
    if w.bytes < 2 * w.elements_bytes:
        return "f32[64,64]"
    return f"f32[64,64]: {fmt_bytes(w.bytes)} on this TPU (tiles of {w.tile})"


def _backend_compiles():
    """A list that grows by one per XLA compile of the user's programs JAX starts (its own
    monitoring event; jaxviz's NaN checks on an accelerator compile a small reduction per
    shape, `_compat.NONFINITE_NAME`, which is not the user's)."""
    from jaxviz import _compat

    seen: list[float] = []

    def on_event(event, secs, **kw):
        if "backend_compile" in event and _compat.NONFINITE_NAME not in str(kw.get("fun_name", "")):
            seen.append(secs)

    jax.monitoring.register_event_duration_secs_listener(on_event)
    return seen


def test_a_function_jax_holds_no_executable_for_is_not_compiled_again_unasked():
    # the cell's call compiled `step`; then JAX's caches were emptied: its analysis would be
    # a second compile of the user's program (minutes on a TPU): not done by default, said,
    # and done when asked for
    compiles = _backend_compiles()
    ct = jaxviz.trace_cell(CELL + "jax.clear_caches()\n")
    assert ct.error is None
    during = len(compiles)
    assert [r.name for r in ct.compiled] == []
    assert compiles[during:] == []                                # nothing compiled after the cell
    (note,) = [n for n in ct.compiled_notes if "no executable" in n]
    assert "step, loss" in note and "ct['step'].memory()" in note, note
    assert ct["step"].memory().peak_bytes > 0                     # asked: compiled now
    assert len(compiles) > during


def test_the_analysis_reads_the_executable_the_call_made():
    # a traced cell compiles what the plain cell compiles, nothing more (each run on new
    # shapes, so that every one of its programs compiles afresh)
    compiles = _backend_compiles()
    exec(CELL.replace("256", "320"), {})
    plain = len(compiles)
    ct = jaxviz.trace_cell(CELL.replace("256", "384"))
    assert [r.name for r in ct.compiled] == ["step", "loss"]
    assert len(compiles) - plain <= plain


def test_a_single_device_program_shows_no_sharding_anywhere(ip, capsys, dispatch_state):
    """Issue 53: on one device (`make test-device` runs this on the accelerator's one chip)
    nothing of the mesh shows: no collectives, no mesh legend, no replicated bytes, no
    per-device shapes, no sharding in the trace headers, types or payload."""
    ip.run_cell("%%jaxtrace --text -o ct\n" + CELL)
    out = capsys.readouterr().out
    assert "compiled memory" in out and "  step: peak " in out   # (the sections are there)
    for word in ("collective", "mesh", "replicated", "per device", "shard"):
        assert word not in out.lower(), (word, out)
    ct = ip.user_ns["ct"]
    assert not ct.eager_collectives
    assert all(r.mesh is None and r.collectives == () and r.replicated == () for r in ct.compiled)
    p = _payload(ct)
    for e in p["compiled_memory"]:
        assert not {"collectives", "mesh", "replicated"} & set(e), sorted(e)
    types = [o for t in p["traces"] for b in t["graph"]["bodies"] for n in b["nodes"]
             for o in n["out"]]
    assert types and not [t for t in types if "@" in t], types

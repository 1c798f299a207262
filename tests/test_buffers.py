"""MemoryReport on real compiled programs: reconciliation with XLA's memory_analysis(),
categories a person can verify (donation, remat), named coverage, the text twin, and an
8-device sharded step (in a subprocess)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

import jaxviz
from jaxviz._compat import parse_hlo_module
from jaxviz.format import fmt_bytes
from jaxviz.memory.simulate import RESULT_TABLE, TABLE
from tests.xla_figures import (
    refused_allocation,
    ON_CPU,
    PLATFORM,
    assignment_total,
    compiled_parameter_bytes,
    off_reference,
    oom_words,
    reference_peak,
)
from tools.memory_models import mlp_step, rnn_grad, transformer_step

JAX_010 = jax.__version__.startswith("0.10")


def _report(f, *args, what_if=False):
    return jaxviz.trace(f, *args).memory(what_if=what_if)


@pytest.mark.parametrize("name, build", [
    ("mlp", mlp_step),
    ("transformer block, remat", lambda: transformer_step(2, 128, 128, remat=True)),
    ("scan rnn", rnn_grad),
])
def test_peak_reconciles_with_memory_analysis(name, build):
    # XLA's peak: memory_analysis() on CPU, the buffer assignment on an accelerator, whose
    # memory_analysis() counts no temporaries (tests/xla_figures.py)
    f, args = build()
    r = _report(f, *args)
    assert r.xla_total is not None
    assert abs(off_reference(r, f, *args)) <= 0.05, (name, r.peak_bytes,
                                                     reference_peak(r, f, *args))
    assert r.timeline[r.peak_step] == r.peak_bytes == max(r.timeline)
    assert len(r.timeline) == len(r.ops)
    assert [b.bytes for b in r.buffers] == sorted((b.bytes for b in r.buffers), reverse=True)


def _flat(built):
    f, args = built
    return (f, *args)


@pytest.fixture(scope="module")
def transformer():
    return transformer_step(12, 64, 16)


@pytest.fixture(scope="module")
def transformer_report(transformer):
    f, args = transformer
    return _report(f, *args, what_if=True)


def test_transformer_train_step_named_and_reconciled(transformer_report, transformer):
    r = transformer_report
    assert r.n_eqns > 2500
    assert abs(off_reference(r, *_flat(transformer))) <= 0.05
    assert r.named_fraction >= 0.9
    args = [b for b in r.buffers if b.category == "argument"]
    assert "params['blocks'][3]['w1']" in {b.where for b in args}
    temps = [b for b in r.buffers if b.category in ("temporary", "activation", "output")]
    named = [b for b in temps if b.where]
    # each by its line, or (a TPU's async copies' tuple tables) by the argument it copies,
    # or (a TPU's table of the outputs) as the result's index table
    on_line = [b for b in named if b.line > 0 and b.file.endswith(".py")]
    by_arg = [b for b in named if b not in on_line and b.where != RESULT_TABLE]
    assert on_line and all(b.where.removesuffix(" (via copy)") in {a.where for a in args} for b in by_arg)
    # the buffers' graph nodes exist and are equations on the buffer's line and primitive
    t_graph = jaxviz.trace(*_flat(transformer_step(12, 64, 16))).graph
    b = next(b for b in on_line if b.node_ids)
    body, node = (int(x) for x in b.node_ids[0].split(":"))
    n = t_graph.bodies[body].nodes[node]
    assert (n.loc.file, n.loc.line) == (b.file, b.line)


def test_text_twin(transformer_report, transformer):
    text = str(transformer_report)
    head = text.splitlines()[0]
    assert head.startswith(f"memory of step (one call, simulated over XLA's schedule; {PLATFORM}): peak ")
    assert "XLA: arguments " in text and "buffers live at the peak" in text
    assert "params['blocks'][0]['w1']" in text
    if ON_CPU:
        assert "  at the peak: argument 2.3 MiB (" in text and "output " in text
    else:  # the arguments' bytes in their compiled layouts; tuple tables may come first
        args = fmt_bytes(sum(compiled_parameter_bytes(*_flat(transformer))))
        (line,) = [ln for ln in text.splitlines() if ln.startswith("  at the peak: ")]
        assert f" argument {args} (" in line and "output " in line
    assert "donating `params` would lower the peak by" in text
    assert "donating `x` would not lower the peak: no output has its shape and dtype" in text


def test_donated_argument_vanishes_from_the_peak():
    x = jnp.zeros((1000, 1000))
    f = jax.jit(lambda x: x * 2 + 1)
    # f32[1000,1000]: 4,000,000 B on CPU; what its compiled layout takes elsewhere (a TPU's
    # 8x128 tiles: 1000x1024 elements, 4,096,000 B)
    size = 4_000_000 if ON_CPU else compiled_parameter_bytes(f, x)[0]
    plain = _report(f, x, what_if=True)
    donated = _report(jax.jit(lambda x: x * 2 + 1, donate_argnums=0), x, what_if=True)
    assert {b.category for b in plain.buffers} >= {"argument", "output"}
    assert [b.category for b in donated.buffers if b.bytes >= 4_000_000] == ["donated argument"]
    assert plain.peak_bytes - donated.peak_bytes == size
    (p,), (d,) = plain.donations, donated.donations
    assert (p.donated, p.saves) == (False, size)
    assert (d.donated, d.saves) == (True, size)
    assert f"would lower the peak by {fmt_bytes(size)}" in p.sentence()


def test_remat_lowers_the_temporaries():
    plain = _report(*_flat(transformer_step(4, 128, 256)))
    remat = _report(*_flat(transformer_step(4, 128, 256, remat=True)))
    if JAX_010 and remat.xla.temp_bytes >= 0.9 * plain.xla.temp_bytes:
        pytest.skip("jaxlib 0.10.2's CPU compiler keeps the activations despite remat "
                    "(its own memory_analysis says so)")
    assert remat.temp_bytes < 0.5 * plain.temp_bytes
    assert sum(b.bytes for b in plain.buffers if b.category == "activation") > \
        sum(b.bytes for b in remat.buffers if b.category == "activation")


def test_loop_body_temporaries_are_counted_inside_the_loop():
    f, args = rnn_grad(hidden=64, steps=8)
    r = _report(f, *args)
    assert abs(off_reference(r, f, *args)) <= 0.05, (r.peak_bytes, reference_peak(r, f, *args))
    m = parse_hlo_module(jaxviz.trace(*_flat(rnn_grad(hidden=64, steps=8))).compile().hlo)
    assert any(i.opcode in ("while", "call") for i in m.entry_instructions())


def test_hlo_frames_are_innermost_first():
    def inner(x):
        return jnp.sin(x) @ x

    def outer(x):
        return inner(inner(x))

    text = jax.jit(outer).lower(jnp.ones((8, 8))).compile().as_text()
    m = parse_hlo_module(text)
    stacks = [[f.fn for f in m.stack(i.frame)] for i in m.entry_instructions() if i.frame]
    assert stacks and all([f.rsplit(".", 1)[-1] for f in s[:2]] == ["inner", "outer"] for s in stacks)


MULTI = textwrap.dedent("""
    import json, jax, jax.numpy as jnp, jaxviz
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = jax.make_mesh((8,), ("d",))
    w = jax.device_put(jnp.ones((256, 256)) * 0.01, NamedSharding(mesh, P()))
    x = jax.device_put(jnp.ones((64, 256)), NamedSharding(mesh, P("d")))
    def loss(w, x):
        return jnp.tanh(x @ w).sum()
    @jax.jit
    def step(w, x):
        return w - 0.1 * jax.grad(loss)(w, x)
    r = jaxviz.trace(step, w, x).memory(what_if=True)
    print(json.dumps({"n": r.num_devices, "peak": r.peak_bytes, "xla": r.xla_total,
                      "w": [b.bytes for b in r.buffers if b.where == "w"],
                      "x": [b.bytes for b in r.buffers if b.where == "x"],
                      "donations": [[d.arg, d.bytes, d.saves is not None]
                                    for d in r.donations]}))
""")


def test_eight_device_sharded_step():
    env = dict(os.environ, JAX_NUM_CPU_DEVICES="8", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(__file__)),
                                         env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", MULTI], env=env, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["n"] == 8
    assert got["w"] == [256 * 256 * 4]                # replicated: whole on each device
    assert got["x"] == [64 * 256 * 4 // 8]            # per device: one row shard
    assert got["donations"] == [["w", 256 * 256 * 4, True], ["x", 64 * 256 * 4 // 8, True]]
    assert abs(got["peak"] / got["xla"] - 1) <= 0.05


OOM_CELL = '''import jax, jax.numpy as jnp

@jax.jit
def big(x):
    y = jnp.sort(x[:, None] * x[None, :], axis=0)
    return y.sum()

big(jnp.ones(1 << 19))
'''


@refused_allocation
def test_out_of_memory_names_the_largest_buffers():
    ct = jaxviz.trace_cell(OOM_CELL)                  # the real RESOURCE_EXHAUSTED (1 TiB)
    assert "RESOURCE_EXHAUSTED" in str(ct.error)
    (d,) = [d for d in ct.diagnostics if d.rule == "out-of-memory"]
    assert (d.line, d.severity, d.trace) == (8, "error", "big")
    # the peak XLA needs: 1.0 TiB on CPU; elsewhere its buffer assignment's (a TPU sorts
    # the values with an s32 iota beside them, in place: 2.0 TiB of temporaries)
    t = next(t for t in ct.traces if t.name == "big").compilable()
    peak = "1.0 TiB" if ON_CPU else fmt_bytes(
        assignment_total(t.fun, *t.args_spec, **t.kwargs_spec))
    assert d.message.startswith("`big(jnp.ones(1 << 19))`: big ran out of device memory: its "
                                f"compiled peak is {peak}")
    assert "1.0 TiB f32[524288,524288] temporary at " in d.message
    assert ":5 (big)" in d.message and d.related[0][1] == 5 and d.node_ids


def test_cli_memory_flag(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp

        def loss(w, x):
            return (jnp.tanh(x @ w) ** 2).mean()

        @jax.jit
        def step(w, x):
            return w - 0.1 * jax.grad(loss)(w, x)

        w = step(jnp.ones((256, 256)), jnp.ones((128, 256)))
    """))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(__file__)),
                                         env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-m", "jaxviz", script.name, "--memory",
                          "--html", "r.html"], env=env,
                         capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "memory of step (one call, simulated over XLA's schedule; cpu): peak 768.0 KiB" in text
    assert "output           train.py:9 (step) -> w  sub" in text  # (its path: the assignment's)
    assert "temporary        train.py:5 (loss)" in text
    assert "donating `x` would not lower the peak" in text
    assert text.count("memory of ") == 1                  # the script's own function only
    from tests.test_widget_payload import decode_fragment
    payload = decode_fragment((tmp_path / "r.html").read_text())
    assert [e["trace"] for e in payload["compiled_memory"]] == ["step"]


@refused_allocation
def test_out_of_memory_in_a_jaxtrace_cell(ip, capsys, dispatch_state):
    # the result read in the cell: dispatch is asynchronous, the error comes with the value
    cell = OOM_CELL.replace("big(jnp.ones(1 << 19))", "total = float(big(jnp.ones(1 << 19)))")
    r = ip.run_cell("%%jaxtrace -q -o ct\n" + cell, store_history=True)
    out = capsys.readouterr()
    assert not r.success and "RESOURCE_EXHAUSTED" in str(r.error_in_exec)
    ct = ip.user_ns["ct"]
    (d,) = [d for d in ct.diagnostics if d.rule == "out-of-memory"]
    assert d.line == 9 and d.filename == ct.filename  # the editor's line: %%jaxtrace is 1
    assert "1.0 TiB f32[524288,524288] temporary" in d.message
    # XLA's own words, as this platform raised them (CPU: "Out of memory" while it runs;
    # a TPU: "Ran out of memory on HBM" at compile time)
    assert (out.out + out.err).count(oom_words(r.error_in_exec)) >= 1


def test_each_output_selects_the_equation_that_writes_it(transformer_report):
    t = jaxviz.trace(*_flat(transformer_step(12, 64, 16)))
    # the outputs the program writes (a TPU's result tuple has an index table, no equation)
    outs = [b for b in transformer_report.buffers
            if b.category == "output" and b.bytes > 4 and b.type != TABLE]
    assert len(outs) >= 100
    root = t.graph.bodies[t.graph.root]
    writers = {e.src for e in root.edges if e.dst in root.outputs}
    picked = [b.node_ids for b in outs]
    assert all(len(ids) == 1 for ids in picked)               # one node each, not the line's
    assert {int(ids[0].split(":")[1]) for ids in picked} <= writers
    assert len({ids[0] for ids in picked}) == len(outs)        # a different node per output


LIMIT_CELL = '''import jax, jax.numpy as jnp

@jax.jit
def step(w, x):
    h = jnp.tanh(x @ w)
    return w - 0.1 * (x.T @ h)

w = step(jnp.ones((512, 512)), jnp.ones((256, 512)))
'''


def test_memory_limit_reports_what_would_not_fit():
    with jaxviz.options.using(memory_limit=2 << 20):            # 2 MiB: the step needs 3
        ct = jaxviz.trace_cell(LIMIT_CELL)
    assert ct.error is None                                     # the cell itself ran
    (d,) = [d for d in ct.diagnostics if d.rule == "out-of-memory"]
    assert (d.line, d.trace) == (8, "step")
    assert d.message.startswith("`w = step(jnp.ones((512, 512)), jnp.ones((256, 512)))`: step "
                                "would run out of memory on a device of 2.0 MiB "
                                "(jaxviz.options.memory_limit): its compiled peak is ")
    assert "argument at w" in d.message and "temporary at " in d.message
    # the hint fits the step: its categories; `w` could be donated (the output has its shape)
    assert "By category: " in d.message and "donate_argnames=('w',)" in d.hint
    with jaxviz.options.using(memory_limit=64 << 20):           # fits: nothing to say
        assert not [d for d in jaxviz.trace_cell(LIMIT_CELL).diagnostics
                    if d.rule == "out-of-memory"]
    assert jaxviz.options.memory_limit is None                  # off by default
    assert not [d for d in jaxviz.trace_cell(LIMIT_CELL).diagnostics if d.rule == "out-of-memory"]


def test_an_unscheduled_module_says_so():
    from jaxviz.memory.buffers import _Simulation
    text = ("HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\n"
            "ENTRY %main (x: f32[4]) -> f32[4] {\n"
            "  %x = f32[4]{0} parameter(0), metadata={op_name=\"x\"}\n"
            "  ROOT %y = f32[4]{0} negate(%x), metadata={op_name=\"jit(f)/neg\"}\n}\n")
    m = parse_hlo_module(text)
    assert not m.scheduled and [i.opcode for i in m.entry_instructions()] == ["parameter", "negate"]
    sim = _Simulation(m)
    sim.run()
    assert sim.no_schedule and sim.timeline == [32, 32]      # x and y (16 B each) all along


def test_memory_of_a_function_that_failed_to_trace_says_why():
    def f(x):
        if x > 0:
            return x
        return -x

    t = jaxviz.trace(f, jnp.ones(()))
    with pytest.raises(ValueError, match="f has no compiled program to explain: tracing failed"):
        t.memory()


def _layers_step(block, params, x):
    """A jitted SGD step over `params["blocks"]`, each layer `block(p, x)`: its Trace and its
    memory tab entry (the rows a person reads)."""
    from jaxviz.view.compiled import compiled_entries

    def loss(params, x):
        for blk in params["blocks"]:
            x = block(blk, x)
        return (x ** 2).mean()

    @jax.jit
    def step(params, x):
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, jax.grad(loss)(params, x))

    t = jaxviz.trace(step, params, x)
    return t, compiled_entries([t.memory()], [t])[0]


def _each_row_selects_nodes_of_its_own_type(t, entry) -> None:
    """Every row of the memory tab that selects graph nodes selects ones whose value has the
    row's type (size-1 dimensions aside: a f32[64] reduction of a f32[64,1] node)."""
    def squeezed(ty: str) -> str:
        dtype, _, dims = ty.lstrip("~").partition("[")
        return dtype + "[" + ",".join(x for x in dims.rstrip("]").split(",") if x != "1") + "]"

    rows = [b for b in entry["buffers"]
            if b["category"] not in ("argument", "donated argument", "output") and b["node_ids"]]
    # (on a TPU v5e these small steps' only temporaries were tuple tables, which its runtime
    # does not allocate: the peak there holds no temporaries)
    assert len(rows) >= 4 or not ON_CPU, [(b["op"], b["type"]) for b in entry["buffers"]]
    for b in rows:
        body, nid = map(int, b["node_ids"][0].split(":"))
        outs = {squeezed(o) for o in t.graph.bodies[body].nodes[nid].out}
        assert squeezed(b["type"]) in outs, (b, outs)


def test_a_layers_rows_select_nodes_of_their_own_type_and_norm():
    """Issue 57, item 6: a line's `g * x / sqrt(...)` makes a f32[64,1] div and a f32[64,128]
    one; the rows of the f32[64,128] buffers selected the small divs (a 32 KiB row, a 256 B
    node), and each block's second norm was labelled norm['g1']. Each row now selects a node
    of its own type, each block's two norms once; relu's rows each their own layer."""

    def norm(x, g):
        return g * x / jnp.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)

    def block(p, x):
        h = norm(x, p["norm"]["g1"])
        x = x + jax.nn.relu(h @ p["w1"]) @ p["w2"]
        return norm(x, p["norm"]["g2"])

    d = 128
    params = {"blocks": [{"norm": {"g1": jnp.ones(d), "g2": jnp.ones(d)}, "w1": jnp.ones((d, 4 * d)) * 0.01,
                          "w2": jnp.ones((4 * d, d)) * 0.01} for _ in range(4)]}
    t, entry = _layers_step(block, params, jnp.ones((64, d)))
    _each_row_selects_nodes_of_its_own_type(t, entry)
    if jax.default_backend() != "cpu":  # (a TPU v5e fuses the norms into their neighbours:
        return                          # no f32[64,128] div, no relu max has a buffer there)
    rows = [b for b in entry["buffers"] if b["op"] == "div" and b["type"] == "f32[64,128]"]
    assert len(rows) >= 4, [(b["op"], b["type"]) for b in entry["buffers"]]
    for b in rows:
        body, nid = map(int, b["node_ids"][0].split(":"))
        assert t.graph.bodies[body].nodes[nid].out[0].lstrip("~") == "f32[64,128]", b
    paths = [b["path"] for b in rows]
    assert len(set(paths)) == len(paths), paths          # no norm named twice
    assert any("norm['g2']" in p for p in paths), paths
    # relu's max, in a body each layer's custom_jvp calls: each row its own layer, by path
    # (they all said `loss > block` and selected one node)
    maxes = [b for b in entry["buffers"] if b["op"] == "max" and b["type"] == "f32[64,512]"]
    assert len(maxes) >= 2, [(b["op"], b["type"]) for b in entry["buffers"]]
    assert len({b["node_ids"][0] for b in maxes}) == len(maxes), maxes
    assert len({b["path"] for b in maxes}) == len(maxes) and all("block[" in b["path"] for b in maxes), \
        [b["path"] for b in maxes]


def test_split_and_gelu_rows_each_name_their_own_layer():
    """Issue 57, item 6: four `mul` rows and eight `split` rows all said `block[0]`. A split
    writes three values of one type (its three rows are one layer's, not three layers'), and
    gelu makes several muls per layer of which one per layer is kept (the k-th row is the
    k-th layer's, not the k-th mul of layer 0)."""

    def block(p, x):
        q, k, v = jnp.split(x @ p["qkv"], 3, axis=-1)
        x = x + jax.nn.softmax(q @ k.T, axis=-1) @ v
        return x + jax.nn.gelu(x @ p["w1"]) @ p["w2"]

    d = 64
    params = {"blocks": [{"qkv": jnp.ones((d, 3 * d)) * 0.01, "w1": jnp.ones((d, 4 * d)) * 0.01,
                          "w2": jnp.ones((4 * d, d)) * 0.01} for _ in range(3)]}
    t, entry = _layers_step(block, params, jnp.ones((32, d)))
    _each_row_selects_nodes_of_its_own_type(t, entry)
    if jax.default_backend() != "cpu":  # (a TPU v5e fuses the splits and gelu's muls into
        return                          # their matmuls: no buffer of theirs there)
    by_op: dict[str, list[dict]] = {}
    for b in entry["buffers"]:
        if b["category"] not in ("argument", "donated argument", "output"):
            by_op.setdefault((b["op"], b["line"]), []).append(b)
    splits = next(v for (op, _), v in by_op.items() if op == "split")
    muls = max((v for (op, _), v in by_op.items() if op == "mul"), key=len)
    for rows in (splits, muls):
        layers = [re.search(r"block\[(\d)\]", b["path"]).group(1) for b in rows]
        assert len(rows) >= 3 and set(layers) == {"0", "1", "2"}, [(b["path"], b["node_ids"]) for b in rows]
        for b in rows:   # each row selects nodes of its own layer only
            assert {t.graph.bodies[0].nodes[int(i.split(":")[1])].path for i in b["node_ids"]} \
                == {t.graph.bodies[0].nodes[int(b["node_ids"][0].split(":")[1])].path}, b
    per_layer = {k: sum(1 for b in splits if f"block[{k}]" in b["path"]) for k in "012"}
    assert len(set(per_layer.values())) == 1, per_layer    # a layer's three splits, not three layers


def test_each_output_is_named_by_its_path_and_the_line_that_makes_it():
    # issue 54: a gradient with has_aux returns the outer product made at one line as its aux
    # output; its buffer said only a line, never which output it is
    def loss(w, x):
        outer = jnp.outer(x, x)
        y = (w * outer).sum() * 2.0
        return y, outer

    line = loss.__code__.co_firstlineno + 1
    g = jax.jit(jax.grad(loss, has_aux=True))
    r = jaxviz.trace(g, jnp.ones((512, 512)), jnp.ones(512)).memory(what_if=False)
    outs = {b.where.rsplit(" -> ", 1)[-1]: b for b in r.buffers
            if b.category == "output" and b.type != TABLE}  # (a TPU's result table: its own)
    assert set(outs) == {"result[0]", "result[1]"}, [b.where for b in r.buffers]
    aux = outs["result[1]"]
    assert (aux.line, aux.type) == (line, "f32[512,512]"), aux
    assert f"test_buffers.py:{line} (loss) -> result[1]" in str(r)


def test_a_buffer_a_librarys_code_wrote_is_at_the_users_line(tmp_path, monkeypatch):
    # flax's GSPMD guide: the updated parameters were named optax/_src/update.py:42 (<lambda>),
    # the temporaries flax/nnx/nn/linear.py:422; the line to change is the user's that called
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "vizlib_update.py").write_text(
        "import jax.numpy as jnp\n"
        "def apply_updates(w, g):\n"
        "    return w - 0.1 * jnp.tanh(g)\n"
    )
    monkeypatch.syspath_prepend(str(lib))
    import vizlib_update

    def step(w, g):
        return vizlib_update.apply_updates(w, g * 2.0)   # the user's line

    line = step.__code__.co_firstlineno + 1
    r = jaxviz.trace(jax.jit(step), jnp.ones((256, 256)), jnp.ones((256, 256))).memory(what_if=False)
    (out,) = [b for b in r.buffers if b.category == "output" and b.type == "f32[256,256]"]
    assert out.line == line and out.fn.endswith("step") and out.file.endswith("test_buffers.py"), out

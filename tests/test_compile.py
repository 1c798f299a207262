"""CompileReport: figures, the donation table on the cases in shared/JAX_NOTES.md, the text
twin and HTML, and per-device figures with 8 simulated CPU devices (in a subprocess)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import pytest

import jaxviz
from jaxviz.format import fmt_bytes
from jaxviz._compat import entry_parameters, hlo_leaves, parse_hlo_aliases, parse_main_args
from jaxviz.memory.compile import CompileReport, _cost, _memory
from tests.conftest import on_accelerator

S = jax.ShapeDtypeStruct


def _step(x, y, z, w, u):
    return (x * 2 + 1,                                   # matched by JAX
            (y + 1).astype(jnp.float16),                 # f32 -> f16: silent, not reused
            z.sum(),                                     # no output of its shape: JAX warns
            w,                                           # not donated: could be
            jax.lax.bitcast_convert_type(u, jnp.int32))  # same bytes, other dtype: XLA matches


@pytest.fixture(scope="module")
def report() -> CompileReport:
    f = jax.jit(_step, donate_argnums=(0, 1, 2, 4))
    args = (jnp.zeros((64, 64)), jnp.zeros((10,)), jnp.zeros((5, 3)),
            jnp.zeros((4,), jnp.int32), jnp.zeros((7,)))
    return jaxviz.trace(f, *args).compile()


def _row(r: CompileReport, path: str):
    return next(d for d in r.donations if d.path == path)


def test_matched_by_jax(report):
    d = _row(report, "x")
    assert (d.donated, d.aliased_to, d.matched_by, d.reason) == (True, "out[0]", "jax", "")


def test_matched_by_xla_buffer_donor(report):
    d = _row(report, "u")
    # the CPU's XLA gives u's buffer to the output of its bytes; a TPU's may pick another
    # output its tiles fit (out[2], seen): the table says what XLA's aliases say
    aliases = parse_hlo_aliases(report.hlo)
    assert (d.donated, d.matched_by) == (True, "xla") and d.aliased_to
    assert int(d.aliased_to[4:-1]) in aliases.values()
    if not on_accelerator():
        assert d.aliased_to == "out[4]"


def test_silent_dtype_change(report):
    d = _row(report, "y")
    if on_accelerator():  # a TPU's tiles hold f32[10] and f16[10] alike: XLA aliases them
        pytest.skip("the CPU's case: on this accelerator XLA reuses the buffer (out[1])")
    assert d.donated and d.aliased_to is None and d.silent
    assert "out[1] is f16[10]" in d.reason and "does not warn" in d.reason
    # JAX indeed said nothing about y: only z's shape appears in its warning
    assert not any("float32[10]" in w for w in report.warnings)


def test_unusable_with_jax_warning(report):
    d = _row(report, "z")
    assert d.donated and d.aliased_to is None and not d.silent
    assert "no output of shape (5,3)" in d.reason
    assert any("float32[5,3]" in w for w in report.warnings)


def test_not_donated_gets_a_hint(report):
    d = _row(report, "w")
    assert not d.donated and d.aliased_to is None and "out[3]" in d.hint


def test_alias_bytes_cross_check(report):
    # the aliased parameters' bytes in their compiled layouts: x and u's elements on CPU;
    # on a TPU their 8x128 / 1024-element tiles, and y too (XLA aliases it there)
    laid_out = [sum(x.bytes for x in hlo_leaves(p)) for p in entry_parameters(report.hlo)]
    aliased = sum(laid_out[p] for p in parse_hlo_aliases(report.hlo))
    assert report.memory.alias_bytes == report.aliased_bytes == aliased
    if not on_accelerator():
        assert report.aliased_bytes == 64 * 64 * 4 + 7 * 4


def test_figures_and_unavailable(report):
    assert report.cost.flops and report.cost.flops > 0
    assert report.memory.peak_bytes is not None and not report.memory.per_device
    text = str(report)
    if not on_accelerator():
        assert report.cost.transcendentals is None          # CPU gives none for this program
        assert "transcendentals unavailable" in text
        assert "y: f32[10]" in text and "[silent]" in text
    assert report.stablehlo.startswith("module") and report.hlo.startswith("HloModule")
    assert report.lower_seconds > 0 and report.compile_seconds > 0


def test_unavailable_is_never_zero():
    class NoFigures:
        def memory_analysis(self):
            raise NotImplementedError("backend has none")

        def cost_analysis(self):
            return None
    m, c = _memory(NoFigures(), 1), _cost(NoFigures())
    assert (m.argument_bytes, m.peak_bytes, m.alias_bytes) == (None, None, None)
    assert (c.flops, c.bytes_accessed, c.transcendentals) == (None, None, None)
    assert fmt_bytes(None) == "unavailable" and fmt_bytes(0) == "0 B"


def test_pytree_static_and_keyword_names():
    f = jax.jit(lambda params, n, *, lr: ({"w": params["w"] - lr, "b": params["b"]}, n),
                static_argnums=1, donate_argnames=("params",))
    params = {"w": jnp.zeros((3, 3)), "b": jnp.zeros((3,))}
    r = jaxviz.trace(f, params, 4, lr=jnp.float32(0.1)).compile()
    assert [(d.path, d.aliased_to) for d in r.donations] == [
        ("params['b']", "out[0]['b']"), ("params['w']", "out[0]['w']"), ("lr", None)]


def test_unused_donated_argument():
    f = jax.jit(lambda a, x: x * 2, donate_argnums=(0, 1))
    r = jaxviz.trace(f, jnp.zeros(3), jnp.zeros(3)).compile()
    a, x = r.donations
    assert a.aliased_to is None and "never uses it" in a.reason
    assert x.aliased_to == "out"


def test_output_already_taken():
    f = jax.jit(lambda a, b: a + b, donate_argnums=(0, 1))
    r = jaxviz.trace(f, jnp.zeros(3), jnp.zeros(3)).compile()
    assert r.donations[0].aliased_to == "out"
    assert "already reuses another donated argument" in r.donations[1].reason


def test_warnings_restored_and_not_leaked():
    before = list(warnings.filters)
    f = jax.jit(lambda z: z.sum(), donate_argnums=0)
    r = jaxviz.trace(f, jnp.zeros((5, 3))).compile()    # JAX warns; filterwarnings=error
    assert warnings.filters == before
    assert r.warnings and "not usable" in r.warnings[0]


def test_mimebundle_escapes():
    f = jax.jit(lambda d: {"<b>": d["<b>"] * 2}, donate_argnums=0)
    r = jaxviz.trace(f, {"<b>": jnp.zeros(2)}).compile()
    bundle = r._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert "['<b>']" in bundle["text/plain"]
    assert "['<b>']" not in bundle["text/html"] and "[&#x27;&lt;b&gt;&#x27;]" in bundle["text/html"]


def test_parsers_on_text():
    hlo = ("HloModule jit_f, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), "
           "{2}: (3, {}, may-alias) }, buffer_donor={ (1, {}) }, entry_computation_layout={()}")
    assert parse_hlo_aliases(hlo) == {0: 0, 3: 2}
    assert parse_hlo_aliases("HloModule m, entry_computation_layout={()}") == {}
    assert parse_hlo_aliases("not hlo") is None
    shlo = ('func.func public @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, '
            '[{"d"}, {}]>, tf.aliasing_output = 0 : i32}, %arg1: tensor<10xf32> {jax.buffer_donor = '
            'true}, %arg2: tensor<f32>) -> (tensor<8x4xf32>) {')
    a = parse_main_args(shlo)
    assert [x["aliasing_output"] for x in a] == [0, None, None]
    assert [x["buffer_donor"] for x in a] == [False, True, False]
    assert a[0]["sharding"].startswith("#sdy.sharding") and a[0]["type"] == "tensor<8x4xf32>"


MULTI = textwrap.dedent("""
    import json, jax, jax.numpy as jnp, jaxviz
    from jax.sharding import NamedSharding, PartitionSpec as P
    from jaxviz.memory.run import run_trace
    assert len(jax.devices()) == 8
    mesh = jax.make_mesh((8,), ("d",))
    sh = NamedSharding(mesh, P("d"))
    x = jax.device_put(jnp.zeros((1024, 64)), sh)
    f = jax.jit(lambda x: x * 2 + 1)
    t = jaxviz.trace(f, x)
    r = t.compile()
    rr = run_trace(t, steps=3)
    g = jax.jit(lambda x: x * 2, out_shardings=NamedSharding(mesh, P()), donate_argnums=0)
    resharded = jaxviz.trace(g, x).compile().donations[0]
    print(json.dumps({
        "resharded": [resharded.aliased_to, resharded.reason],
        "per_device": r.memory.per_device, "num_devices": r.memory.num_devices,
        "arg_bytes": r.memory.argument_bytes, "devices": list(r.devices),
        "in_sharding": r.donations[0].sharding, "out_sharding": r.outputs[0].sharding,
        "lanes": [ln.id for ln in rr.samples.lanes],
        "with": rr.runs[0].peak_rise, "without": rr.runs[1].peak_rise,
        "ratio": rr.donation_ratio}))
""")


def test_eight_cpu_devices_per_device_accounting():
    env = dict(os.environ, JAX_NUM_CPU_DEVICES="8", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(__file__)),
                                         env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-W", "error::UserWarning",
                          "-W", "ignore:Transparent hugepages:UserWarning", "-c", MULTI], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    shard = 1024 * 64 * 4 // 8
    assert got["per_device"] and got["num_devices"] == 8 and got["arg_bytes"] == shard
    assert got["devices"] == [f"cpu:{i}" for i in range(8)]
    assert "'d'" in got["in_sharding"] and "'d'" in got["out_sharding"]
    assert got["lanes"] == [f"cpu:{i}" for i in range(8)] + ["rss"]
    for i in range(8):                      # each device holds 1/8: one copy with, two without
        assert got["with"][f"cpu:{i}"] == shard
        assert got["without"][f"cpu:{i}"] == 2 * shard
    assert got["ratio"] == pytest.approx(2.0)
    aliased, reason = got["resharded"]      # donated, but the output is replicated
    assert aliased is None and "different sharding" in reason and "P()" in reason

"""The same diagnostics through `python -m jaxviz FILE.py` and through %%jaxtrace."""
from __future__ import annotations

import os
import subprocess
import sys

import jaxviz
from tests.diagnostics.corpus import CASES, HEADER, expected



def test_cli_prints_file_line_and_fails(tmp_path):
    path = tmp_path / "train.py"
    src = HEADER + CASES["key_eager_twice"] + "leak = []\n@jax.jit\ndef f(x):\n    leak.append(x)\n    return x\nf(jnp.ones(2))\n"
    path.write_text(src)
    leak_line = src.splitlines().index("    leak.append(x)") + 1
    rule, key_line = expected(CASES["key_eager_twice"])
    r = subprocess.run([sys.executable, "-m", "jaxviz", str(path)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=300, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{path}:{key_line}: warning: key-reuse: " in r.stdout, r.stdout
    assert f"{path}:{leak_line}: error: leaked-tracer: " in r.stdout, r.stdout


def test_cli_clean_exits_0(tmp_path):
    path = tmp_path / "ok.py"
    path.write_text(HEADER + "f = jax.jit(lambda x: x * 2)\nprint(f(jnp.ones(2)))\n")
    r = subprocess.run([sys.executable, "-m", "jaxviz", str(path)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "error:" not in r.stdout and "warning:" not in r.stdout


def test_magic_reports_the_same(ip):
    src = HEADER + CASES["key_eager_twice"]
    rule, line = expected(CASES["key_eager_twice"])
    ip.run_cell("%%jaxtrace -q -o ct\n" + src)
    ct = ip.user_ns["ct"]
    direct = jaxviz.trace_cell(src)
    # the cell's lines as the editor numbers them: %%jaxtrace is line 1
    assert [(d.rule, d.line) for d in ct.diagnostics] == [(d.rule, d.line + 1) for d in direct.diagnostics]
    assert (rule, line + 1) in [(d.rule, d.line) for d in ct.diagnostics]


def test_magic_error_cell(ip):
    src = HEADER + CASES["bool_if"]
    rule, line = expected(CASES["bool_if"])
    result = ip.run_cell("%%jaxtrace -q -o ct\n" + src)
    assert isinstance(result.error_in_exec, jaxviz_errors().TracerBoolConversionError)
    ct = ip.user_ns["ct"]
    assert (rule, line + 1) in [(d.rule, d.line) for d in ct.diagnostics]


def jaxviz_errors():
    import jax
    return jax.errors


def test_recompile_severity_follows_the_pattern():
    """One more shape is often meant (info); a third one, or a new function object each
    time, is the costly pattern (warning)."""
    import jaxviz
    head = "import jax, jax.numpy as jnp\nf = jax.jit(lambda x: x.sum())\n"
    two = jaxviz.trace_cell(head + "a = f(jnp.ones(8))\nb = f(jnp.ones(5))\n", filename="<two>")
    three = jaxviz.trace_cell(head + "a = f(jnp.ones(8))\nb = f(jnp.ones(5))\nc = f(jnp.ones(3))\n",
                              filename="<three>")
    fresh = jaxviz.trace_cell("import jax, jax.numpy as jnp\ndef loss(x):\n    return x.sum()\n"
                              "for _ in range(2):\n    y = jax.jit(lambda x: loss(x))(jnp.ones(3))\n",
                              filename="<fresh>")
    sev = lambda ct: [d.severity for d in ct.diagnostics if d.rule == "recompile"]  # noqa: E731
    assert sev(two) == ["info"]
    assert sev(three) == ["warning", "warning"]
    assert sev(fresh) == ["warning"]


def test_nan_gradient_names_the_forward_op_not_its_neighbours():
    """`jnp.sqrt(jnp.sum(x ** 2))` at 0: the derivative of sqrt is the culprit (x ** 2 has a
    finite one), eager or jitted, on every supported JAX."""
    import jaxviz
    for call in ("jax.grad(safe_norm)", "jax.jit(jax.grad(safe_norm))"):
        src = ("import jax, jax.numpy as jnp\n"
               "def safe_norm(x):\n"
               "    n = jnp.sqrt(jnp.sum(x ** 2))\n"
               "    return jnp.where(n > 0, n, 0.0)\n"
               f"g = {call}(jnp.zeros(3))\n")
        (d,) = [d for d in jaxviz.trace_cell(src, filename="<norm>").diagnostics if d.rule == "nan"]
        assert d.line == 3
        assert "the derivative of `sqrt` here" in d.message, d.message


def test_nan_messages_say_forward_or_gradient_as_it_happened():
    import jaxviz
    head = "import jax, jax.numpy as jnp\n"
    fwd = jaxviz.trace_cell(head + "@jax.jit\ndef f(x, y):\n    return jnp.sum(y * jnp.log(x))\n"
                            "loss = f(jnp.array([0., 1.]), jnp.array([0., 1.]))\n", filename="<fwd>")
    (d,) = [d for d in fwd.diagnostics if d.rule == "nan"]
    assert d.line == 4 and "gradient" not in d.message
    assert "NaN from `mul`" in d.message and "`log` on this line made an Inf" in d.message
    grad = jaxviz.trace_cell(head + "g = jax.grad(lambda x: jnp.where(x > 0, jnp.sqrt(x), 0.).sum())"
                             "(jnp.array([0., 1.]))\n", filename="<grad>")
    (d,) = [d for d in grad.diagnostics if d.rule == "nan"]
    assert d.line == 2 and d.message.count("NaN in the gradient: the derivative of `sqrt`") == 1


def test_a_nan_used_again_is_not_said_to_have_become_nan_and_an_inf_is():
    import jaxviz
    head = "import jax, jax.numpy as jnp\nfrom jax import lax\n"
    nan = jaxviz.trace_cell(head + "h = jnp.ones(4)\nlogs = lax.log(h - 3.0)\n"
                            "loss = logs.mean()\n", filename="<nan used>")
    (d,) = [d for d in nan.diagnostics if d.rule == "nan"]
    assert d.line == 4 and "NaN from `log` of a negative value here" in d.message, d.message
    assert "turned into NaN" not in d.message, d.message
    inf = jaxviz.trace_cell(head + "z = lax.log(jnp.zeros(2))\nw = z - z\n", filename="<inf used>")
    (d,) = [d for d in inf.diagnostics if d.rule == "nan"]
    assert d.line == 3 and "which later operations turned into NaN" in d.message, d.message


def test_a_masked_eager_nan_stays_unreported():
    """log(0) inside jnp.where, eagerly: the Inf only ever fed the mask's finite result."""
    import jaxviz
    ct = jaxviz.trace_cell("import jax.numpy as jnp\nx = jnp.array([0., 1.])\n"
                           "y = jnp.where(x > 0, jnp.log(x), 0.0)\nprint(y)\n", filename="<masked>")
    assert [d for d in ct.diagnostics if d.rule == "nan"] == []



def test_a_masked_eager_nan_held_only_by_a_dropped_cycle_stays_unreported():
    """The masked Inf kept alive only by garbage (a cycle the cell dropped) is not the
    user's: the cell ends as if it were gone (a CI run saw the masked case reported once)."""
    import jaxviz
    ct = jaxviz.trace_cell("import jax.numpy as jnp\nx = jnp.array([0., 1.])\n"
                           "c = [jnp.log(x)]\nc.append(c)\n"
                           "y = jnp.where(x > 0, c[0], 0.0)\ndel c\nprint(y)\n",
                           filename="<cycle>")
    assert [d for d in ct.diagnostics if d.rule == "nan"] == []

def test_recompile_reason_for_python_numbers():
    import jaxviz
    head = "import jax, jax.numpy as jnp\nf = jax.jit(lambda x: x * 2)\n"
    cases = {"a = f(1.0)\nb = f(jnp.float32(1.0))\n": "`x` was a Python float, then a f32[] array",
             "a = f(1)\nb = f(1.0)\n": "`x` was a Python int, then a Python float: the dtype changed"}
    for body, want in cases.items():
        (d,) = jaxviz.trace_cell(head + body, filename="<scalars>").diagnostics
        assert d.rule == "recompile" and want in d.message and "static" not in d.message, d.message


def test_two_kept_functions_from_one_lambda_are_not_a_recompile():
    import jaxviz
    src = ("import jax, jax.numpy as jnp\n"
           "def make_scaler(c):\n"
           "    return jax.jit(lambda x: x * c)\n"
           "double, triple = make_scaler(2.0), make_scaler(3.0)\n"
           "x = jnp.ones(3)\n"
           "print(double(x), triple(x))\n")
    assert jaxviz.trace_cell(src, filename="<scalers>").diagnostics == []
    loop = ("import jax, jax.numpy as jnp\n"
            "for i in range(3):\n"
            "    y = jax.jit(lambda x: x * 2)(jnp.ones(3))\n")
    assert [d.rule for d in jaxviz.trace_cell(loop, filename="<loop>").diagnostics] == ["recompile"]


def test_recompile_reason_names_a_new_keyword_argument():
    import jaxviz
    src = ("import jax, jax.numpy as jnp\nfrom functools import partial\n"
           "@partial(jax.jit, static_argnames='act')\n"
           "def layer(x, act='relu'):\n"
           "    return jnp.tanh(x) if act == 'tanh' else jax.nn.relu(x)\n"
           "a = layer(jnp.ones(3))\n"
           "b = layer(jnp.ones(3), act='tanh')\n")
    (d,) = [d for d in jaxviz.trace_cell(src, filename="<kw>").diagnostics if d.rule == "recompile"]
    assert "the keyword arguments changed: added `act`" in d.message, d.message

"""The recompile rule: only real retraces, each with JAX's own cause (or a more precise one).

A retrace is a trace of one function object (the one jax.jit wrapped) in this cell, after
another of its traces: jit's cache is per function object, and a call JAX's cache served
(an earlier cell traced it) is no trace at all. A function made anew at each call
(`jax.jit(lambda ...)` in a loop) is one finding at that call. Each reason is checked against
what JAX itself says with `jax_explain_cache_misses`, on every supported JAX.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import jax
import pytest

import jaxviz

HEAD = "import jax, jax.numpy as jnp\nfrom functools import partial\n"
JAX_LOGGER = "jax._src.interpreters.partial_eval"  # where jax_explain_cache_misses writes


def recompiles(ct) -> list:
    return [d for d in ct.diagnostics if d.rule == "recompile"]


def line_of(src: str, text: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if text in line)


def traced_with_jax_explaining(src: str, caplog, filename: str, ns: dict | None = None):
    """The cell's CellTrace, and what JAX's jax_explain_cache_misses said while it ran."""
    before = jax.config.jax_explain_cache_misses
    jax.config.update("jax_explain_cache_misses", True)
    caplog.clear()
    try:
        with caplog.at_level(logging.WARNING, logger=JAX_LOGGER):
            ct = jaxviz.trace_cell(src, namespace=ns, filename=filename)
    finally:
        jax.config.update("jax_explain_cache_misses", before)
    said = "\n".join(r.getMessage() for r in caplog.records if r.name == JAX_LOGGER)
    return ct, said


# --- 1. distinct function objects that share code ---------------------------------------------


def test_distinct_functions_that_share_code_are_not_a_recompile(caplog):
    src = HEAD + (
        "def make_step(s):\n"
        "    @jax.jit\n"
        "    def step(t): return jax.tree.map(lambda x: x * s, t)\n"
        "    return step\n"
        "a, b = make_step(1.), make_step(2.)\n"
        'a({"w": jnp.ones(2)}); b({"w": jnp.ones(2), "m": jnp.ones(2)})\n'
        "steps = [make_step(s) for s in (3., 4.)]\n"
        "for st in steps:\n"
        '    st({"w": jnp.ones(3)})\n'
    )
    ct, said = traced_with_jax_explaining(src, caplog, "<make_step>")
    assert ct.error is None, ct.error
    assert ct.diagnostics == [], [d.format() for d in ct.diagnostics]
    # JAX agrees: each `step` is a function it never saw, traced once (for the kept list
    # called in a loop JAX guesses "maybe the function is being re-defined repeatedly")
    assert said.count("never seen function") == 4, said
    assert "all previously seen cache keys differ" not in said


def test_jit_of_the_function_after_a_jit_of_partial_loop_is_cached():
    """JAX's jit docs: `jax.jit(partial(f))` in a loop retraces each time (a new partial
    object), `jax.jit(f)` in a loop does not (the cache is per function object)."""
    src = HEAD + (
        "def f(x): return x * 2\n"
        "for i in range(3): y = jax.jit(partial(f))(jnp.ones(3))\n"
        "for i in range(3): y = jax.jit(f)(jnp.ones(3))\n"
    )
    (d,) = recompiles(jaxviz.trace_cell(src, filename="<partial>"))
    assert d.line == line_of(src, "jax.jit(partial(f))"), d.format()
    assert d.severity == "warning"
    assert "f is traced again at each call here (3 traces" in d.message, d.message
    assert "`jax.jit(partial(...))` wraps a new functools.partial object at each call" in d.message


# --- 2. a re-run cell that hits JAX's cache ---------------------------------------------------------


def test_a_rerun_cell_served_by_jax_cache_is_not_a_recompile():
    ns: dict = {}
    defined = jaxviz.trace_cell(
        HEAD + "f = jax.jit(lambda d: sum(d.values()))\nx = jnp.ones(2)\n",
        namespace=ns,
        filename="<define>",
    )
    assert defined.diagnostics == []
    cell = 'y = f({"a": x}); z = f({"a": x, "b": x})\n'
    (d,) = recompiles(jaxviz.trace_cell(cell, namespace=ns, filename="<run 1>"))
    assert "`d` has other keys: added 'b'" in d.message, d.message
    again = jaxviz.trace_cell(cell, namespace=ns, filename="<run 2>")
    assert again.error is None and again.diagnostics == [], [d.format() for d in again.diagnostics]
    # a new signature in the re-run is traced there: that one is a recompile again
    third = jaxviz.trace_cell(cell + 'w = f({"c": x})\n', namespace=ns, filename="<run 3>")
    (d,) = recompiles(third)
    assert d.line == 2 and "`d` has other keys: added 'c' and left out 'a', 'b'" in d.message


# --- 3. the reasons, as precise as JAX's own explanation -------------------------------------------


def test_a_new_function_each_iteration_is_one_finding_naming_that_cause(caplog):
    src = HEAD + (
        "def body(x):\n"
        "    return x + 1\n"
        "i = 0\n"
        "for _ in range(3):\n"
        "    i = jax.jit(lambda x: body(x))(i)\n"
    )
    ct, said = traced_with_jax_explaining(src, caplog, "<fresh lambda>")
    (d,) = recompiles(ct)
    assert d.line == line_of(src, "i = jax.jit(lambda")
    assert d.severity == "warning"
    assert "<lambda> is traced again at each call here (3 traces" in d.message, d.message
    assert "the lambda is a new function object at each call" in d.message
    assert "weak" not in d.message and "Python int" not in d.message
    assert "maybe the function is\n  being re-defined repeatedly" in said  # JAX's guess


# source (after HEAD), jaxviz's reason, what JAX's explanation names (None: JAX has none)
REASONS = {
    "shape": (
        "f = jax.jit(lambda x: x.sum())\nf(jnp.ones(3))\nf(jnp.ones(4))  # here\n",
        "`x` changed shape: f32[3] -> f32[4]",
        "at x, now f32[4] and before f32[3]",
    ),
    "dtype": (
        "f = jax.jit(lambda x: x.sum())\nf(jnp.ones(3))\nf(jnp.ones(3, jnp.int32))  # here\n",
        "`x` changed dtype: f32[3] -> i32[3]",
        "at x, now i32[3] and before f32[3]",
    ),
    "weak type": (
        "f = jax.jit(lambda x: x * 2)\nf(1.0)\nf(jnp.float32(1.0))  # here\n",
        "`x` was a Python float, then a f32[] array: a Python number is weakly typed",
        "weak_type=True",
    ),
    "pytree keys": (
        "f = jax.jit(lambda d: sum(d.values()))\nx = jnp.ones(2)\n"
        'f({"a": x})\nf({"a": x, "b": x})  # here\n',
        "`d` has other keys: added 'b'",
        "symmetric difference of key sets: {'b'}",
    ),
    "pytree length": (
        "f = jax.jit(lambda xs: sum(xs))\nf([jnp.ones(2)])\nf([jnp.ones(2)] * 2)  # here\n",
        "`xs` changed length: 1 -> 2",
        "now list of length 2 and before list of length 1",
    ),
    "static argument": (
        "f = jax.jit(lambda x, n: x ** n, static_argnums=1)\n"
        "f(jnp.ones(3), 2)\nf(jnp.ones(3), 3)  # here\n",
        "the static argument `n` changed: 2 -> 3",
        None,  # 0.10.2: "Static(val=3) ... Static(val=2)"; 0.12: "explanation unavailable"
    ),
    "static keyword": (
        "@partial(jax.jit, static_argnames='act')\n"
        "def layer(x, act='relu'):\n"
        "    return jnp.tanh(x) if act == 'tanh' else jax.nn.relu(x)\n"
        "layer(jnp.ones(3), act='relu')\nlayer(jnp.ones(3), act='tanh')  # here\n",
        "the static argument `act` changed: 'relu' -> 'tanh'",
        None,
    ),
    "jit options": (
        "def f(x, n):\n    return x ** n\n"
        "a = jax.jit(f)(jnp.ones(3), 2)\nb = jax.jit(f, static_argnums=1)(jnp.ones(3), 2)  # here\n",
        # the jitted object is seen (Python 3.12), or only the static arguments (3.11)
        ("it was jitted again with other options: static_argnums () -> (1,)",
         "the static arguments changed: none -> n=2"),
        None,  # 0.12: "Debug info doesn't match"; 0.10.2: "now <class '...Static'> and before
        # pytree leaf"
    ),
    "config": (
        "f = jax.jit(lambda x: x @ x)\nf(jnp.ones((2, 2)))\n"
        'with jax.default_matmul_precision("highest"):\n    f(jnp.ones((2, 2)))  # here\n',
        "the config option `jax_default_matmul_precision` changed: None -> 'highest'",
        "jax_default_matmul_precision differs: now highest and before None",
    ),
    "default device": (
        "f = jax.jit(lambda x: x + 1)\nf(jnp.ones(2))\n"
        "with jax.default_device(jax.devices()[0]):\n    f(jnp.ones(2))  # here\n",
        "the config option `jax_default_device` changed: None -> CpuDevice(id=0)",
        "jax_default_device differs",
    ),
    "caches cleared": (
        "f = jax.jit(lambda x: x + 1)\nf(jnp.ones(2))\njax.clear_caches()\nf(jnp.ones(2))  # here\n",
        "the arguments and the tracing context (mesh, config) are the same: JAX's caches were "
        "cleared in between (jax.clear_caches())",
        None,  # JAX: "never seen function"
    ),
}


@pytest.mark.parametrize("case", sorted(REASONS))
def test_the_reason_names_what_jax_names(case, caplog):
    body, reason, jax_says = REASONS[case]
    src = HEAD + body
    ct, said = traced_with_jax_explaining(src, caplog, f"<reason {case}>")
    assert ct.error is None, ct.error
    (d,) = recompiles(ct)
    assert d.line == line_of(src, "# here"), d.format()
    assert any(r in d.message for r in ((reason,) if isinstance(reason, str) else reason)), d.message
    assert d.message.startswith(f"`{d.code}`: "), d.message
    if jax_says is not None:
        assert jax_says in said, said


MESH_SCRIPT = r"""
import json, logging, os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jaxviz
logs = []
class Keep(logging.Handler):
    def emit(self, record): logs.append(record.getMessage())
logging.getLogger("jax._src.interpreters.partial_eval").addHandler(Keep())
jax.config.update("jax_explain_cache_misses", True)
src = '''import jax, jax.numpy as jnp
mesh = jax.make_mesh((8,), ("d",))
f = jax.jit(lambda x: x * 2)
x = jnp.ones(8)
with jax.set_mesh(mesh):
    y = f(x)
z = f(x)
'''
ct = jaxviz.trace_cell(src, filename="<mesh>")
print(json.dumps({"devices": len(jax.devices()), "error": repr(ct.error), "jax": logs,
                  "found": [[d.rule, d.line, d.severity, d.message] for d in ct.diagnostics]}))
"""


def test_a_mesh_change_names_the_mesh():
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("XLA_FLAGS", None)
    r = subprocess.run(
        [sys.executable, "-c", MESH_SCRIPT], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["devices"] == 8 and out["error"] == "None"
    ((rule, line, severity, message),) = out["found"]
    assert (rule, line, severity) == ("recompile", 7, "info"), message
    assert message.startswith("`z = f(x)`: <lambda> is traced again"), message
    assert "the mesh set by `jax.set_mesh` changed: mesh('d': 8) -> none" in message, message
    # JAX: "abstract_mesh_context_manager differs: now AbstractMesh((), ...) [0.12] / None
    # [0.10.2] and before AbstractMesh('d': 8, ...)"
    assert any("abstract_mesh_context_manager differs" in m for m in out["jax"]), out["jax"]

"""The recompile rule: only real retraces, each with JAX's own cause (or a more precise one).

A retrace is a trace of one function object (the one jax.jit wrapped) in this cell, after
another of its traces: jit's cache is per function object, and a call JAX's cache served
(an earlier cell traced it) is no trace at all. A function made anew at each call
(`jax.jit(lambda ...)` in a loop) is one finding at that call; one made per config and then
called many times (a sweep) is one true info. A library's wrapper is the user's function it
wraps: equinox-like filter_jit functions are distinct functions, whether they share the
wrapper's code or one shared jitted function is handed each as a static argument. Each
reason is checked against what JAX itself says with `jax_explain_cache_misses`, on every
supported JAX.
"""
from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import jax
import pytest

from jaxviz.diagnostics.rules import RULES

import jaxviz
from jaxviz.capture.policy import COUNTS_EVERY_CALL, JIT_CALLS_WATCHED

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
    "weak array": (  # optax's ogda example: params from jnp.array(1.0), then a step's output
        "f = jax.jit(lambda x: x * 2)\nf(jnp.array(1.0))\nf(jnp.float32(1.0))  # here\n",
        "`x` changed weak type: ~f32[] -> f32[] (weakly typed one time, as an array made from "
        "a Python number is: `jnp.array(1.0)`; strongly typed the other)",
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
        # the device by a short name, "cpu:0" / "tpu:0", not its repr (on a TPU:
        # `TpuDevice(id=0, process_index=0, coords=(0,0,0), core_on_chip=0)`)
        "the config option `jax_default_device` changed: None -> "
        f"{jax.devices()[0].platform}:{jax.devices()[0].id}.",
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
                  "found": [[d.rule, d.line, d.severity, d.message, d.hint] for d in ct.diagnostics]}))
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
    ((rule, line, severity, message, hint),) = out["found"]
    assert (rule, line, severity) == ("recompile", 7, "info"), message
    # the fix is the mesh's, not "a new lambda each time" (JAX's shard_map tutorial)
    assert hint == RULES["recompile"].hint_for("mesh") and "jax.set_mesh(m1)" in hint, hint
    assert message.startswith("`z = f(x)`: <lambda> is traced again"), message
    assert "the mesh set by `jax.set_mesh` changed: mesh('d': 8) -> none" in message, message
    # JAX: "abstract_mesh_context_manager differs: now AbstractMesh((), ...) [0.12] / None
    # [0.10.2] and before AbstractMesh('d': 8, ...)"
    assert any("abstract_mesh_context_manager differs" in m for m in out["jax"]), out["jax"]


# --- 4. a function made per config, and reused: a sweep ----------------------------------------

SWEEP = HEAD + (
    "def make_step(lr):\n"
    "    def loss(w, x):\n"
    "        return jnp.mean((x @ w) ** 2)\n"
    "    @jax.jit\n"
    "    def step(w, x):\n"
    "        return w - lr * jax.grad(loss)(w, x)\n"
    "    return step\n"
    "x = jnp.ones((8, 3))\n"
    "losses = {}\n"
)


def test_a_step_made_per_config_and_called_many_times_is_one_true_info(caplog):
    """A learning-rate sweep: each config's jitted step is a new function (lr a constant in
    it), made once and called 10 times; jit's cache serves 9 of them. One trace per config
    is meant: an info that says so, never a warning."""
    src = SWEEP + (
        "for lr in (0.1, 0.03, 0.01):\n"
        "    step = make_step(lr)\n"
        "    w = jnp.zeros(3)\n"
        "    for _ in range(10):\n"
        "        w = step(w, x)  # here\n"
        "    losses[lr] = w\n"
    )
    ct, said = traced_with_jax_explaining(src, caplog, "<sweep>")
    assert ct.error is None, ct.error
    (d,) = recompiles(ct)
    assert (d.line, d.severity) == (line_of(src, "# here"), "info"), d.format()
    head = ("`w = step(w, x)  # here`: step is made anew 3 times (a new function object "
            "each time), each one called ")
    if JIT_CALLS_WATCHED >= 10 or COUNTS_EVERY_CALL:  # every call watched and counted
        assert d.message.startswith(
            head + "10 times here: one trace per object, 3 traces for 30 calls"), d.message
        assert d.message.endswith("jit's cache served the other 27."), d.message
    else:  # Python 3.11: a site's later calls take JAX's fast path, unseen: "at least"
        m = re.match(re.escape(head) + r"(\d+)\+ times here: one trace per object, 3 traces "
                     r"for (\d+)\+ calls", d.message)
        assert m and JIT_CALLS_WATCHED <= int(m[1]) < 10 and int(m[2]) == 3 * int(m[1]), d.message
        assert d.message.endswith(f"jit's cache served the other {int(m[2]) - 3}+."), d.message
    assert "lr in lrs" in d.hint and "jax.jit(lambda" not in d.hint, d.hint
    assert said.count("never seen function") == 3, said  # JAX: one miss per new step


def test_a_step_made_anew_for_each_call_still_warns():
    """The same factory, its step made anew at every call: a trace at each call."""
    src = SWEEP + (
        "for lr in (0.1, 0.03):\n"
        "    w = jnp.zeros(3)\n"
        "    for _ in range(3):\n"
        "        step = make_step(lr)\n"
        "        w = step(w, x)  # here\n"
    )
    ct = jaxviz.trace_cell(src, filename="<sweep per call>")
    assert ct.error is None, ct.error
    (d,) = recompiles(ct)
    assert (d.line, d.severity) == (line_of(src, "# here"), "warning"), d.format()
    assert "step is traced again at each call here (6 traces" in d.message, d.message
    assert "`step` is a new function object at each call" in d.message, d.message


# --- 5. a library's wrapper of the user's functions (equinox's filter_jit) ----------------------

# In the image of equinox's filter_jit from before it jitted one function per name: one
# module-level jitted function for every decorated function; the user's function travels in
# the static part of the arguments.
SHARED_EQX = '''\
import functools
import jax


def _partition(tree):
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    dynamic = [x if isinstance(x, jax.Array) else None for x in leaves]
    static = tuple(None if isinstance(x, jax.Array) else x for x in leaves)
    return dynamic, (treedef, static)


def _combine(dynamic, static):
    treedef, leaves = static
    flat = [d if s is None else s for d, s in zip(dynamic, leaves)]
    return jax.tree_util.tree_unflatten(treedef, flat)


@functools.partial(jax.jit, static_argnums=1)
def _call(dynamic, static):
    fun, args, kwargs = _combine(dynamic, static)
    return fun(*args, **kwargs)


class _JitWrapper:
    def __init__(self, fun):
        functools.update_wrapper(self, fun)

    def __call__(self, /, *args, **kwargs):
        dynamic, static = _partition((self.__wrapped__, args, kwargs))
        return _call(dynamic, static)  # LIBRARY CALL


def filter_jit(fun):
    return _JitWrapper(fun)
'''

THREE_STEPS = (
    "@eqx.filter_jit\n"
    "def make_step(w, x):\n"
    "    return w - 0.1 * (x.T @ (x @ w))\n"
    "@eqx.filter_jit\n"
    "def evaluate(w, x):\n"
    "    return jnp.mean(x @ w)\n"
    "@eqx.filter_jit\n"
    "def predict(w, x):\n"
    "    return x @ w\n"
    "w, x = jnp.ones(3), jnp.ones((5, 3))\n"
    "for _ in range(3):\n"
    "    w = make_step(w, x)\n"
    "e = evaluate(w, x)\n"
    "p = predict(w, x)\n"
)


@pytest.fixture
def library(tmp_path, monkeypatch):
    """Writes a module into a directory on sys.path (`site-packages`: an installed library;
    `project`: the user's own) and forgets it afterwards."""
    made = []

    def write(folder: str, name: str, source: str) -> str:
        d = tmp_path / folder
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}.py").write_text(source)
        monkeypatch.syspath_prepend(str(d))
        made.append(name)
        return str(d / f"{name}.py")

    yield write
    for name in made:
        sys.modules.pop(name, None)


def test_filter_jit_functions_that_share_its_inner_function_are_distinct(caplog):
    """tests/diagnostics/realcode.py's filter_jit jits one inner function per decorated
    function, all with one code object, named after the user's function and called from
    one line: three functions, each traced once."""
    src = HEAD + "from tests.diagnostics.realcode import eqx\n" + THREE_STEPS
    ct, said = traced_with_jax_explaining(src, caplog, "<filter_jit>")
    assert ct.error is None, ct.error
    assert recompiles(ct) == [], [d.format() for d in recompiles(ct)]
    assert said.count("never seen function") == 3, said  # JAX: three functions


def test_a_filter_jit_function_traced_with_another_shape_is_named_after_it(caplog):
    src = HEAD + "from tests.diagnostics.realcode import eqx\n" + THREE_STEPS + (
        "e2 = evaluate(w, x[:2])\n"
    )
    ct, said = traced_with_jax_explaining(src, caplog, "<filter_jit shapes>")
    assert ct.error is None, ct.error
    (d,) = recompiles(ct)
    assert d.severity == "info", d.format()
    # realcode.py is a module the user wrote: the finding stays at its jitted call
    assert "evaluate is traced again" in d.message, d.message
    assert "changed shape: f32[5,3] -> f32[2,3]" in d.message, d.message
    assert "at dynamic[0][1], now f32[2,3] and before f32[5,3]" in said, said


@pytest.mark.parametrize("folder", ["site-packages", "project"])
def test_user_functions_one_shared_jitted_wrapper_is_handed_are_distinct(library, folder):
    """One jitted `_call` traces every decorated function, each passed as a static argument:
    a different static function is a different function to the user, each traced once."""
    library(folder, f"jaxviz_t_shared_{folder.replace('-', '_')}", SHARED_EQX)
    src = HEAD + f"import jaxviz_t_shared_{folder.replace('-', '_')} as eqx\n" + THREE_STEPS
    ct = jaxviz.trace_cell(src, filename=f"<shared {folder}>")
    assert ct.error is None, ct.error
    assert recompiles(ct) == [], [d.format() for d in recompiles(ct)]


def test_a_shared_wrapper_s_function_traced_again_is_named_after_it(library):
    """evaluate, through the shared wrapper, traced for 3 batch sizes: its retraces, at the
    user's lines, in the user's names (not `_call`'s `dynamic[2]`); a warning from the
    third signature on."""
    lib = library("site-packages", "jaxviz_t_shared_tp", SHARED_EQX)
    src = HEAD + "import jaxviz_t_shared_tp as eqx\n" + THREE_STEPS + (
        "e2 = evaluate(w, x[:2])  # second\n"
        "e3 = evaluate(w, x[:1])  # third\n"
    )
    ct = jaxviz.trace_cell(src, filename="<shared tp>")
    assert ct.error is None, ct.error
    second, third = recompiles(ct)
    assert (second.line, third.line) == (line_of(src, "# second"), line_of(src, "# third"))
    assert second.message.startswith(
        "`e2 = evaluate(w, x[:2])  # second`: evaluate is traced again"
    ), second.message
    assert "`x` changed shape: f32[5,3] -> f32[2,3]" in second.message, second.message
    assert "`x` changed shape: f32[2,3] -> f32[1,3]" in third.message, third.message
    assert {second.severity, third.severity} == {"warning"}  # 3 signatures of evaluate
    assert ("<shared tp>", line_of(src, "e = evaluate"), "traced before here") in second.related
    library_line = next(i for i, s in enumerate(SHARED_EQX.splitlines(), 1) if "LIBRARY" in s)
    assert (lib, library_line, "jaxviz_t_shared_tp calls evaluate here") in second.related


def test_a_new_lambda_for_the_shared_wrapper_at_each_call_still_warns(library):
    library("site-packages", "jaxviz_t_shared_fresh", SHARED_EQX)
    src = HEAD + "import jaxviz_t_shared_fresh as eqx\n" + (
        "x = jnp.ones(3)\n"
        "for _ in range(3):\n"
        "    x = eqx.filter_jit(lambda v: v * 2)(x)  # here\n"
    )
    ct = jaxviz.trace_cell(src, filename="<shared fresh>")
    assert ct.error is None, ct.error
    (d,) = recompiles(ct)
    assert (d.line, d.severity) == (line_of(src, "# here"), "warning"), d.format()
    assert "<lambda> is traced again at each call here (3 traces" in d.message, d.message
    assert "the lambda is a new function object at each call" in d.message, d.message


def test_a_user_function_in_a_pytree_argument_is_not_the_traced_function(library):
    """A jitted function of the user's whose argument carries a function from another
    module (a layer's activation, in its pytree's static fields) is still that function:
    its retrace is named after it, not after the activation."""
    library("project", "jaxviz_t_acts", "import jax.numpy as jnp\n"
            "def my_act(x):\n    return jnp.tanh(x) * 2\n")
    src = HEAD + (
        "import jaxviz_t_acts as acts\n"
        "class Layer:\n"
        "    def __init__(self, w, act):\n"
        "        self.w, self.act = w, act\n"
        "jax.tree_util.register_pytree_node(\n"
        "    Layer, lambda l: ((l.w,), l.act), lambda act, c: Layer(c[0], act))\n"
        "@jax.jit\n"
        "def apply(layer, x):\n"
        "    return layer.act(x @ layer.w)\n"
        "layer = Layer(jnp.ones((3, 2)), acts.my_act)\n"
        "a = apply(layer, jnp.ones((5, 3)))\n"
        "b = apply(layer, jnp.ones((4, 3)))  # here\n"
    )
    ct = jaxviz.trace_cell(src, filename="<layer>")
    assert ct.error is None, ct.error
    (d,) = recompiles(ct)
    assert (d.line, d.severity) == (line_of(src, "# here"), "info"), d.format()
    assert "apply is traced again" in d.message and "`x` changed shape" in d.message, d.message


# --- the text twin says how to compare the two signatures ---------------------------------------

RETRACED = HEAD + (
    "@jax.jit\n"
    "def g(x):\n"
    "    return x * 2\n"
    "@jax.jit\n"
    "def f(x):\n"
    "    return jnp.sin(x) @ x.T\n"
    "g(jnp.ones(3))\n"
    "f(jnp.ones((3, 4)))\n"
    "g(jnp.ones(4))\n"                     # g's retrace comes between: f's is not traces 0 and 1
    "f(jnp.ones((5, 4)))\n"
)
COMPARE_CALL = r"(jaxviz\.compare\(ct\[(\d+)\], ct\[(\d+)\]\))"


def test_the_text_twin_says_how_to_compare_the_two_signatures():
    import re

    ct = jaxviz.trace_cell(RETRACED)
    (d,) = [d for d in recompiles(ct) if d.trace == "f"]
    assert d.compare is not None and d.compare != (0, 1)
    text = str(ct)
    said = re.findall(r"compare them: " + COMPARE_CALL + r"  \(ct: the cell's CellTrace, %%jaxtrace -o ct\)", text)
    assert len(said) == len(recompiles(ct)) == 2, text
    (call,) = [c for c, i, j in said if (int(i), int(j)) == d.compare]
    # what it says runs, and compares f's two signatures
    c = eval(call, {"jaxviz": jaxviz, "ct": ct})
    assert (c.a.name, c.b.name) == ("f", "f")
    assert [a.shape for a in c.a.args_spec] == [(3, 4)] and [a.shape for a in c.b.args_spec] == [(5, 4)]
    assert c.diff.count("changed") >= 1


def test_the_cli_says_how_to_compare_the_two_signatures(tmp_path):
    import pathlib
    import re

    script = tmp_path / "train.py"
    script.write_text(RETRACED)
    p = subprocess.run([sys.executable, "-m", "jaxviz", "train.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    said = [m for m in re.finditer(
        r"compare them: " + COMPARE_CALL + r" with ct = (jaxviz\.trace_cell\(pathlib\.Path\('train\.py'\)\.read_text\(\)\))"
        r", or side by side: --html PAGE\.html, then the finding's compare button", p.stdout)]
    assert len(said) == 2, p.stdout
    m = said[-1]                           # f's, the later finding
    # what it says runs (from the script's folder) and finds the same two traces
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        ct = eval(m[4], {"jaxviz": jaxviz, "pathlib": pathlib})
    finally:
        os.chdir(cwd)
    c = eval(m[1], {"jaxviz": jaxviz, "ct": ct})
    assert (c.a.name, c.b.name) == ("f", "f")
    assert [a.shape for a in c.a.args_spec] == [(3, 4)] and [a.shape for a in c.b.args_spec] == [(5, 4)]

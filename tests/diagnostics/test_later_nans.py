"""A NaN made by a later call of a jitted function, one that ran on JAX's C++ fast path.

jaxviz checks the outputs of the first call of each function. A value the cell keeps that
holds NaN and came from a later call is reported at the line that assigned it; `check_every_call` (`%%jaxtrace --nans`) finds the
operation that made it.
"""
from __future__ import annotations

import re


import jaxviz
from jaxviz.capture.policy import COUNTS_EVERY_CALL, JIT_CALLS_WATCHED
from jaxviz.diagnostics.nans.later import bound_names

DIVERGES = """import jax, jax.numpy as jnp

@jax.jit
def step(w, lr):
    grow = w * lr
    return grow - grow * 0.5

w = jnp.ones((4,))
for i in range(50):
    w = step(w, 1e3)
"""
ASSIGN, OP = 10, 6          # `w = step(w, 1e3)`, `return grow - grow * 0.5`


def _nans(ct):
    return [d for d in ct.diagnostics if d.rule == "nan"]


def test_a_nan_from_a_later_call_is_reported_where_it_was_assigned():
    ct = jaxviz.trace_cell(DIVERGES, filename="<later nan>")
    assert ct.error is None
    (d,) = _nans(ct)
    # the 49 later calls ran unchecked (on Python 3.11 they come through jaxviz too, but
    # reading every output to the host would slow a GPU loop: only first calls are read)
    assert d.line == ASSIGN
    # a call site's calls after the first JIT_CALLS_WATCHED are not watched (3.11: they take
    # JAX's fast path; 3.12: their CALL events are off), and the message says "at least"
    # (3.11's call counter counts them all: "the 49 later ones")
    later = re.search(r"the (\d+)(\+?) later ones", d.message)
    assert "`w` holds NaN after the cell" in d.message and later, d.message
    if COUNTS_EVERY_CALL:
        assert later.groups() == ("49", ""), d.message
    else:
        assert later.group(2) == "+" and JIT_CALLS_WATCHED - 1 <= int(later.group(1)) < 49
    assert "--nans" in d.hint


def test_check_every_call_names_the_operation():
    with jaxviz.options.using(check_every_call=True):
        ct = jaxviz.trace_cell(DIVERGES, filename="<later nan, every call>")
    assert not jaxviz.options.check_every_call          # restored
    (d,) = _nans(ct)
    assert d.line == OP
    assert "NaN from `sub` here (in step)" in d.message
    assert "from inputs without NaN" in d.message


def test_a_nan_the_user_passed_in_is_not_blamed_on_later_calls():
    src = ("import jax, jax.numpy as jnp\n"
           "f = jax.jit(lambda x: x * 2)\n"
           "x = jnp.array([jnp.nan, 1.0])\n"
           "for _ in range(5):\n"
           "    y = f(x)\n")
    ct = jaxviz.trace_cell(src, filename="<nan input>")
    assert _nans(ct) == [], [d.format() for d in ct.diagnostics]


def test_finite_results_of_many_calls_stay_clean():
    src = DIVERGES.replace("1e3", "0.5")
    ct = jaxviz.trace_cell(src, filename="<converges>")
    assert ct.diagnostics == [], [d.format() for d in ct.diagnostics]


def test_bound_names_last_assignment_outside_functions():
    src = ("a = 1\n"
           "for i, (b, *c) in enumerate(x):\n"
           "    a += i\n"
           "def g():\n"
           "    d = 2\n"
           "with ctx() as e:\n"
           "    if a:\n"
           "        f: int = 3\n")
    assert bound_names(src) == {"a": 3, "i": 2, "b": 2, "c": 2, "e": 6, "f": 8}
    assert bound_names("%%bad syntax") == {}


def test_finding_a_nan_never_runs_the_users_callbacks_again():
    src = ("import jax, jax.numpy as jnp, numpy as np\n"
           "from jax.experimental import io_callback\n"
           "sent = []\n"
           "def send(v):\n"
           "    sent.append(float(v))\n"
           "    return np.zeros((), np.float32)\n"
           "@jax.jit\n"
           "def step(x):\n"
           "    io_callback(send, jax.ShapeDtypeStruct((), jnp.float32), x.sum(), ordered=True)\n"
           "    return jnp.log(x) * 0.0\n"
           "y = step(jnp.array([0.0, 1.0]))\n"
           "jax.effects_barrier()\n")
    ns: dict = {}
    ct = jaxviz.trace_cell(src, ns, filename="<callback nan>")
    assert ns["sent"] == [1.0]
    assert [d.line for d in ct.diagnostics if d.rule == "nan"] == [11]   # at the call


def test_infinities_the_program_puts_there_are_not_reported():
    """Masking with -inf (log-probabilities of illegal actions) is deliberate."""
    src = ("import jax, jax.numpy as jnp\n"
           "@jax.jit\n"
           "def masked_log_softmax(logits, legal):\n"
           "    return jax.nn.log_softmax(jnp.where(legal, logits, -jnp.inf))\n"
           "lp = masked_log_softmax(jnp.zeros(3), jnp.array([True, False, True]))\n")
    ct = jaxviz.trace_cell(src, filename="<masked>")
    assert ct.diagnostics == [], [d.format() for d in ct.diagnostics]


def test_an_inf_is_a_warning_a_nan_an_error():
    inf = jaxviz.trace_cell("import jax.numpy as jnp\nlogp = jnp.log(jnp.array([0.5, 0.0]))\n",
                            filename="<inf>")
    nan = jaxviz.trace_cell("import jax.numpy as jnp\nx = jnp.array([0.0, 1.0])\n"
                            "y = x * jnp.log(x)\n", filename="<nan>")
    assert [d.severity for d in inf.diagnostics if d.rule == "nan"] == ["warning"]
    assert [d.severity for d in nan.diagnostics if d.rule == "nan"] == ["error"]


SHARDED_NAN = r"""
import json, os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jaxviz
ns = {"__name__": "__main__"}
src = '''import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((8,), ("d",))
x = jax.device_put(jnp.arange(16.0) - 8.0, NamedSharding(mesh, P("d")))
y = jax.lax.sqrt(x)
ok = jax.lax.abs(x)
'''
ct = jaxviz.trace_cell(src, ns, filename="<sharded nan>")
print(json.dumps({"devices": len(jax.devices()),
                  "found": [[d.rule, d.line] for d in ct.diagnostics],
                  # jax.Array keeps a host copy np.asarray made of a sharded array
                  "kept_copies": [k for k in ("x", "y", "ok") if ns[k]._npy_value is not None]}))
"""


def test_a_sharded_nan_is_found_and_its_check_leaves_no_host_copy():
    # reading a sharded (or accelerator) array whole to the host keeps the copy on the
    # array while it lives: the check reads it shard by shard instead
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("XLA_FLAGS", None)
    r = subprocess.run([sys.executable, "-c", SHARDED_NAN], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["devices"] == 8
    assert got["found"] == [["nan", 5]], got
    assert got["kept_copies"] == [], got

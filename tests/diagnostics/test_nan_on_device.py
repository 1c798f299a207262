"""NaN checks of arrays on an accelerator: reduced on the device, never copied to the host.

On a TPU or GPU, reading a jitted call's outputs (np.asarray) waits for the call and copies
them: a Python loop under the watch would no longer run ahead of the device. There, the
checks reduce the outputs where they are (`_compat.nonfinite_flags`) and read their flags
once it is computed. CI has no accelerator: these tests take CPU arrays for device ones
(`on_device`, tests/diagnostics/conftest.py), so the same code path runs, with real JAX;
bench/accel_check.py runs the same cells on the accelerator itself.
"""
from __future__ import annotations

import gc

import jax.numpy as jnp
import numpy as np

import jaxviz
from jaxviz import _compat


def _worst(xs):
    return _compat.read_flags(_compat.nonfinite_flags(xs))


def test_the_flag_says_nan_inf_or_finite():
    assert _worst([jnp.ones(3), jnp.zeros((2, 2))]) == 0
    assert _worst([jnp.ones(3), jnp.array([1.0, jnp.inf])]) == 1
    assert _worst([jnp.array([jnp.inf]), jnp.array([0.0, jnp.nan])]) == 2
    assert _worst([jnp.ones(2, jnp.bfloat16).at[1].set(jnp.nan)]) == 2
    assert _worst([]) == 0


NAN_CELL = """import jax, jax.numpy as jnp

@jax.jit
def step(x):
    y = jnp.log(x - 2.0)
    return y * 2

x = jnp.ones((8,))
for _ in range(5):
    z = step(x)
"""


def _nans(ct):
    return [d for d in ct.diagnostics if d.rule == "nan"]


def test_a_nan_made_on_the_device_is_found_at_its_line_without_host_copies(on_device):
    ct = jaxviz.trace_cell(NAN_CELL, filename="<nan on device>")
    assert ct.error is None
    (d,) = _nans(ct)
    assert d.line == 5 and "log" in d.message, d.message
    assert on_device == [], f"host copies of user arrays: {on_device}"


CLEAN_CELL = """import jax, jax.numpy as jnp
from functools import partial

@partial(jax.jit, donate_argnums=(0,))
def step(w, g):
    return w - 0.1 * g, (w ** 2).sum()

w, g = jnp.ones((64, 64)), jnp.ones((64, 64))
for _ in range(20):
    w, loss = step(w, g)
v = jnp.exp(w).sum()
"""


def test_a_clean_donating_loop_reads_nothing_to_the_host_and_finds_nothing(on_device):
    ct = jaxviz.trace_cell(CLEAN_CELL, filename="<clean on device>")
    assert ct.error is None and _nans(ct) == []
    assert on_device == [], f"host copies of user arrays: {on_device}"


def test_the_same_cells_on_the_host_give_the_same_findings():
    # the deferred device path and the host path agree
    (d,) = _nans(jaxviz.trace_cell(NAN_CELL, filename="<nan on host>"))
    assert d.line == 5
    assert _nans(jaxviz.trace_cell(CLEAN_CELL, filename="<clean on host>")) == []
    assert np.isfinite(np.asarray(jnp.ones(2))).all()


HOLDS_NOTHING = """import gc, time, weakref
import jax, jax.numpy as jnp

f = jax.jit(lambda x: x * 2)
x = jnp.ones(1000)
y = f(x)
rx, ry = weakref.ref(x), weakref.ref(y)
del x, y
for _ in range(1000):  # (no jax call: the check itself waits until the cell ends)
    gc.collect()
    if rx() is None and ry() is None:
        break
    time.sleep(0.01)
gone = (rx() is None, ry() is None)
"""


def test_a_finite_calls_arrays_go_once_its_flags_are_read_not_when_the_cell_ends(on_device):
    # the check waits for its flags; a loop's later calls take JAX's fast path and it may
    # wait until the cell ends. It holds the call's arrays (a NaN found later is localised
    # on them) only until jaxviz's reader thread has read the flags finite, about when the
    # device is done with them: then the user's arrays go when the user drops them
    for _ in range(2):  # the output's reduction new (compiled by jaxviz's thread), then known
        ns: dict = {}
        ct = jaxviz.trace_cell(HOLDS_NOTHING, ns, filename="<weak>")
        assert ct.error is None
        assert ns["gone"] == (True, True)


def test_a_nan_calls_inputs_the_user_dropped_are_held_to_localise_it(reader):
    # `f(jnp.ones(4))`: the input is gone from the user's names before the check runs; the
    # check held it (the flags said NaN), so the NaN is found at its op, as on the host
    src = ("import jax, jax.numpy as jnp\n"
           "f = jax.jit(lambda x: jnp.log(x - 2.0))\n"
           "y = f(jnp.ones(4))\n")
    (d,) = _nans(jaxviz.trace_cell(src, filename="<gone>"))
    assert d.line == 2 and "NaN from `log` of a negative value here" in d.message, d.message


def test_the_arrays_are_let_go_after_the_check(reader):
    src = ("import jax, jax.numpy as jnp, weakref\n"
           "f = jax.jit(lambda x: jnp.log(x - 2.0))\n"
           "r = weakref.ref(f(jnp.ones(4)))\n")
    ns: dict = {}
    (d,) = _nans(jaxviz.trace_cell(src, ns, filename="<let go>"))
    gc.collect()
    assert d.line == 2 and ns["r"]() is None


def test_a_new_shapes_reduction_compiles_off_the_loops_thread(on_device, monkeypatch):
    # issue 44 item 6: in a first traced cell, each new output shape's reduction compiled on
    # the loop's own thread (~0.3 s on a TPU): 20 long kernels' host loop no longer ran
    # ahead of the device. jaxviz's thread compiles it; the check is the same
    import threading

    from jaxviz._compat import flags

    compiled_on = []
    executable = flags._executable

    def recorded(x):
        if flags._key(x) not in flags._EXECUTABLES:
            compiled_on.append(threading.current_thread() is threading.main_thread())
        return executable(x)

    monkeypatch.setattr(flags, "_executable", recorded)
    src = NAN_CELL.replace("jnp.ones((8,))", "jnp.ones((8, 3, 5))")  # a shape new here
    ct = jaxviz.trace_cell(src, filename="<nan on device>")
    (d,) = _nans(ct)
    assert d.line == 5 and "log" in d.message, d.message  # found, at its line, as before
    assert compiled_on and not any(compiled_on), compiled_on  # never on the loop's thread

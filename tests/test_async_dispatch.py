"""A traced cell keeps JAX's asynchronous dispatch: no call of the user's waits for its result
because of jaxviz (issue 56 item 3).

In a traced cell the first call of each jitted function (a jnp function's too: `jnp.dot`)
comes through JAX's Python path, where jaxviz's NaN check looked at its outputs; on the CPU
it read them at once, which waited for the computation: `%time jnp.dot(x, x)` (1000x1000)
read 0.2-0.7 ms plain and 18-56 ms traced, the whole product, with every flag.

No timing is asserted: the cell's calls take inputs that a long computation (`slow`, about a
second, started by the plain cell just before) has not made yet, so their results cannot be
ready when they return unless something waited. The plain cell shows that JAX itself leaves
them so; the traced cell must too.
"""
from __future__ import annotations

import time

import pytest

SETUP = """
import jax, jax.numpy as jnp
from jax import lax
slow = jax.jit(lambda c, n: lax.fori_loop(0, n, lambda i, c: c * 0.999 + 0.001, c))
c0 = jnp.ones((64, 64))
slow(c0, 10).block_until_ready()
"""
START = "y = slow(c0, N)\n"  # (plain) about a second of one core's work, not waited for
CALLS = """
d = jnp.dot(y, y)            # a jnp function's first call in the cell
w = slow(d, 2)               # the user's jitted function's first call in the cell
e = y * 2.0                  # an eager op
ready = (d.is_ready(), w.is_ready(), e.is_ready())
"""


def _n_for_one_second(ip) -> int:
    ip.run_cell(SETUP)
    slow, c0 = ip.user_ns["slow"], ip.user_ns["c0"]
    n = 20_000
    t0 = time.perf_counter()
    slow(c0, n).block_until_ready()
    return max(n, int(n * 1.0 / max(time.perf_counter() - t0, 1e-4)))


@pytest.mark.parametrize("flags", ["", "-q", "--no-run -q", "--nans", "--text"])
def test_a_traced_cells_calls_do_not_wait_for_their_results(ip, flags):
    ip.user_ns["N"] = _n_for_one_second(ip)
    ip.run_cell(START)
    r = ip.run_cell(CALLS)  # plain: JAX dispatches asynchronously
    assert r.success
    if any(ip.user_ns["ready"]):  # (the machine finished a second's work already)
        pytest.skip("the computation was done before the plain cell looked")
    ip.user_ns["y"].block_until_ready()
    ip.run_cell(START)
    r = ip.run_cell(f"%%jaxtrace {flags}\n{CALLS}")
    assert r.success, r.error_in_exec
    assert ip.user_ns["ready"] == (False, False, False)


DONATED = """
import jax, jax.numpy as jnp
from jax import lax
step = jax.jit(lambda c, n: lax.fori_loop(0, n, lambda i, c: c * 0.999 + 0.001, c),
               donate_argnums=0)
c = step(jnp.ones((64, 67)), N)  # not computed when it returns: its check reduces it later
c = step(c, 2)                   # ... and the next call donates it at once
c.block_until_ready()
"""


def test_no_reduction_runs_on_a_value_a_later_call_donated(monkeypatch):
    # a CPU call's outputs still computing are reduced once jaxviz's thread has compiled the
    # reduction for their shape. That thread ran it too, racing the user's next call,
    # which donated the value meanwhile: on jax 0.10.2 each such run logged "Buffer has been
    # deleted or donated" to the process's stderr (shown in a kernel's cell; 24 lines for a
    # 24-leaf Adam step). The cell's thread runs it now, before a donating call (or gives
    # it up if still compiling: the call goes unchecked)
    import jaxviz
    from jaxviz._compat import flags

    executable = flags._executable
    ran_on_deleted: list[bool] = []

    def slow_compile(x):
        time.sleep(0.3)  # (the donation comes first)
        c = executable(x)
        return lambda y: (ran_on_deleted.append(y.is_deleted()), c(y))[1]

    monkeypatch.setattr(flags, "_executable", slow_compile)
    monkeypatch.setattr(flags, "_EXECUTABLES", {})
    ns: dict = {"N": 200_000}  # (~0.1 s: not computed when the call returns)
    ct = jaxviz.trace_cell(DONATED, ns, filename="<donated meanwhile>")
    if flags._POOL is not None:
        flags._POOL.submit(lambda: None).result()  # (its thread is done)
    assert ct.error is None
    assert True not in ran_on_deleted, ran_on_deleted


def test_jaxviz_s_thread_runs_no_reduction_on_an_array_deleted_while_it_compiled(monkeypatch):
    # an accelerator's outputs are reduced in jaxviz's thread (not `here`): on the TPU the
    # test above found its reduction run on the value the next call had donated while the
    # reduction compiled. The thread looks before it runs; the flag is lost, as documented
    import jax.numpy as jnp

    from jaxviz._compat import flags

    executable = flags._executable
    ran_on_deleted: list[bool] = []

    def slow_compile(x):
        time.sleep(0.3)  # (the array is deleted meanwhile)
        c = executable(x)
        return lambda y: (ran_on_deleted.append(y.is_deleted()), c(y))[1]

    monkeypatch.setattr(flags, "_executable", slow_compile)
    monkeypatch.setattr(flags, "_EXECUTABLES", {})
    x = jnp.ones((64, 69))
    got = flags.nonfinite_flags([x], wait=False)
    x.delete()
    flags._POOL.submit(lambda: None).result()  # (its thread is done)
    assert ran_on_deleted == [] and flags.flags_lost(got)

"""Nothing of jaxviz's reaches the user's streams (issue 45, item 4).

An optimistix root find under `%%jaxtrace` printed `jaxviz/diagnostics/bounds.py:261:
RuntimeWarning: invalid value encountered in scalar floor_divide`: the out-of-bounds check
folds the small integer arithmetic an index is made of, and it had folded a solver's float
constants too (`inf / atol`), with numpy's floor division; integer constants at their limits
(`-2**31 // -1`, `2**30 * 4`) warned of overflow. The programs below have those shapes; each
runs plainly and under jaxviz, and the warnings and the output must be the same. The
checker now follows integer arithmetic only, and folds it as XLA's integers wrap, silently.
"""

from __future__ import annotations

import builtins
import warnings

import pytest

import jaxviz

HEADER = "import jax, jax.numpy as jnp\nfrom jax import lax\n"

PROGRAMS = {
    # optimistix's Newton: a tolerance-scaled "infinitely far" first step in a nested jit,
    # beside an index the checker must follow
    "solver-constants": """
@jax.jit
def init(y):
    diff = lax.div(jnp.float32(jnp.inf), jnp.float32(1e-8))   # inf / atol
    return jnp.full_like(y, diff)

@jax.jit
def step(y, i):
    far = init(y)
    pick = lax.dynamic_slice(jnp.arange(4.0), (i,), (1,))[0]
    return jnp.minimum(far, y - 1.0) + pick * 0.0

print(step(jnp.zeros(3), 1))
""",
    # integer constants at their limits, folded on the way to an index
    "integer-limits": """
@jax.jit
def f(x, i):
    big = lax.div(jnp.int32(-2**31), jnp.int32(-1)) + jnp.int32(2**30) * jnp.int32(4)
    return lax.dynamic_slice(x, (i + big * 0,), (2,)), big

print(f(jnp.arange(6.0), 2))
""",
}


def _run(source: str, capfd, traced: bool):
    ns = {"__name__": "__main__", "__builtins__": builtins}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if traced:
            ct = jaxviz.trace_cell(source, namespace=ns, filename="<streams>")
            assert ct.error is None, ct.error
        else:
            exec(compile(source, "<plain>", "exec"), ns)
    out, err = capfd.readouterr()
    return [f"{w.category.__name__}: {w.message}" for w in caught], out, err


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_cell_prints_and_warns_as_without_jaxviz(name, capfd):
    source = HEADER + PROGRAMS[name]
    want = _run(source, capfd, traced=False)
    got = _run(source, capfd, traced=True)
    assert got[0] == want[0], f"jaxviz's warnings in the user's stream: {got[0]}"
    assert got[1] == want[1]
    assert got[2] == want[2], f"jaxviz wrote to the user's stderr: {got[2]!r}"


"""Golden text twins, in jaxviz's own format (stable across JAX 0.10.2 and 0.12).

Regenerate after an intended format change: JAXVIZ_REGOLD=1 pytest tests/test_text.py
"""
from __future__ import annotations

import os
import pathlib

import pytest

import jaxviz
from jaxviz.format import fmt_bytes as human_bytes, human
from tests.golden.funcs import CASES

GOLDEN = pathlib.Path(__file__).parent / "golden"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_text_twin(name):
    fn, args = CASES[name]
    text = str(jaxviz.trace(fn, *args())).replace(str(GOLDEN / "funcs.py"), "funcs.py")
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("JAXVIZ_REGOLD"):
        path.write_text(text + "\n")
    assert text + "\n" == path.read_text()


def test_units():
    assert human(1234567, "FLOP") == "1.2 MFLOP"
    assert human(12, "FLOP") == "12 FLOP"
    assert human_bytes(3 * 2**20) == "3.0 MiB"


def test_diagnostics_in_another_cell_name_it():
    """A diagnostic whose line is in another cell (a function defined there) says which."""
    import jaxviz
    from jaxviz.graph.files import register_file_label
    import linecache
    first = "import jax, jax.numpy as jnp\n@jax.jit\ndef relu(x):\n    if x > 0:\n        return x\n    return 0.0\n"
    linecache.cache["<first cell>"] = (len(first), None, first.splitlines(True), "<first cell>")
    register_file_label("<first cell>", "cell [2]")
    ns: dict = {}
    exec(compile(first, "<first cell>", "exec"), ns)
    ct = jaxviz.trace_cell("y = relu(3.0)\n", ns, filename="<second cell>")
    text = str(ct)
    assert "cell [2]:4: error: tracer-bool" in text, text


def test_a_note_about_memory_that_memory_prints_below_is_not_said_above():
    # helper-12 on JAX's shard_map tutorial: the cell's text said "compiled memory not
    # computed for ... (at most 8 functions)" above --memory's full report of each of them
    from jaxviz.view.text import cell_text

    src = ("import jax, jax.numpy as jnp\n"
           "f = jax.jit(lambda x: x + 1)\n"
           "g = jax.jit(lambda x: x * 2)\n"
           "a, b = f(jnp.ones(4)), g(jnp.ones(4))\n")
    with jaxviz.options.using(compiled_memory_max=1):
        ct = jaxviz.trace_cell(src)
    names = [t.name for t in ct.traces if t.kind == "jit"]
    assert any("compiled memory not computed for" in n for n in ct.compiled_notes), ct.compiled_notes
    assert "compiled memory not computed for" in cell_text(ct)
    assert "compiled memory not computed for" not in cell_text(ct, memory_below=frozenset(names))

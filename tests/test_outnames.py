"""Outputs are named as inputs are: the return structure, and the caller's assignment."""
from __future__ import annotations

import jax
import jax.numpy as jnp

import jaxviz
from jaxviz.graph.outnames import assign_targets, output_names


def out_names(graph) -> list[str]:
    return [n.op for n in graph.body.nodes if n.kind == "out"]


def test_output_names_from_paths_and_targets():
    paths = ("result[0]", "result[1]['b']", "result[1]['w']")
    assert output_names(paths, ["loss", "grads"]) == ["loss", "grads['b']", "grads['w']"]
    assert output_names(paths, ["out"]) == ["out[0]", "out[1]['b']", "out[1]['w']"]
    assert output_names(paths, None) == list(paths)
    assert output_names(("result",), ["y"]) == ["y"]
    # more outputs than names (a starred target is refused earlier): the result path stays
    assert output_names(("result[0]", "result[1]"), ["a"])[1] == "a[1]"
    assert output_names(("result[0]", "result[2]"), ["a", "b"]) == ["a", "result[2]"]
    assert output_names(("weird",), ["a"]) == [""]


def test_assign_targets_reads_the_callers_line(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "import jax\n"
        "j = jax.jit(step)\n"
        "loss, grads = j(p, x)\n"
        "t = jaxviz.trace(step, p)\n"
        "out: int = step(\n    p)\n"
        "a, *rest = step(p)\n"
        "self.cache['k'] = step(p)\n"
    )
    f = str(src)
    assert assign_targets(f, 3, "step") == ["loss", "grads"]
    assert assign_targets(f, 4, "step") is None          # step is passed, not called
    assert assign_targets(f, 6, "step") == ["out"]       # a statement over two lines
    assert assign_targets(f, 7, "step") is None          # starred: no names by position
    assert assign_targets(f, 8, "step") == ["self.cache['k']"]
    assert assign_targets(f, 1, "step") is None
    assert assign_targets(str(tmp_path / "missing.py"), 1, "step") is None


def test_a_cells_outputs_take_the_callers_names():
    src = (
        "import jax, jax.numpy as jnp\n"
        "@jax.jit\n"
        "def step(p, x):\n"
        "    return (p['w'] * x).sum(), {'w': p['w'] * 2, 'b': p['b']}\n"
        "p = {'w': jnp.ones(3), 'b': jnp.ones(2)}\n"
        "loss, grads = step(p, 1.0)\n"
    )
    cell = jaxviz.trace_cell(src)
    t = next(t for t in cell.traces if t.name == "step")
    assert out_names(t.graph) == ["loss", "grads['b']", "grads['w']"]
    # eager statements keep unnamed outputs (their replay's structure means nothing)
    assert all(out_names(e.graph) == [""] * len(out_names(e.graph)) for e in cell.traces if e.kind == "eager")


def test_trace_names_outputs_by_return_structure():
    def f(x):
        return {"y": jnp.sin(x)}, x * 2

    t = jaxviz.trace(jax.jit(f), jnp.ones(3))
    assert out_names(t.graph) == ["result[0]['y']", "result[1]"]

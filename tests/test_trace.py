"""jaxviz.trace: staging without running, errors kept as data, no user arrays kept."""
from __future__ import annotations

import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxviz


def mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"]


PARAMS = {"w1": jnp.ones((4, 8)), "b1": jnp.zeros(8), "w2": jnp.ones((8, 2))}


def test_trace_pytrees_shape_dtype_structs_and_jitted_functions():
    t1 = jaxviz.trace(mlp, PARAMS, jnp.ones((3, 4)))
    spec = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), PARAMS)
    t2 = jaxviz.trace(jax.jit(mlp), spec, jax.ShapeDtypeStruct((3, 4), jnp.float32))
    assert t1.error is None and t2.error is None
    assert [n.op for n in t1.graph.body.nodes] == [n.op for n in t2.graph.body.nodes]
    assert t1.name == t2.name == "mlp"
    names = [t1.graph.body.nodes[i].op for i in t1.graph.body.inputs]
    assert names == ["params['b1']", "params['w1']", "params['w2']", "x"]
    assert t1.signature == "f32[8], f32[4,8], f32[8,2], f32[3,4]"
    assert isinstance(t1.args_spec[1], jax.ShapeDtypeStruct)


def test_trace_does_not_run_the_function():
    ran = []

    def f(x):
        jax.debug.callback(lambda v: ran.append(v), x)
        return x + 1

    t = jaxviz.trace(f, jnp.ones(2))
    assert ran == []
    assert "debug_callback" in [n.op for n in t.graph.body.nodes]


def test_errors_in_user_code_are_kept_with_the_partial_graph():
    def f(x):
        y = jnp.sin(x) * 2
        if y.sum() > 0:          # TracerBoolConversionError
            return y
        return -y

    t = jaxviz.trace(f, jnp.ones(3))
    assert isinstance(t.error, jax.errors.TracerBoolConversionError)
    assert t.error.__traceback__ is None            # no frames (and arrays) kept
    ops = [n.op for n in t.graph.body.nodes if n.kind == "eqn"]
    assert ops[:2] == ["sin", "mul"] and "reduce_sum" in ops and "gt" in ops
    line = f.__code__.co_firstlineno + 2
    assert (__file__, line, "f") in t.error_frames
    text = str(t)
    assert "tracing failed: TracerBoolConversionError" in text


def test_exception_inside_the_function_is_the_users():
    def f(x):
        raise ValueError("bad batch")

    t = jaxviz.trace(f, jnp.ones(3))
    assert isinstance(t.error, ValueError) and str(t.error) == "bad batch"


def test_non_callable_gets_a_clear_message():
    with pytest.raises(TypeError, match=r"expects a function, got Array.*jaxviz.trace\(f, x\)"):
        jaxviz.trace(jnp.ones(3), jnp.ones(3))


def test_arguments_jax_cannot_abstract():
    t = jaxviz.trace(lambda s: s, "a string")
    assert isinstance(t.error, TypeError)
    assert "str" in str(t.error)


def test_trace_keeps_no_user_arrays():
    x = jnp.ones((1000,))
    ref = weakref.ref(x)
    t = jaxviz.trace(lambda v: v * 2, x)
    del x
    gc.collect()
    assert ref() is None, "jaxviz.trace kept the argument alive"
    assert t.graph.n_eqns == 1


def test_to_dot_and_mimebundle():
    t = jaxviz.trace(mlp, PARAMS, jnp.ones((3, 4)))
    dot = t.to_dot()
    assert "dot_general" in dot.source and "tanh" in dot.source
    bundle = t._repr_mimebundle_()
    assert bundle["text/plain"].startswith("trace mlp(")


def test_hostile_names_in_dot_are_quoted():
    def f(x):
        with jax.named_scope('"><script>alert(1)</script>'):
            return jnp.sin(x)

    f.__qualname__ = 'evil"name\\'
    t = jaxviz.trace(f, jnp.ones(2))
    src = t.to_dot().source
    # the graphviz package quotes the name; our backslash escaping keeps DOT well formed
    assert 'digraph "evil\\"name\\\\"' in src.splitlines()[0] or 'evil' in src.splitlines()[0]


def test_big_function_stays_usable():
    from tools.models import wide
    t = jaxviz.trace(lambda x: wide(x, 4000), jnp.ones(3))
    assert t.graph.n_eqns == 4000
    text = t._repr_mimebundle_()["text/plain"]
    assert len(text.splitlines()) < 1000


def test_programs_past_max_eqns_are_cut_with_a_clear_note():
    from tools.models import wide
    old = jaxviz.options.max_eqns
    jaxviz.options.max_eqns = 1000
    try:
        t = jaxviz.trace(lambda x: wide(x, 3000), jnp.ones(3))
    finally:
        jaxviz.options.max_eqns = old
    assert t.error is None
    assert sum(1 for n in t.graph.body.nodes if n.kind == "eqn") == 1000
    assert t.graph.cut == 2000
    assert "leaves out 2,000" in t.notes[0] and "jaxviz.options.max_eqns = 3,000" in t.notes[0]
    assert "note: " in str(t)
    import json
    assert json.loads(t.graph.to_json())["cut"] == 2000


def test_widget_selection_resolves_to_the_jax_equation():
    t = jaxviz.trace(mlp, PARAMS, jnp.ones((3, 4)))
    w = t.widget
    tanh = next(n for n in t.graph.body.nodes if n.op == "tanh")
    w.selected = {"trace": 0, "body": t.graph.root, "node": tanh.id}   # what a click syncs back
    assert w.selected_node is tanh
    assert w.selected_eqn.primitive.name == "tanh"
    assert w.selected_eqn is t.eqn(t.graph.root, tanh.id)

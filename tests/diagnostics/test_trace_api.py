"""jaxviz.trace (no cell, nothing run) reports the static rules and tracing errors."""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
from jax import random

import jaxviz


def _line(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, l in enumerate(lines) if text in l)


def test_trace_error_is_classified():
    def f(x):
        if x.sum() > 0:
            return x
        return -x
    t = jaxviz.trace(f, jnp.ones(3))
    assert t.error is not None
    assert [(d.rule, d.line) for d in t.diagnostics] == [("tracer-bool", _line(f, "if x.sum()"))]


W = np.ones((1024, 512), np.float32)


def test_trace_large_constant_names_the_consumer():
    def f(x):
        return x @ W
    t = jaxviz.trace(f, jnp.ones((2, 1024)))
    (d,) = t.diagnostics
    assert (d.rule, d.line) == ("large-constant", _line(f, "x @ W"))
    assert "2.0 MiB" in d.message and d.node_ids
    b, n = map(int, d.node_ids[0].split(":"))
    assert t.graph.bodies[b].nodes[n].op == "dot_general"


def test_large_constant_threshold_is_the_option():
    def f(x):
        return x @ W          # 2 MiB
    with jaxviz.options.using(large_constant_bytes=4 << 20):
        assert not jaxviz.trace(f, jnp.ones((2, 1024))).diagnostics
    with jaxviz.options.using(large_constant_bytes=1 << 10):
        (d,) = jaxviz.trace(f, jnp.ones((2, 1024))).diagnostics
    assert d.rule == "large-constant" and "(threshold 1.0 KiB)" in d.message


def test_trace_key_reuse_and_clean_split():
    def bad(k):
        return random.normal(k, (2,)) + random.uniform(k, (2,))
    def good(k):
        k1, k2 = random.split(k)
        return random.normal(k1, (2,)) + random.uniform(k2, (2,))
    t = jaxviz.trace(bad, random.PRNGKey(0))
    assert [(d.rule, d.line) for d in t.diagnostics] == [("key-reuse", _line(bad, "return"))]
    assert jaxviz.trace(good, random.PRNGKey(0)).diagnostics == []


def test_trace_donation_unusable_from_jit_options():
    f = jax.jit(lambda x, y: (x * y).astype(jnp.float16), donate_argnums=0)
    t = jaxviz.trace(f, jnp.ones(4), jnp.ones(4))
    assert [d.rule for d in t.diagnostics] == ["donation-unusable"]
    assert "`x`" in t.diagnostics[0].message and "float16" in t.diagnostics[0].message


leaked = []


def test_trace_leak_into_global_list():
    def f(x):
        leaked.append(x)
        return x * 2
    t = jaxviz.trace(f, jnp.ones(2))
    assert [(d.rule, d.line) for d in t.diagnostics] == [("leaked-tracer", _line(f, "leaked.append"))]
    leaked.clear()


def test_diagnostic_format_and_dict():
    ct = jaxviz.trace_cell("import jax\nk = jax.random.PRNGKey(0)\na = jax.random.normal(k)\n"
                           "b = jax.random.normal(k)\n", filename="<t>")
    (d,) = ct.diagnostics
    assert d.format().startswith("<t>:4: warning: key-reuse: `b = jax.random.normal(k)`")
    assert d.to_dict()["related"] == [["<t>", 3, "first consumed here"]]


def test_a_jaxprs_summary_is_remembered_while_jax_holds_it():
    """A cell run again checks the same jaxpr objects (JAX's tracing cache): their summary
    is walked once, held weakly; another jaxpr gets its own."""
    import gc
    import weakref

    from jaxviz.diagnostics.check import staged_summary

    big = np.ones((256, 256), np.float32)
    a = jax.make_jaxpr(lambda x: jnp.sin(x) @ big)(jnp.ones((4, 256)))
    b = jax.make_jaxpr(lambda x: jnp.cos(x) + 1)(jnp.ones(3))
    first = staged_summary(a)
    assert "sin" in first[0] and "dot_general" in first[0] and first[1] == big.nbytes
    assert staged_summary(a) is first                    # walked once
    assert "cos" in staged_summary(b)[0] and staged_summary(b)[1] == 0
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None                                         # not kept alive by jaxviz


def test_the_keys_a_jaxpr_consumes_are_remembered_while_jax_holds_it():
    """A step taking a key is walked for the keys it consumes once per jaxpr (JAX's tracing
    cache hands a cell run again the same object), not at each cell's first call."""
    import gc
    import weakref

    from jaxviz.diagnostics.keys.flow import consumed_inputs
    from jaxviz.diagnostics.keys.uses import FULL

    step = jax.jit(lambda k, x: x + jax.random.normal(k, x.shape))
    a = step.trace(jax.random.PRNGKey(0), jnp.ones(3)).jaxpr
    assert step.trace(jax.random.PRNGKey(1), jnp.ones(3)).jaxpr is a  # JAX's cache
    first = consumed_inputs(a)
    assert [(i, kind) for i, kind, _data, _op in first] == [(0, FULL)]
    assert consumed_inputs(a) is first                      # walked once
    b = jax.make_jaxpr(lambda x: x * 2)(jnp.ones(3))
    assert consumed_inputs(b) == []
    ref = weakref.ref(a)
    del a, step
    gc.collect()
    assert ref() is None                                         # not kept alive by jaxviz

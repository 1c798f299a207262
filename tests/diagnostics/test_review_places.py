"""Diagnostics at the line the user must change, across helpers, cells and transformations:
use-after-donate through a helper, a tracer leaked in an earlier cell, eager jax.grad / vmap
op lines, leaks onto callable objects, partial traces under jax.grad's wrapper."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp

import jaxviz
from jaxviz.capture.cell import register_source as _register_source

DONATE = ("import jax, jax.numpy as jnp\n"
          "def loss(p, x):\n"
          "    return jnp.sum(p * x)\n"
          "step = jax.jit(lambda p, x: p - 0.1 * x, donate_argnums=0)\n"
          "p = jnp.ones(4); x = jnp.ones(4)\n"
          "old = p\n"
          "p = step(p, x)\n"
          "print(loss(old, x))")


def _ns() -> dict:
    return {"__name__": "__main__", "__builtins__": __builtins__, "jax": jax, "jnp": jnp}


def _run_plain(src: str, ns: dict, filename: str) -> None:
    """An earlier cell, run without jaxviz (as a notebook cell jaxviz did not watch)."""
    _register_source(filename, src)
    exec(compile(src, filename, "exec"), ns)


def _one(ct, rule):
    found = [d for d in ct.diagnostics if d.rule == rule]
    assert len(found) == 1, [d.format() for d in ct.diagnostics]
    return found[0]


# --- use-after-donate: the statement that passes the deleted array ---------------------------

def test_use_after_donate_is_the_statement_that_passes_the_array():
    ct = jaxviz.trace_cell(DONATE, filename="<donate>")
    d = _one(ct, "use-after-donate")
    assert (d.filename, d.line) == ("<donate>", 8), d.format()
    assert "`old`" in d.message and "f32[4]" in d.message, d.message
    assert [r[:2] for r in d.related] == [("<donate>", 7)], d.related


def test_use_after_donate_helper_in_an_earlier_cell():
    ns = _ns()
    _run_plain("def loss(p, x):\n    return jnp.sum(p * x)\n", ns, "<helpers>")
    ct = jaxviz.trace_cell("step = jax.jit(lambda p, x: p - 0.1 * x, donate_argnums=0)\n"
                           "p = jnp.ones(4); x = jnp.ones(4)\n"
                           "old = p\n"
                           "p = step(p, x)\n"
                           "print(loss(old, x))\n", namespace=ns, filename="<uses>")
    d = _one(ct, "use-after-donate")
    assert (d.filename, d.line) == ("<uses>", 5), d.format()
    assert "`old`" in d.message


def test_use_after_donate_inside_a_function_that_donated_it():
    """The function that donated and reused the array is where the fix goes, not the
    top-level call that passed it in."""
    src = ("import jax, jax.numpy as jnp\n"
           "step = jax.jit(lambda p: p * 2, donate_argnums=0)\n"
           "def train(p):\n"
           "    old = p\n"
           "    p = step(p)\n"
           "    return jnp.sum(old)\n"
           "train(jnp.ones(4))\n")
    d = _one(jaxviz.trace_cell(src, filename="<train>"), "use-after-donate")
    assert (d.filename, d.line) == ("<train>", 6), d.format()
    assert "`old`" in d.message


def test_use_after_donate_through_the_magic(ip):
    """IPython's own frames and output history (`_`, `Out`) do not name the array."""
    ip.run_cell("%%jaxtrace -q -o ct\n" + DONATE)
    d = _one(ip.user_ns["ct"], "use-after-donate")
    assert d.line == 9 and "`old`" in d.message, d.format()  # the editor's: %%jaxtrace is 1
    # the cell and its helper defined in an earlier cell
    ip.run_cell("def loss2(p, x):\n    return jnp.sum(p * x)\n")
    ip.run_cell("%%jaxtrace -q -o ct\nq = jnp.ones(4)\nkeep = q\nq = step(q, x)\n"
                "loss2(keep, x)\n")
    d = _one(ip.user_ns["ct"], "use-after-donate")
    assert d.line == 5 and "`keep`" in d.message, d.format()


def test_related_places_in_text_twin_and_cli(tmp_path):
    ct = jaxviz.trace_cell(DONATE, filename="<donate>")
    text = str(ct)
    assert "8: error: use-after-donate:" in text
    assert "  <donate>:7: note: <lambda> donates p here" in text, text
    path = tmp_path / "donate.py"
    path.write_text(DONATE + "\n")
    r = subprocess.run([sys.executable, "-m", "jaxviz", str(path)], capture_output=True,
                       text=True, cwd=tmp_path, timeout=240,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    lines = r.stdout.splitlines()
    k = next(i for i, l in enumerate(lines) if ": error: use-after-donate: " in l)
    assert lines[k].startswith(f"{path}:8: error: use-after-donate: "), r.stdout
    # under it: the fix (issue 45, item 10), then the related places
    assert lines[k + 1].startswith("  fix: "), r.stdout
    assert f"  {path}:7: note: <lambda> donates p here" in lines[k + 1 : k + 6], r.stdout


# --- leaked-tracer used in a later cell ----------------------------------------------------

CELL_A = ("@jax.jit\n"
          "def forward(x):\n"
          "    global saved\n"
          "    h = jnp.tanh(x)\n"
          "    saved = h\n"
          "    return h * 2\n"
          "forward(jnp.ones(3))\n")


def test_leak_from_an_unwatched_earlier_cell_is_at_the_store():
    ns = _ns()
    _run_plain(CELL_A, ns, "<cell A>")
    ct = jaxviz.trace_cell("print(saved + 1)\n", namespace=ns, filename="<cell B>")
    d = _one(ct, "leaked-tracer")
    assert (d.filename, d.line) == ("<cell A>", 5), d.format()
    assert ("<cell B>", 1, "used here") in d.related


def test_leak_reported_before_is_at_the_store_when_used():
    """Cell A ran under jaxviz (its leak reported there); cell B uses it: JAX's error names
    forward, whose store into what cell B reads is the line."""
    ns = _ns()
    first = jaxviz.trace_cell(CELL_A, namespace=ns, filename="<cell A2>")
    assert [(d.rule, d.line) for d in first.diagnostics] == [("leaked-tracer", 5)]
    ct = jaxviz.trace_cell("y = saved + 1\n", namespace=ns, filename="<cell B2>")
    d = _one(ct, "leaked-tracer")
    assert (d.filename, d.line) == ("<cell A2>", 5), d.format()
    assert ("<cell B2>", 1, "used here") in d.related


def test_leak_with_no_store_to_find_is_at_the_use_with_its_origin():
    ns = _ns()
    _run_plain("@jax.jit\n"
               "def forward(x):\n"
               "    h = jnp.tanh(x)\n"
               "    globals()['hidden'] = h\n"
               "    return h * 2\n"
               "forward(jnp.ones(3))\n", ns, "<cell C>")
    ct = jaxviz.trace_cell("print(hidden + 1)\n", namespace=ns, filename="<cell D>")
    d = _one(ct, "leaked-tracer")
    assert (d.filename, d.line) == ("<cell D>", 1), d.format()
    assert [r[:2] for r in d.related] == [("<cell C>", 3)], d.related


# --- eager transformations: each op at its own line -----------------------------------------

EAGER = ("def f(x):\n"
         "    a = jnp.sin(x)\n"
         "    b = jnp.log(a)\n"
         "    return jnp.sum(b * 2)\n")


def _lines_by_op(ct) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for t in ct.traces:
        for b in t.graph.bodies:
            for n in b.nodes:
                if n.kind == "eqn" and n.loc is not None and n.loc.file == ct.filename:
                    out.setdefault(n.op, set()).add(n.loc.line)
    return out


def test_eager_transformations_give_each_op_its_line():
    for k, call in enumerate(("g = jax.grad(f)(jnp.ones(3))",
                              "g = jax.value_and_grad(f)(jnp.ones(3))",
                              "g = jax.vmap(f)(jnp.ones((2, 3)))",
                              "g = jax.jit(jax.grad(f))(jnp.ones(3))")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ct = jaxviz.trace_cell(EAGER + call + "\n", namespace=_ns(), filename=f"<eager {k}>")
        lines = _lines_by_op(ct)
        assert lines.get("sin") == {2}, (call, lines)
        assert lines.get("log") == {3}, (call, lines)
        assert lines.get("reduce_sum") == {4}, (call, lines)


# --- a tracer stored on a callable object ------------------------------------------------

def test_leak_onto_an_object_with_call():
    src = ("import jax, jax.numpy as jnp\n"
           "class Model:\n"
           "    def __call__(self, x):\n"
           "        h = jnp.tanh(x); self.h = h; return h\n"
           "m = Model(); jax.jit(lambda x: m(x))(jnp.ones(2))\n")
    d = _one(jaxviz.trace_cell(src, filename="<model>"), "leaked-tracer")
    assert (d.filename, d.line) == ("<model>", 4), d.format()
    assert "`m.h`" in d.message


def test_functions_and_classes_are_not_scanned_as_objects():
    from jaxviz.diagnostics.leaks import scan_namespace

    class Holder:
        pass
    f = jax.jit(lambda x: x)
    assert scan_namespace({"Holder": Holder, "f": f, "g": len, "h": Holder().__init__}) == []


# --- a failed trace under jax.grad's wrapper is named after the user's function -----------

def test_partial_trace_under_value_and_grad_has_the_users_names():
    src = ("import jax, jax.numpy as jnp\n"
           "def f(w, x):\n"
           "    y = jnp.sin(w) * x\n"
           "    if y.sum() > 0:\n"
           "        return y.sum()\n"
           "    return jnp.sum(w * x)\n"
           "v = jax.jit(jax.value_and_grad(f))(jnp.ones(3), jnp.ones(3))\n")
    ct = jaxviz.trace_cell(src, filename="<vg>")
    failed = [t for t in ct.traces if t.error is not None]
    assert [(t.name, t.arg_names) for t in failed] == [("f", ["w", "x"])]
    assert _one(ct, "tracer-bool").trace == "f"


def test_partial_trace_of_eager_grad_names_the_differentiated_argument():
    src = ("import jax, jax.numpy as jnp, numpy as np\n"
           "from jax import lax\n"
           "def f(w, x):\n"
           "    y = lax.sin(x) * w\n"
           "    z = np.asarray(y)\n"
           "    return jnp.sum(w * x)\n"
           "v = jax.grad(f, argnums=1)(jnp.ones(3), jnp.ones(3))\n")
    ct = jaxviz.trace_cell(src, filename="<eg>")
    failed = [t for t in ct.traces if t.error is not None]
    assert [(t.name, t.arg_names) for t in failed] == [("f", ["x"])]
    assert "dyn_args" not in str(ct)

"""In a real JupyterLab: jaxviz.compare's output and its widget draw both panes with the
wider layer coloured, and a %%jaxtrace cell's diagnostics give the line the editor shows."""
from __future__ import annotations

import re

from tests.browser.conftest import ARTIFACTS, write_notebook
from tests.browser.test_jupyterlab import _run_cell, _wait

CELL1 = '''%load_ext jaxviz
import jax, jax.numpy as jnp, jaxviz

def layer(p, x):
    return jax.nn.relu(x @ p["w"] + p["b"])

def mlp(params, x):
    for p in params:
        x = layer(p, x)
    return x

def params(*w):
    return [{"w": jnp.ones((a, b)), "b": jnp.ones(b)} for a, b in zip(w[:-1], w[1:])]

x = jnp.ones((8, 4))
c = jaxviz.compare(jaxviz.trace(mlp, params(4, 16, 16, 2), x), jaxviz.trace(mlp, params(4, 32, 16, 2), x))
c'''
CELL2 = "c.widget"
CELL3 = '''%%jaxtrace --no-run
@jax.jit
def h(x):
    if x.sum() > 0:
        return x
    return -x
h(jnp.ones(3))'''
IF_LINE = CELL3.splitlines().index("    if x.sum() > 0:") + 1   # as the editor numbers it

READY = ".jp-OutputArea-output .jv-cmp[data-ready='1']"


def test_compare_and_line_numbers_in_jupyterlab(jupyterlab, browser_context):
    write_notebook(jupyterlab.root / "compare.ipynb", (CELL1, CELL2, CELL3))
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    jupyterlab.open_notebook(page, "compare.ipynb")
    _run_cell(page, 0)
    _wait(page, READY, "compare-html")
    _run_cell(page, 1)
    page.wait_for_function(f"() => document.querySelectorAll(\"{READY}\").length === 2", timeout=60_000)
    for i in (0, 1):   # the HTML output, then the widget
        for k in (0, 1):
            got = page.evaluate(
                "([i, k]) => document.querySelectorAll('.jp-OutputArea-output .jv-cmp')[i].jaxvizCompare.marks(k)",
                [i, k])
            # (an open group's frame says "layer[0] — 4 eqns · ...": the first look opens one)
            by_label = {m["label"].split(" — ")[0]: m["status"] for m in got if m["kind"] == "group"}
            assert (by_label["layer[0]"], by_label["layer[1]"], by_label["layer[2]"]) == \
                ("changed", "changed", "same"), by_label
    page.screenshot(path=str(ARTIFACTS / "lab-compare.png"))

    _run_cell(page, 2)
    _wait(page, ".jp-OutputArea-output .jv-diag", "line-numbers")
    head = page.locator(".jp-OutputArea-output .jv-diag .jv-diag-msg b").first.text_content()
    assert re.search(rf"cell \[\d+\]:{IF_LINE} error: tracer-bool", head), head
    page.close()
    jupyterlab.shutdown_kernels()
    assert errors == []

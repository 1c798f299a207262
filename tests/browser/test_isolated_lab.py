"""jaxviz.options.outputs = "isolated" in a real JupyterLab: a %%jaxtrace cell's graph view is
the GraphWidget itself, drawn by anywidget's front-end from the state its comm synced, and a
click reaches `ct.widget.selected_eqn` through that comm, with no page-wide registry: the path
Colab and VS Code take (item 9)."""
from __future__ import annotations

import re

from tests.browser.conftest import ARTIFACTS, write_notebook
from tests.browser.test_jupyterlab import _run_cell, _wait

CELL1 = '''%load_ext jaxviz
import jax, jax.numpy as jnp, jaxviz
jaxviz.options.outputs = "isolated"     # as detected in Colab and VS Code'''
CELL2 = '''%%jaxtrace --no-run -o ct
@jax.jit
def mlp(x, w):
    return jnp.tanh(x @ w).sum()
mlp(jnp.ones((4, 8)), jnp.ones((8, 3)))'''
CELL3 = '''e = ct.widget.selected_eqn
print("SELECTED", e.primitive.name if e is not None else None)'''

ROOT = ".jp-OutputArea-output .jv-root"


def test_isolated_outputs_click_reaches_python_through_the_comm(jupyterlab, browser_context):
    write_notebook(jupyterlab.root / "isolated.ipynb", (CELL1, CELL2, CELL3))
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    jupyterlab.open_notebook(page, "isolated.ipynb")
    _run_cell(page, 0)
    _run_cell(page, 1)
    _wait(page, ROOT + "[data-painted='1']", "isolated-widget")
    # the widget view, not the HTML copy (.jaxviz-output, its loader's host), is what shows
    assert page.locator(".jp-OutputArea-output .jaxviz-output").count() == 0
    assert page.locator(ROOT).count() == 1
    J = f"document.querySelector(\"{ROOT}\").jaxviz"
    page.evaluate(f"() => {J}.expandAll()")
    b = next(b for b in page.evaluate(f"() => {J}.boxes()") if b["op"] == "tanh" and b["onScreen"])
    page.mouse.click(b["cx"], b["cy"])
    page.wait_for_function(f"k => document.querySelector(\"{ROOT}\").dataset.selected === k", arg=b["key"])
    # (no HTML view is in this page that could have written the click: it goes through the comm)
    _run_cell(page, 2)
    out = page.locator(".jp-OutputArea-output").filter(has_text=re.compile(r"SELECTED \w+"))
    out.first.wait_for(timeout=20_000)
    assert "SELECTED tanh" in out.first.text_content()
    page.screenshot(path=str(ARTIFACTS / "lab-isolated.png"))
    page.close()
    jupyterlab.shutdown_kernels()
    assert errors == []

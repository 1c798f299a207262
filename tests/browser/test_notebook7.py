"""The same view in Notebook 7 (served by the same jupyter_server as the Lab tests): a
%%jaxtrace cell draws its graph, and clicking an equation shows its source line."""
from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, run_cell, start_cell, wait_until, write_notebook

CELL0 = "%load_ext jaxviz\nimport jax, jax.numpy as jnp"
CELL1 = """%%jaxtrace --no-run
@jax.jit
def mlp(x, w):
    return jnp.tanh(x @ w).sum()
mlp(jnp.ones((4, 8)), jnp.ones((8, 3)))"""
ROOT = ".jp-OutputArea-output .jv-root"


def test_graph_in_notebook7(jupyterlab, browser_context):
    if jupyterlab.api("contents") is None:
        pytest.skip("the Jupyter server did not answer")
    write_notebook(jupyterlab.root / "nb7.ipynb", (CELL0, CELL1))
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    try:
        page.goto(f"{jupyterlab.url}/notebooks/nb7.ipynb?token={jupyterlab.token}")
        page.wait_for_selector(".jp-Notebook .jp-CodeCell .cm-content", timeout=60_000)
        wait_until(lambda: any(k.get("execution_state") == "idle"
                               for k in jupyterlab.api("kernels") or []), 60, "the kernel to be idle")
        for i in range(2):
            cell = page.locator(".jp-Notebook .jp-CodeCell").nth(i)
            run_cell(page, cell)
        page.wait_for_selector(f"{ROOT}[data-painted='1']", timeout=60_000)
        root = page.locator(ROOT).first
        assert int(root.get_attribute("data-visible")) > 0
        for _ in range(4):        # open groups until an equation shows
            boxes = page.evaluate(f"() => document.querySelector('{ROOT}').jaxviz.boxes()")
            eqns = [b for b in boxes if b.get("nodeKind") == "eqn" and b["kind"] == "node" and b["onScreen"]]
            if eqns:
                break
            page.evaluate(f"() => document.querySelector('{ROOT}').jaxviz.expandAll()")
        tanh = next(b for b in eqns if b["op"] == "tanh")
        page.mouse.click(tanh["cx"], tanh["cy"])
        page.wait_for_function(f"k => document.querySelector('{ROOT}').dataset.selected === k",
                               arg=tanh["key"])
        assert re.search(r":4 in mlp", root.locator(".jv-insp .jv-loc").text_content())
        page.screenshot(path=str(ARTIFACTS / "notebook7-graph.png"))
    finally:
        page.close()
        jupyterlab.shutdown_kernels()
    # Notebook 7's own bundles log a settings-schema error in a fresh HOME: not ours
    ours = [e for e in errors if "/static/notebook/" not in e]
    assert ours == []


LOOP = """%%jaxtrace
keep = []
for i in range(40):
    keep.append(step(x))
    if len(keep) == 5:
        keep.clear()
    time.sleep(0.08)"""


def test_cell_memory_grows_in_notebook7(jupyterlab, browser_context):
    """The default cell's memory chart draws while the cell runs, in Notebook 7 too."""
    if jupyterlab.api("contents") is None:
        pytest.skip("the Jupyter server did not answer")
    setup = CELL0 + "\nimport time\nstep = jax.jit(lambda x: x * 0.5 + 1.0)\nx = jnp.zeros((512, 1024))"
    write_notebook(jupyterlab.root / "nb7mem.ipynb", (setup, LOOP))
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    try:
        page.goto(f"{jupyterlab.url}/notebooks/nb7mem.ipynb?token={jupyterlab.token}")
        page.wait_for_selector(".jp-Notebook .jp-CodeCell .cm-content", timeout=60_000)
        wait_until(lambda: any(k.get("execution_state") == "idle"
                               for k in jupyterlab.api("kernels") or []), 60, "the kernel to be idle")
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        run_cell(page, cells.nth(0))
        cell = cells.nth(1)
        start_cell(page, cell)
        chart = cell.locator(".jvm")
        chart.wait_for(timeout=30_000)
        seen = []
        for _ in range(600):                          # bounded: at most ~60 s
            if "*" not in (cell.locator(".jp-InputPrompt").text_content() or ""):
                break
            seen.append(int(chart.first.get_attribute("data-samples") or 0))
            page.wait_for_timeout(100)
        assert len({s for s in seen if s > 0}) >= 3, f"the chart did not grow during the cell: {seen[-10:]}"
        done = cell.locator(".jaxviz-memory .jvm[data-phase^='done: 40 jitted calls']")
        done.wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "notebook7-cell-memory.png"))
    finally:
        page.close()
        jupyterlab.shutdown_kernels()
    ours = [e for e in errors if "/static/notebook/" not in e]
    assert ours == []

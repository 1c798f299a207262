"""The default %%jaxtrace cell's memory tab in a real JupyterLab: each of the cell's own
jitted functions shows the buffers at its compiled peak (jaxviz.memory.peaks: no option, no
re-run), and clicking a buffer's row selects its graph node, which the inspector shows."""
from __future__ import annotations

import re

from tests.browser.conftest import ARTIFACTS, run_cell, start_cell, write_notebook

SETUP = '''%load_ext jaxviz
import jax, jax.numpy as jnp

def mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b

def loss(params, x, y):
    return ((mlp(params, x) - y) ** 2).mean()

@jax.jit
def train_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)]

sizes = [64, 128, 128, 10]
params = [(jnp.ones((m, n)) * 0.01, jnp.zeros(n)) for m, n in zip(sizes[:-1], sizes[1:])]
x, y = jnp.ones((32, 64)), jnp.zeros((32, 10))'''
STEP = '''%%jaxtrace
params = train_step(params, x, y)
print("STEP DONE")'''

NB = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def test_default_cell_lists_buffers_at_the_peak_and_a_row_selects_its_node(jupyterlab, browser_context):
    path = jupyterlab.root / "buffers.ipynb"
    write_notebook(path, (SETUP, STEP))
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    try:
        jupyterlab.open_notebook(page, "buffers.ipynb")
        cells = page.locator(f"{NB} .jp-CodeCell")
        run_cell(page, cells.nth(0))
        cell = cells.nth(1)
        start_cell(page, cells.nth(1))
        root = cell.locator(".jp-OutputArea-output .jv-root[data-painted='1']")
        root.wait_for(timeout=90_000)
        assert "STEP DONE" in cell.locator(".jp-OutputArea").text_content()
        root.locator(".jv-tab-memory").click()
        page.wait_for_function("el => el.dataset.tab === 'memory'", arg=root.element_handle(), timeout=10_000)
        entries = root.locator(".jv-buf-entry")
        assert [e.get_attribute("data-trace") for e in entries.all()] == ["train_step"]  # not jnp's jits
        entry = entries.first
        assert "train_step: one call, simulated over XLA's schedule" in entry.locator(".jv-title").text_content()
        assert re.match(r"peak [\d.]+ KiB at step \d+ of \d+ \(XLA's memory_analysis\(\): [\d.]+ KiB\)",
                        entry.locator(".jv-mem-ratio").text_content())
        assert entry.locator(".jv-buf-timeline polyline").count() == 1
        rows = entry.locator(".jv-buf-row")
        shown = [(r.get_attribute("data-category"), r.locator("td").nth(3).text_content()) for r in rows.all()]
        cats = {c for c, _ in shown}
        assert {"argument", "output"} <= cats and cats & {"temporary", "activation"}, shown
        assert ("argument", "params[0][0]") in shown                        # an argument's path
        assert any(re.match(r"cell \[\d+\]:\d+ \(\w+\)", w) for c, w in shown if c != "argument")
        page.screenshot(path=str(ARTIFACTS / "lab-buffers-default.png"))

        # a buffer a user's line made: the click opens the graph with its node selected
        made = entry.locator(".jv-buf-row[data-nodes]:not([data-nodes=''])").filter(
            has_not=page.locator("td:nth-child(5):empty"))
        row = made.first
        op = row.locator("td").nth(4).text_content()
        nodes = row.get_attribute("data-nodes").split()
        row.click()
        page.wait_for_function("el => el.dataset.tab === 'graph'", arg=root.element_handle(), timeout=10_000)
        selected = root.get_attribute("data-selected") or ""
        assert any(selected.endswith(f"n{n.split(':')[1]}") for n in nodes), (selected, nodes)
        assert root.locator(".jv-insp .jv-title").text_content() == op   # the inspector shows it
        page.screenshot(path=str(ARTIFACTS / "lab-buffers-selected.png"))
    finally:
        page.close()
        jupyterlab.shutdown_kernels()
    assert errors == []

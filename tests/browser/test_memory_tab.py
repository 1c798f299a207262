"""%%jaxtrace in a real JupyterLab shows one output: the graph view, whose memory tab draws the
live chart while the cell's functions run (samples streamed before the tab opens are kept),
and which still shows the run's static summary after save + reload without a kernel."""
from __future__ import annotations

import json
import re

import nbformat

from tests.browser.conftest import ARTIFACTS, samples_while_running, wait_until
from tests.test_widget_payload import decode_fragment

CELL1 = '''%load_ext jaxviz
import jax, jax.numpy as jnp

@jax.jit
def step(x):
    return x * 0.5 + 1.0

x = jnp.zeros((4 * 1024 * 1024,))'''
CELL2 = '''%%jaxtrace --steps 300 --compare
y = step(x)'''

ROOT = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output .jv-root"   # only cell 2 has one


def _notebook(path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in (CELL1, CELL2)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


def _saved_memory(path):
    """The memory entries of the graph output saved in the notebook file (None: not yet)."""
    nb = json.loads(path.read_text())
    for out in nb["cells"][1].get("outputs", []):
        html = "".join(out.get("data", {}).get("text/html", []))
        if "jaxviz-output" in html:
            return decode_fragment(html).get("memory")
    return None


def test_memory_tab_live_then_offline(jupyterlab, browser_context):
    path = jupyterlab.root / "memtab.ipynb"
    _notebook(path)
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(jupyterlab.notebook_url("memtab.ipynb"))
        page.wait_for_selector(".jp-Notebook .jp-CodeCell .cm-content", timeout=60_000)
        wait_until(lambda: any(k.get("execution_state") == "idle" for k in jupyterlab.api("kernels") or []),
                   60, "the kernel to be idle")
        cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell")
        cells.nth(0).locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
        cells.nth(0).locator(".jp-InputPrompt").filter(has_text=re.compile(r"\[\d+\]")).wait_for(timeout=60_000)
        cell = cells.nth(1)
        cell.locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")

        # one output: the graph view, with a memory tab next to the function's graph
        page.wait_for_selector(f"{ROOT}[data-memory='1'][data-painted='1']", timeout=60_000)
        page.locator(f"{ROOT} .jv-tab-memory").click()
        page.wait_for_selector(f"{ROOT} .jv-membox .jvm", timeout=30_000)
        chart = page.locator(f"{ROOT} .jv-membox .jvm").first
        seen_running = samples_while_running(page, cell, chart)   # counts read while [*]
        page.screenshot(path=str(ARTIFACTS / "lab-memory-tab-live.png"))
        running = sorted(set(v for v in seen_running if v > 0))
        assert len(running) >= 2, f"the memory tab did not update during the run: {seen_running[-20:]}"
        assert cell.locator(".jp-OutputArea-output").count() == 1, "the chart must not be a separate output"
        assert page.locator(".jp-OutputArea-output[data-mime-type*='widget-view']").count() == 0

        # the run ended: the output is updated in place with the summary, the tab stays open
        page.wait_for_selector(f"{ROOT}[data-tab='memory'] .jv-mem-entry[data-summary='1'][data-live='1']",
                               timeout=30_000)
        root = page.locator(ROOT).first
        assert "donation ratio" in root.locator(".jv-mem-ratio").text_content()
        assert int(root.locator(".jvm").first.get_attribute("data-samples")) >= running[-1]

        page.keyboard.press("Control+s")
        wait_until(lambda: (_saved_memory(path) or [{}])[0].get("summary"), 20, "the save with the summary")
        page.wait_for_timeout(300)  # let the save request finish before the kernel stops
    finally:
        page.close()
        jupyterlab.shutdown_kernels()

    # reopen with kernels refused: the memory tab shows the static summary from the payload
    page = browser_context.new_page()
    # ipywidgets' manager itself fails to find the refused kernel: its error, not the view's
    page.on("pageerror", lambda e: "@jupyter-widgets/jupyterlab-manager" in str(e.stack)
            or errors.append(f"{e}\n{e.stack}"))
    refuse = lambda route: route.abort() if route.request.method == "POST" else route.continue_()
    page.route("**/api/sessions**", refuse)
    page.route("**/api/kernels**", refuse)
    try:
        page.goto(jupyterlab.notebook_url("memtab.ipynb"))
        page.wait_for_selector(f"{ROOT}[data-painted='1']", timeout=60_000)
        # (JupyterLab's "kernel could not start" dialog may cover the page: click the tab itself)
        page.locator(f"{ROOT} .jv-tab-memory").dispatch_event("click")
        entry = page.locator(f"{ROOT} .jv-mem-entry[data-summary='1']").first
        entry.wait_for(timeout=10_000)
        page.screenshot(path=str(ARTIFACTS / "lab-memory-tab-offline.png"))
        assert jupyterlab.api("kernels") == []
        assert entry.get_attribute("data-live") is None            # no kernel, no live chart
        assert re.search(r"donation ratio \d+\.\d\dx", entry.locator(".jv-mem-ratio").text_content())
        rows = [r.get_attribute("data-run") for r in entry.locator(".jv-mem-table tbody tr").all()]
        assert rows == ["with donation", "without donation"]
        assert "ms" in entry.locator(".jv-mem-table tbody tr").first.text_content()
        assert int(entry.locator(".jv-mem-chart").first.get_attribute("data-points")) > 1
        assert entry.locator(".jv-mem-charts").is_visible()
    finally:
        page.close()
    assert errors == []

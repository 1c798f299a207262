"""The live memory chart in a real JupyterLab: it updates while the cell runs (not only at the
end), shows both runs side by side, and ends with the donation ratio in its header."""
from __future__ import annotations

import re
import time

from tests.browser.conftest import start_cell, write_notebook

from conftest import ARTIFACTS, samples_while_running

CELL = '''import jax, jax.numpy as jnp, jaxviz
from jaxviz.view.chart import live_run
x = jnp.zeros((4 * 1024 * 1024,))
t = jaxviz.trace(jax.jit(lambda x: x * 0.5 + 1.0), x)
report = live_run(t, steps=STEPS)
print("RATIO", report.donation_ratio and round(report.donation_ratio, 2), "STOPPED", report.stopped)'''

CHART = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output .jvm"   # the open tab's chart


def _notebook(path, steps: int):
    write_notebook(path, [CELL.replace("STEPS", str(steps))])


def test_chart_updates_while_the_cell_runs(jupyterlab, browser_context):
    _notebook(jupyterlab.root / "memory.ipynb", steps=400)
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    jupyterlab.open_notebook(page, "memory.ipynb")
    cell = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell").first
    start_cell(page, cell)
    page.wait_for_selector(CHART, timeout=60_000)
    chart = page.locator(CHART).first
    seen_running = samples_while_running(page, cell, chart)   # counts read while [*]
    page.screenshot(path=str(ARTIFACTS / "lab-memory-chart.png"))
    running = sorted(set(v for v in seen_running if v > 0))
    assert len(running) >= 2, f"the chart did not update during the run: {seen_running[-20:]}"
    page.wait_for_function(f"() => document.querySelector('{CHART}').dataset.phase.startsWith('done')")
    assert chart.get_attribute("data-runs") == "2"
    labels = [e.text_content() for e in chart.locator(".jvm-rlabel").all()]
    assert labels == ["with donation", "without donation"]
    assert chart.locator("canvas").count() == 1          # both runs on one shared time axis
    assert "donation ratio" in chart.locator(".jvm-status").text_content()
    page.locator(".jp-OutputArea-output").filter(has_text=re.compile(r"RATIO [12]\.\d+ STOPPED False")).wait_for(timeout=20_000)
    page.close()
    jupyterlab.shutdown_kernels()
    assert errors == []


def test_stop_button(jupyterlab, browser_context):
    """Stop during a long foreground run: the kernel gets the click when it can."""
    # long enough that the first run (with donation) is still going when the click lands
    # also on a busy machine (4000 steps took ~10 s at idle: a loaded one saw the first run
    # end and the second begin before the click); the Stop ends it, so a pass takes no longer
    _notebook(jupyterlab.root / "stop.ipynb", steps=100_000)
    page = browser_context.new_page()
    jupyterlab.open_notebook(page, "stop.ipynb")
    cell = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell").first
    start_cell(page, cell)
    page.wait_for_function(f"() => Number(document.querySelector('{CHART}')?.dataset.samples) > 0",
                           timeout=60_000)
    chart = page.locator(CHART).first
    t0 = time.monotonic()
    page.locator(f"{CHART} button", has_text="Stop").click()
    try:
        page.wait_for_function(f"() => document.querySelector('{CHART}').dataset.phase.startsWith('stopped')",
                               timeout=120_000)
    except Exception:                      # say what the page showed instead
        page.screenshot(path=str(ARTIFACTS / "lab-memory-stop-failed.png"))
        raise AssertionError(f"not stopped: phase {chart.get_attribute('data-phase')!r}, status "
                             f"{chart.locator('.jvm-status').text_content()!r}, output "
                             f"{page.locator('.jp-OutputArea-output').all_text_contents()!r}")
    took = time.monotonic() - t0
    page.screenshot(path=str(ARTIFACTS / "lab-memory-stopped.png"))
    page.locator(".jp-OutputArea-output").filter(has_text="STOPPED True").wait_for(timeout=20_000)
    assert chart.get_attribute("data-runs") == "1", f"Stop took {took:.1f} s"
    page.close()
    jupyterlab.shutdown_kernels()
    assert took < 5, f"Stop took {took:.1f} s"

"""What a newcomer sees first in a real JupyterLab (issue 46): every finding of a cell in one
list above the tabs, each tab marked with its count; idle device lanes folded into one line;
the mouse wheel scrolling the notebook past a graph (Ctrl + wheel, or a click first, zooms);
charts drawn at their container's size after a theme switch.

One notebook, run once (module fixture); each test reads one thing off it and takes its
screenshot before asserting (test-artifacts/first-look-*.png)."""
from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, run_cell, wait_until, write_notebook

SETUP = '''import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
%load_ext jaxviz
import jax, jax.numpy as jnp
print("devices", len(jax.devices()))'''
# five kinds of trouble in one cell: the findings land in the cell's list and in one tab's
FINDINGS = '''%%jaxtrace
@jax.jit
def put(x, i):
    return x.at[i].set(1.0)
@jax.jit
def get(x, idx):
    return x[idx]
key = jax.random.key(0)
a = jax.random.normal(key, (3,))
b = jax.random.normal(key, (3,))
y = put(jnp.zeros(4), 9)
z = get(jnp.zeros(4), jnp.array([0, 7]))
w = jnp.zeros(4)[jnp.array([5])]'''
TALL = '''for i in range(300):
    print("line", i)'''
# JAX raises while tracing: nothing ran, the view says what went wrong, no chart above it
FAILING = '''%%jaxtrace
@jax.jit
def relu(x):
    if x.sum() > 0:
        return x
    return -x
relu(jnp.ones(3))'''

NB = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def _shot(page, name: str, el=None) -> None:
    (el or page).screenshot(path=str(ARTIFACTS / f"first-look-{name}.png"))


@pytest.fixture(scope="module")
def notebook(jupyterlab, browser_context):
    write_notebook(jupyterlab.root / "firstlook.ipynb", [SETUP, FINDINGS, TALL, FAILING])
    page = browser_context.new_page()
    page.set_viewport_size({"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    page.errors = errors
    jupyterlab.open_notebook(page, "firstlook.ipynb")
    cells = page.locator(f"{NB} .jp-CodeCell")
    for i in range(4):
        run_cell(page, cells.nth(i))
    assert "devices 8" in cells.nth(0).locator(".jp-OutputArea").text_content()
    cells.nth(1).locator(".jv-root[data-painted='1']").wait_for(timeout=60_000)
    cells.nth(1).locator(".jaxviz-memory .jvm[data-phase^='done']").wait_for(timeout=60_000)
    page.cells = cells
    yield page
    page.close()
    jupyterlab.shutdown_kernels()


def test_every_finding_in_one_list_above_the_tabs(notebook):
    page = notebook
    root = page.cells.nth(1).locator(".jv-root")
    root.scroll_into_view_if_needed()
    _shot(page, "1-findings", root)
    head = root.locator(".jv-diag-head").text_content()
    items = root.locator(".jv-diag")
    n = items.count()
    # the cell's own finding (key reuse) and the one under a statement's tab (an index out of
    # bounds at line 13), whichever tab is open: the first tab (`put`) has none
    assert head.startswith(f"{n} finding{'s' if n > 1 else ''}") and n >= 2, head
    rules = " ".join(items.all_text_contents())
    assert "key-reuse" in rules and "out-of-bounds" in rules
    assert root.locator(".jv-tab[aria-selected='true']").text_content() == "put"
    # the list sits above the tabs
    assert root.locator(".jv-diags").bounding_box()["y"] < root.locator(".jv-bar").bounding_box()["y"]
    # each tab carries its count: they add up to the findings listed under a tab
    tabs = root.locator(".jv-tab:not(.jv-tab-memory)")
    counts = [int(t.get_attribute("data-findings") or 0) for t in tabs.all()]
    badges = root.locator(".jv-tab .jv-tab-count")
    under_tabs = root.locator(".jv-diag .jv-diag-where")
    assert sum(counts) == under_tabs.count() >= 1
    assert sum(int(b) for b in badges.all_text_contents()) == sum(counts)
    assert any("line 13" in t for t in under_tabs.all_text_contents())
    # the list stays whole on another tab; a click on a tab's finding opens that tab
    tabs.nth(2).click()
    assert root.locator(".jv-diag").count() == n
    marked = [k for k, c in enumerate(counts) if c]
    item = root.locator(".jv-diag:has(.jv-diag-where)").first
    item.click()
    wait_until(lambda: tabs.nth(marked[0]).get_attribute("aria-selected") == "true", 10, "the finding's tab")
    assert root.get_attribute("data-selected")
    assert page.errors == []


def test_idle_device_lanes_fold_into_one_line(notebook):
    page = notebook
    chart = page.cells.nth(1).locator(".jaxviz-memory .jvm")
    chart.scroll_into_view_if_needed()
    _shot(page, "2-lanes", chart)
    # eight CPU devices, arrays on the first only: its lane and the process RSS are drawn
    assert chart.get_attribute("data-lanes") == "2"
    assert chart.locator(".jvm-idle").text_content() == "7 more devices: no arrays (cpu:1 … cpu:7)"
    assert chart.locator("canvas").bounding_box()["height"] < 300
    assert page.errors == []


def _scroller(page):
    return page.locator(f"{NB} .jp-WindowedPanel-outer").first


def test_the_wheel_scrolls_the_notebook_past_a_graph(notebook):
    page = notebook
    root = page.cells.nth(1).locator(".jv-root")
    root.scroll_into_view_if_needed()
    J = "(e) => e.jaxviz.camera()"
    scroller = _scroller(page)
    top = scroller.evaluate("e => e.scrollTop")
    z = root.evaluate(J)["z"]
    canvas = root.locator(".jv-stage canvas").first.bounding_box()
    page.mouse.move(canvas["x"] + canvas["width"] / 2, canvas["y"] + canvas["height"] / 2)
    page.mouse.wheel(0, 300)
    page.wait_for_timeout(300)
    _shot(page, "3-wheel-scrolls")
    wait_until(lambda: scroller.evaluate("e => e.scrollTop") > top + 50, 5, "the notebook to scroll")
    assert root.evaluate(J)["z"] == z, "the plain wheel zoomed the graph"
    assert root.locator(".jv-wheel-hint").is_visible()
    # Ctrl + wheel zooms the graph, and the notebook stays where it is
    root.scroll_into_view_if_needed()
    canvas = root.locator(".jv-stage canvas").first.bounding_box()
    page.mouse.move(canvas["x"] + canvas["width"] / 2, canvas["y"] + canvas["height"] / 2)
    top = scroller.evaluate("e => e.scrollTop")
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    wait_until(lambda: root.evaluate(J)["z"] > z, 5, "Ctrl + wheel to zoom in")
    assert scroller.evaluate("e => e.scrollTop") == top
    # a click into the view first: then the plain wheel zooms too
    z = root.evaluate(J)["z"]
    page.mouse.click(canvas["x"] + 8, canvas["y"] + 8)
    page.mouse.wheel(0, 200)
    wait_until(lambda: root.evaluate(J)["z"] < z, 5, "the wheel to zoom after a click")
    assert scroller.evaluate("e => e.scrollTop") == top
    assert page.errors == []


def _theme(page, name: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).hover()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{name}$")).click()
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=20_000)
    light = "true" if "Light" in name else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=20_000)


SIZES = """(e) => { const dpr = window.devicePixelRatio || 1;
  return [...e.querySelectorAll('.jvm canvas, .jv-stage > canvas:not(.jv-minimap)')].map((c) => ({
    css: c.getBoundingClientRect().width, px: c.width / dpr })); }"""


def test_charts_redraw_at_their_size_after_a_theme_switch(notebook):
    page = notebook
    cell = page.cells.nth(1)
    try:
        # the switch made while the notebook is a tab behind another (a launcher)
        page.locator(".lm-MenuBar-itemLabel", has_text="File").click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^New Launcher$")).click()
        page.wait_for_selector(".jp-Launcher", timeout=10_000)
        _theme(page, "JupyterLab Dark")
        page.wait_for_timeout(1500)      # (the chart's second look, once the sheet has loaded)
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="firstlook.ipynb").click()
        page.wait_for_selector(f"{NB} .jaxviz-memory .jvm", timeout=10_000)
        cell.locator(".jv-root").scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        _shot(page, "5-dark", cell.locator(".jp-Cell-outputWrapper"))
        sizes = cell.evaluate(SIZES)
        assert len(sizes) == 2, sizes
        for s in sizes:
            assert s["css"] > 500 and abs(s["px"] - s["css"]) <= 1, sizes
        # and a resize of the page: drawn again at the new width
        page.set_viewport_size({"width": 1100, "height": 900})
        wait_until(lambda: all(abs(s["px"] - s["css"]) <= 1 for s in cell.evaluate(SIZES)), 5, "a redraw at the new size")
        assert cell.locator(".jv-root").get_attribute("data-theme") == "dark"
    finally:
        page.set_viewport_size({"width": 1400, "height": 900})
        _theme(page, "JupyterLab Light")
    assert page.errors == []


def test_a_cell_that_failed_while_tracing_shows_no_memory_chart(notebook):
    page = notebook
    cell = page.cells.nth(3)
    root = cell.locator(".jv-root[data-painted='1']")
    root.wait_for(timeout=30_000)
    root.scroll_into_view_if_needed()
    _shot(page, "10-failed", cell)
    assert "tracer-bool" in root.locator(".jv-diags").text_content()
    assert "TracerBoolConversionError" in cell.locator(".jp-OutputArea").text_content()
    assert cell.locator(".jaxviz-memory, .jvm").count() == 0
    # the chart's output is one line, not a flat chart above the view, nor an empty output
    first = cell.locator(".jp-OutputArea-output").first
    assert first.locator(".jv-root").count() == 1 or (first.text_content() or "").strip().startswith(
        "jaxviz: JAX raised while tracing `relu`: the view below shows what was traced before it")
    assert page.errors == []


def test_notebook7_shows_the_cell_whole_not_in_an_inner_scroll_box(jupyterlab, browser_context):
    """Notebook 7 scrolls a cell's outputs in a small box once they are taller than ~1800 px:
    a traced cell (8 devices, findings, a chart, the graph) stays under that, so it reads
    whole in the page."""
    write_notebook(jupyterlab.root / "firstlook7.ipynb", [SETUP, FINDINGS])
    page = browser_context.new_page()
    page.set_viewport_size({"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    try:
        page.goto(f"{jupyterlab.url}/notebooks/firstlook7.ipynb?token={jupyterlab.token}")
        page.wait_for_selector(".jp-Notebook .jp-CodeCell .cm-content", timeout=60_000)
        # this notebook's own kernel (the Lab notebook's may still be running)
        wait_until(lambda: any(s.get("path", "").endswith("firstlook7.ipynb")
                               and (s.get("kernel") or {}).get("execution_state") == "idle"
                               for s in jupyterlab.api("sessions") or []), 60, "its kernel to be idle")
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        for i in range(2):
            try:
                run_cell(page, cells.nth(i))
            except Exception:
                _shot(page, "7-notebook7-stuck")
                raise
        cell = cells.nth(1)
        cell.locator(".jaxviz-memory .jvm[data-phase^='done']").wait_for(timeout=60_000)
        cell.locator(".jv-root[data-painted='1']").wait_for(timeout=60_000)
        page.wait_for_timeout(500)
        cell.locator(".jv-root").scroll_into_view_if_needed()
        _shot(page, "7-notebook7")
        area = cell.locator(".jp-OutputArea").first
        sizes = area.evaluate("e => [e.scrollHeight, e.clientHeight]")
        assert "jp-mod-outputsScrolled" not in (cell.get_attribute("class") or ""), sizes
        assert sizes[0] <= sizes[1] + 1, sizes
    finally:
        page.close()
        jupyterlab.shutdown_kernels()
    assert [e for e in errors if "/static/notebook/" not in e] == []

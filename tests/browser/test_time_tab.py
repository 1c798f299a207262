"""The time tab (%%jaxtrace --profile; js/src/graph/timetab.js) in real Chromium: on a saved
HTML report of a profiled cell, and in a real JupyterLab in its light and dark themes. The
lines are listed by device time with their code, the oversized matmul's line on top, and a
click on a line selects its node in the graph."""
from __future__ import annotations

import re

import pytest

import jaxviz
from tests.browser.conftest import ARTIFACTS, run_cell, start_cell, write_notebook
from tests.browser.test_memory_tab import _contrast, _theme
from tests.test_profile import CELL_BIG_MATMUL

pytestmark = pytest.mark.browser
PAINTED = ".jv-root[data-painted='1']"

CELL = CELL_BIG_MATMUL  # (tests/test_profile.py's: one oversized matmul on top)


def _check_tab(page, root, artifacts_name: str) -> None:
    root.locator(".jv-tab-time").click()
    page.wait_for_function("el => el.dataset.tab === 'time'", arg=root.element_handle(),
                           timeout=10_000)
    assert root.locator(".jv-main").is_hidden()
    rows = root.locator(".jv-time-row")
    assert rows.count() >= 2
    first = rows.first
    cells = [c.text_content() for c in first.locator("td").all()]
    assert cells[3] == "y = (big + h[0, 0]) @ big" and re.match(r"~?[\d.]+ (us|ms|s)$", cells[0]), cells
    assert re.match(r"\d+\.\d%$", cells[1]) and float(cells[1][:-1]) > 50
    assert re.search(r"device time [\d.]+ (us|ms|s) on .*3 steps", root.locator(
        ".jv-time .jv-title").first.text_content())
    assert root.locator(".jv-time-kernel").count() >= 1
    # what the rows' per-step times add up to: the step's calls and the eager ops around them
    assert re.match(r"the rows add up to [\d.]+ (us|ms|s) a step, each line's time over the 3 "
                    r"steps: [\d.]+ (us|ms|s) in the 3 calls of step, ",
                    root.locator(".jv-time-sum").text_content())
    # the step's calls on the device: one filled span each (3 calls)
    assert root.locator(".jv-time-strip rect").count() == 3
    assert root.locator(".jv-time-compile").filter(has_text="step").count() == 1
    page.screenshot(path=str(ARTIFACTS / artifacts_name))
    # the matmul's line: a click opens the graph with its dot_general selected
    first.click()
    page.wait_for_function("el => el.dataset.tab === 'graph'", arg=root.element_handle(),
                           timeout=10_000)
    assert root.locator(".jv-main").is_visible()
    page.wait_for_function("el => !!el.dataset.selected", arg=root.element_handle(),
                           timeout=10_000)
    assert root.locator(".jv-insp .jv-title").text_content() == "dot_general"
    # the inspector states the node's device time per step
    assert re.search(r"[\d.]+ (us|ms|s) per step", root.locator(".jv-insp").text_content())


def test_time_tab_in_saved_html(page, tmp_path, artifacts):
    ct = jaxviz.trace_cell(CELL, profile=True)
    assert ct.profile is not None
    path = jaxviz.save_html(ct, tmp_path / "time.html")
    page.goto(path.as_uri())
    page.wait_for_selector(PAINTED, timeout=15_000)
    root = page.locator(".jv-root").first
    _check_tab(page, root, "time-tab-html.png")
    # and back: the time tab again (its lines shown again); the top kernel's row selects
    # the node of the line it fused
    root.locator(".jv-tab-time").click()
    page.wait_for_function("el => el.dataset.tab === 'time'", arg=root.element_handle())
    assert root.locator(".jv-time-row").first.is_visible()
    kernel = root.locator(".jv-time-kernel").first
    assert set(ct.profile.lines[0].node_ids) <= set(kernel.get_attribute("data-nodes").split())
    kernel.click()
    page.wait_for_function("el => el.dataset.tab === 'graph'", arg=root.element_handle())
    assert root.locator(".jv-insp .jv-title").text_content() == "dot_general"
    # then a trace's tab, from the time tab, returns to the graph
    root.locator(".jv-tab-time").click()
    page.wait_for_function("el => el.dataset.tab === 'time'", arg=root.element_handle())
    root.locator(".jv-tab:not(.jv-tab-time)").first.click()
    page.wait_for_function("el => el.dataset.tab === 'graph'", arg=root.element_handle())
    assert root.locator(".jv-timebox").is_hidden()
    # the graph coloured by device time: its legend's scale, up to the matmul's time per step
    root.locator(".jv-tab", has_text="step").first.click()
    root.locator("select.jv-color").select_option("time")
    page.wait_for_function("el => el.dataset.color === 'time'", arg=root.element_handle())
    scale = root.locator(".jv-scale[data-mode=time]")
    assert "device time per step per box" in scale.locator(".jv-legend-title").text_content()
    top = ct.profile.lines[0].per_step_us
    shown = scale.locator(".jv-tick").last.text_content()
    value = float(shown.split()[0]) * (1e3 if shown.endswith("ms") else 1)
    assert value == pytest.approx(top, rel=0.05), (shown, top)
    page.screenshot(path=str(artifacts / "time-colour-graph.png"))
    assert page.errors == []


def test_cell_without_profile_has_no_time_tab(page, tmp_path):
    ct = jaxviz.trace_cell(CELL)
    path = jaxviz.save_html(ct, tmp_path / "plain.html")
    page.goto(path.as_uri())
    page.wait_for_selector(PAINTED, timeout=15_000)
    assert page.locator(".jv-tab-time").count() == 0


NB = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def test_time_tab_in_jupyterlab_light_and_dark(jupyterlab, browser_context):
    path = jupyterlab.root / "time.ipynb"
    write_notebook(path, ("%load_ext jaxviz", "%%jaxtrace --profile\n" + CELL + 'print("DONE")'))
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    try:
        jupyterlab.open_notebook(page, "time.ipynb")
        cells = page.locator(f"{NB} .jp-CodeCell")
        run_cell(page, cells.nth(0))
        cell = cells.nth(1)
        start_cell(page, cells.nth(1))
        root = cell.locator(".jp-OutputArea-output .jv-root[data-painted='1']")
        root.wait_for(timeout=120_000)
        assert "DONE" in cell.locator(".jp-OutputArea").text_content()
        _check_tab(page, root, "lab-time-tab-light.png")
        _theme(page, "JupyterLab Dark")
        root.locator(".jv-tab-time").click()
        page.wait_for_function("el => el.dataset.tab === 'time'", arg=root.element_handle())
        assert root.locator(".jv-time-row").first.is_visible()
        sel = f"{NB} .jv-time-row td:nth-child(4)"
        assert _contrast(page, sel) >= 4.5, "the line's code on the dark theme"
        page.screenshot(path=str(ARTIFACTS / "lab-time-tab-dark.png"))
        _theme(page, "JupyterLab Light")
    finally:
        page.close()
        jupyterlab.shutdown_kernels()
    assert errors == []


def test_a_collectives_row_shows_its_bytes_and_bandwidth(page, tmp_path, artifacts):
    # a step on 8 CPU devices, profiled and saved by a child process (tests/mesh)
    from tests.mesh.test_profile_mesh import profiled

    html = tmp_path / "sharded-time.html"
    out = profiled(str(html))
    page.goto(html.as_uri())
    page.wait_for_selector(PAINTED, timeout=15_000)
    root = page.locator(".jv-root").first
    root.locator(".jv-tab-time").click()
    page.wait_for_function("el => el.dataset.tab === 'time'", arg=root.element_handle(),
                           timeout=10_000)
    heads = [c.text_content() for c in root.locator(".jv-time-table").first.locator("th").all()]
    assert heads[-2:] == ["moved / call", "bandwidth"], heads
    row = root.locator(".jv-time-row").filter(has_text="all-reduce at <step>:7")
    cells = [c.text_content() for c in row.first.locator("td").all()]
    # the text twin's figures: 32.0 KiB a call and the rate its device time achieved
    text = next(t for t in out["text"].splitlines() if "all-reduce at <step>:7" in t)
    rate = re.search(r"([\d.]+) GB/s achieved", text).group(1)
    assert cells[-2:] == ["32.0 KiB", f"{rate} GB/s"], (cells, text)
    compute = root.locator(".jv-time-row").filter(has_text="<step>:7 (step)")
    assert [c.text_content() for c in compute.first.locator("td").all()][-2:] == ["", ""]
    page.screenshot(path=str(ARTIFACTS / "time-tab-collectives.png"))

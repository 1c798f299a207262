"""The view in Notebook 7 (issue 57, items 1 and 12): the findings list and the memory tab
grow with the page (they were fixed-height scroll boxes inside the page's scroll: 529 px of a
1,599 px tab), and a finding's cell line puts the cursor on that line in Notebook 7's editor."""
from __future__ import annotations


import pytest

from tests.browser.conftest import ARTIFACTS, run_cell, wait_until, write_notebook
from tests.browser.test_findings_lab import FIVE, SETUP

ROOT = ".jp-OutputArea-output .jv-root"


def test_findings_and_memory_tab_grow_with_the_page_in_notebook7(jupyterlab, browser_context):
    if jupyterlab.api("contents") is None:
        pytest.skip("the Jupyter server did not answer")
    write_notebook(jupyterlab.root / "nb7view.ipynb", (SETUP, FIVE))
    page = browser_context.new_page()
    page.set_viewport_size({"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    try:
        page.goto(f"{jupyterlab.url}/notebooks/nb7view.ipynb?token={jupyterlab.token}")
        page.wait_for_selector(".jp-Notebook .jp-CodeCell .cm-content", timeout=60_000)
        wait_until(lambda: any(s.get("path", "").endswith("nb7view.ipynb")
                               and (s.get("kernel") or {}).get("execution_state") == "idle"
                               for s in jupyterlab.api("sessions") or []), 60, "its kernel to be idle")
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        for i in range(2):
            run_cell(page, cells.nth(i))
        cell = cells.nth(1)
        root = cell.locator(".jv-root[data-painted='1']")
        root.wait_for(timeout=60_000)
        root.scroll_into_view_if_needed()
        # the findings list whole, no inner scroll box
        box = root.locator(".jv-diags")
        assert box.evaluate("e => e.scrollHeight <= e.clientHeight + 1")
        assert root.locator(".jv-diag").count() == 5
        # the line link: Notebook 7's editor gets the cursor on the NaN's line (9)
        root.locator(".jv-diag", has_text="error: nan").locator(".jv-diag-line").click()
        head = """(e) => { const c = e.querySelector('.cm-content'), t = c.cmTile || c.cmView;
          const v = (t.root && t.root.view) || (t.rootView && t.rootView.view) || t.view;
          return [v.hasFocus, v.state.doc.lineAt(v.state.selection.main.head).number]; }"""
        wait_until(lambda: cell.evaluate(head) == [True, 9], 5, "the cursor on line 9")
        # the memory tab: as tall as what it shows, no inner scroll box
        root.scroll_into_view_if_needed()
        root.locator(".jv-tab-memory").click()
        mem = root.locator(".jv-membox")
        wait_until(lambda: mem.is_visible(), 5, "the memory tab")
        page.wait_for_timeout(300)
        sizes = mem.evaluate("e => [e.scrollHeight, e.clientHeight]")
        assert sizes[0] <= sizes[1] + 1, sizes
        tall = root.bounding_box()["height"]
        # its tables: sizes right-aligned on one line, text columns from the left (Notebook 7's
        # rendered-HTML rules right-aligned every cell)
        cells = root.locator(".jv-buf-row").first.evaluate(
            "r => [...r.cells].map((c) => [getComputedStyle(c).textAlign, getComputedStyle(c).whiteSpace])")
        assert cells[0] == ["right", "nowrap"] and all(c[0] in ("left", "start") for c in cells[1:]), cells
        page.screenshot(path=str(ARTIFACTS / "notebook7-memory-tab.png"))
        # back on the graph: its height again
        root.locator(".jv-tabs .jv-tab").first.click()
        wait_until(lambda: root.locator(".jv-stage").is_visible(), 5, "the graph")
        assert root.locator(".jv-stage").bounding_box()["height"] >= 400
        assert tall != root.bounding_box()["height"] or sizes[0] <= 520
    finally:
        page.close()
        jupyterlab.shutdown_kernels()
    assert [e for e in errors if "/static/notebook/" not in e] == []

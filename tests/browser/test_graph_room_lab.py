"""A narrow window in a real JupyterLab (issue 57 item 11): at 1000 px with the file browser
open, the quickstart's graph had a 246 px stage beside the inspector and a minimap over half
of it. Now the graph takes the output's width until a click, the inspector then opens under
it, and the minimap keeps to a corner."""
from __future__ import annotations

import re

from tests.browser.conftest import ARTIFACTS, write_notebook
from tests.browser.test_graph_room import QUICKSTART

NB = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def _rect(loc) -> dict:
    return loc.evaluate("e => { const r = e.getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width, h: r.height}; }")


def test_a_1000px_window_with_the_file_browser_open(jupyterlab, browser_context):
    setup = "%load_ext jaxviz\n" + QUICKSTART.replace("for _ in range(3):\n    params, l = train_step(params, x, y)\n", "")
    cell = "%%jaxtrace\nfor _ in range(3):\n    params, l = train_step(params, x, y)"
    write_notebook(jupyterlab.root / "room.ipynb", [setup, cell])
    page = browser_context.new_page()
    page.set_viewport_size({"width": 1000, "height": 800})
    try:
        jupyterlab.open_notebook(page, "room.ipynb")
        if not page.locator(".jp-FileBrowser").is_visible():
            page.locator(".jp-SideBar [data-id='filebrowser']").click()
        page.locator(".jp-FileBrowser").wait_for(state="visible")
        assert _rect(page.locator(".jp-FileBrowser"))["w"] > 150
        cells = page.locator(f"{NB} .jp-CodeCell")
        for i in range(2):
            cells.nth(i).locator(".cm-content").click()
            page.keyboard.press("Shift+Enter")
            cells.nth(i).locator(".jp-InputPrompt").filter(has_text=re.compile(r"\[\d+\]")).wait_for(timeout=120_000)
        root = cells.nth(1).locator(".jv-root[data-painted='1']")
        root.wait_for(timeout=60_000)
        root.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        root.screenshot(path=str(ARTIFACTS / "room-lab-1000.png"))
        r, stage = _rect(root), _rect(root.locator(".jv-stage"))
        assert r["w"] < 760, r                     # narrow: what the file browser leaves
        assert stage["w"] >= r["w"] - 4, (stage, r)
        mm = root.evaluate("e => e.jaxviz.minimap()")
        if mm is not None:
            assert max(mm["w"], mm["h"]) <= 0.22 * min(stage["w"], stage["h"]) + 1, (mm, stage)
        # a click on a box: the inspector opens under the graph, the graph keeps the width
        b = next(b for b in root.evaluate("e => e.jaxviz.boxes()") if b["onScreen"] and b["kind"] == "node")
        page.mouse.click(b["cx"], b["cy"])
        page.wait_for_function("([e, k]) => e.dataset.selected === k", arg=[root.element_handle(), b["key"]])
        page.wait_for_timeout(300)
        root.screenshot(path=str(ARTIFACTS / "room-lab-1000-selected.png"))
        stage, insp = _rect(root.locator(".jv-stage")), _rect(root.locator(".jv-insp"))
        assert insp["y"] >= stage["y"] + stage["h"] - 1 and insp["w"] >= r["w"] - 4, (insp, stage)
        assert stage["w"] >= r["w"] - 4 and stage["h"] >= 140
    finally:
        page.close()
        jupyterlab.shutdown_kernels()

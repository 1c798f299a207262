"""A narrow window in a real JupyterLab (issue 57 item 11): at 1000 px with the file browser
open, the quickstart's graph had a 246 px stage beside the inspector and a minimap over half
of it. Now the graph takes the output's width until a click, the inspector then opens under
it, and the minimap keeps to a corner."""
from __future__ import annotations


from tests.browser.conftest import ARTIFACTS, run_cell, write_notebook
from tests.browser.test_graph_room import QUICKSTART

NB = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def _rect(loc) -> dict:
    return loc.evaluate("e => { const r = e.getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width, h: r.height}; }")


def _quickstart_with_the_file_browser(jupyterlab, page, name: str, width: int, height: int):
    """The quickstart's traced cell run in JupyterLab at width x height with the file
    browser open: the view's root, painted and scrolled into the window."""
    setup = "%load_ext jaxviz\n" + QUICKSTART.replace("for _ in range(3):\n    params, l = train_step(params, x, y)\n", "")
    cell = "%%jaxtrace\nfor _ in range(3):\n    params, l = train_step(params, x, y)"
    write_notebook(jupyterlab.root / name, [setup, cell])
    page.set_viewport_size({"width": width, "height": height})
    jupyterlab.open_notebook(page, name)
    if not page.locator(".jp-FileBrowser").is_visible():
        page.locator(".jp-SideBar [data-id='filebrowser']").click()
    page.locator(".jp-FileBrowser").wait_for(state="visible")
    assert _rect(page.locator(".jp-FileBrowser"))["w"] > 150
    cells = page.locator(f"{NB} .jp-CodeCell")
    for i in range(2):
        run_cell(page, cells.nth(i))
    root = cells.nth(1).locator(".jv-root[data-painted='1']")
    root.wait_for(timeout=60_000)
    root.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    return root


def test_a_1000px_window_with_the_file_browser_open(jupyterlab, browser_context):
    page = browser_context.new_page()
    try:
        root = _quickstart_with_the_file_browser(jupyterlab, page, "room.ipynb", 1000, 800)
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


def test_a_1400px_window_with_the_file_browser_open_shows_every_box(jupyterlab, browser_context):
    """Issue 57 item 10: the quickstart's first graph in JupyterLab at 1400 px with the file
    browser open (a 948 px output) cut off `in y` and two of the new params on the right: its
    8 inputs and 7 outputs side by side are wider than the output at a readable zoom. Now an
    argument's arrays stand in one box (`in params`, 6 arrays) when side by side they do not
    fit, and every box of the first view is on screen; a double-click opens the box."""
    page = browser_context.new_page()
    try:
        root = _quickstart_with_the_file_browser(jupyterlab, page, "room1400.ipynb", 1400, 900)
        root.screenshot(path=str(ARTIFACTS / "room-lab-1400.png"))
        assert 760 < _rect(root)["w"] < 1100                  # the file browser takes its share
        boxes = root.evaluate("e => e.jaxviz.boxes()")
        assert boxes and all(b["onScreen"] for b in boxes), [(b["label"], b["onScreen"]) for b in boxes]
        labels = [b["label"] for b in boxes]
        assert labels.count("in params") == 1 and "in x" in labels and "in y" in labels, labels
        assert "out l" in labels, labels
        # the box opens in place: its six arrays, each its own input
        b = next(b for b in boxes if b["label"] == "in params")
        page.mouse.dblclick(b["cx"], b["cy"])
        page.wait_for_function("e => e.jaxviz.boxes().some(b => b.label === \"in params[2]['w']\")",
                               arg=root.element_handle(), timeout=10_000)
    finally:
        page.close()
        jupyterlab.shutdown_kernels()

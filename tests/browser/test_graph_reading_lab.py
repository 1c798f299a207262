"""The first paint of a transformer train step in a real JupyterLab at 1400x900 (issue 12): the
same story as the saved HTML (test_graph_reading.py), read under a %%jaxtrace cell: forward,
backward and the update on screen, every text >= 11 px, with JupyterLab's own panels around."""
from __future__ import annotations

from tests.browser.conftest import ARTIFACTS, write_notebook
from tests.browser.test_graph_reading import CELL, assert_story_on_first_paint
from tests.browser.test_jupyterlab import _run_cell, _wait

ROOT = ".jp-OutputArea-output .jv-root"


def test_first_paint_in_jupyterlab(jupyterlab, browser_context):
    write_notebook(jupyterlab.root / "reading.ipynb",
                   ("%load_ext jaxviz", "%%jaxtrace --no-run" + CELL.rstrip()))
    page = browser_context.new_page()
    page.set_viewport_size({"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    jupyterlab.open_notebook(page, "reading.ipynb")
    _run_cell(page, 0)
    _run_cell(page, 1, timeout=120_000)
    _wait(page, ROOT + "[data-painted='1']", "reading-lab")
    J = f"document.querySelector(\"{ROOT}\").jaxviz"
    tabs = page.locator(ROOT + " .jv-tab").all_text_contents()
    assert tabs[0].startswith("train_step"), tabs     # the first paint is the train step's
    page.locator(ROOT).first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "reading-lab-first-paint.png"))
    assert_story_on_first_paint(page, J)
    page.close()
    jupyterlab.shutdown_kernels()
    assert errors == []

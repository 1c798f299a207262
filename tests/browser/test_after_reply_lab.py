"""A traced cell's view fills in after its reply, in a real JupyterLab (issue 56 item 1).

The cell is done (its prompt numbered, its print shown) while its output still says
"analysing"; the graph view then takes that output's place, and the saved notebook holds the
view, not the note. The kernel's analysis is made slow on purpose (2 s) so that the state
between is seen.
"""
from __future__ import annotations

import json

from tests.browser.conftest import ARTIFACTS, run_cell, start_cell, wait_until, write_notebook

SETUP = '''%load_ext jaxviz
import time, jax, jax.numpy as jnp
import jaxviz.api as _api
_diagnose = _api.diagnose_cell
def _slow(*a, **k):
    time.sleep(2.0)
    return _diagnose(*a, **k)
_api.diagnose_cell = _slow'''
TRACED = '''%%jaxtrace
f = jax.jit(lambda x: jnp.tanh(x) * 2)
y = f(jnp.ones(3))
print("cell done")'''


def test_the_view_replaces_analysing_after_the_reply_and_is_saved(jupyterlab, browser_context):
    path = jupyterlab.root / "after_reply.ipynb"
    write_notebook(path, (SETUP, TRACED))
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    jupyterlab.open_notebook(page, "after_reply.ipynb")
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    run_cell(page, cells.nth(0))
    start_cell(page, cells.nth(1))
    # the cell's code is done (its print shown): its view is still to come. (JupyterLab
    # numbers the prompt once the kernel is idle again: after the view)
    out = cells.nth(1).locator(".jp-OutputArea")
    out.filter(has_text="cell done").wait_for(timeout=60_000)
    out.filter(has_text="analysing").wait_for(timeout=1_500)
    page.screenshot(path=str(ARTIFACTS / "lab-after-reply-analysing.png"))
    out.locator(".jv-root[data-painted='1']").wait_for(timeout=60_000)
    assert "jaxviz: analysing" not in out.inner_text()
    page.screenshot(path=str(ARTIFACTS / "lab-after-reply-view.png"))
    page.keyboard.press("Control+s")
    wait_until(lambda: "jaxviz-output" in path.read_text(), 20, "the save")
    saved = json.loads(path.read_text())["cells"][1]["outputs"]
    text = json.dumps(saved)
    assert "jaxviz-output" in text and "jaxviz: analysing" not in text
    page.close()
    assert errors == []

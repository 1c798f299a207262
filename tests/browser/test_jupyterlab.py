"""The graph widget in a real JupyterLab: runs a notebook, clicks, searches, follows the
theme, syncs the selection to Python, and still renders after save + reload without a kernel."""
from __future__ import annotations

import pathlib
import re
import shutil

import pytest

from tests.browser.conftest import ARTIFACTS, run_cell, wait_until, write_notebook

CELL1 = '''import jax, jax.numpy as jnp, jaxviz
from IPython.display import display
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.view.html import mimebundle
from jaxviz.view.widget import make_widget

def mlp(x, w):
    h = jnp.tanh(x @ w)
    return (h * 2.0).sum()

t = jaxviz.trace(jax.jit(mlp), jnp.ones((4, 8)), jnp.ones((8, 3)))'''
TANH_LINE = CELL1.splitlines().index("    h = jnp.tanh(x @ w)") + 1
CELL2 = '''tb, tid = next((b.id, n.id) for b in t.graph.bodies for n in b.nodes if n.op == "tanh")
diag = Diagnostic(rule="nan", severity="warning", message="tanh <b>saturates</b>",
                  filename="<cell 1>", line=8, node_ids=(f"{tb}:{tid}",))
w = make_widget([t], [diag])
display(mimebundle([t], [diag], str(t), widget=w), raw=True)'''
CELL3 = '''print("SELECTED", w.selected_node.op if w.selected_node else None)'''

ROOT_SEL = ".jp-OutputArea-output .jv-root"


def _notebook(path):
    write_notebook(path, (CELL1, CELL2, CELL3))


def _run_cell(page, index: int, timeout: float = 90_000):
    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(index)
    run_cell(page, cell)


def _wait(page, selector, name, timeout=60_000):
    """wait_for_selector that leaves a screenshot and the outputs' text when it fails."""
    try:
        page.wait_for_selector(selector, timeout=timeout)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / f"lab-failed-{name}.png"))
        (ARTIFACTS / f"lab-failed-{name}.txt").write_text(
            page.evaluate("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                          ".map(o => o.dataset.mimeType + ': ' + o.innerText.slice(0, 2000)).join('\\n---\\n')"))
        raise


def _boxes(page):
    return page.evaluate(f"() => document.querySelector('{ROOT_SEL}').jaxviz.boxes()")


def _click_box(page, op):
    b = next(b for b in _boxes(page) if b["op"] == op and b["onScreen"])
    page.mouse.click(b["cx"], b["cy"])
    page.wait_for_function(f"k => document.querySelector('{ROOT_SEL}').dataset.selected === k", arg=b["key"])
    return b


def test_widget_in_jupyterlab(jupyterlab, browser_context):
    _notebook(jupyterlab.root / "graph.ipynb")
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    jupyterlab.open_notebook(page, "graph.ipynb")
    _run_cell(page, 0)
    _run_cell(page, 1)
    # the live widget (not the HTML fallback) draws the graph
    _wait(page, ".jp-OutputArea-output .jv-root[data-painted='1']", "widget")
    # one view: the self-contained HTML one, linked to the live widget model
    assert page.locator(".jp-OutputArea-output[data-mime-type='text/html'] .jaxviz-output .jv-root").count() == 1
    root = page.locator(ROOT_SEL).first
    ops = [b["op"] for b in _boxes(page)]
    assert int(root.get_attribute("data-visible")) == len(ops)
    assert {"dot_general", "tanh", "mul", "reduce_sum"} <= set(ops)
    page.screenshot(path=str(ARTIFACTS / "lab-widget.png"))
    # read at first sight (issue 12): text >= 11 px on screen, a legend, the output named
    # after the return structure, the view exports as SVG
    J = f"document.querySelector('{ROOT_SEL}').jaxviz"
    assert min(t["px"] for t in page.evaluate(f"() => {J}.textPx()")) >= 11
    assert any("weak type" in m for m in page.evaluate(f"() => {J}.legend()")["marks"])
    assert any(b["label"] == "out result" for b in _boxes(page))
    assert ">tanh<" in page.evaluate(f"() => {J}.exportSvg()")
    root.locator(".jv-color").select_option("flops")
    page.wait_for_function(f"() => {J}.legend().mode === 'flops'")
    assert page.evaluate(f"() => {J}.legend()")["ticks"][-1].endswith("FLOP")
    root.locator(".jv-color").select_option("none")

    # click tanh: the inspector shows the line it came from, with the cell's code
    _click_box(page, "tanh")
    assert re.search(rf":{TANH_LINE}( in mlp)?$", root.locator(".jv-insp .jv-loc").text_content())
    assert "jnp.tanh(x @ w)" in root.locator(".jv-insp .jv-src-hit").text_content()
    # ...and Python sees the selection
    _run_cell(page, 2)
    page.locator(".jp-OutputArea-output").filter(has_text="SELECTED tanh").wait_for(timeout=20_000)

    # search finds by primitive
    root.locator(".jv-search").fill("dot_general")
    root.locator(".jv-search").press("Enter")
    page.wait_for_function(f"() => document.querySelector('{ROOT_SEL}').dataset.matches === '1'")

    # the diagnostics panel: clicking the entry selects the tanh node
    _click_box(page, "dot_general")
    root.locator(".jv-diag").click()
    page.wait_for_function(f"() => document.querySelector('{ROOT_SEL} .jv-insp .jv-title')?.textContent === 'tanh'")
    assert "tanh <b>saturates</b>" in root.locator(".jv-diags").text_content()

    # the theme follows JupyterLab's
    assert root.get_attribute("data-theme") == "light"
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).hover()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Dark$")).click()
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=20_000)
    page.wait_for_function(f"() => document.querySelector('{ROOT_SEL}').dataset.theme === 'dark'", timeout=20_000)
    jp_bg = page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--jp-layout-color0').trim()")
    assert root.get_attribute("data-bg") == jp_bg
    page.screenshot(path=str(ARTIFACTS / "lab-widget-dark.png"))

    # save, stop the kernel, reopen with kernels refused: the text/html fallback renders
    page.keyboard.press("Control+s")
    wait_until(lambda: "jaxviz-output" in (jupyterlab.root / "graph.ipynb").read_text(), 20, "the save")
    page.wait_for_timeout(300)  # let the save request finish writing before the kernel stops
    page.close()
    jupyterlab.shutdown_kernels()
    page = browser_context.new_page()
    refuse = lambda route: route.abort() if route.request.method == "POST" else route.continue_()
    page.route("**/api/sessions**", refuse)
    page.route("**/api/kernels**", refuse)
    page.goto(jupyterlab.notebook_url("graph.ipynb"))
    _wait(page, ".jp-OutputArea-output .jv-root[data-painted='1']", "reload")
    assert jupyterlab.api("kernels") == []
    page.screenshot(path=str(ARTIFACTS / "lab-reloaded-no-kernel.png"))
    root = page.locator(".jp-OutputArea-output .jv-root").first
    assert page.locator(".jp-OutputArea-output[data-mime-type='text/html'] .jaxviz-output .jv-root").count() == 1
    assert int(root.get_attribute("data-visible")) == len(ops)
    page.close()
    assert errors == []


QUICKSTART = pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"


@pytest.mark.skipif(not QUICKSTART.exists(), reason="notebooks/quickstart.ipynb is not written yet")
def test_quickstart_notebook_draws_graphs(jupyterlab, browser_context):
    shutil.copy(QUICKSTART, jupyterlab.root / "quickstart.ipynb")
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    jupyterlab.open_notebook(page, "quickstart.ipynb")
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    # the first graph (the MLP step) is enough; later cells may still be running. Its cell
    # redraws the output in place once its memory runs end: wait for the cell to finish.
    step_cell = page.locator(".jp-Notebook .jp-CodeCell").filter(has_text="%%jaxtrace -o step_trace")
    step_cell.locator(".jp-InputPrompt").filter(has_text=re.compile(r"\[\d+\]")).wait_for(timeout=120_000)
    _wait(page, ".jp-OutputArea-output .jv-root[data-painted='1']", "quickstart", timeout=120_000)
    root = page.locator(".jp-OutputArea-output .jv-root").first
    root.scroll_into_view_if_needed()
    boxes = page.evaluate("() => document.querySelector('.jp-OutputArea-output .jv-root').jaxviz.boxes()")
    assert int(root.get_attribute("data-visible")) == len(boxes) > 0
    page.screenshot(path=str(ARTIFACTS / "lab-quickstart.png"))
    # the first view leaves a library's custom_jvp rules (relu's) shut
    frames = page.evaluate("() => document.querySelector('.jp-OutputArea-output .jv-root').jaxviz.frameBoxes()")
    assert not any(f["label"].startswith(("custom_jvp_call", "jit(relu)")) for f in frames), frames
    # clicking an equation (opening groups until one shows) shows its source line
    for _ in range(6):
        eqns = [b for b in page.evaluate(
            "() => document.querySelector('.jp-OutputArea-output .jv-root').jaxviz.boxes()")
            if b["nodeKind"] == "eqn" and b["kind"] == "node" and b["onScreen"]]
        if eqns:
            break
        page.evaluate("() => document.querySelector('.jp-OutputArea-output .jv-root').jaxviz.expandAll()")
    b = eqns[0]
    page.mouse.click(b["cx"], b["cy"])
    page.wait_for_function("k => document.querySelector('.jp-OutputArea-output .jv-root').dataset.selected === k",
                           arg=b["key"])
    assert re.search(r":\d+", root.locator(".jv-insp .jv-loc").text_content())
    page.close()
    # later cells may still be running: stop them, or they starve the next tests' kernels
    jupyterlab.shutdown_kernels()
    assert errors == []

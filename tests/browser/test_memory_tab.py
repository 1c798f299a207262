"""%%jaxtrace's memory in a real JupyterLab.

Default cell: its memory chart is displayed when the cell starts and grows while the user's own
loop runs (samples and call marks arrive before the cell ends); when the cell ends the output
becomes the chart's self-contained copy (saved with the notebook), clicking a moment lists
the arrays alive then, and it stays readable in JupyterLab's dark theme.
--compare: each synthetic run's chart is its own output; the graph view's memory tab shows the
run's summary, also after save + reload without a kernel.
"""
from __future__ import annotations

import json
import re
import time

from tests.browser.conftest import ARTIFACTS, run_cell, start_cell, wait_until, write_notebook
from tools import memory_models
from tests.test_widget_payload import decode_fragment

SETUP = '''%load_ext jaxviz
import time
import jax, jax.numpy as jnp

@jax.jit
def step(x):
    return x * 0.5 + 1.0

x = jnp.zeros((1024, 1024))'''
# a sawtooth whose every moment after the first call holds an array `step` made (the last one
# kept at each drop): a click anywhere on it lists one (keep.clear() left an eighth of the
# timeline with none, and the click test failed there one run in eight)
LOOP = '''%%jaxtrace
keep = []
for i in range(60):
    keep.append(step(x))
    if len(keep) == 8:
        del keep[:-1]
    time.sleep(0.08)
print("LOOP DONE")'''
COMPARE = '''%%jaxtrace --steps 300 --compare
y = step(x)'''

NB = ".jp-NotebookPanel:not(.lm-mod-hidden)"
ROOT = f"{NB} .jp-OutputArea-output .jv-root"


def _notebook(path, cells):
    write_notebook(path, cells)


def _contrast(page, selector: str) -> float:
    """WCAG contrast of an element's text colour on the colour behind it (alpha blended)."""
    return page.evaluate("""(sel) => {
      const el = document.querySelector(sel);
      const parse = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
      let bg = [255, 255, 255, 0];
      for (let e = el; e; e = e.parentElement) {
        const c = parse(getComputedStyle(e).backgroundColor);
        if (c.length >= 3 && (c.length < 4 || c[3] > 0)) { bg = c; break; }
      }
      const fg = parse(getComputedStyle(el).color);
      const a = fg.length > 3 ? fg[3] : 1;
      const mix = [0, 1, 2].map((i) => fg[i] * a + bg[i] * (1 - a));
      const lum = (c) => { const v = c.map((x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; });
        return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
      const [l1, l2] = [lum(mix), lum(bg)].sort((p, q) => q - p);
      return (l1 + 0.05) / (l2 + 0.05);
    }""", selector)


def _theme(page, name: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).hover()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{name}$")).click()
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=20_000)
    light = "true" if "Light" in name else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=20_000)


def test_cell_memory_grows_while_the_cell_runs(jupyterlab, browser_context):
    path = jupyterlab.root / "cellmem.ipynb"
    _notebook(path, [SETUP, LOOP])
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    try:
        jupyterlab.open_notebook(page, "cellmem.ipynb")
        cells = page.locator(f"{NB} .jp-CodeCell")
        run_cell(page, cells.nth(0))
        cell = cells.nth(1)
        start_cell(page, cells.nth(1))
        chart = cell.locator(".jvm")
        chart.wait_for(timeout=30_000)
        # read while the prompt still says [*]: samples and call marks arrive during the cell
        seen = []
        end = time.monotonic() + 60
        while time.monotonic() < end:
            prompt = cell.locator(".jp-InputPrompt").text_content() or ""
            if "*" not in prompt:
                break
            if chart.count():
                seen.append((int(chart.first.get_attribute("data-samples") or 0),
                             int(chart.first.get_attribute("data-marks") or 0)))
            page.wait_for_timeout(100)
        page.screenshot(path=str(ARTIFACTS / "lab-cell-memory-live.png"))
        samples = sorted({s for s, _m in seen if s > 0})
        marks = sorted({m for _s, m in seen if m > 0})
        assert len(samples) >= 3, f"the chart did not grow during the cell: {seen[-10:]}"
        assert len(marks) >= 3, f"no call marks arrived during the cell: {seen[-10:]}"
        assert "LOOP DONE" in cell.locator(".jp-OutputArea").text_content()

        # the cell ended: its chart output is now the self-contained copy, whole
        done = cell.locator(".jaxviz-memory .jvm[data-phase^='done']")
        done.wait_for(timeout=30_000)
        assert done.get_attribute("data-phase").startswith("done: 60 jitted calls")
        assert int(done.get_attribute("data-marks")) == 60
        assert int(done.get_attribute("data-samples")) >= samples[-1]
        assert cell.locator(".jp-OutputArea-output[data-mime-type*='widget-view']").count() == 0
        assert cell.locator(".jv-root").count() == 1                     # and the graph view

        # hover a call mark: its name and cell line
        canvas = done.locator("canvas")
        box = canvas.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 6)
        tip = done.locator(".jvm-tip")
        page.mouse.move(box["x"] + box["width"] * 0.5 + 1, box["y"] + 6)
        wait_until(lambda: tip.is_visible(), 5, "the hover tip")
        # click a moment: the arrays alive then, with the call and line that made them
        canvas.click(position={"x": box["width"] * 0.6, "y": 60})
        table = done.locator(".jvm-alive table")
        table.wait_for(timeout=5_000)
        rows = table.locator("tr").all_text_contents()[1:]
        # (grouped by the call that made them, issue 57: "made by step (line 4)", N x 4 MiB)
        assert any("float32[1024,1024]" in r and "MiB" in r and "step (line 4" in r for r in rows), rows
        page.screenshot(path=str(ARTIFACTS / "lab-cell-memory-click.png"))

        # dark theme: the chart's text keeps its contrast (it was #444 on #111)
        _theme(page, "JupyterLab Dark")
        sel = f"{NB} .jaxviz-memory .jvm"
        assert _contrast(page, sel) >= 7, "chart text on the dark theme"
        assert _contrast(page, f"{sel} .jvm-hint") >= 4.5, "muted text on the dark theme"
        page.screenshot(path=str(ARTIFACTS / "lab-cell-memory-dark.png"))
        _theme(page, "JupyterLab Light")
        assert _contrast(page, sel) >= 7

        # saved: the notebook keeps the finished chart as self-contained HTML
        page.keyboard.press("Control+s")
        wait_until(lambda: "jaxviz-memory" in path.read_text(), 20, "the save")
        outs = json.loads(path.read_text())["cells"][1]["outputs"]
        assert not [o for o in outs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        page.wait_for_timeout(300)
    finally:
        page.close()
        jupyterlab.shutdown_kernels()
    assert errors == []


def _saved_memory(path):
    """The memory entries of the graph output saved in the notebook file (None: not yet)."""
    nb = json.loads(path.read_text())
    for out in nb["cells"][1].get("outputs", []):
        html = "".join(out.get("data", {}).get("text/html", []))
        if "jaxviz-output" in html:
            return decode_fragment(html).get("memory")
    return None


def test_compare_runs_chart_then_offline_summary(jupyterlab, browser_context):
    path = jupyterlab.root / "memtab.ipynb"
    _notebook(path, [SETUP, COMPARE])
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    try:
        jupyterlab.open_notebook(page, "memtab.ipynb")
        cells = page.locator(f"{NB} .jp-CodeCell")
        run_cell(page, cells.nth(0))
        cell = cells.nth(1)
        start_cell(page, cells.nth(1))
        # the cell's own chart comes first; the run's chart is its own output after the graph
        # view; both runs on one axis, with a legend
        ran = f"{NB} .jaxviz-memory .jvm[data-phase*='donation ratio']"
        page.wait_for_selector(ran, timeout=60_000)
        done = page.locator(ran).last
        assert cell.locator(".jaxviz-memory").count() == 2
        legend = done.locator(".jvm-legend").text_content()
        assert "with donation" in legend and "without donation" in legend
        assert done.locator("canvas").count() == 1
        done.screenshot(path=str(ARTIFACTS / "lab-compare-chart.png"))
        # the graph view's memory tab: the run's summary
        page.wait_for_selector(f"{ROOT}[data-memory='1'][data-painted='1']", timeout=60_000)
        page.locator(f"{ROOT} .jv-tab-memory").click()
        page.wait_for_selector(f"{ROOT} .jv-mem-entry[data-summary='1']", timeout=30_000)
        assert "donation ratio" in page.locator(f"{ROOT} .jv-mem-ratio").first.text_content()
        page.keyboard.press("Control+s")
        wait_until(lambda: (_saved_memory(path) or [{}])[0].get("summary"), 20, "the save with the summary")
        page.wait_for_timeout(300)
    finally:
        page.close()
        jupyterlab.shutdown_kernels()

    # reopen with kernels refused: the memory tab shows the static summary from the payload
    page = browser_context.new_page()
    page.on("pageerror", lambda e: "@jupyter-widgets/jupyterlab-manager" in str(e.stack)
            or errors.append(f"{e}\n{e.stack}"))
    refuse = lambda route: route.abort() if route.request.method == "POST" else route.continue_()
    page.route("**/api/sessions**", refuse)
    page.route("**/api/kernels**", refuse)
    try:
        page.goto(jupyterlab.notebook_url("memtab.ipynb"))
        page.wait_for_selector(f"{ROOT}[data-painted='1']", timeout=60_000)
        page.locator(f"{ROOT} .jv-tab-memory").dispatch_event("click")
        entry = page.locator(f"{ROOT} .jv-mem-entry[data-summary='1']").first
        entry.wait_for(timeout=10_000)
        assert re.search(r"donation ratio \d+\.\d\dx", entry.locator(".jv-mem-ratio").text_content())
        rows = [r.get_attribute("data-run") for r in entry.locator(".jv-mem-table tbody tr").all()]
        assert rows == ["with donation", "without donation"]
        assert re.search(r"ms \(.*ms–.*ms.*steps\)", entry.locator(".jv-mem-table tbody tr").first.text_content())
        # the run's saved chart draws without a kernel too
        saved = page.locator(f"{NB} .jaxviz-memory .jvm[data-phase*='donation ratio']").first
        saved.wait_for(timeout=10_000)
        assert int(saved.get_attribute("data-samples")) > 0
        page.screenshot(path=str(ARTIFACTS / "lab-memory-offline.png"))
    finally:
        page.close()
    assert errors == []


DONATED_SETUP = "%load_ext jaxviz\nimport time\n" + memory_models.DONATED_SETUP + 'print("HELD", held)'
DONATED_LOOP = '''%%jaxtrace
t0 = time.time()
while time.time() - t0 < 3:
    params, opt_state, l = step(params, opt_state, x)
jax.block_until_ready(params)
print("LOOP DONE")'''


def test_a_donated_loops_lane_and_click_hold_its_params(jupyterlab, browser_context):
    # issue 44, item 8, as a new user found it: during a donated training loop the "cpu:0 live
    # JAX arrays" lane fell from 8 MiB to a few KiB for most of the loop, and a click there
    # listed scalars instead of params and opt_state
    _notebook(jupyterlab.root / "donated.ipynb", [DONATED_SETUP, DONATED_LOOP])
    page = browser_context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    try:
        jupyterlab.open_notebook(page, "donated.ipynb")
        cells = page.locator(f"{NB} .jp-CodeCell")
        start_cell(page, cells.nth(0))
        cells.nth(0).locator(".jp-OutputArea").filter(has_text="HELD").wait_for(timeout=120_000)
        held = int(re.search(r"HELD (\d+)", cells.nth(0).locator(".jp-OutputArea").text_content()).group(1))
        cell = cells.nth(1)
        start_cell(page, cells.nth(1))
        done = cell.locator(".jaxviz-memory .jvm[data-phase^='done']")
        done.wait_for(timeout=120_000)
        canvas = done.locator("canvas")
        box = canvas.bounding_box()
        for frac in (0.3, 0.5, 0.7):  # moments inside the loop
            canvas.click(position={"x": box["width"] * frac, "y": 60})
            head = done.locator(".jvm-alive .jvm-alive-head")
            head.wait_for(timeout=5_000)
            rows = done.locator(".jvm-alive table tr").all_text_contents()[1:]
            # params + opt (grouped by the global holding them: "float32[512,512] ×4")
            n = sum(int(m.group(1) or 1) for r in rows for m in re.finditer(r"float32\[512,512\](?: ×(\d+))?", r))
            assert n >= 8, (frac, rows)
            total = re.search(r"alive at [\d.]+ s, ([\d.]+) (KiB|MiB)", head.text_content())
            assert total, head.text_content()
            size = float(total.group(1)) * (1 << (20 if total.group(2) == "MiB" else 10))
            assert size >= 0.99 * held, (frac, head.text_content(), held)
        page.screenshot(path=str(ARTIFACTS / "lab-donated-loop-click.png"))
        assert errors == []
    finally:
        page.close()
        jupyterlab.shutdown_kernels()

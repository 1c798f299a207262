"""What a newcomer sees first (issue 46), in the saved HTML in real Chromium at 1400x900: Fit
and `f` show the whole graph and the minimap marks what is on screen; the compare view opens
on its first difference with the inspectors closed; search goes to match 1 as you type and
Enter steps on from there, the equation that defines a variable first. Each test takes its
screenshot (test-artifacts/first-look-*.png) before asserting."""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp

import jaxviz
from jaxviz.view.html import render_html

from .test_graph_reading import CELL as TRAIN_CELL

PAINTED = ".jv-root[data-painted='1']"
J = "document.querySelector('.jv-root').jaxviz"


def _open(page, path):
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(path.as_uri())
    page.wait_for_selector(PAINTED, timeout=15_000)


def _html(tmp_path, cell_src: str, name: str, pick=None):
    ct = jaxviz.trace_cell(cell_src)
    traces = [t for t in ct.traces if pick is None or t.name == pick]
    path = tmp_path / f"{name}.html"
    path.write_text(render_html(traces, (), title=name, sources={ct.filename: ct.source}))
    return path


def test_fit_shows_the_whole_graph_and_the_minimap_marks_the_screen(page, tmp_path, artifacts):
    _open(page, _html(tmp_path, TRAIN_CELL, "fit", pick="train_step"))
    page.focus(".jv-stage")
    page.keyboard.press("f")              # from the first view: the whole graph
    page.wait_for_timeout(300)
    page.screenshot(path=str(artifacts / "first-look-4-fit.png"))
    assert all(b["onScreen"] for b in page.evaluate(f"() => {J}.boxes()"))
    page.click(".jv-expand-all")          # (kept readable: the top of the graph and a minimap)
    page.wait_for_selector(".jv-root[data-minimap='1']")
    mm = page.evaluate(f"() => {J}.minimap()")
    # the minimap's mark is what the canvas shows, inside the map
    r = mm["rect"]
    assert r["w"] >= 8 and r["h"] >= 8 and r["x"] >= 0 and r["y"] >= 0
    assert r["x"] + r["w"] <= mm["w"] + 0.5 and r["y"] + r["h"] <= mm["h"] + 0.5
    assert r["w"] < mm["w"] - 4, "the mark covers the whole map while the canvas shows a part"
    size, cam = page.evaluate(f"() => {J}.size()"), page.evaluate(f"() => {J}.camera()")
    # centred where the canvas's middle is on the graph
    mid = (cam["cw"] / 2 - cam["tx"]) / cam["z"] * mm["w"] / size["w"]
    assert abs(r["x"] + r["w"] / 2 - mid) < 3 or r["x"] == 0 or r["x"] + r["w"] >= mm["w"] - 0.5
    page.focus(".jv-stage")
    page.keyboard.press("f")
    page.wait_for_selector(".jv-root[data-minimap='0']")
    page.screenshot(path=str(artifacts / "first-look-4-fit-expanded.png"))
    bs = page.evaluate(f"() => {J}.boxes()")
    assert bs and all(b["onScreen"] for b in bs)
    assert page.evaluate(f"() => {J}.camera().z") < 1
    # the Fit button does the same after a zoom in
    page.focus(".jv-stage")
    for _ in range(4):
        page.keyboard.press("+")
    page.wait_for_selector(".jv-root[data-minimap='1']")
    page.click(".jv-fit")
    page.wait_for_selector(".jv-root[data-minimap='0']")
    assert all(b["onScreen"] for b in page.evaluate(f"() => {J}.boxes()"))
    assert page.errors == []


def _layer(p, x):
    return jax.nn.relu(x @ p["w"] + p["b"])


def _mlp(params, x):
    for p in params:
        x = _layer(p, x)
    return x


def _params(*widths):
    return [{"w": jnp.ones((a, b)), "b": jnp.ones(b)} for a, b in zip(widths[:-1], widths[1:])]


def test_compare_opens_on_the_first_difference_with_inspectors_closed(page, tmp_path, artifacts):
    x = jnp.ones((8, 4))
    c = jaxviz.compare(jaxviz.trace(_mlp, _params(4, 16, 16, 16, 2), x),
                       jaxviz.trace(_mlp, _params(4, 16, 16, 32, 2), x))
    path = c.save_html(tmp_path / "compare.html")
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(path.as_uri())
    page.wait_for_selector(".jv-cmp[data-ready='1']", timeout=15_000)
    page.wait_for_function("() => document.querySelectorAll(\".jv-root[data-painted='1']\").length === 2")
    page.wait_for_timeout(300)
    page.screenshot(path=str(artifacts / "first-look-6-compare.png"))
    page.wait_for_selector(".jv-cmp[data-first='2']", timeout=5_000)
    cmp = "document.querySelector('.jv-cmp').jaxvizCompare"
    first = next(n for n in c.diff.nodes if n.a and n.b)
    for k, at in ((0, first.a), (1, first.b)):
        pane = f"{cmp}.panes()[{k}]"
        # nothing selected, the inspector closed: the graph has the pane's width
        assert page.evaluate(f"() => {pane}.dataset.selected || ''") == ""
        assert page.evaluate(f"() => getComputedStyle({pane}.querySelector('.jv-insp')).display") == "none"
        # the first difference is on screen, and coloured as changed
        bs = page.evaluate(f"() => {pane}.jaxviz.boxes()")
        (b,) = [b for b in bs if b["key"].endswith(f"n{at[1]}")]
        assert b["onScreen"], b
        status = {m["key"]: m["status"] for m in page.evaluate(f"k => {cmp}.marks(k)", k)}
        assert status[b["key"]] == "changed"
    # a click selects: that pane's inspector opens
    page.evaluate(f"() => {cmp}.select(0, {cmp}.marks(0).find(m => m.status === 'changed' && m.kind === 'node').key)")
    page.wait_for_function(f"() => getComputedStyle({cmp}.panes()[0].querySelector('.jv-insp')).display !== 'none'")
    assert not page.errors, page.errors


SEARCH_CELL = '''import jax, jax.numpy as jnp
def loss_fn(w, x, targets):
    logits = x @ w
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, targets[:, None], axis=1))
step = jax.jit(jax.value_and_grad(loss_fn))
l, g = step(jnp.ones((4, 10)), jnp.ones((8, 4)), jnp.zeros(8, jnp.int32))
'''


def _count(page) -> str:
    return page.text_content(".jv-count") or ""


def test_search_goes_to_match_one_as_you_type_then_steps_on(page, tmp_path, artifacts):
    _open(page, _html(tmp_path, SEARCH_CELL, "search", pick="loss_fn"))
    page.click(".jv-search")
    page.keyboard.type("logp", delay=30)
    page.wait_for_function("() => document.querySelector('.jv-count').textContent.startsWith('1 of ')")
    page.screenshot(path=str(artifacts / "first-look-8-search.png"))
    # the first match is the equation that defines logp: the call of log_softmax at line 4
    title = page.text_content(".jv-insp .jv-title")
    assert "jit" in title and "line 4" not in title
    assert page.text_content(".jv-insp .jv-src-hit").strip().endswith("logp = jax.nn.log_softmax(logits)")
    first = page.get_attribute(".jv-root", "data-selected")
    # Enter goes on to match 2, Shift+Enter back to 1: nothing skipped
    page.press(".jv-search", "Enter")
    page.wait_for_function("() => document.querySelector('.jv-count').textContent.startsWith('2 of ')")
    assert page.get_attribute(".jv-root", "data-selected") != first
    page.press(".jv-search", "Shift+Enter")
    page.wait_for_function("() => document.querySelector('.jv-count').textContent.startsWith('1 of ')")
    assert page.get_attribute(".jv-root", "data-selected") == first
    # typed and Enter at once (before the search ran): match 1, not 2. In one task of the
    # page, so that the search's 120 ms debounce cannot fire between them (page.fill, then
    # page.press, were 120 ms apart under CI's load once: Enter then rightly stepped to 2)
    page.evaluate("""() => { const q = document.querySelector('.jv-search');
      q.value = 'logits'; q.dispatchEvent(new Event('input', {bubbles: true}));
      q.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true})); }""")
    page.wait_for_function("() => document.querySelector('.jv-count').textContent.startsWith('1 of ')")
    page.wait_for_timeout(300)            # (the typing's own search, had it not been cancelled)
    assert _count(page).startswith("1 of "), _count(page)
    assert page.errors == []


MEMORY_CELL = '''import jax, jax.numpy as jnp
from functools import partial
def mlp(x, w):
    return jax.nn.relu(x @ w)
def block(x, w):
    return x + mlp(x, w)
def model(ws, x):
    for w in ws:
        x = block(x, w)
    return (x ** 2).mean()
@partial(jax.jit, donate_argnums=(0,))
def step(ws, opt, x):
    l, g = jax.value_and_grad(model)(ws, x)
    opt = [0.9 * o + q for o, q in zip(opt, g)]
    return [w - 0.1 * o for w, o in zip(ws, opt)], opt, l
ws = [jnp.ones((256, 256)) * 0.01 for _ in range(4)]
opt = [jnp.zeros((256, 256)) for _ in range(4)]
ws, opt, l = step(ws, opt, jnp.ones((512, 256)))
'''


def test_memory_tab_opens_with_three_lines_and_folds_a_loops_layers(page, tmp_path, artifacts):
    ct = jaxviz.trace_cell(MEMORY_CELL)
    path = jaxviz.save_html(ct, tmp_path / "memory.html")
    _open(page, path)
    page.click(".jv-tab-memory")
    page.wait_for_function("() => document.querySelector('.jv-root').dataset.tab === 'memory'")
    page.screenshot(path=str(artifacts / "first-look-11-memory-tab.png"))
    # the tab's first lines: the peak, what donation saves now, what donating more would save,
    # each saying where its number comes from
    first = page.locator(".jv-membox .jv-mem > *").first
    assert "jv-mem-head" in first.get_attribute("class")
    lines = first.locator(".jv-mem-line").all_text_contents()
    assert len(lines) == 3, lines
    assert lines[0].startswith("peak ") and "for one call of step" in lines[0] and "XLA's schedule" in lines[0]
    # (the names as code, issue 57: no literal backticks)
    assert lines[1].startswith("donating ws saves ") and " now" in lines[1]
    assert lines[2].startswith("donating opt too could save up to ") and "--compare measures it" in lines[2]
    assert first.locator(".jv-mem-line code.jv-code").all_text_contents()[:2] == ["ws", "opt"]
    # a loop's layers: one row for the line's buffers, with count, total and call paths
    fold = page.locator(".jv-buf-fold").filter(has_text="block[0..3] > mlp").first
    assert fold.get_attribute("data-n") == "4", fold.text_content()
    assert re.search(r"4 × [\d.]+ KiB = [\d.]+ (KiB|MiB)", fold.text_content())
    fold.locator(".jv-buf-toggle").click()
    members = page.locator(".jv-buf-row.jv-buf-member:visible")
    paths = [m.get_attribute("data-path") for m in members.all()]
    assert [p for p in paths if p.endswith("> mlp")][:4] == [f"model > block[{k}] > mlp" for k in range(4)], paths
    page.screenshot(path=str(artifacts / "first-look-12-rows.png"))
    # the compiled timeline's axes: bytes, schedule steps, the peak labelled at its step
    tl = page.locator(".jv-buf-tl").first
    assert tl.locator(".jv-buf-y span").all_text_contents()[-1] == "0 B"
    xs = tl.locator(".jv-buf-x span").all_text_contents()
    assert xs[0] == "step 1" and xs[1] == "schedule step →" and re.fullmatch(r"step \d+", xs[2])
    assert re.fullmatch(r"peak [\d.]+ (KiB|MiB) at step \d+", tl.locator(".jv-buf-peak").text_content())
    assert "by category: " in page.text_content(".jv-buf-totals")
    # the third layer's row selects the third layer's node
    page.locator(".jv-buf-row.jv-buf-member[data-path='model > block[2] > mlp']").first.click()
    page.wait_for_function("() => document.querySelector('.jv-root').dataset.tab === 'graph'")
    page.wait_for_function("() => /block\\[2\\] > mlp/.test(document.querySelector('.jv-insp').textContent)")
    assert page.errors == []

"""The memory tab's compiled-memory section (js/src/graph/buffers.js) on a saved HTML report,
in real Chromium: the buffers at a real compiled program's peak are listed, largest first, and
clicking one selects its graph node."""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import pytest

import jaxviz

pytestmark = pytest.mark.browser
PAINTED = ".jv-root[data-painted='1']"


def _step():
    def loss(w, x):
        h = jnp.tanh(x @ w)
        return (h ** 2).mean()

    @jax.jit
    def step(w, x):
        return w - 0.1 * jax.grad(loss)(w, x)

    return jaxviz.trace(step, jnp.ones((256, 256)) * 0.01, jnp.ones((128, 256)))


def test_clicking_a_buffer_selects_its_node(page, tmp_path, artifacts):
    t = _step()
    report = t.memory()
    path = jaxviz.save_html(t, tmp_path / "mem.html", memory_reports=[report])
    page.goto(path.as_uri())
    page.wait_for_selector(PAINTED, timeout=15_000)
    root = page.locator(".jv-root").first
    page.click(".jv-tab-memory")
    page.wait_for_function("() => document.querySelector('.jv-root').dataset.tab === 'memory'")
    rows = page.locator(".jv-buf-row")
    assert rows.count() == len(report.buffers)
    # largest first, each with its category and line as the report has them
    shown = page.evaluate("() => [...document.querySelectorAll('.jv-buf-row')].map(r => "
                          "[r.dataset.buffer, r.dataset.category, r.cells[3].textContent])")
    assert shown == [[b.name, b.category, b.where or f"{b.name} (XLA kept no source)"]
                     for b in report.buffers]
    assert "one call, simulated over XLA's schedule" in page.text_content(".jv-buf-entry .jv-title")
    assert page.locator(".jv-buf-timeline polyline").count() == 1
    # code named in a line shows as code, not between literal backticks (issue 57, item 8)
    assert "donating x would not lower the peak" in page.text_content(".jv-buffers")
    assert "`" not in page.text_content(".jv-mem-head") + page.text_content(".jv-buffers")
    assert page.locator(".jv-buf-donation code.jv-code", has_text="x").count() >= 1
    assert page.locator(".jv-mem-head code.jv-code").count() >= 1
    # sizes stay on one line, right-aligned; text columns read from the left
    cells = page.evaluate("() => { const r = document.querySelector('.jv-buf-row'); return [...r.cells].map((c) => "
                          "[getComputedStyle(c).textAlign, getComputedStyle(c).whiteSpace, c.getClientRects().length && "
                          "Math.round(c.getBoundingClientRect().height)]); }")
    assert cells[0][:2] == ["right", "nowrap"] and all(c[0] in ("left", "start") for c in cells[1:]), cells
    page.screenshot(path=str(artifacts / "buffers-memory-tab.png"))

    # a temporary made by the user's line: the click goes to the graph and selects its node
    temp = next(b for b in report.buffers if b.category == "temporary" and b.node_ids)
    page.click(f".jv-buf-row[data-buffer='{temp.name}']")
    page.wait_for_function("() => document.querySelector('.jv-root').dataset.tab === 'graph'")
    ids = [int(i.split(":")[1]) for i in temp.node_ids]
    page.wait_for_function(
        "ids => ids.some(n => new RegExp('(^|/)n' + n + '$').test("
        "document.querySelector('.jv-root').dataset.selected))", arg=ids)
    sel = int(re.search(r"n(\d+)$", root.get_attribute("data-selected")).group(1))
    node = t.graph.bodies[int(temp.node_ids[0].split(":")[0])].nodes[sel]
    assert (node.loc.line, node.op) == (temp.line, temp.op)
    assert page.text_content(".jv-insp .jv-title") == node.op

    # an argument's row selects its input node
    page.click(".jv-tab-memory")
    arg = next(b for b in report.buffers if b.category == "argument" and b.where == "w")
    page.click(f".jv-buf-row[data-buffer='{arg.name}']")
    n_in = int(arg.node_ids[0].split(":")[1])
    page.wait_for_function("n => new RegExp('(^|/)n' + n + '$').test("
                           "document.querySelector('.jv-root').dataset.selected)", arg=n_in)
    assert page.errors == []


TWO_SIGNATURES = '''import jax, jax.numpy as jnp

@jax.jit
def step(w, x):
    return w - 0.1 * (x.T @ jnp.tanh(x @ w))

a = step(jnp.ones((64, 64)), jnp.ones((32, 64)))
b = step(jnp.ones((128, 128)), jnp.ones((16, 128)))
'''


def test_a_second_signature_row_selects_in_its_own_trace(page, tmp_path):
    ct = jaxviz.trace_cell(TWO_SIGNATURES)
    assert [r.name for r in ct.compiled] == ["step", "step"]   # the cell's own, by default
    path = jaxviz.save_html(ct, tmp_path / "two.html")
    page.goto(path.as_uri())
    page.wait_for_selector(PAINTED, timeout=15_000)
    page.click(".jv-tab-memory")
    entries = page.locator(".jv-buf-entry")
    assert entries.count() == 2
    for k, want in ((1, "f32[128,128]"), (0, "f32[64,64]")):
        page.click(".jv-tab-memory")
        row = entries.nth(k).locator(".jv-buf-row[data-category='argument']").first
        assert row.locator("td").nth(1).text_content() == want
        row.click()
        page.wait_for_function("() => document.querySelector('.jv-root').dataset.tab === 'graph'")
        tabs = page.locator(".jv-tab:not(.jv-tab-memory)")
        chosen = [i for i in range(tabs.count()) if tabs.nth(i).get_attribute("aria-selected") == "true"]
        assert len(chosen) == 1 and ct.traces[chosen[0]].signature.startswith(want)
        assert page.text_content(".jv-insp").count(want) >= 1       # the inspector shows its input
    assert page.errors == []

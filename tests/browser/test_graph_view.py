"""The view's logic on a mock anywidget model (the lighter tier: the bundled ESM served
through page.route, no Jupyter): Python-side selection, payload swaps, write-back, cleanup."""
from __future__ import annotations

import json

import pytest

from jaxviz.view.assets import STATIC

ESM = STATIC / "graph.js"
from jaxviz.view.payload import build_payload
from tools.synth import FakeTrace, flat_graph, nested_graph

BASE = "http://jaxviz.test/"
PAGE = """<!DOCTYPE html><html><body><div id="host"></div>
<script type="module">
const payload = JSON.parse(document.getElementById("p").textContent);
class Model {
  constructor(state) { this.state = state; this.handlers = {}; this.saves = 0; }
  get(k) { return this.state[k]; }
  set(k, v) { this.state[k] = v; for (const f of this.handlers["change:" + k] || []) f(); }
  on(e, f) { (this.handlers[e] = this.handlers[e] || []).push(f); }
  off(e, f) { this.handlers[e] = (this.handlers[e] || []).filter((g) => g !== f); }
  send() {}
  save_changes() { this.saves++; }
  listeners() { return Object.values(this.handlers).reduce((a, l) => a + l.length, 0); }
}
const mod = await import("/graph.js");
window.model = new Model({ payload, selected: {}, live_token: "" });
window.cleanup = mod.default.render({ model: window.model, el: document.getElementById("host") });
</script><script type="application/json" id="p">%s</script></body></html>"""


@pytest.fixture
def view(page):
    if not ESM.is_file():
        pytest.fail(f"{ESM} is missing: run `cd js && npm run build`")
    payload = build_payload([FakeTrace(flat_graph(1000)), FakeTrace(nested_graph(12_000))])
    body = PAGE % json.dumps(payload).replace("<", "\\u003c")
    page.route(BASE, lambda r: r.fulfill(status=200, content_type="text/html", body=body))
    page.route(BASE + "graph.js", lambda r: r.fulfill(status=200, content_type="text/javascript",
                                                      body=ESM.read_text()))
    page.goto(BASE)
    page.wait_for_selector(".jv-root[data-painted='1']", timeout=15_000)
    return page


def js(page, expr, arg=None):
    return page.evaluate(expr, arg)


def test_python_side_selection_reveals_the_node(view):
    assert js(view, "() => document.querySelector('.jv-root').dataset.visible") == "7"
    js(view, "() => model.set('selected', {trace: 0, body: 0, node: 40})")
    view.wait_for_function("() => /n40$/.test(document.querySelector('.jv-root').dataset.selected)")
    assert int(js(view, "() => document.querySelector('.jv-root').dataset.visible")) > 7
    # selecting in another trace switches the tab
    js(view, "() => model.set('selected', {trace: 1, body: 3, node: 5})")
    view.wait_for_function("() => document.querySelector('.jv-tab[aria-selected=true]').textContent === 'train_step'")
    view.wait_for_function("() => /n5$/.test(document.querySelector('.jv-root').dataset.selected)")


def test_clicks_write_selection_back_and_hover_shows_a_tooltip(view):
    b = next(b for b in js(view, "() => document.querySelector('.jv-root').jaxviz.boxes()")
             if b["nodeKind"] == "in")
    view.mouse.move(b["cx"], b["cy"])
    view.wait_for_selector(".jv-tip:not([hidden])")
    assert view.text_content(".jv-tip").startswith("in x")
    view.mouse.click(b["cx"], b["cy"])
    view.wait_for_function("() => model.saves > 0")
    sel = js(view, "() => model.get('selected')")
    assert (sel["trace"], sel["body"]) == (0, 0)
    assert sel["node"] == int(b["key"].rsplit("n", 1)[1])


def test_payload_swap_rerenders_and_cleanup_removes_listeners(view):
    before = js(view, "() => model.listeners()")
    assert before >= 2
    new = build_payload([FakeTrace(flat_graph(300, grouped=False), name="other")])
    js(view, "p => model.set('payload', p)", new)
    view.wait_for_function("() => document.querySelector('.jv-status').textContent.endsWith('300 eqns')")
    assert js(view, "() => document.querySelectorAll('.jv-tab').length") == 0
    js(view, "() => window.cleanup()")
    assert js(view, "() => model.listeners()") == 0
    assert view.errors == []

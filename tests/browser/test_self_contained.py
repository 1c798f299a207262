"""Every output stands alone, as Colab and VS Code need (issue 12, item 9).

Colab renders each output in its own sandboxed iframe: here the memory chart's saved copy and
the graph view's HTML each go in an `<iframe sandbox="allow-scripts" srcdoc=...>` of their
own (no shared `window`, an opaque origin), and must draw and answer clicks. VS Code renders
widgets through the standard widget manager: here the chart's bundled ESM is driven through
anywidget's model interface only (initialize, then render, then custom messages arriving
while it shows), inside its own iframe, with no page-wide registry to lean on; and the graph
view, displayed as the GraphWidget itself where outputs are isolated, is mounted from the
Python widget's own synced state, a click reaching its `selected` trait through its comm.
"""
from __future__ import annotations

import html
import re
import json
import time

import jax
import jax.numpy as jnp
import pytest

import jaxviz
from jaxviz.capture.recorder import Recorder
from jaxviz.memory.timeline import CellWatch
from jaxviz.view.assets import STATIC
from jaxviz.view.chart import MemoryChart

from tests.browser.conftest import ARTIFACTS

BASE = "http://jaxviz.test/"


@pytest.fixture(scope="module")
def chart():
    """A chart fed by a real CellWatch over a small sawtooth loop."""
    step = jax.jit(lambda x: x * 0.5 + 1.0)
    chart = MemoryChart(title="cell [1]: memory while it runs")
    sent = []
    real_send = chart.send

    def send(content, buffers=None):          # the messages, as a widget manager gets them
        sent.append((content, list(buffers or [])))
        real_send(content, buffers)
    chart.send = send
    rec = Recorder(__file__)
    watch = CellWatch(rec, on_update=lambda s, m, b, g: chart.on_cell(s, m, b, g, 0))
    chart.start_cell(watch.lanes)
    donating = jax.jit(lambda x: x + 1.0, donate_argnums=0)
    with watch, rec:
        x = jnp.zeros((512, 1024))
        keep = []
        for _ in range(12):
            keep.append(step(x))
            watch.sampler.sample()             # each output seen at its call (no timing
            if len(keep) == 4:                 # luck: under load the sampler's thread had
                keep.clear()                   # not looked between calls 4 and 6, and the
            time.sleep(0.03)                   # click below listed none of them)
        d = jnp.ones((256, 1024))
        watch.sampler.sample()                 # seen alive (on demand: no timing luck)
        out = donating(d)                      # d is donated while still referenced
        watch.sampler.sample()                 # seen gone
        del keep, x, d, out
    mem = watch.stop()
    chart.finish_cell(mem)
    return chart, mem, sent


def _frame(page, name, timeout: float = 10.0):
    """The frame called `name`, once Playwright has attached it (bounded wait)."""
    end = time.monotonic() + timeout
    while (frame := page.frame(name=name)) is None:
        assert time.monotonic() < end, f"no frame {name} after {timeout:.0f} s"
        page.wait_for_timeout(50)
    return frame


def test_each_output_in_its_own_sandboxed_iframe(page, chart):
    chart, mem, _sent = chart
    ct = jaxviz.trace(jax.jit(lambda x: jnp.tanh(x) * 2), jnp.ones(8))
    with jaxviz.options.using(outputs="isolated"):     # the copy a Colab output keeps
        graph_html = ct._repr_mimebundle_()["text/html"]
    chart_html = chart.static_bundle(str(mem))["text/html"]
    body = (
        "<!DOCTYPE html><html><body>"
        f'<iframe name="chart" sandbox="allow-scripts" style="width:900px;height:420px" srcdoc="{html.escape(chart_html)}"></iframe>'
        f'<iframe name="graph" sandbox="allow-scripts" style="width:900px;height:500px" srcdoc="{html.escape(graph_html)}"></iframe>'
        "</body></html>"
    )
    page.route(BASE, lambda r: r.fulfill(status=200, content_type="text/html", body=body))
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(BASE)
    c = _frame(page, "chart")
    c.wait_for_selector(".jvm[data-frames]:not([data-frames='0'])", timeout=15_000)
    jvm = c.locator(".jvm")
    assert int(jvm.get_attribute("data-samples")) == len(mem.samples)
    assert int(jvm.get_attribute("data-marks")) == len(mem.calls) == 13
    assert jvm.get_attribute("data-phase").startswith("done: 13 jitted calls")
    labels = c.locator(".jvm-legend").text_content()
    assert "this cell" in labels and "a jitted call (13)" in labels
    # issue 54: a mark is the call's dispatch (dispatch runs ahead of the device), said so
    assert "marked when Python dispatched it: the device may run it later" in labels
    assert jvm.get_attribute("data-phase").startswith("done: 13 jitted calls marked at dispatch")
    assert "donated inputs released" in labels and jvm.get_attribute("data-donated") == "1"
    # click a moment in the middle of the run: the arrays alive then
    box = c.locator("canvas").bounding_box()
    t_mid = mem.calls[6].t + 0.01
    alive = mem.alive_at(t_mid)
    tmax = max(max(t for t, _l, _v in mem.samples), mem.calls[-1].t)
    x = 64 + t_mid / tmax * (box["width"] - 64 - 8)
    c.locator("canvas").click(position={"x": x, "y": 40})
    c.wait_for_selector(".jvm-alive table", timeout=5_000)
    head = c.locator(".jvm-alive-head").text_content()
    assert "arrays alive at" in head and len(alive) >= 1
    rows = c.locator(".jvm-alive tr").all_text_contents()[1:]
    # grouped by the call that made them (issue 57): 2 MiB each
    assert any(re.search(r"made by <lambda> \(line \d+\)float32\[512,1024\]( ×(\d+))?([\d.]+) MiB", r) for r in rows), rows
    page.screenshot(path=str(ARTIFACTS / "iframe-outputs.png"))
    # the graph view in its own frame
    g = _frame(page, "graph")
    g.wait_for_selector(".jv-root[data-painted='1']", timeout=15_000)
    g.evaluate("() => document.querySelector('.jv-root').jaxviz.expandAll()")
    _click_node(g, "tanh")                             # answers clicks with no model behind it
    assert errors == []
    # neither frame reached into the other, nor into the page
    assert page.evaluate("() => window.__jaxvizLive === undefined")


PAGE = """<!DOCTYPE html><html><body><div id="host"></div><script type="module">
// anywidget's model interface, as a widget manager (VS Code's, Jupyter's) hands it to the ESM
class Model {
  constructor(state) { this.state = state; this.handlers = {}; }
  get(k) { return this.state[k]; }
  set(k, v) { this.state[k] = v; for (const f of this.handlers["change:" + k] || []) f({ new: v }); }
  on(e, f) { (this.handlers[e] = this.handlers[e] || []).push(f); }
  off(e, f) { this.handlers[e] = (this.handlers[e] || []).filter((g) => g !== f); }
  send() {}
  save_changes() {}
  emit(msg, buffers) { for (const f of this.handlers["msg:custom"] || []) f(msg, buffers); }
}
const mod = await import("/memory.js");
const data = JSON.parse(document.getElementById("d").textContent);
const model = new Model(data.traits);
const done = mod.default.initialize({ model });
// the first messages arrive before any view exists (the chart is displayed, then streams)
const msgs = data.messages.map(([m, b]) => [m, b.map((x) => new DataView(Uint8Array.from(atob(x), (c) => c.charCodeAt(0)).buffer))]);
const half = msgs.length >> 1;
for (const [m, b] of msgs.slice(0, half)) model.emit(m, b);
window.cleanup = mod.default.render({ model, el: document.getElementById("host") });
window.rest = () => { for (const [m, b] of msgs.slice(half)) model.emit(m, b); model.set("phase", "done"); };
window.registry = typeof window.__jaxvizLive;
</script><script type="application/json" id="d">%s</script></body></html>"""


def test_widget_path_through_the_model_only(page, chart):
    import base64
    chart, mem, sent = chart
    esm = STATIC / "memory.js"
    if not esm.is_file():
        pytest.fail(f"{esm} is missing: run `cd js && npm run build`")
    data = {"traits": {"title": chart.title, "phase": "running", "lanes": chart.lanes,
                       "runs": chart.runs, "live_token": chart.live_token},
            "messages": [[m, [base64.b64encode(b).decode() for b in bufs]] for m, bufs in sent]}
    frame = '<!DOCTYPE html><html><body><iframe name="out" src="/out" style="width:900px;height:420px"></iframe></body></html>'
    page.route(BASE, lambda r: r.fulfill(status=200, content_type="text/html", body=frame))
    page.route(BASE + "out", lambda r: r.fulfill(status=200, content_type="text/html",
                                                 body=PAGE % json.dumps(data).replace("<", "\\u003c")))
    page.route(BASE + "memory.js", lambda r: r.fulfill(status=200, content_type="text/javascript",
                                                       body=esm.read_text()))
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(BASE)
    out = _frame(page, "out")
    out.wait_for_selector(".jvm[data-frames]:not([data-frames='0'])", timeout=15_000)
    first = int(out.locator(".jvm").get_attribute("data-samples"))
    assert first > 0, "messages received before the view was made were kept"
    out.evaluate("() => window.rest()")
    n = sum(m.get("n", 0) for m, _b in sent if m["kind"] == "samples")
    out.wait_for_function(f"() => Number(document.querySelector('.jvm').dataset.samples) === {n}", timeout=5_000)
    assert n > first
    # (marks are counted when the next frame draws)
    out.wait_for_function("() => document.querySelector('.jvm').dataset.marks === '13'", timeout=5_000)
    assert out.evaluate("() => window.registry") == "undefined"
    assert errors == []


# The graph view through the widget model path, as VS Code's (and Colab's) widget manager
# drives it: the GraphWidget's own synced state (ipywidgets' get_state, the `_esm` text
# included) opens an anywidget-shaped model in the output's own iframe; the ESM is loaded from
# a Blob URL as anywidget does; `save_changes` posts the changed traits, which reach the
# Python widget through its comm as the front-end's "update" message.
GRAPH_PAGE = """<!DOCTYPE html><html><body style="margin:0"><div id="host" style="height:560px"></div>
<script type="module">
class Model {
  constructor(state) { this.state = state; this.handlers = {}; this.dirty = new Set(); }
  get(k) { return this.state[k]; }
  set(k, v) { this.state[k] = v; this.dirty.add(k); for (const f of this.handlers["change:" + k] || []) f({ new: v }); }
  on(e, f) { (this.handlers[e] = this.handlers[e] || []).push(f); }
  off(e, f) { this.handlers[e] = (this.handlers[e] || []).filter((g) => g !== f); }
  send() {}
  save_changes() {
    const state = {};
    for (const k of this.dirty) state[k] = this.state[k];
    this.dirty.clear();
    fetch("/comm", { method: "POST", body: JSON.stringify({ method: "update", state, buffer_paths: [] }) });
  }
}
const state = JSON.parse(document.getElementById("d").textContent);
const url = URL.createObjectURL(new Blob([state._esm], { type: "text/javascript" }));
const mod = await import(url);
const model = new Model(state);
const done = mod.default.initialize ? mod.default.initialize({ model }) : null;
window.cleanup = mod.default.render({ model, el: document.getElementById("host") });
</script><script type="application/json" id="d">%s</script></body></html>"""


def _click_node(frame, op):
    """Clicks the first on-screen node of `op` in the view of `frame`; returns its box."""
    boxes = frame.evaluate("() => document.querySelector('.jv-root').jaxviz.boxes()")
    b = next(b for b in boxes if b["op"] == op and b["onScreen"])
    inner = frame.evaluate("() => { const r = document.querySelector('.jv-root canvas').getBoundingClientRect(); return [r.left, r.top]; }")
    frame.locator("canvas").first.click(position={"x": b["cx"] - inner[0], "y": b["cy"] - inner[1]})
    frame.wait_for_function("k => document.querySelector('.jv-root').dataset.selected === k", arg=b["key"], timeout=5_000)
    return b


def test_graph_widget_clicks_reach_python_through_its_comm(page):
    from jaxviz.view.html import mimebundle

    def mlp(w, x):
        return jnp.tanh(x @ w).sum()

    t = jaxviz.trace(jax.jit(mlp), jnp.ones((8, 4)), jnp.ones((2, 8)))
    w = t.widget
    with jaxviz.options.using(outputs="isolated"):      # as in Colab / VS Code
        data, _meta = mimebundle([t], t.diagnostics, str(t), widget=w)
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == w.model_id
    state = w.get_state()
    assert state["payload"]["traces"], "the payload travels through the widget's own state"
    assert "live_token" in state and w.selected == {}
    got = []

    def comm(route):                                    # the front-end's update, into the comm
        msg = json.loads(route.request.post_data)
        got.append(msg)
        w.comm.handle_msg({"content": {"comm_id": w.comm.comm_id, "data": msg}, "buffers": []})
        route.fulfill(status=200, body="")

    frame = '<!DOCTYPE html><html><body><iframe name="out" src="/out" style="width:1000px;height:600px"></iframe></body></html>'
    page.route(BASE, lambda r: r.fulfill(status=200, content_type="text/html", body=frame))
    page.route(BASE + "out", lambda r: r.fulfill(status=200, content_type="text/html",
                                                 body=GRAPH_PAGE % json.dumps(state).replace("<", "\\u003c")))
    page.route(BASE + "comm", comm)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(BASE)
    out = _frame(page, "out")
    out.wait_for_selector(".jv-root[data-painted='1']", timeout=15_000)
    out.evaluate("() => document.querySelector('.jv-root').jaxviz.expandAll()")
    b = _click_node(out, "dot_general")
    end = time.monotonic() + 5
    while not w.selected and time.monotonic() < end:    # the POST is answered on this thread
        page.wait_for_timeout(50)
    assert got and got[-1]["method"] == "update" and "selected" in got[-1]["state"]
    assert w.selected_node is not None and w.selected_node.op == "dot_general", (b, w.selected)
    eqn = w.selected_eqn
    assert eqn is not None and eqn.primitive.name == "dot_general"
    assert errors == []
    page.screenshot(path=str(ARTIFACTS / "widget-path-graph.png"))
    w.close()


def test_the_saved_chart_draws_when_the_device_computed_a_loop_that_ran_ahead(page):
    # issue 54: the marks are dispatches; the bar under them is when the device still
    # computed their outputs (the loop ran ahead of it), in the saved copy as live
    f = jax.jit(lambda a: jnp.tanh(a @ a))
    x = jnp.ones((1024, 1024)) / 1024
    f(x).block_until_ready()
    chart = MemoryChart(title="cell [2]: memory while it runs")
    rec = Recorder(__file__)
    watch = CellWatch(rec, on_update=lambda s, m, b, g: chart.on_cell(s, m, b, g, 0))
    watch.on_computing, watch.on_lanes = chart.on_computing, chart.set_lanes
    chart.start_cell(watch.lanes)
    with watch, rec:
        y = x
        for _ in range(20):
            y = f(y)
        end = time.monotonic() + 60
        while not y.is_ready() and time.monotonic() < end:
            time.sleep(0.01)
        time.sleep(0.2)
    mem = watch.stop()
    chart.finish_cell(mem)
    until = mem.computed_until()
    assert until is not None and until > mem.calls[-1].t, mem.computing
    body = "<!DOCTYPE html><html><body>" + chart.static_bundle(str(mem))["text/html"] + "</body></html>"
    page.route(BASE, lambda r: r.fulfill(status=200, content_type="text/html", body=body))
    page.goto(BASE)
    page.wait_for_selector(".jvm[data-frames]:not([data-frames='0'])", timeout=15_000)
    jvm = page.locator(".jvm")
    spans = json.loads(jvm.get_attribute("data-computing"))
    assert spans and spans[-1][1] == pytest.approx(until) and spans[0][0] <= mem.calls[-1].t + 0.1
    assert "the device still computing the calls' outputs" in page.locator(".jvm-legend").text_content()
    assert "the device computed their outputs until" in jvm.get_attribute("data-phase")
    jvm.screenshot(path=str(ARTIFACTS / "chart-computing.png"))
    del y

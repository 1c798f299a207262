"""Room for the graph (issue 57 items 10, 11), in the saved HTML in real Chromium: the
inspector takes room only while it shows a selection, so the quickstart's first graph is
whole at 1400x900; in a narrow view (a 1000 px window with JupyterLab's file browser open
leaves about 600 px) the inspector sits under the graph, and the minimap keeps to a corner."""
from __future__ import annotations

import pytest

PAINTED = ".jv-root[data-painted='1']"
J = "document.querySelector('.jv-root').jaxviz"

# the quickstart's training step (notebooks/quickstart.ipynb, its first %%jaxtrace cell)
QUICKSTART = '''
import functools
import jax, jax.numpy as jnp

def init(key, sizes=(16, 64, 64, 4)):
    keys = jax.random.split(key, len(sizes) - 1)
    return [dict(w=jax.random.normal(k, (m, n)) / jnp.sqrt(m), b=jnp.zeros(n))
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]

def mlp(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer['w'] + layer['b'])
    return x @ params[-1]['w'] + params[-1]['b']

def loss(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)

@functools.partial(jax.jit, donate_argnums=0)
def train_step(params, x, y):
    l, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads), l

params = init(jax.random.key(0))
x, y = jnp.ones((32, 16)), jnp.zeros((32, 4))
for _ in range(3):
    params, l = train_step(params, x, y)
'''


@pytest.fixture(scope="module")
def quickstart_html(tmp_path_factory):
    import jaxviz

    cell = jaxviz.trace_cell(QUICKSTART)
    path = tmp_path_factory.mktemp("room") / "quickstart.html"
    jaxviz.save_html(cell, path)
    return path


def rect(page, sel: str) -> dict:
    return page.evaluate("s => { const r = document.querySelector(s).getBoundingClientRect();"
                         " return {x: r.left, y: r.top, w: r.width, h: r.height}; }", sel)


def shown(page, sel: str) -> bool:
    return page.evaluate("s => getComputedStyle(document.querySelector(s)).display !== 'none'", sel)


def open_at(page, path, width: int, height: int = 900) -> list:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(path.as_uri())
    page.wait_for_selector(PAINTED, timeout=15_000)
    page.wait_for_timeout(200)      # the size observer's first answer
    return page.evaluate(f"() => {J}.boxes()")


def inside(b: dict, r: dict) -> bool:
    return (r["x"] - 1 <= b["cx"] - b["w"] / 2 and b["cx"] + b["w"] / 2 <= r["x"] + r["w"] + 1
            and r["y"] - 1 <= b["cy"] - b["h"] / 2 and b["cy"] + b["h"] / 2 <= r["y"] + r["h"] + 1)


def test_the_quickstarts_first_graph_is_whole_beside_no_empty_inspector(page, quickstart_html, artifacts):
    """The first view at 1400x900 shows every box of the train step at a readable zoom: the
    inspector, empty until a click, took 300 px and cut off the outputs on the right. A click
    opens it and keeps the clicked box in view; Escape closes it."""
    bs = open_at(page, quickstart_html, 1400)
    page.screenshot(path=str(artifacts / "room-first-view.png"))
    assert [b["label"] for b in bs if not b["onScreen"]] == []
    assert not shown(page, ".jv-insp")
    canvas = page.evaluate(f"() => {J}.canvasRect()")
    assert all(inside(b, canvas) for b in bs), [b["label"] for b in bs if not inside(b, canvas)]
    assert page.evaluate(f"() => {J}.camera().z") >= 1
    # a click on the rightmost output: the inspector opens, the box stays whole in the canvas
    right = max((b for b in bs if b["nodeKind"] == "out"), key=lambda b: b["cx"])
    z = page.evaluate(f"() => {J}.camera().z")
    page.mouse.click(right["cx"], right["cy"])
    page.wait_for_function("k => document.querySelector('.jv-root').dataset.selected === k", arg=right["key"])
    assert shown(page, ".jv-insp") and "out" in page.text_content(".jv-insp .jv-title")
    page.wait_for_timeout(200)
    canvas = page.evaluate(f"() => {J}.canvasRect()")
    insp = rect(page, ".jv-insp")
    assert canvas["x"] + canvas["w"] <= insp["x"] + 1     # beside the graph, not over it
    now = next(b for b in page.evaluate(f"() => {J}.boxes()") if b["key"] == right["key"])
    assert inside(now, canvas), (now, canvas)
    assert page.evaluate(f"() => {J}.camera().z") == z     # kept, not fitted again
    page.keyboard.press("Escape")
    page.wait_for_function("() => document.querySelector('.jv-root').dataset.selected === ''")
    assert not shown(page, ".jv-insp")
    assert page.errors == []


def test_a_narrow_view_puts_the_inspector_under_the_graph(page, quickstart_html, artifacts):
    """A 620 px window (the room a 1000 px one leaves beside JupyterLab's file browser): the
    stage had 294 px beside the inspector, and the 160 px minimap covered half of it. Now the
    graph takes the width, the inspector opens under it, and the minimap keeps to a corner."""
    bs = open_at(page, quickstart_html, 620)
    root = rect(page, ".jv-root")
    assert root["w"] < 760
    stage = rect(page, ".jv-stage")
    assert stage["w"] >= root["w"] - 4
    page.screenshot(path=str(artifacts / "room-narrow.png"))
    # the first view fits: params' arrays in one box each way (issue 57 item 10)
    assert all(x["onScreen"] for x in bs), [(x["label"], x["onScreen"]) for x in bs]
    assert {"in params", "out params"} <= {x["label"] for x in bs}
    page.click(".jv-root button:has-text('Expand all')")
    page.wait_for_function(f"() => {J}.minimap() !== null")   # now wider than the canvas
    mm = page.evaluate(f"() => {J}.minimap()")
    assert max(mm["w"], mm["h"]) <= 0.22 * min(stage["w"], stage["h"]) + 1, (mm, stage)
    bs = page.evaluate(f"() => {J}.boxes()")
    # a click: the inspector opens under the graph, as wide as the view
    b = next(b for b in bs if b["onScreen"] and b["kind"] == "node")
    page.mouse.click(b["cx"], b["cy"])
    page.wait_for_function("k => document.querySelector('.jv-root').dataset.selected === k", arg=b["key"])
    page.wait_for_timeout(200)
    page.screenshot(path=str(artifacts / "room-narrow-selected.png"))
    stage, insp = rect(page, ".jv-stage"), rect(page, ".jv-insp")
    assert shown(page, ".jv-insp") and insp["y"] >= stage["y"] + stage["h"] - 1, (insp, stage)
    assert stage["w"] >= root["w"] - 4 and insp["w"] >= root["w"] - 4
    assert stage["h"] >= 140
    canvas = page.evaluate(f"() => {J}.canvasRect()")
    now = next(x for x in page.evaluate(f"() => {J}.boxes()") if x["key"] == b["key"])
    assert inside(now, canvas), (now, canvas)
    # a tiny canvas has no minimap at all
    page.set_viewport_size({"width": 240, "height": 900})
    page.wait_for_function(f"() => {J}.camera().cw < 230")
    page.wait_for_timeout(200)
    page.evaluate(f"() => {J}.center({b['key']!r})")
    assert page.evaluate(f"() => {J}.minimap()") is None
    assert page.errors == []

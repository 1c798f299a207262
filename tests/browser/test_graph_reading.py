"""The graph view a person reads at first sight (issue 12), in the saved HTML in real Chromium
at 1400x900: a transformer train step's first paint shows forward, backward and the update at
>= 11 px text; search finds every kind of label; outputs have names; bundles say what they
carry; each colouring has a legend; an opened group stays in the canvas; no stale tooltip,
inspector or memory-tab tools; the view exports as SVG and PNG."""
from __future__ import annotations

import base64
import types
import urllib.parse

import pytest

PAINTED = ".jv-root[data-painted='1']"
J = "document.querySelector('.jv-root').jaxviz"

CELL = '''
import jax, jax.numpy as jnp
from tools.models import transformer, transformer_args

def forward(params, x):
    nll = transformer(params, x) * 2.0
    return nll

@jax.jit
def train_step(params, x):
    loss, grads = jax.value_and_grad(forward)(params, x)
    params = jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads)
    return loss, params

params, x = transformer_args(layers=4)
loss, params = train_step(params, x)
'''


@pytest.fixture(scope="module")
def train_step_html(tmp_path_factory):
    """The saved HTML of a cell that runs a 4-block transformer's train step (with a memory tab
    that says why nothing ran, for the memory-tab checks)."""
    import jaxviz
    from jaxviz.view.html import render_html

    cell = jaxviz.trace_cell(CELL)
    step = [t for t in cell.traces if t.name == "train_step"]
    note = types.SimpleNamespace(trace="train_step", chart=None, report=None, note="not run here")
    path = tmp_path_factory.mktemp("reading") / "train_step.html"
    sources = {cell.filename: cell.source}
    path.write_text(render_html(step, (), title="train step", sources=sources, memory=[note]))
    return path


def open_page(page, path):
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(path.as_uri())
    page.wait_for_selector(PAINTED, timeout=15_000)
    return page.evaluate(f"() => {J}.boxes()")


def box(bs, pred):
    got = [b for b in bs if pred(b)]
    assert got, [b["label"] for b in bs]
    return got[0]


def assert_story_on_first_paint(page, j: str = J) -> list:
    """The first paint of the train step, as a person sees it: inputs, forward, backward, the
    update and the outputs on screen, every text >= 11 px; `j` the view's hooks. Its boxes."""
    bs = page.evaluate(f"() => {j}.boxes()")
    frames = page.evaluate(f"() => {j}.frameBoxes()")
    shown = [b["label"] for b in bs if b["onScreen"]] + [f["label"] for f in frames if f["onScreen"]]
    # inputs, forward, backward, the update, outputs: all on screen
    assert any(s.startswith("forward") and "backward" not in s for s in shown), shown
    assert any("backward" in s for s in shown), shown
    assert any(s.startswith("<lambda> x") for s in shown), shown     # the update, per leaf
    assert box(bs, lambda b: b["kind"] == "io" and b["label"] == "params")["onScreen"]
    # the loss output is named after the caller's assignment, the new params after theirs
    assert box(bs, lambda b: b["nodeKind"] == "out")["label"] == "out loss"
    assert sum(1 for b in bs if b["kind"] == "io" and b["label"] == "params") == 2
    # every text the painter drew is >= 11 px on screen (font size x zoom)
    text = page.evaluate(f"() => {j}.textPx()")
    assert text and min(t["px"] for t in text) >= 11, text
    return bs


def test_first_paint_shows_the_whole_story_readable(page, train_step_html, artifacts):
    open_page(page, train_step_html)
    page.screenshot(path=str(artifacts / "reading-first-paint.png"))
    bs = assert_story_on_first_paint(page)
    # every box is inside the canvas: no minimap needed
    assert all(b["onScreen"] for b in bs)
    assert page.get_attribute(".jv-root", "data-minimap") == "0"
    assert page.errors == []


def test_search_finds_every_kind_of_label(page, train_step_html):
    open_page(page, train_step_html)

    def find(q):
        page.fill(".jv-search", q)
        page.press(".jv-search", "Enter")
        # Enter searches at once (the typing's debounce is cancelled)
        return int(page.get_attribute(".jv-root", "data-matches")), page.text_content(".jv-count")

    # a call's body label, a group's label, a function name, an input and an output name,
    # a variable named only in the source, a primitive, an aval
    for q in ["jit(tril)", "tril", "layernorm", "block", "forward", "params['blocks'][0]['wq']", "loss",
              "nll", "softmax", "dot_general", "f32[16,64]"]:
        n, count = find(q)
        assert n >= 1, q
        assert " in " in count and " of " in count, (q, count)     # "1 of 3 matches in 2 groups"
    # a group is one match, not every equation inside it
    n, _ = find("forward")
    assert n <= 4, n
    # the exact label comes first: `jit(tril)` selects the call of that body
    find("jit(tril)")
    assert page.text_content(".jv-insp .jv-title") in ("jit", "pjit")   # the op: jax 0.12, 0.10
    # a group match opens what is around the group and selects it
    find("layernorm")
    sel = page.get_attribute(".jv-root", "data-selected")
    assert sel
    bs = page.evaluate(f"() => {J}.boxes()")
    frames = page.evaluate(f"() => {J}.frameBoxes()")
    hit = [b for b in bs if b["key"] == sel] + [f for f in frames if f["key"] == sel]
    assert hit and hit[0]["label"].startswith("layernorm") and hit[0]["onScreen"], hit
    assert page.errors == []


def test_bundles_legends_and_weak_types(page, train_step_html):
    open_page(page, train_step_html)
    edges = page.evaluate(f"() => {J}.edges()")
    bundles = [e["label"] for e in edges if e["label"] and "arrays" in e["label"]]
    assert bundles and all(" · " in b and ("B ·" in b or "B" in b.split(" · ")[1]) for b in bundles), bundles
    # the legend: the marks always; each colouring's scale with its units
    legend = page.evaluate(f"() => {J}.legend()")
    assert legend["mode"] == "none" and legend["title"] == ""
    assert any("weak type" in m for m in legend["marks"]) and any("diagnostic" in m for m in legend["marks"])
    for mode, unit in [("flops", "FLOP"), ("bytes", "B")]:
        page.select_option(".jv-color", mode)
        page.wait_for_function(f"m => {J}.legend().mode === m", arg=mode)
        legend = page.evaluate(f"() => {J}.legend()")
        assert "per box" in legend["title"], legend
        assert len(legend["ticks"]) == 3 and all(t.endswith(unit) for t in legend["ticks"]), legend
        assert page.is_visible(".jv-legend .jv-scale-bar")
    page.select_option(".jv-color", "none")
    page.wait_for_function(f"() => {J}.legend().mode === 'none'")
    assert not page.is_visible(".jv-legend .jv-scale-bar")
    assert page.errors == []


def test_opened_group_stays_in_the_canvas_and_nothing_goes_stale(page, train_step_html, artifacts):
    bs = open_page(page, train_step_html)
    canvas = page.evaluate(f"() => {J}.canvasRect()")
    back = box(bs, lambda b: b["label"] == "transformer backward")
    # hover: the shut group says how to open it
    page.mouse.move(back["cx"], back["cy"])
    page.wait_for_selector(".jv-tip:not([hidden])")
    assert "double-click to open" in page.text_content(".jv-tip")
    page.mouse.dblclick(back["cx"], back["cy"])
    page.wait_for_function(f"k => {J}.frames().includes(k)", arg=back["key"])
    page.screenshot(path=str(artifacts / "reading-group-opened.png"))
    rect = next(f for f in page.evaluate(f"() => {J}.frameRects()") if f["key"] == back["key"])
    # the opened group is inside the canvas (or, larger than it, its header is)
    assert rect["x"] >= canvas["x"] - 1 and rect["y"] >= canvas["y"] - 1, (rect, canvas)
    if rect["w"] <= canvas["w"]:
        assert rect["x"] + rect["w"] <= canvas["x"] + canvas["w"] + 1, (rect, canvas)
    assert page.evaluate(f"() => {J}.camera().z") >= 1
    # the tooltip no longer says "double-click to open"
    page.mouse.move(rect["x"] + 40, rect["y"] + 8)
    page.wait_for_selector(".jv-tip:not([hidden])")
    assert "double-click to open" not in page.text_content(".jv-tip")
    # select a node inside, collapse all: the inspector no longer shows the hidden node
    inside = lambda b: rect["x"] < b["cx"] < rect["x"] + rect["w"] and rect["y"] < b["cy"] < rect["y"] + rect["h"]  # noqa: E731
    inner = box(page.evaluate(f"() => {J}.boxes()"), lambda b: b["nodeKind"] == "eqn" and b["onScreen"] and inside(b))
    page.mouse.click(inner["cx"], inner["cy"])
    page.wait_for_function("k => document.querySelector('.jv-root').dataset.selected === k", arg=inner["key"])
    page.click(".jv-collapse-all")
    page.wait_for_function("() => document.querySelector('.jv-root').dataset.selected === ''")
    assert "Click a node" in page.text_content(".jv-insp")
    # the memory tab hides the graph's tools; back on the graph they return
    page.click(".jv-tab-memory")
    page.wait_for_selector(".jv-root[data-tab='memory']")
    for sel in [".jv-search", ".jv-fit", ".jv-expand-all", ".jv-color", ".jv-export-svg"]:
        assert not page.is_visible(sel), sel
    page.click(".jv-tab >> text=train_step")
    page.wait_for_selector(".jv-root[data-tab='graph']")
    assert page.is_visible(".jv-search") and page.is_visible(".jv-fit")
    assert page.errors == []


def _image_size(page, data_url: str) -> list:
    return page.evaluate("""async (u) => { const img = new Image(); img.src = u;
        await img.decode(); return [img.naturalWidth, img.naturalHeight]; }""", data_url)


def test_export_svg_and_png_of_the_whole_graph(page, train_step_html, tmp_path, artifacts):
    """SVG and PNG save the whole graph as opened now, not the part on screen (Shift + click
    saves the view on screen)."""
    open_page(page, train_step_html)
    page.click(".jv-expand-all")          # larger than the canvas now
    page.wait_for_selector(".jv-root[data-minimap='1']")
    bs = page.evaluate(f"() => {J}.boxes()")
    assert not all(b["onScreen"] for b in bs)
    with page.expect_download() as dl:
        page.click(".jv-export-svg")
    whole = tmp_path / "whole.svg"
    dl.value.save_as(whole)
    assert dl.value.suggested_filename == "train_step.svg"
    svg = whole.read_text()
    assert svg.count('class="box"') == len(bs)
    size = page.evaluate(f"() => {J}.size()")["bounds"]     # edge labels included
    got = _image_size(page, "data:image/svg+xml;charset=utf-8," + urllib.parse.quote(svg))
    assert abs(got[0] - (size["w"] + 32)) <= 1 and abs(got[1] - (size["h"] + 32)) <= 1, (got, size)
    png = page.evaluate(f"() => {J}.exportWholePng()")
    (artifacts / "first-look-9-export.png").write_bytes(base64.b64decode(png.split(",", 1)[1]))
    w, hgt = _image_size(page, png)
    assert max(w, hgt) == 8192 or (abs(w - size["w"] - 32) <= 1 and abs(hgt - size["h"] - 32) <= 1), (w, hgt, size)
    assert w / hgt == pytest.approx((size["w"] + 32) / (size["h"] + 32), rel=0.01)
    page.click(".jv-collapse-all")
    page.wait_for_selector(".jv-root[data-minimap='0']")
    bs = page.evaluate(f"() => {J}.boxes()")
    with page.expect_download() as dl:
        page.click(".jv-export-svg", modifiers=["Shift"])
    svg_path = tmp_path / "view.svg"
    dl.value.save_as(svg_path)
    assert dl.value.suggested_filename == "train_step.svg"
    svg = svg_path.read_text()
    assert svg.startswith("<svg xmlns=\"http://www.w3.org/2000/svg\"")
    assert svg.count('class="box"') == sum(1 for b in bs if b["onScreen"])
    assert "&lt;lambda&gt; x42" in svg and ">out loss<" in svg
    # the SVG draws in the browser as an image of the same size as the canvas
    canvas = page.evaluate(f"() => {J}.canvasRect()")
    size = page.evaluate("""async (s) => { const img = new Image(); img.src = 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(s);
        await img.decode(); return [img.naturalWidth, img.naturalHeight]; }""", svg)
    assert abs(size[0] - canvas["w"]) <= 1 and abs(size[1] - canvas["h"]) <= 1
    with page.expect_download() as dl:
        page.click(".jv-export-png", modifiers=["Shift"])
    png_path = tmp_path / "view.png"
    dl.value.save_as(png_path)
    assert dl.value.suggested_filename == "train_step.png"
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.errors == []


def test_expand_all_stays_readable_with_a_minimap_and_fit_shows_all(page, train_step_html, artifacts):
    open_page(page, train_step_html)
    page.click(".jv-expand-all")
    page.wait_for_selector(".jv-root[data-minimap='1']")
    page.screenshot(path=str(artifacts / "reading-expanded-fit.png"))
    # expanding does not shrink the text below 11 px: the minimap shows the whole graph instead
    assert min(t["px"] for t in page.evaluate(f"() => {J}.textPx()")) >= 11
    assert page.is_visible(".jv-minimap")
    # ...and the canvas shows the top of the graph, not an empty corner of it
    assert sum(1 for b in page.evaluate(f"() => {J}.boxes()") if b["onScreen"]) >= 5
    # a click on the minimap's bottom moves the camera down the graph
    before = page.evaluate(f"() => {J}.camera()")
    mm = page.locator(".jv-minimap").bounding_box()
    page.mouse.click(mm["x"] + mm["width"] / 2, mm["y"] + mm["height"] - 3)
    page.wait_for_function(f"ty => {J}.camera().ty < ty - 100", arg=before["ty"])
    # Fit shows the whole graph, however small that makes it: no minimap then
    page.click(".jv-fit")
    page.wait_for_selector(".jv-root[data-minimap='0']")
    assert all(b["onScreen"] for b in page.evaluate(f"() => {J}.boxes()"))
    assert page.evaluate(f"() => {J}.camera().z") < 1
    # collapsed again, everything fits: no minimap
    page.click(".jv-collapse-all")
    page.wait_for_selector(".jv-root[data-minimap='0']")
    assert not page.is_visible(".jv-minimap")
    assert page.errors == []


def test_fit_and_the_exports_keep_the_edge_labels(page, train_step_html, tmp_path, artifacts):
    """The train step's first graph has bundle labels left of its leftmost box (an edge into it
    arrives left of its middle): Fit shows them whole, and the SVG and PNG exports hold them
    inside their frame (they were cut off at x = -59 to -224 outside the viewBox)."""
    import re

    open_page(page, train_step_html)
    page.click(".jv-fit")
    canvas = page.evaluate(f"() => {J}.canvasRect()")
    es = [e for e in page.evaluate(f"() => {J}.edges()") if e["rect"]]
    assert len(es) >= 8
    page.screenshot(path=str(artifacts / "fit-keeps-labels.png"))
    left = min(e["rect"]["x"] for e in es)
    right = max(e["rect"]["x"] + e["rect"]["w"] for e in es)
    assert canvas["x"] <= left and right <= canvas["x"] + canvas["w"], (left, right, canvas)
    # the whole graph's SVG: every label from its start to its end inside the viewBox
    cam = page.evaluate(f"() => {J}.camera()")
    widths = {e["label"]: e["rect"]["w"] / cam["z"] for e in es}     # world px
    svg = page.evaluate(f"() => {J}.exportWholeSvg()")
    w, hgt = (float(x) for x in re.search(r'viewBox="0 0 (\S+) (\S+)"', svg).groups())
    tx, ty, z = (float(x) for x in re.search(r'translate\((\S+) (\S+)\) scale\((\S+)\)', svg).groups())
    labels = re.findall(r'class="edge-label" x="(\S+)" y="(\S+)"[^>]*>([^<]*)<', svg)
    assert labels and min(float(x) for x, _, _ in labels) < 0      # left of the leftmost box
    for x, y, text in labels:
        text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        x0 = float(x) * z + tx
        assert 0 <= x0 and x0 + widths.get(text, 0) * z <= w + 1, (text, x0, w)
        assert 0 <= float(y) * z + ty <= hgt
    # the PNG is drawn with the same camera: as wide as the SVG
    png = page.evaluate(f"() => {J}.exportWholePng()")
    (artifacts / "export-keeps-labels.png").write_bytes(base64.b64decode(png.split(",", 1)[1]))
    assert _image_size(page, png) == [round(w), round(hgt)]
    assert page.errors == []

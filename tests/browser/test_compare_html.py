"""jaxviz.compare's saved HTML in real Chromium: two MLPs whose first hidden layer got wider.
The changed layers are coloured in both panes, the list gives each call path's FLOPs and
bytes in both, and the panes follow each other (selection, opening and closing, pan and zoom)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import jaxviz

READY = ".jv-cmp[data-ready='1']"


def layer(p, x):
    return jax.nn.relu(x @ p["w"] + p["b"])


def mlp(params, x):
    for p in params:
        x = layer(p, x)
    return x


def params(*widths):
    return [{"w": jnp.ones((a, b)), "b": jnp.ones(b)} for a, b in zip(widths[:-1], widths[1:])]


def js_fmt(x: float) -> str:
    """graph/format.js's fmt (1.3k, 2.6k)."""
    if not x:
        return "0"
    units, i = ["", "k", "M", "G"], 0
    while abs(x) >= 1000 and i < len(units) - 1:
        x, i = x / 1000, i + 1
    return (f"{round(x * 10) / 10:g}" if i == 0 else f"{x:.1f}" if x < 10 else f"{x:.0f}") + units[i]


@pytest.fixture
def compared(page, tmp_path):
    x = jnp.ones((8, 4))
    c = jaxviz.compare(jaxviz.trace(mlp, params(4, 16, 16, 2), x),
                       jaxviz.trace(mlp, params(4, 32, 16, 2), x))
    path = c.save_html(tmp_path / "compare.html")
    page.goto(path.as_uri())
    page.wait_for_selector(READY, timeout=15_000)
    page.wait_for_function("() => document.querySelectorAll(\".jv-root[data-painted='1']\").length === 2")
    return c


def marks(page, k):
    return page.evaluate("k => document.querySelector('.jv-cmp').jaxvizCompare.marks(k)", k)


def pane_root(k):
    return f"document.querySelector('.jv-cmp').jaxvizCompare.panes()[{k}]"


def test_the_wider_layer_is_coloured_in_both_panes(page, compared, artifacts):
    # the calls of `layer` fold into one box when alike; the fold holds the change: it opens
    for k in (0, 1):
        # (an open group's frame says "layer[0] — 4 eqns · ...": the first look opened one)
        by_label = {m["label"].split(" — ")[0]: m["status"] for m in marks(page, k) if m["kind"] == "group"}
        assert by_label["layer[0]"] == "changed" and by_label["layer[1]"] == "changed"
        assert by_label["layer[2]"] == "same"
    page.screenshot(path=str(artifacts / "compare-html.png"))
    # the list: the call paths that changed, each with its FLOPs in a and b
    rows = page.locator(".jv-cmp-row[data-kind='group']")
    paths = rows.evaluate_all("rs => rs.map(r => r.dataset.path)")
    assert paths == [g.path for g in compared.diff.groups if g.status != "same"]
    assert "mlp > layer[2]" not in paths
    g0 = compared.diff.group("mlp > layer[0]")
    text = page.locator(".jv-cmp-row[data-kind='group'][data-path='mlp > layer[0]']").text_content()
    assert f"FLOPs {js_fmt(g0.flops_a)} → {js_fmt(g0.flops_b)} (+{js_fmt(g0.flops_b - g0.flops_a)})" in text
    assert page.locator(".jv-cmp").get_attribute("data-changed") == str(compared.diff.count("changed"))
    assert not page.errors, page.errors


def test_panes_follow_each_other(page, compared):
    expanded = "document.querySelector('.jv-cmp').jaxvizCompare.expanded"
    # the first look opened layer[0] (the first difference is in it) in both panes: close it in
    # pane a, it closes in pane b; open it again, it opens in pane b too
    g0 = next(m for m in marks(page, 0) if m["kind"] == "group" and m["label"].startswith("layer[0]"))
    (gp,) = [p for p in compared.diff.group_pairs if p[:2] == (0, int(g0["key"][1:]))]
    want = f"g{gp[3]}"
    assert g0["open"] and want in page.evaluate(f"() => {expanded}(1)")
    page.evaluate(f"k => {pane_root(0)}.jaxviz.toggle(k)", g0["key"])
    page.wait_for_function(f"k => !{expanded}(1).includes(k)", arg=want)
    page.evaluate(f"k => {pane_root(0)}.jaxviz.toggle(k)", g0["key"])
    page.wait_for_function(f"k => {expanded}(1).includes(k)", arg=want)

    # click its changed dot_general in pane a: pane b selects its match
    boxes = page.evaluate(f"() => {pane_root(0)}.jaxviz.boxes()")
    dot = next(b for b in boxes if b["op"] == "dot_general" and b["onScreen"])
    page.mouse.click(dot["cx"], dot["cy"])
    page.wait_for_function(f"k => {pane_root(0)}.dataset.selected === k", arg=dot["key"])
    (pair,) = [p for p in compared.diff.pairs if (p[0], p[1]) == (0, int(dot["key"][1:]))]
    page.wait_for_function(f"k => {pane_root(1)}.dataset.selected === k", arg=f"n{pair[3]}")
    insp_b = page.evaluate(f"() => {pane_root(1)}.querySelector('.jv-insp').textContent")
    assert "dot_general" in insp_b and "f32[8,32]" in insp_b
    status_b = {m["key"]: m["status"] for m in marks(page, 1)}
    assert status_b[f"n{pair[3]}"] == "changed"

    # close it in pane a: it closes in pane b
    page.evaluate(f"k => {pane_root(0)}.jaxviz.toggle(k)", g0["key"])
    page.wait_for_function(f"k => !{expanded}(1).includes(k)", arg=want)

    # a row of the list goes to its equation in both panes
    page.locator(".jv-cmp-row[data-kind='node'][data-path='mlp > layer[1]']").first.click()
    (nd,) = [n for n in compared.diff.nodes if n.path == "mlp > layer[1]"]
    for k, at in ((0, nd.a), (1, nd.b)):
        page.wait_for_function(f"n => ({pane_root(k)}.dataset.selected || '').endsWith('n' + n)",
                               arg=at[1])
    assert not page.errors, page.errors


# Where pane k's item nearest its middle (of those with a match) is, and where its match is
# in the other pane, relative to each pane's canvas, with both zooms.
ANCHOR = """k => {
  const cmp = document.querySelector('.jv-cmp').jaxvizCompare, panes = cmp.panes();
  const at = (i) => { const r = panes[i].querySelector('canvas').getBoundingClientRect();
    return { r, boxes: panes[i].jaxviz.boxes() }; };
  const a = at(k), b = at(1 - k);
  const mx = a.r.left + a.r.width / 2, my = a.r.top + a.r.height / 2;
  let best = null;
  for (const x of a.boxes) {
    const m = cmp.match(k, x.key), y = m && b.boxes.find((q) => q.key === m);
    if (!y) continue;
    const d = Math.hypot(x.cx - mx, x.cy - my);
    if (!best || d < best.d) best = { d, key: x.key, match: m,
      here: [x.cx - a.r.left, x.cy - a.r.top], there: [y.cx - b.r.left, y.cy - b.r.top] };
  }
  return { ...best, z: [cmp.camera(k).z, cmp.camera(1 - k).z] };
}"""


def _in_step(page, k):
    got = page.evaluate(ANCHOR, k)
    assert got["key"] is not None, "no item of the pane has a match in the other"
    assert abs(got["z"][0] - got["z"][1]) < 1e-9, got
    assert abs(got["here"][0] - got["there"][0]) < 1.5 and abs(got["here"][1] - got["there"][1]) < 1.5, got
    return got


def test_pan_and_zoom_follow_in_both_panes(page, compared, artifacts):
    cam = "k => document.querySelector('.jv-cmp').jaxvizCompare.camera(k)"
    rect = "k => document.querySelector('.jv-cmp').jaxvizCompare.panes()[k].querySelector('canvas').getBoundingClientRect().toJSON()"
    b0 = page.evaluate(cam, 1)
    # drag pane a: pane b pans with it
    r = page.evaluate(rect, 0)
    x, y = r["x"] + r["width"] / 2, r["y"] + r["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    for i in range(1, 6):
        page.mouse.move(x - 14 * i, y - 9 * i)
    page.mouse.up()
    page.wait_for_function(f"([k, c]) => ({cam})(k).tx !== c.tx || ({cam})(k).ty !== c.ty", arg=[1, b0])
    page.wait_for_timeout(100)       # (the follow is drawn on the next frame: let it settle)
    _in_step(page, 0)
    # zoom pane b with the wheel: pane a zooms with it, the same item under the same place
    za = page.evaluate(cam, 0)["z"]
    r = page.evaluate(rect, 1)
    page.mouse.move(r["x"] + r["width"] * 0.4, r["y"] + r["height"] * 0.45)
    page.keyboard.down("Control")     # (a plain wheel scrolls the page)
    page.mouse.wheel(0, -24)
    page.keyboard.up("Control")
    page.wait_for_function(f"([k, z]) => Math.abs(({cam})(k).z - z) > 1e-6", arg=[0, za])
    page.wait_for_timeout(100)
    got = _in_step(page, 1)
    assert got["z"][0] > za
    page.screenshot(path=str(artifacts / "compare-pan-zoom.png"))
    assert not page.errors, page.errors


def test_a_recompile_opens_its_two_traces_side_by_side(page, tmp_path):
    ct = jaxviz.trace_cell("import jax, jax.numpy as jnp\n"
                           "@jax.jit\n"
                           "def f(x):\n"
                           "    return jnp.sin(x) @ x.T\n"
                           "f(jnp.ones((3, 4)))\n"
                           "f(jnp.ones((5, 4)))\n")
    (d,) = [d for d in ct.diagnostics if d.rule == "recompile"]
    assert d.compare == (0, 1)
    path = jaxviz.save_html(ct, tmp_path / "cell.html")
    page.goto(path.as_uri())
    page.wait_for_selector(".jv-root[data-painted='1']", timeout=15_000)
    page.locator(".jv-diag .jv-compare").click()
    page.wait_for_selector(READY, timeout=15_000)
    sides = page.locator(".jv-cmp-side").all_text_contents()
    assert sides == ["a: f(f32[3,4])", "b: f(f32[5,4])"]
    rows = page.locator(".jv-cmp-row[data-kind='node']").evaluate_all("rs => rs.map(r => r.textContent)")
    assert any("sin" in r and "f32[3,4] → f32[5,4]" in r for r in rows), rows
    for k in (0, 1):
        assert {m["status"] for m in marks(page, k) if m["kind"] == "node" and m["label"] == "sin"} == {"changed"}
    page.locator(".jv-cmp-close").click()
    page.wait_for_function("() => !document.querySelector('.jv-cmp')")
    assert not page.errors, page.errors

"""jaxviz.compare's saved HTML in real Chromium: two MLPs whose first hidden layer got wider.
The changed layers are coloured in both panes, the list gives each call path's FLOPs and
bytes in both, and the panes follow each other (selection, opening and closing)."""
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
        by_label = {m["label"]: m["status"] for m in marks(page, k) if m["kind"] == "group"}
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
    # open layer[0] in pane a: it opens in pane b too
    g0 = next(m for m in marks(page, 0) if m["kind"] == "group" and m["label"].startswith("layer[0]"))
    assert not g0["open"]
    (gp,) = [p for p in compared.diff.group_pairs if p[:2] == (0, int(g0["key"][1:]))]
    want = f"g{gp[3]}"
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

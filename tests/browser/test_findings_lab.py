"""Every finding leads to its node, in a real JupyterLab (issue 57, items 1-3): five kinds of
misuse in one cell (a leaked tracer, a NaN, a key consumed twice, an index out of bounds, a
recompile), each finding's click selecting its node in its tab, its cell line putting the
editor's cursor there, each tab marked with its count; the list in line order, whole up to
FINDINGS_SHOWN findings, the rest folded under "N more" (no inner scroll box).

One notebook, run once (module fixture); screenshots in test-artifacts/findings-*.png."""
from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, run_cell, wait_until, write_notebook

SETUP = '''%load_ext jaxviz
import jax, jax.numpy as jnp'''
# line numbers as the editor shows them (%%jaxtrace is line 1)
FIVE = '''%%jaxtrace
leaked = []
@jax.jit
def put(x, i):
    return x.at[i].set(1.0)
@jax.jit
def f(x):
    leaked.append(x)
    return jnp.log(x - 1.0)
key = jax.random.key(0)
a = jax.random.normal(key, (3,))
b = jax.random.normal(key, (3,))
y = put(jnp.zeros(4), 9)
v = jnp.zeros(4)
w = v[10]
n = f(jnp.zeros(3))
for i in range(3):
    g = jax.jit(lambda z: z * 2)(jnp.ones(i + 1))'''
# eight findings: one key drawn from at nine lines
MANY = "%%jaxtrace\nk = jax.random.key(1)\n" + "\n".join(
    f"r{i} = jax.random.uniform(k, ({i + 1},))" for i in range(9))

# what each rule's finding selects: the node's op (the leaked `x` is f's input)
SELECTS = {"leaked-tracer": "x", "nan": "log", "key-reuse": "random_bits",
           "out-of-bounds": "dynamic_slice", "recompile": None}

# a library's deliberate error while JAX traces (issue 57, item 16)
LIBERR = '''%%jaxtrace
@jax.jit
def check(x):
    if x.shape[0] != 4:
        raise ValueError("expected 4 rows")
    return x * 2
check(jnp.ones(3))'''

NB = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def _shot(page, name: str, el=None) -> None:
    (el or page).screenshot(path=str(ARTIFACTS / f"findings-{name}.png"))


@pytest.fixture(scope="module")
def notebook(jupyterlab, browser_context):
    write_notebook(jupyterlab.root / "findings.ipynb", [SETUP, FIVE, MANY, LIBERR])
    page = browser_context.new_page()
    page.set_viewport_size({"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    page.errors = errors
    jupyterlab.open_notebook(page, "findings.ipynb")
    cells = page.locator(f"{NB} .jp-CodeCell")
    for i in range(4):
        run_cell(page, cells.nth(i))
    for i in (1, 2):
        cells.nth(i).locator(".jv-root[data-painted='1']").wait_for(timeout=60_000)
    page.cells = cells
    yield page
    page.close()
    jupyterlab.shutdown_kernels()


SELECTED = """(e) => { const k = e.dataset.selected; const b = e.jaxviz.boxes().find((x) => x.key === k);
  return b ? b.op : null; }"""


def test_each_finding_selects_its_node_in_its_tab(notebook):
    page = notebook
    root = page.cells.nth(1).locator(".jv-root")
    root.scroll_into_view_if_needed()
    _shot(page, "1-list", root)
    items = root.locator(".jv-diag")
    rules = [re.search(r"(error|warning|info): ([\w-]+)", t).group(2) for t in items.all_text_contents()]
    assert sorted(rules) == sorted(SELECTS), rules
    got = {}
    for k, rule in enumerate(rules):
        item = items.nth(k)
        tab = item.locator(".jv-diag-where").text_content() if item.locator(".jv-diag-where").count() else ""
        item.click()
        page.wait_for_timeout(200)
        got[rule] = (root.evaluate(SELECTED), tab, root.locator(".jv-tab[aria-selected='true']").text_content())
        if rule == "key-reuse":
            _shot(page, "1-key-reuse-clicked", root)
    for rule, (op, tab, open_tab) in got.items():
        assert op is not None and op == (SELECTS[rule] or op), got
        # the finding's tab is the open one
        assert tab and tab.strip(" ()").removeprefix("in ") in open_tab, got
    assert page.errors == []


def test_a_findings_line_puts_the_cursor_on_it_in_the_editor(notebook):
    page = notebook
    cell = page.cells.nth(1)
    root = cell.locator(".jv-root")
    root.scroll_into_view_if_needed()
    nan = root.locator(".jv-diag", has_text="error: nan")
    link = nan.locator(".jv-diag-line")
    assert re.fullmatch(r"cell \[\d+\]:9", link.text_content()), link.text_content()
    link.click()
    # CodeMirror's view, as its EditorView.findFromDOM finds it
    head = """(e) => { const c = e.querySelector('.cm-content'), t = c.cmTile || c.cmView;
      const v = (t.root && t.root.view) || (t.rootView && t.rootView.view) || t.view;
      return [v.hasFocus, v.state.doc.lineAt(v.state.selection.main.head).number]; }"""
    wait_until(lambda: cell.evaluate(head) == [True, 9], 5, "the cursor on line 9")
    _shot(page, "1-line-in-editor")
    assert page.errors == []


def test_each_tab_is_marked_with_its_count(notebook):
    page = notebook
    root = page.cells.nth(1).locator(".jv-root")
    n = root.locator(".jv-diag").count()
    tabs = root.locator(".jv-tab:not(.jv-tab-memory)")
    counts = [int(t.get_attribute("data-findings") or 0) for t in tabs.all()]
    badges = root.locator(".jv-tab .jv-tab-count").all_text_contents()
    # every finding of the cell is some tab's: the badges add up to the list
    assert sum(counts) == n == 5 and sum(int(b) for b in badges) == n, (counts, badges)
    assert len(badges) == 4, badges   # f holds two: its leaked input and its NaN
    assert page.errors == []


def test_findings_in_line_order_whole_then_folded(notebook):
    page = notebook
    root = page.cells.nth(1).locator(".jv-root")
    box = root.locator(".jv-diags")
    lines = [int(x) for x in root.locator(".jv-diag").evaluate_all("(es) => es.map((e) => e.dataset.line)")]
    assert lines == sorted(lines), lines
    assert "by line" in box.locator(".jv-diag-head").text_content()
    # five findings, all shown: no inner scroll box, the graph keeps its room below them
    assert box.evaluate("e => e.scrollHeight <= e.clientHeight + 1")
    assert all(d.is_visible() for d in root.locator(".jv-diag").all())
    assert root.locator(".jv-stage").bounding_box()["height"] >= 400
    # eight findings: six shown, the rest under "2 more"
    root8 = page.cells.nth(2).locator(".jv-root")
    root8.scroll_into_view_if_needed()
    items = root8.locator(".jv-diag")
    assert items.count() == 8
    _shot(page, "3-folded", root8)
    assert [d.is_visible() for d in items.all()] == [True] * 6 + [False] * 2
    more = root8.locator(".jv-diag-more")
    assert more.text_content() == "2 more"
    more.click()
    assert all(d.is_visible() for d in items.all())
    assert root8.locator(".jv-diags").evaluate("e => e.scrollHeight <= e.clientHeight + 1")
    _shot(page, "3-unfolded", root8)
    assert page.errors == []


def test_one_statement_is_one_tab_and_the_strip_keeps_one_row(notebook):
    """18 tabs wrapped onto two rows (issue 57, item 4): `line 15` and `line 15 (2)` came from
    one statement, `w = v[10]`, split by jnp's jitted `less` and `add` of its index."""
    page = notebook
    root = page.cells.nth(1).locator(".jv-root")
    root.scroll_into_view_if_needed()
    _shot(page, "4-tabs", root.locator(".jv-bar"))
    tabs = root.locator(".jv-tabs .jv-tab")
    texts = tabs.all_text_contents()
    tops = {round(t.bounding_box()["y"]) for t in tabs.all()}
    assert len(tops) == 1, (tops, texts)
    line15 = [t for t in texts if t.startswith("line 15")]
    assert len(line15) == 1 and "1/2" in line15[0], texts
    assert not any(t in ("less", "add") for t in texts), texts
    more = root.locator(".jv-tab-more")
    options = more.locator("option").all_text_contents()
    assert "less" in options and "add" in options, options
    # the statement's tab opens its second part when clicked again
    tab = root.locator(".jv-tabs .jv-tab", has_text="line 15")
    tab.click()
    assert "1/2" in tab.text_content() and tab.get_attribute("aria-selected") == "true"
    tab.click()
    assert "2/2" in tab.text_content() and tab.get_attribute("aria-selected") == "true"
    # a folded one opens from the menu, which then shows it
    more.select_option(label="less")
    wait_until(lambda: root.evaluate("(e) => e.jaxviz.boxes().some((b) => b.op === 'lt')"), 5, "less's graph")
    assert more.evaluate("e => e.selectedOptions[0].textContent") == "less"
    assert root.locator(".jv-tabs .jv-tab[aria-selected='true']").count() == 0
    # nine functions with a finding each: one row still, the menu says what it folds
    root8 = page.cells.nth(2).locator(".jv-root")
    tabs8 = root8.locator(".jv-tabs .jv-tab")
    assert len({round(t.bounding_box()["y"]) for t in tabs8.all()}) == 1, tabs8.all_text_contents()
    head = root8.locator(".jv-tab-more option").first.text_content()
    assert re.fullmatch(r"\d+ more… · \d+ findings?", head), head
    shown = sum(int(t.get_attribute("data-findings") or 0) for t in tabs8.all())
    folded = sum(int(o.get_attribute("data-findings") or 0) for o in root8.locator(".jv-tab-more option").all()[1:])
    assert shown + folded == root8.locator(".jv-diag").count() == 8
    assert page.errors == []


def test_code_in_a_findings_message_shows_as_code(notebook):
    """Literal backticks showed in finding messages (issue 57, item 8): code is code, as text."""
    root = notebook.cells.nth(1).locator(".jv-root")
    msgs = root.locator(".jv-diag-msg").all_text_contents()
    assert msgs and not any("`" in m for m in msgs), msgs
    code = root.locator(".jv-diag-msg code.jv-code").all_text_contents()
    assert "leaked.append(x)" in code and "log" in code, code
    assert notebook.errors == []


def test_a_library_error_while_tracing_leaves_one_line_not_an_empty_output(notebook):
    """JAX raised while tracing (a library's deliberate check, issue 57, item 16): no flat
    chart, no view of what little was captured, no empty output: one line, then the error."""
    cell = notebook.cells.nth(3)
    cell.scroll_into_view_if_needed()
    _shot(notebook, "16-library-error", cell)
    outs = [(o.text_content() or "").strip() for o in cell.locator(".jp-OutputArea-child").all()]
    assert all(outs), outs                          # no empty output area
    assert outs[0].startswith("jaxviz: JAX raised while tracing `check`: captured before it: line 7"), outs
    assert "ValueError: expected 4 rows" in outs[-1] and len(outs) == 2, outs
    assert cell.locator(".jv-root, .jvm").count() == 0
    assert notebook.errors == []


def test_a_findings_click_brings_its_node_into_the_window(notebook):
    """In a short window the findings list fills the screen and the graph is below it: a
    click selected the node out of sight (1000x800 with the file browser open, five
    findings: the list 710 px tall, the graph from y = 886; found as a new user, issue 57's
    check). Now the click scrolls the graph into the window, the node on screen."""
    page = notebook
    root = page.cells.nth(1).locator(".jv-root")
    page.set_viewport_size({"width": 1000, "height": 640})
    try:
        page.wait_for_timeout(300)
        first = root.locator(".jv-diag").first
        first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(200)
        stage = root.locator(".jv-stage").bounding_box()
        assert stage["y"] > 640 - 100, stage              # the graph is (nearly) out of sight
        box = first.bounding_box()
        page.mouse.click(box["x"] + box["width"] * 0.6, box["y"] + 8)
        key = wait_until(lambda: root.get_attribute("data-selected"), 5, "a selection")
        page.wait_for_timeout(300)
        b = next(b for b in root.evaluate("e => e.jaxviz.boxes()") if b["key"] == key)
        assert b["onScreen"] and 0 <= b["cy"] <= 640, (b, root.locator(".jv-stage").bounding_box())
        _shot(page, "1-click-in-a-short-window")
    finally:
        page.set_viewport_size({"width": 1400, "height": 900})
    assert page.errors == []


def test_a_narrow_output_keeps_every_tab_reachable(notebook):
    """At 1000x800 with the file browser open (a 548 px output) the strip of seven tabs, the
    "10 more" menu and the memory tab ran past the output's right edge, clipped: the menu and
    the memory tab could not be reached (found as a new user, issue 57's check). Now the strip
    wraps there, every tab inside the output."""
    page = notebook
    root = page.cells.nth(1).locator(".jv-root")
    page.set_viewport_size({"width": 700, "height": 900})
    try:
        page.wait_for_timeout(300)
        root.scroll_into_view_if_needed()
        r = root.bounding_box()
        assert r["width"] < 600, r
        kids = root.locator(".jv-tabs > *")
        boxes = [(k.text_content()[:20], k.bounding_box()) for k in kids.all()]
        assert len(boxes) >= 9, boxes                      # 7 tabs, the menu, memory
        out = [(t, b["x"] + b["width"] - r["x"]) for t, b in boxes if b["x"] + b["width"] > r["x"] + r["width"] + 1]
        assert not out, (out, r["width"])
        _shot(page, "4-tabs-narrow", root.locator(".jv-bar"))
        root.locator(".jv-tab-memory").click(timeout=5_000)
        wait_until(lambda: root.get_attribute("data-tab") == "memory", 5, "the memory tab")
        root.locator(".jv-tabs .jv-tab").first.click()
    finally:
        page.set_viewport_size({"width": 1400, "height": 900})
    assert page.errors == []

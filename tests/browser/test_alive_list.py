"""The arrays alive at a moment (issue 57, item 5): a click on the cell's memory chart listed
95 unnamed rows, 1,746 px tall, with no way to close it. Now each array the cell's globals
hold is named by its path (`params['blocks'][2]['w1']`), the arrays are grouped by the global
that holds them, else by the call that made them, largest first; past a screen the groups
fold ("N more groups"); a button and Escape close the list.

The chart's saved copy (its messages replayed in the page, no kernel) of a real CellWatch."""
from __future__ import annotations

import re
import time

import jax
import jax.numpy as jnp
import pytest

from jaxviz.capture.recorder import Recorder
from jaxviz.memory.timeline import CellWatch
from jaxviz.view.chart import MemoryChart

from tests.browser.conftest import ARTIFACTS

BASE = "http://jaxviz.test/alive"


@pytest.fixture(scope="module")
def chart():
    """111 arrays alive at the end: 60 in `params` (a global), 20 in `acts` (a global), 16
    small globals, 15 held only by a local list (no name: grouped by the call that made
    them): 19 groups."""
    layer = jax.jit(lambda x: x * 2.0)
    chart = MemoryChart(title="cell [1]: memory while it runs")
    ns = {"__name__": "__main__"}
    rec = Recorder(__file__, namespace=ns)
    watch = CellWatch(rec, on_update=lambda s, m, b, g: chart.on_cell(s, m, b, g, 0))
    chart.start_cell(watch.lanes)
    hidden = []
    with rec:
        watch.start()
        watch.sampler.sample()                       # the first look: from before the cell
        ns["params"] = {"blocks": [{"w1": jnp.ones((64, 64 + b)), "w2": jnp.ones((64, 32)), "b": jnp.zeros(64)}
                                   for b in range(20)]}
        watch.sampler.sample()
        ns["acts"] = [layer(jnp.ones(256 + i)) for i in range(20)]
        for i in range(16):
            ns[f"g{i}"] = jnp.ones(8 + i)              # small globals: 16 groups of one
        watch.sampler.sample()
        for i in range(15):
            hidden.append(layer(jnp.ones(16 + i)))
            watch.sampler.sample()
            time.sleep(0.005)
        mem = watch.stop()
    chart.finish_cell(mem)
    yield chart, mem
    del hidden


def _open(page, chart):
    chart, mem = chart
    body = chart.static_bundle(str(mem))["text/html"]
    page.set_viewport_size({"width": 1200, "height": 900})
    page.route(BASE, lambda r: r.fulfill(status=200, content_type="text/html",
                                          body=f"<!DOCTYPE html><html><body>{body}</body></html>"))
    page.goto(BASE)
    page.wait_for_selector(".jvm[data-frames]:not([data-frames='0'])", timeout=15_000)
    return mem


def _click_end(page):
    canvas = page.locator(".jvm canvas")
    box = canvas.bounding_box()
    canvas.click(position={"x": box["width"] - 10, "y": 40})
    page.wait_for_selector(".jvm-alive", timeout=5_000)


def test_the_alive_list_names_groups_and_folds(page, chart):
    mem = _open(page, chart)
    alive = [a for a in mem.arrays if a.gone is None]
    assert len(alive) >= 111
    _click_end(page)
    box = page.locator(".jvm-alive")
    page.locator(".jvm").screenshot(path=str(ARTIFACTS / "alive-list.png"))
    head = box.locator(".jvm-alive-head").text_content()
    assert int(re.match(r"(\d+) arrays alive at", head).group(1)) >= 100, head
    rows = box.locator("tr.jvm-group")
    texts = [r.text_content() for r in rows.all()]
    # one row per global, named; the unnamed ones by the call that made them
    params = next(t for t in texts if t.strip("▸▾ ").startswith("params"))
    assert "float32[64]" in params and "×20" in params, params
    assert any(t.strip("▸▾ ").startswith("acts") for t in texts), texts
    assert any("made by <lambda> (" in t for t in texts), texts
    # largest first
    sizes = rows.evaluate_all("(rs) => rs.map((r) => r.lastElementChild.textContent)")
    assert texts[0].strip("▸▾ ").startswith("params"), (texts, sizes)
    # an opened group lists its arrays by their paths
    rows.first.click()
    members = box.locator("tr.jvm-member").all_text_contents()
    assert any("params['blocks'][19]['w1']" in m for m in members), members[:5]
    # 19 groups: 12 shown, the rest folded; within a screen. (Arrays an earlier test of the
    # same xdist worker left alive are one more group, "before the first call": a CI
    # rehearsal's worker held 5)
    before = sum("before the first call" in t for t in texts)
    assert before <= 1, texts
    assert rows.count() == 19 + before and sum(r.is_visible() for r in rows.all()) == 12
    more = box.locator(".jvm-more")
    assert more.text_content().startswith(f"{7 + before} more groups")
    assert box.bounding_box()["height"] < 900
    more.click()
    assert all(r.is_visible() for r in rows.all())
    page.locator(".jvm").screenshot(path=str(ARTIFACTS / "alive-list-open.png"))


def test_the_alive_list_closes_with_its_button_and_escape(page, chart):
    _open(page, chart)
    _click_end(page)
    page.locator(".jvm-alive-close").click()
    assert page.locator(".jvm-alive").count() == 0
    assert page.locator(".jvm").get_attribute("data-picked") is None
    _click_end(page)
    page.keyboard.press("Escape")
    assert page.locator(".jvm-alive").count() == 0

"""A sharded program's marks on a saved HTML report, in real Chromium: the violet tab on the
ops XLA's collectives serve, the mesh in the legend, and an equation's layout as compiled in
the inspector. The report is made on 8 CPU devices in a child process (the suite keeps its
device count)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.browser
PAINTED = ".jv-root[data-painted='1']"

CHILD = r'''
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jax.numpy as jnp, jaxviz
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))

@jax.jit
def f(a, w):
    d = jnp.sin(a) + 1.0
    e = jax.lax.with_sharding_constraint(d, NamedSharding(mesh, P()))
    return e @ w

t = jaxviz.trace(f, jax.device_put(jnp.ones((2048, 1024)), NamedSharding(mesh, P("x"))),
                 jax.device_put(jnp.ones((1024, 1024)), NamedSharding(mesh, P())))
r = t.memory(what_if=False)
jaxviz.save_html(t, sys.argv[1], memory_reports=[r])
print(r.collectives[0].node_ids[0], dict(r.layouts)[r.collectives[0].node_ids[0]])
'''


def _child(code: str, path) -> subprocess.CompletedProcess:
    """`code` run in a child (it sets its own XLA_FLAGS: 8 CPU devices), writing `path`."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("XLA_FLAGS", None)
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                       text=True, timeout=300, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    return r


def test_collectives_marks_mesh_legend_and_layouts(page, tmp_path, artifacts):
    path = tmp_path / "mesh.html"
    r = _child(CHILD, path)
    ref, layout = r.stdout.split()[-2:]
    assert layout == "f32[2048@x,1024]"               # the `sin` the all-gather gathers
    page.goto(path.as_uri())
    page.wait_for_selector(PAINTED, timeout=15_000)
    boxes = page.evaluate("() => document.querySelector('.jv-root').jaxviz.boxes()")
    marked = [b for b in boxes if b["coll"]]
    assert [b["op"] for b in marked] == ["sin"], marked
    assert not any(b["coll"] for b in boxes if b["op"] != "sin")
    # each equation's box gives its layout as compiled: split over x until the constraint
    subs = {b["op"]: b["sub"] for b in boxes if b["nodeKind"] == "eqn"}
    assert subs["sin"] == "f32[2048@x,1024]"
    assert subs["dot_general"] == "f32[2048,1024]"
    assert "mesh x=8 (Auto)" in page.text_content(".jv-legend")
    page.screenshot(path=str(artifacts / "mesh-collective-mark.png"))
    # the marked op's inspector gives its layout as compiled
    b = marked[0]
    page.mouse.click(b["cx"], b["cy"])
    page.wait_for_function("() => document.querySelector('.jv-insp .jv-title')"
                           " && document.querySelector('.jv-insp .jv-title').textContent === 'sin'")
    assert "f32[2048@x,1024] (as XLA compiled it" in page.text_content(".jv-insp")
    assert page.errors == []


EAGER_CHILD = r'''
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jaxviz
from tests.mesh.test_eager_collectives import CELL
ct = jaxviz.trace_cell(CELL)
jaxviz.save_html(ct, sys.argv[1])
print(len(ct.eager_collectives))
'''


def test_eager_ops_collectives_in_the_memory_tab_select_their_op(page, tmp_path, artifacts):
    """jnp.sum, x @ w and an eager shard_map on 8 devices, no jax.jit (jaxviz.mesh.eager):
    the memory tab has an entry per program with its collectives; a row selects the op it
    serves in the trace that ran it, which carries the violet tab."""
    path = tmp_path / "eager.html"
    r = _child(EAGER_CHILD, path)
    assert r.stdout.split()[-1] == "3"
    page.goto(path.as_uri())
    page.wait_for_selector(PAINTED, timeout=15_000)
    page.click(".jv-tab-memory")
    entries = page.locator(".jv-eager-entry")
    assert entries.count() == 3
    assert page.locator(".jv-eager-entry .jv-coll-row").count() == 3
    assert "mesh x=8 (Auto): 1 collective" in entries.nth(0).text_content()
    row = page.locator(".jv-eager-entry .jv-coll-row[data-line='7']")
    assert row.get_attribute("data-cause") == "contracting"
    page.screenshot(path=str(artifacts / "mesh-eager-collectives.png"))
    row.click()
    page.wait_for_function("() => document.querySelector('.jv-root').dataset.tab === 'graph'")
    page.wait_for_function("() => document.querySelector('.jv-insp .jv-title')"
                           " && document.querySelector('.jv-insp .jv-title').textContent"
                           " === 'dot_general'")
    boxes = page.evaluate("() => document.querySelector('.jv-root').jaxviz.boxes()")
    assert [b["op"] for b in boxes if b["coll"]] == ["dot_general"]
    assert page.errors == []

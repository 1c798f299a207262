"""The graph view's payload: widget state round-trips and matches the model; HTML is safe."""
from __future__ import annotations

import base64
import json
import re
import zlib

import pytest

from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.graph.model import Loc
from jaxviz.view.html import html_fragment, mimebundle, render_html, save_html, script_json
from jaxviz.view.payload import build_payload
from jaxviz.view.widget import GraphWidget, make_widget
from tools.synth import FakeTrace, flat_graph, nested_graph

HOSTILE_SCRIPT = "<script>alert(1)</script>"
HOSTILE_IMG = '"><img src=x onerror=alert(2)>'


def hostile_trace() -> FakeTrace:
    g = flat_graph(200)
    g.name = HOSTILE_SCRIPT
    body = g.bodies[0]
    eqn = next(n for n in body.nodes if n.kind == "eqn")
    eqn.params = [f"name={HOSTILE_IMG}", f"jaxpr={HOSTILE_SCRIPT}"]
    eqn.loc = Loc(f"<cell {HOSTILE_IMG}>", 3, 0, HOSTILE_SCRIPT)
    body.groups[0].label = HOSTILE_IMG
    d = Diagnostic(rule="large-constant", severity="warning", message=f"constant {HOSTILE_SCRIPT}",
                   filename="<cell 1>", line=3, node_ids=(f"0:{eqn.id}",), code=HOSTILE_IMG)
    return FakeTrace(g, name=HOSTILE_SCRIPT, diagnostics=[d])


def decode_fragment(html_text: str) -> dict:
    """The payload an HTML fragment carries, decoded the way the page does."""
    m = re.search(r'<script type="application/json" id="[^"]+-data">(.*?)</script>', html_text, re.S)
    assert m, "no data script"
    data = json.loads(m.group(1))
    return json.loads(zlib.decompress(base64.b64decode(data["payload"])))


def test_payload_matches_model():
    g = nested_graph(12_000)
    d = Diagnostic(rule="nan", severity="error", message="NaN in exp", filename="<cell 1>", line=40,
                   node_ids=("3:5",))
    t = FakeTrace(g, diagnostics=[d], calls=3, call_sites=[("<cell 1>", 7)])
    p = build_payload([t])
    assert [tr["name"] for tr in p["traces"]] == ["train_step"]
    assert p["traces"][0]["graph"] == g.to_dict()
    assert p["traces"][0]["diagnostics"] == [d.to_dict()]
    assert p["traces"][0]["calls"] == 3
    assert p["traces"][0]["call_sites"] == [["<cell 1>", 7]]
    # plain JSON: survives a serialisation round trip unchanged
    assert json.loads(json.dumps(p, allow_nan=False)) == p
    # every equation of the model is in the payload once (shared bodies stored once)
    n_eqns = sum(1 for b in p["traces"][0]["graph"]["bodies"] for n in b["nodes"] if n.get("kind", "eqn") == "eqn")
    assert n_eqns == sum(1 for _ in g.eqns())


def test_payload_sources_from_given_cells():
    t = FakeTrace(flat_graph(100))
    cell = "\n".join(f"line {i}" for i in range(1, 60))
    p = build_payload([t], sources={"<cell 1>": cell})
    lines = p["sources"]["<cell 1>"]
    assert lines["12"] == "line 12"
    assert "100" not in lines


def test_failed_trace_moves_diagnostics_to_cell_level():
    ok = FakeTrace(flat_graph(100))
    bad = FakeTrace(flat_graph(100), name="broken")
    bad.graph = None
    bad.diagnostics = [Diagnostic(rule="tracer-bool", severity="error", message="if x > 0")]
    p = build_payload([ok, bad])
    assert [t["name"] for t in p["traces"]] == ["model"]
    assert [d["rule"] for d in p["diagnostics"]] == ["tracer-bool"]


def test_widget_state_round_trips_and_resolves_selection():
    g = nested_graph(12_000)
    t = FakeTrace(g)
    w = make_widget([t])
    state = w.get_state()
    assert state["payload"] == build_payload([t])
    assert state["selected"] == {}
    assert w.selected_node is None
    # the browser writes the selection back; Python resolves it to the model node
    w.set_state({"selected": {"trace": 0, "body": 3, "node": 5}})
    node = w.selected_node
    assert node is g.bodies[3].nodes[5]
    assert w.selected_trace is t
    assert w.selected_eqn is None          # FakeTrace cannot map to a JAX equation
    t.eqn = lambda body, node: ("eqn", body, node)
    assert w.selected_eqn == ("eqn", 3, 5)
    w.set_state({"selected": {"trace": 0, "body": 99, "node": 5}})
    assert w.selected_node is None
    assert "as default" in w._esm and "render" in w._esm
    w.close()


def test_script_json_cannot_close_its_script():
    s = script_json({"a": "</script><script>alert(1)</script>", "b": "&amp; <!--"})
    assert "<" not in s and ">" not in s and "&" not in s
    assert json.loads(s) == {"a": "</script><script>alert(1)</script>", "b": "&amp; <!--"}


def test_html_export_escapes_hostile_text(tmp_path):
    t = hostile_trace()
    page = render_html([t], t.diagnostics, title=HOSTILE_SCRIPT, text=f"{HOSTILE_SCRIPT} {HOSTILE_IMG}")
    # hostile strings never appear as markup: only our two scripts and no injected img
    assert page.count("<script") == 2
    assert "<img" not in page
    assert "alert(1)" not in page.replace("&lt;script&gt;alert(1)&lt;/script&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page      # title and text twin, escaped
    # ...but the data still carries them verbatim, for the view to show as text
    p = decode_fragment(page)
    assert p["traces"][0]["name"] == HOSTILE_SCRIPT
    assert any(HOSTILE_IMG in s for n in p["traces"][0]["graph"]["bodies"][0]["nodes"]
               for s in n.get("params", []))
    out = save_html(t, tmp_path / "h.html")
    assert out.read_text().count("<script") == 2


def test_save_html_accepts_trace_celltrace_and_list(tmp_path):
    a, b = FakeTrace(flat_graph(100), name="a"), FakeTrace(flat_graph(100), name="b")

    class Cell:
        traces = [a, b]
        diagnostics = [Diagnostic(rule="recompile", severity="info", message="f recompiled")]

        def __str__(self):
            return "cell: a, b"

    for obj, names, n_diag in [(a, ["a"], 0), (Cell(), ["a", "b"], 1), ([a, b], ["a", "b"], 0)]:
        path = save_html(obj, tmp_path / "x.html")
        p = decode_fragment(path.read_text())
        assert [t["name"] for t in p["traces"]] == names
        assert len(p["diagnostics"]) == n_diag


def test_mimebundle_outside_a_kernel_has_text_and_html():
    t = FakeTrace(flat_graph(300))
    data = mimebundle([t], text="model: 300 equations")
    assert data["text/plain"] == "model: 300 equations"
    assert decode_fragment(data["text/html"])["traces"][0]["graph"] == t.graph.to_dict()
    assert "application/vnd.jupyter.widget-view+json" not in data


def test_mimebundle_with_a_widget_links_the_html_view_to_it():
    t = FakeTrace(flat_graph(300))
    w = GraphWidget([t])
    data = mimebundle([t], widget=w)
    # no widget-view entry: it would hide the HTML after a reload without the model
    assert set(data) == {"text/plain", "text/html"}
    assert decode_fragment(data["text/html"]) == w.payload
    m = re.search(r'<script type="application/json" id="[^"]+-data">(.*?)</script>', data["text/html"])
    assert json.loads(m.group(1))["live"] == w.live_token != ""
    w.close()


@pytest.mark.parametrize("graph", [flat_graph(20_000), flat_graph(20_000, grouped=False)],
                         ids=["grouped", "ungrouped"])
def test_html_of_20k_equations_stays_under_2mb(graph):
    frag = html_fragment(build_payload([FakeTrace(graph)]))
    assert len(frag.encode()) <= 2_000_000


def test_the_text_shown_until_the_view_starts_is_the_twins_head(tmp_path):
    """A saved page of a 20k-equation trace held its whole text twin (20,002 lines, 1.4 MB)
    in the <pre> shown until the view starts: Chromium parsed and laid it out before the
    view's first paint (bench/bench_first_paint.py). The page keeps its head and says how many
    lines more there are; the text/plain of a notebook output keeps every line."""
    from jaxviz.view.html import FALLBACK_LINES

    text = "\n".join(f"line {i} <of the twin>" for i in range(3000))
    page = render_html([FakeTrace(flat_graph(100))], text=text)
    pre = re.search(r'<pre class="jaxviz-text"[^>]*>(.*?)</pre>', page, re.S).group(1)
    lines = pre.split("\n")
    assert lines[:FALLBACK_LINES] == [f"line {i} &lt;of the twin&gt;" for i in range(FALLBACK_LINES)]
    assert lines[FALLBACK_LINES:] == [f"... {3000 - FALLBACK_LINES:,} more lines (print() of the trace, or the view, shows them all)"]
    assert len(page.encode()) < 100_000
    bundle = mimebundle([FakeTrace(flat_graph(100))], text=text)
    assert bundle["text/plain"] == text and "line 2999 " not in bundle["text/html"]
    # a short twin is shown whole
    short = render_html([FakeTrace(flat_graph(100))], text="a\nb")
    assert '<pre class="jaxviz-text" style="max-height:520px;overflow:auto">a\nb</pre>' in short


def test_each_diagnostic_is_listed_once():
    """CellTrace.diagnostics holds the traces' own and the cell's: the view lists each once,
    a trace's with its trace, the rest at cell level."""
    import jaxviz
    ct = jaxviz.trace_cell("import jax, jax.numpy as jnp\n"
                           "from jax import random\n"
                           "key = random.PRNGKey(0)\n"
                           "@jax.jit\n"
                           "def init(key):\n"
                           "    return random.normal(key, (2,)), random.normal(key, (2,))\n"
                           "a = init(key)\n"
                           "b = random.normal(key, (2,))\n", filename="<once>")
    p = build_payload(ct.traces, ct.diagnostics)
    listed = [d["line"] for t in p["traces"] for d in t["diagnostics"]] + [d["line"] for d in p["diagnostics"]]
    assert sorted(listed) == sorted(d.line for d in ct.diagnostics) and len(listed) >= 2


def test_a_missing_bundle_shows_the_text_twin_and_never_fails(monkeypatch, tmp_path):
    """A checkout whose JS was never built: displaying a trace still works (text twin)."""
    import jax.numpy as jnp

    import jaxviz
    from jaxviz.view import assets
    monkeypatch.setattr(assets, "STATIC", tmp_path)          # an empty static/ folder
    t = jaxviz.trace(lambda x: jnp.sin(x) * 2, jnp.ones(3))
    data = t._repr_mimebundle_()
    assert data["text/plain"].startswith("trace <lambda>(")
    assert "npm run build" in data["text/html"] and "<script" not in data["text/html"]
    assert "sin" in data["text/html"]                      # the text twin, escaped
    assert "graph.js is missing" in str(assets.bundle("graph.js"))


def test_the_selection_widget_does_not_carry_the_payload_until_displayed():
    """In a kernel the HTML view carries the payload; the widget it writes clicks to
    ships none (the payload travels once), unless the widget itself is displayed."""
    t = FakeTrace(flat_graph(100))
    w = make_widget([t], lazy=True)
    assert w.payload == {}
    data = mimebundle([t], widget=w)
    assert decode_fragment(data["text/html"])["traces"][0]["graph"] == t.graph.to_dict()
    assert w.payload == {}                                 # still nothing synced twice
    w._repr_mimebundle_()                                  # shown on its own: now it needs it
    assert w.payload == build_payload([t])
    w.close()

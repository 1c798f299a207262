"""The wire format (jaxviz.schema): real payloads, chart traits and chart messages have exactly
the declared keys, recursively, every optional key included somewhere; and every declared
field is named in the JS under js/src (code or JSDoc), so a field renamed on one side fails."""
from __future__ import annotations

import collections
import time
import dataclasses
import pathlib
import re
import types
import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxviz
from jaxviz import schema
from jaxviz.memory.run import run_trace
from jaxviz.view.chart import MemoryChart, MemoryEntry, live_run
from jaxviz.view.payload import build_payload

JS_SRC = pathlib.Path(__file__).resolve().parents[1] / "js" / "src"
TYPED_DICTS = [v for v in vars(schema).values() if typing.is_typeddict(v)]


# --- checking a value against a TypedDict, recursively ----------------------------------------

def _typeddict_for(v: dict, options: list[type]) -> type:
    """The member of a union of TypedDicts `v` is: by its `kind` literal, when they have one."""
    if len(options) == 1:
        return options[0]
    for td in options:
        kind = typing.get_type_hints(td).get("kind")
        if typing.get_origin(kind) is typing.Literal and v.get("kind") in typing.get_args(kind):
            return td
    raise AssertionError(f"{v!r:.200} matches none of {[td.__name__ for td in options]}")


def check(v, tp, where: str, seen: dict) -> None:
    """Asserts that `v` has the shape of type `tp`; records the keys seen per TypedDict."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is typing.Any:
        return
    if typing.is_typeddict(tp):
        assert isinstance(v, dict), f"{where}: {type(v).__name__}, not a {tp.__name__}"
        keys = set(v)
        missing = tp.__required_keys__ - keys
        extra = keys - tp.__required_keys__ - tp.__optional_keys__
        assert not missing and not extra, (
            f"{where} ({tp.__name__}): missing {sorted(missing)}, undeclared {sorted(extra)}")
        seen[tp] |= keys
        hints = typing.get_type_hints(tp)
        for k, x in v.items():
            check(x, hints[k], f"{where}.{k}", seen)
    elif origin in (typing.Union, types.UnionType):
        if v is None:
            assert type(None) in args, f"{where}: None, not a {tp}"
            return
        dicts = [a for a in args if typing.is_typeddict(a)]
        if dicts and isinstance(v, dict):
            check(v, _typeddict_for(v, dicts), where, seen)
            return
        leaves = [a for a in args if a is not type(None)]
        errors = []
        for a in leaves:
            try:
                check(v, a, where, seen)
                return
            except AssertionError as e:
                errors.append(str(e))
        raise AssertionError(f"{where}: {v!r:.80} is none of {tp}: {errors}")
    elif origin is list:
        assert isinstance(v, list), f"{where}: {type(v).__name__}, not a list"
        for i, x in enumerate(v):
            check(x, args[0] if args else typing.Any, f"{where}[{i}]", seen)
    elif origin is dict:
        assert isinstance(v, dict), f"{where}: {type(v).__name__}, not a dict"
        for k, x in v.items():
            assert isinstance(k, str), f"{where}: key {k!r} is not a str"
            check(x, args[1], f"{where}[{k!r}]", seen)
    elif origin is typing.Literal:
        assert v in args, f"{where}: {v!r} is not one of {args}"
    elif tp is float:
        assert isinstance(v, (int, float)) and not isinstance(v, bool), f"{where}: {v!r} is not a number"
    elif tp in (int, str, bool):
        assert isinstance(v, tp) and (tp is bool or not isinstance(v, bool)), (
            f"{where}: {v!r} is not a {tp.__name__}")
    else:
        raise AssertionError(f"{where}: no check for {tp}")


# --- real data: a payload with every optional field, and a chart's traits and messages --------

C = np.ones((8, 8), np.float32)             # a captured constant: a "const" node with nbytes


def _block(h, w):
    return jnp.tanh(h @ w) + 1.0            # + 1.0: a literal node


def _model(x, w):
    with jax.named_scope("scope"):          # ns
        x = _block(x, w)                    # two identical calls: block[0] x2, block[1] repeat_of
        x = _block(x, w)
    x, _ = jax.lax.scan(lambda c, _: (c * 2.0, None), x, None, length=3)   # subs, times=3
    return x @ C


CELL = """
import jax, jax.numpy as jnp
key = jax.random.PRNGKey(0)
a = jax.random.normal(key, (3,))
b = jax.random.normal(key, (3,))
"""


RECOMPILE = """
import jax, jax.numpy as jnp
f = jax.jit(lambda x: jnp.sin(x) * 2)
f(jnp.ones(3))
f(jnp.ones(4))
"""


@pytest.fixture(scope="module")
def ran():
    """A live_run with the chart's messages and traits recorded, and its memory entry."""
    sent = []
    chart = MemoryChart()
    chart.send = lambda content, buffers=None: sent.append(content)
    t = jaxviz.trace(jax.jit(lambda x: x * 0.5 + 1.0), jnp.zeros((4096,)))
    report = live_run(t, steps=3, chart=chart, display=False)
    chart._handle(chart, {"kind": "stop"}, [])          # what the Stop button sends
    return t, chart, sent, MemoryEntry(t.name, chart=chart, report=report)


def test_payload_keys_are_the_declared_ones(ran):
    t_run, _, _, entry = ran
    t = jaxviz.trace(_model, jnp.ones((8, 8)), jnp.ones((8, 8)))
    with jaxviz.options.using(max_eqns=3):
        cut = jaxviz.trace(_model, jnp.ones((8, 8)), jnp.ones((8, 8)))
    ct = jaxviz.trace_cell(CELL)
    assert ct.diagnostics, "the cell's key reuse gives a diagnostic"
    assert cut.graph.cut
    seen = collections.defaultdict(set)
    p = build_payload([t, cut, t_run, *ct.traces], ct.diagnostics, memory=[entry])
    check(p, schema.Payload, "payload", seen)
    assert p["memory"][0]["summary"] and p["memory"][0]["live"]
    # the memory tab while a run goes (no summary yet), and a payload without a memory tab
    live = build_payload([t_run], memory=[MemoryEntry(t_run.name, chart=MemoryChart())])
    check(live, schema.Payload, "payload", seen)
    assert live["memory"][0]["summary"] is None
    check(build_payload([t]), schema.Payload, "payload", seen)
    # a recompile: the payload compares its two traces (the view's "compare" action)
    again = jaxviz.trace_cell(RECOMPILE)
    p = build_payload(again.traces, again.diagnostics)
    check(p, schema.Payload, "payload", seen)
    every = p["diagnostics"] + [d for t in p["traces"] for d in t["diagnostics"]]
    assert p["compares"] and any(d["compare"] for d in every)   # (listed by the later trace)
    # a cell's view: what jaxviz added to its time
    from tests.test_widget_payload import decode_fragment

    p = decode_fragment(ct._repr_mimebundle_()["text/html"])
    check(p, schema.Payload, "payload", seen)
    assert p["cost"]["text"] == str(ct.cost)
    # the compiled memory section, from a real MemoryReport (a donation not measured: None)
    from jaxviz.memory.report import DonationSaving
    report = t_run.memory()
    report = dataclasses.replace(report, donations=report.donations + (
        DonationSaving("kw", 4, False, None, "a keyword argument: not measured"),))
    notes = ["compiled memory not computed for g (at most 1 function)"]
    compiled = build_payload([t_run], memory_reports=[report], memory_notes=notes)
    check(compiled, schema.Payload, "payload", seen)
    assert compiled["compiled_memory"][0]["buffers"] and compiled["compiled_notes"] == notes
    assert "collectives" not in compiled["compiled_memory"][0]   # one device: no mesh at all
    # a sharded program's (8 devices run in tests/mesh; here its records on this report)
    from jaxviz.mesh import Collective, Mesh
    from jaxviz.mesh.devices import Replicated
    mesh = Mesh(("x",), (8,), ("Auto",))
    sharded = dataclasses.replace(report, mesh=mesh, num_devices=8, collectives=(Collective(
        "all-gather", "all-gather", 4096, "f32[1024]", ("x",), 8, "sin", "jit(f)/sin",
        "f.py", 3, "f", "constraint", "with_sharding_constraint to P() at line 4", 4),),
        replicated=(Replicated("w", "f32[1024]", 4096, 8, ("x",), 512, ("x",)),),
        layouts=(("0:1", "f32[4096@x]"),))
    p = build_payload([t_run], memory_reports=[sharded])
    check(p, schema.Payload, "payload", seen)
    assert p["compiled_memory"][0]["collectives"][0]["cause_line"] == 4
    assert p["compiled_memory"][0]["devices"] == 8 and "devices" not in compiled["compiled_memory"][0]
    # the time tab, from a real profile (%%jaxtrace --profile)
    prof = jaxviz.trace_cell(RECOMPILE, profile=True)
    p = build_payload(prof.traces, prof.diagnostics, profile=prof.profile)
    check(p, schema.Payload, "payload", seen)
    assert p["profile"]["lines"] and p["profile"]["text"] == str(prof.profile)
    # every optional key occurs somewhere: the test covers the whole schema of the payload
    in_payload = set(seen)
    for td in in_payload:
        declared = td.__required_keys__ | td.__optional_keys__
        assert seen[td] == declared, f"{td.__name__}: never saw {sorted(declared - seen[td])}"
    assert {schema.Payload, schema.TraceEntry, schema.GraphDict, schema.BodyDict,
            schema.NodeDict, schema.SubDict, schema.GroupDict, schema.DiagnosticEntry,
            schema.MemoryTabEntry, schema.RunSummary, schema.RunSummaryRun, schema.ChartLane,
            schema.StepMs, schema.ChartSeries, schema.RunEvent, schema.CompareEntry,
            schema.DiffEntry, schema.NodeDiffEntry, schema.GroupDiffEntry, schema.CompiledMemoryEntry,
            schema.CompiledBuffer, schema.CompiledDonation, schema.CompiledCollective,
            schema.ProfileEntry,
            schema.ProfileLine, schema.ProfileKernel, schema.ProfileModule,
            schema.ProfileCompile, schema.ProfileTimeline} <= in_payload


def test_graph_json_and_diagnostics_match_the_schema():
    """Graph.to_dict and Diagnostic.to_dict on their own (the graph page's JSON)."""
    import json
    seen = collections.defaultdict(set)
    g = jaxviz.trace(_model, jnp.ones((8, 8)), jnp.ones((8, 8))).graph
    check(json.loads(g.to_json()), schema.GraphDict, "graph", seen)
    for d in jaxviz.trace_cell(CELL).diagnostics:
        check(d.to_dict(), schema.DiagnosticEntry, "diagnostic", seen)


def test_chart_traits_and_messages_are_the_declared_ones(ran):
    _, chart, sent, _ = ran
    seen = collections.defaultdict(set)
    check(chart.lanes, list[schema.ChartLane], "lanes", seen)
    check(chart.runs, list[schema.ChartRun], "runs", seen)
    assert len(chart.runs) == 2
    for i, m in enumerate(sent):
        check(m, schema.ChartMessage, f"message {i}", seen)
    check({"kind": "stop"}, schema.StopMessage, "from the view", seen)
    kinds = {m["kind"] for m in sent}
    assert kinds == {"samples", "steps", "events", "stopping"}
    assert {schema.SamplesMessage, schema.StepsMessage, schema.EventsMessage,
            schema.StoppingMessage, schema.StopMessage, schema.RunEvent} <= set(seen)


def test_payload_typeddicts_cover_the_builders():
    """The builders are annotated with the schema's types (annotations only)."""
    from jaxviz.diagnostics.diagnostic import Diagnostic
    from jaxviz.graph import model
    from jaxviz.view import payload
    assert typing.get_type_hints(payload.build_payload)["return"] is schema.Payload
    assert typing.get_type_hints(payload.run_summary)["return"] is schema.RunSummary
    assert typing.get_type_hints(payload.memory_entries)["return"] == list[schema.MemoryTabEntry]
    assert typing.get_type_hints(model.Graph.to_dict)["return"] is schema.GraphDict
    assert typing.get_type_hints(Diagnostic.to_dict)["return"] is schema.DiagnosticEntry


# --- the JS side -------------------------------------------------------------------------------

def _js_names() -> str:
    return "\n".join(p.read_text() for p in sorted(JS_SRC.rglob("*.js")))


@pytest.mark.parametrize("td", TYPED_DICTS, ids=lambda td: td.__name__)
def test_every_field_is_named_in_the_js(td):
    """Each field occurs in js/src as a property (`.name`, `name:` in code or JSDoc, `"name"`,
    `{name}`): a field renamed in Python or in JS fails here."""
    js = _js_names()
    missing = []
    for name in td.__required_keys__ | td.__optional_keys__:
        n = re.escape(name)
        if not re.search(rf"(?:\.{n}\b|\b{n}\??\s*:|[\"']{n}[\"']|[{{,]\s*{n}\s*[,}}=])", js):
            missing.append(name)
    assert not missing, f"{td.__name__}: {sorted(missing)} named nowhere in js/src"
    kind = typing.get_type_hints(td).get("kind")
    if typing.get_origin(kind) is typing.Literal:       # a message: its kind, as a string
        for value in typing.get_args(kind):
            assert re.search(rf"[\"']{re.escape(value)}[\"']", js), f"{td.__name__}: {value!r}"


def test_the_docs_name_every_typeddict():
    doc = (JS_SRC.parents[1] / "docs" / "graph-json.md").read_text()
    assert not [td.__name__ for td in TYPED_DICTS if f"`{td.__name__}`" not in doc]


def test_cell_chart_messages_are_the_declared_ones():
    """A default %%jaxtrace cell's chart: samples, the cell's call marks, its arrays."""
    from jaxviz.capture.recorder import Recorder
    from jaxviz.memory.timeline import CellWatch
    sent = []
    chart = MemoryChart()
    chart.send = lambda content, buffers=None: sent.append(content)
    rec = Recorder(__file__)
    watch = CellWatch(rec, on_update=lambda s, m, b, g: chart.on_cell(s, m, b, g, 0))
    chart.start_cell(watch.lanes)
    f = jax.jit(lambda x: x * 2.0)
    with watch, rec:
        x = jnp.ones((64, 64))
        for _ in range(3):
            x = f(x)
            time.sleep(0.05)
        del x
    chart.finish_cell(watch.stop())
    seen = collections.defaultdict(set)
    check(chart.lanes, list[schema.ChartLane], "lanes", seen)
    check(chart.runs, list[schema.ChartRun], "runs", seen)
    for i, m in enumerate(sent):
        check(m, schema.ChartMessage, f"message {i}", seen)
    assert {m["kind"] for m in sent} == {"samples", "marks", "arrays"}
    assert {schema.MarksMessage, schema.CallMarkEntry, schema.ArraysMessage, schema.ArrayEntry} <= set(seen)
    assert seen[schema.ArrayEntry] == set(schema.ArrayEntry.__required_keys__)

"""The graph view's payload: traces, diagnostics, source lines and memory runs as plain JSON.

One function, `build_payload`, shared by the live widget (`jaxviz.view.widget`) and the offline
HTML page (`jaxviz.view.html`), so both views read exactly the same data. The shape is declared
in jaxviz.schema (`Payload` and the entries in it; TypedDicts) and in JSDoc in js/src/graph/
(model.js, memory.js); docs/graph-json.md documents it field by field.

Example:
    payload = build_payload([trace])       # {"traces": [{"name", "graph", ...}], ...}
"""

from __future__ import annotations

import dataclasses
import linecache
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from jaxviz.graph import files
from jaxviz.graph.compare import diff_graphs
from jaxviz.memory.run import render_text as run_text
from jaxviz.schema import (
    CellCostEntry,
    ChartSeries,
    CompareEntry,
    DiagnosticEntry,
    MemoryTabEntry,
    Payload,
    RunSummary,
    RunSummaryRun,
    TraceEntry,
)
from jaxviz.view.compiled import compiled_entries
from jaxviz.view.diff import compare_entry
from jaxviz.view.timetab import profile_entry

SOURCE_CONTEXT = 2  # lines kept around each referenced line, for the inspector
MAX_SOURCE_LINES = 4000  # cap on source lines shipped in one payload
MEMORY_POINTS = 120  # points per lane and run kept for the memory tab's static chart
MEMORY_EVENTS = 20  # events per run kept in the memory summary
MAX_COMPARES = 4  # recompiles whose two traces a payload compares (the view's "compare")
MAX_COMPARE_EQNS = 5_000  # ... when both graphs stage at most this many equations


def jsonable(x: Any) -> Any:
    """Plain JSON data from dataclasses, tuples, dicts and scalars (anything else: str)."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if x == x and x not in (float("inf"), float("-inf")) else str(x)
    if hasattr(x, "to_dict"):
        return jsonable(x.to_dict())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in x]
    return str(x)


def _diag(d: Any) -> DiagnosticEntry:
    return jsonable(d)


def _trace_entry(t: Any) -> TraceEntry:
    return {
        "name": str(getattr(t, "name", "") or getattr(t.graph, "name", "")),
        "kind": str(getattr(t, "kind", "") or ""),  # "jit" | "eager" | "trace" | ...
        "user": bool(getattr(t, "user_code", True)),  # the user's own function
        "graph": t.graph.to_dict(),
        "calls": jsonable(getattr(t, "calls", None)),
        "calls_more": bool(getattr(t, "calls_uncounted", False)),
        "call_sites": jsonable(getattr(t, "call_sites", None)),
        "diagnostics": [_diag(d) for d in (getattr(t, "diagnostics", None) or ())],
        "donated": _donated_inputs(t),
    }


def _donated_inputs(t: Any) -> list[int]:
    """The top-level input nodes whose argument is donated (`donate_argnums`): the view marks
    them (their buffers may become an output's)."""
    flags = list(getattr(t, "donated", None) or ())
    inputs = t.graph.body.inputs
    if len(flags) != len(inputs):
        return []
    return [n for n, d in zip(inputs, flags) if d]


def _wanted_lines(traces: list, diagnostics: list) -> dict[str, set[int]]:
    want: dict[str, set[int]] = {}

    def add(loc) -> None:
        if loc is None:
            return
        file, line = (loc.file, loc.line) if hasattr(loc, "file") else (loc[0], loc[1])
        if file and line:
            want.setdefault(file, set()).update(
                range(max(1, line - SOURCE_CONTEXT), line + SOURCE_CONTEXT + 1)
            )

    for t in traces:
        for b in t.graph.bodies:
            for n in b.nodes:
                add(n.loc)
            for g in b.groups:
                add(g.loc)
    for d in diagnostics:
        dd = d if isinstance(d, dict) else jsonable(d)
        if dd.get("filename") and dd.get("line"):
            add((dd["filename"], dd["line"]))
    return want


def collect_sources(
    traces: list, diagnostics: list, sources: dict[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """{file: {line: text}} for the lines nodes and diagnostics point at, with context.

    Text comes from `sources` (cell name -> cell text) first, then `linecache`, which
    IPython fills with every executed cell.
    """
    out: dict[str, dict[str, str]] = {}
    budget = MAX_SOURCE_LINES
    for file, lines in sorted(_wanted_lines(traces, diagnostics).items()):
        text_lines = sources[file].splitlines() if sources and file in sources else None
        got: dict[str, str] = {}
        for ln in sorted(lines):
            if budget <= 0:
                break
            if text_lines is not None:
                s = text_lines[ln - 1] if ln <= len(text_lines) else ""
            else:
                s = linecache.getline(file, ln)
            s = s.rstrip("\n")
            if s or text_lines is not None:
                got[str(ln)] = s
                budget -= 1
        if got:
            out[file] = got
    return out


def _downsample(t: Any, v: Any, points: int) -> dict[str, list]:
    """At most `points` (t, bytes) pairs: the largest reading of each time bucket, so the
    peaks the summary quotes stay visible in the chart."""
    t = np.asarray(t, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if len(t) > points:
        edges = np.linspace(np.min(t), np.max(t), points + 1)
        k = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, points - 1)
        keep = [int(np.flatnonzero(k == b)[np.argmax(v[k == b])]) for b in np.unique(k)]
        t, v = t[keep], v[keep]
    return {"t": [round(float(x), 4) for x in t], "v": [int(x) for x in v]}


def _num(x: Any) -> float | None:
    return None if x is None else jsonable(float(x))


def run_summary(report: Any, points: int = MEMORY_POINTS) -> RunSummary:
    """The memory tab's static summary of a jaxviz RunReport: compact plain JSON.

    Per run: peak rise per lane (device lanes and the process RSS), XLA's estimate, step
    times, events, and the samples downsampled to `points` per lane; for the report: the
    peaks with and without donation and their ratio. The same figures as `str(report)`,
    which rides along as `text`.

    Example:
        s = run_summary(trace.run(steps=10))     # {"runs": [{"label": "with donation", ...}]}
    """
    runs: list[RunSummaryRun] = []
    for run in report.runs:
        st = np.asarray(run.step_times, dtype=np.float64) * 1e3
        sm = run.samples
        chart: list[ChartSeries] = []
        for i in range(len(sm.lanes)):
            m = sm.lane == i
            if m.any():
                d = _downsample(sm.t[m], sm.bytes[m], points)
                chart.append({"lane": i, "t": d["t"], "v": d["v"]})
        runs.append(
            {
                "label": run.label,  # "with donation"
                "donated": list(run.donated),  # ["x"]
                "baseline": {k: _num(v) for k, v in run.baseline.items()},
                "peak_bytes": {k: _num(v) for k, v in run.peak_bytes.items()},
                "peak_rise": {k: _num(v) for k, v in run.peak_rise.items()},  # {"cpu:0": 2.7e8}
                "xla_peak": run.xla_peak_bytes,  # int bytes or None
                "step_ms": (
                    {
                        "n": len(st),
                        "median": _num(np.median(st)),
                        "min": _num(np.min(st)),
                        "max": _num(np.max(st)),
                        "total": _num(np.sum(st)),
                    }
                    if len(st)
                    else {"n": 0}
                ),
                "samples": len(sm.t),
                "events": [
                    {"t": round(float(e.t), 4), "kind": e.kind, "label": e.label}
                    for e in run.events[:MEMORY_EVENTS]
                ],  # the first few
                "donations": sum(e.kind == "donation" for e in run.events),  # all of them
                "stopped": bool(run.stopped),
                "chart": chart,  # [{"lane": 0, "t": [0.0, ...], "v": [bytes, ...]}]
            }
        )
    lanes = report.runs[0].samples.lanes if report.runs else ()
    return {
        "name": str(report.name),
        "steps": int(report.steps),
        "source": str(report.source),
        "lanes": [{"id": ln.id, "label": ln.label, "source": ln.source} for ln in lanes],
        "runs": runs,
        "peak_with_donation": _num(report.peak_bytes_with_donation),
        "peak_without_donation": _num(report.peak_bytes_without_donation),
        "donation_ratio": _num(report.donation_ratio),
        "rss_ratio": _num(report.rss_ratio),
        "stopped": bool(report.stopped),
        "note": str(report.note or ""),
        "text": run_text(report),
    }


def memory_entries(memory: Iterable[Any], shown: Iterable[Any] = ()) -> list[MemoryTabEntry]:
    """The memory tab's entries: one per MemoryEntry (jaxviz.view.chart) with a live chart, a
    finished run or a note (why it did not run), for the traces shown (all when `shown` is
    empty).

    `live` is the `live_token` of the entry's MemoryChart (its model, when a kernel runs,
    is found in the page through it); `summary` is `run_summary` of its RunReport, or None
    while it runs; `note` says why there is no summary (e.g. the run failed).
    """
    names = {t.name for t in shown}
    out: list[MemoryTabEntry] = []
    for m in memory:
        if (names and m.trace not in names) or (
            m.chart is None and m.report is None and not m.note
        ):
            continue
        out.append(
            {
                "trace": str(m.trace or ""),
                "live": str(getattr(m.chart, "live_token", "") or ""),
                "summary": run_summary(m.report) if m.report is not None else None,
                "note": str(m.note or ""),
            }
        )
    return out


def _shift_locs(graph: dict, line) -> None:
    """Node and group locations as the editor numbers their lines (`files.shown_line`)."""
    names = graph.get("files", [])
    if not any(line(f, 1) != 1 for f in names):
        return
    for b in graph["bodies"]:
        for n in [*b["nodes"], *b.get("groups", [])]:
            loc = n.get("loc")
            if loc and isinstance(loc[0], int) and loc[0] < len(names):
                loc[1] = line(names[loc[0]], loc[1])


def _relabel_diag(d: DiagnosticEntry) -> None:
    name, line = files.file_label, files.shown_line
    f = d.get("filename", "")
    at = d.get("line")
    if at is not None:
        d["line"] = line(f, at)
    d["related"] = [[name(r[0]), line(r[0], r[1]), *r[2:]] for r in d.get("related") or []]
    d["filename"] = name(f)


def _files_in(payload: Payload) -> Iterator[str]:
    """The files a payload names (its sources, graphs, call sites and diagnostics)."""
    yield from payload["sources"]
    diags = list(payload["diagnostics"])
    for t in payload["traces"]:
        yield from t["graph"].get("files", [])
        yield from (s[0] for s in t.get("call_sites") or [])
        diags.extend(t["diagnostics"])
    for d in diags:
        yield d.get("filename", "")
        yield from (r[0] for r in d.get("related") or [])


def _relabel(payload: Payload) -> Payload:
    """Shows registered file labels and the editor's line numbers everywhere the view prints
    a file name or a line (the records keep the file's own)."""
    if not files.has_labels(_files_in(payload)):
        return payload
    name, line = files.file_label, files.shown_line
    for t in payload["traces"]:
        _shift_locs(t["graph"], line)  # type: ignore[arg-type]
        t["graph"]["files"] = [name(f) for f in t["graph"].get("files", [])]
        t["call_sites"] = [
            [name(s[0]), line(s[0], s[1]), *s[2:]] for s in (t.get("call_sites") or [])
        ]
        for d in t["diagnostics"]:
            _relabel_diag(d)
    for d in payload["diagnostics"]:
        _relabel_diag(d)
    payload["sources"] = {
        name(f): {str(line(f, int(k))): v for k, v in lines.items()}
        for f, lines in payload["sources"].items()
    }
    return payload


def cost_entry(cost: Any) -> CellCostEntry:
    """A CellCost (jaxviz.graph.trace) as the view's status line reads it."""
    return {
        "cell_seconds": float(cost.cell_seconds),
        "capture_seconds": float(cost.capture_seconds),
        "analysis_seconds": float(cost.analysis_seconds),
        "text": str(cost),
    }


def build_payload(
    traces: Iterable[Any],
    diagnostics: Iterable[Any] = (),
    sources: dict[str, str] | None = None,
    memory: Iterable[Any] = (),
    memory_reports: Iterable[Any] = (),
    memory_notes: Iterable[str] = (),
    cost: Any = None,
    profile: Any = None,
) -> Payload:
    """The view's payload for duck-typed traces (.name, .graph, .calls, .call_sites, .diagnostics).

    Traces without a graph (tracing failed) contribute only their diagnostics, at cell level.
    `memory` entries (traces that ran, or run now with a live chart) add a "memory" list
    (`memory_entries`), which the view shows as its memory tab; `memory_reports`
    (jaxviz.MemoryReport, from `Trace.memory()`) add the compiled programs' buffers to it,
    and `memory_notes` what was not computed (with how to get it); `cost` (a cell's
    jaxviz.graph.trace.CellCost) what jaxviz added to the cell's time; `profile` (a
    ProfileReport, %%jaxtrace --profile) the time tab (jaxviz.view.timetab).
    """
    traces = list(traces)
    diagnostics = list(diagnostics)
    shown = [t for t in traces if getattr(t, "graph", None) is not None]
    # cell-level: what no shown trace lists already (CellTrace.diagnostics holds both kinds)
    own = {id(d) for t in shown for d in (getattr(t, "diagnostics", None) or ())}
    cell = [_diag(d) for d in diagnostics if id(d) not in own]
    for t in traces:
        if getattr(t, "graph", None) is None:
            cell.extend(_diag(d) for d in (getattr(t, "diagnostics", None) or ()))
    payload: Payload = {
        "traces": [_trace_entry(t) for t in shown],
        "diagnostics": cell,
        "sources": collect_sources(shown, diagnostics, sources),
    }
    entries = memory_entries(memory, shown)
    if entries:
        payload["memory"] = entries
    compares = _compares(payload, traces, shown)
    if compares:
        payload["compares"] = compares
    compiled = compiled_entries(memory_reports, shown)
    if compiled:
        payload["compiled_memory"] = compiled
    notes = [str(n) for n in memory_notes]
    if notes:
        payload["compiled_notes"] = notes
    if cost is not None:  # a cell's CellCost: the view's status line states it
        payload["cost"] = cost_entry(cost)
    if profile is not None:  # the time tab: each line's device time
        payload["profile"] = profile_entry(profile)
    return _relabel(payload)


def _compares(payload: Payload, traces: list, shown: list) -> list[CompareEntry]:
    """The two traces of each recompile finding compared (the diagnostic's `compare` then
    holds their indices in the payload's traces; null when they are not both shown)."""
    at = {i: k for k, t in enumerate(shown) for i, x in enumerate(traces) if x is t}
    out: list[CompareEntry] = []
    done: dict[tuple[int, int], bool] = {}
    every = [d for t in payload["traces"] for d in t["diagnostics"]] + payload["diagnostics"]
    for d in every:
        pair = d.get("compare")
        if not pair:
            continue
        ia, ib = at.get(pair[0], -1), at.get(pair[1], -1)
        if min(ia, ib) >= 0 and (ia, ib) not in done:
            a, b = shown[ia], shown[ib]
            small = max(a.graph.n_eqns, b.graph.n_eqns) <= MAX_COMPARE_EQNS
            done[(ia, ib)] = small and len(out) < MAX_COMPARES
            if done[(ia, ib)]:
                out.append(compare_entry(diff_graphs(a.graph, b.graph), a, b, ia, ib))
        d["compare"] = [ia, ib] if done.get((ia, ib)) else None
    return out

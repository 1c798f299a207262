"""The graph view's payload: traces, diagnostics and source lines as plain JSON.

One function, `build_payload`, shared by the live widget (`jaxviz._widget`) and the offline
HTML page (`jaxviz._html`), so both views read exactly the same data. The shape is declared
in JSDoc in js/src/graph/model.js.

Example:
    payload = build_payload([trace])       # {"traces": [{"name", "graph", ...}], ...}
"""
from __future__ import annotations

import dataclasses
import linecache
from typing import Any, Iterable

SOURCE_CONTEXT = 2          # lines kept around each referenced line, for the inspector
MAX_SOURCE_LINES = 4000     # cap on source lines shipped in one payload


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


def _diag(d: Any) -> dict:
    return jsonable(d) if not isinstance(d, dict) else jsonable(d)


def _trace_entry(t: Any) -> dict:
    return {
        "name": str(getattr(t, "name", "") or getattr(t.graph, "name", "")),
        "graph": t.graph.to_dict(),
        "calls": jsonable(getattr(t, "calls", None)),
        "call_sites": jsonable(getattr(t, "call_sites", None)),
        "diagnostics": [_diag(d) for d in (getattr(t, "diagnostics", None) or ())],
    }


def _wanted_lines(traces: list, diagnostics: list) -> dict[str, set[int]]:
    want: dict[str, set[int]] = {}

    def add(loc) -> None:
        if loc is None:
            return
        file, line = (loc.file, loc.line) if hasattr(loc, "file") else (loc[0], loc[1])
        if file and line:
            want.setdefault(file, set()).update(range(max(1, line - SOURCE_CONTEXT),
                                                      line + SOURCE_CONTEXT + 1))

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


def collect_sources(traces: list, diagnostics: list,
                    sources: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
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


def build_payload(traces: Iterable[Any], diagnostics: Iterable[Any] = (),
                  sources: dict[str, str] | None = None) -> dict:
    """The view's payload for duck-typed traces (.name, .graph, .calls, .call_sites, .diagnostics).

    Traces without a graph (tracing failed) contribute only their diagnostics, at cell level.
    """
    traces = list(traces)
    diagnostics = list(diagnostics)
    shown = [t for t in traces if getattr(t, "graph", None) is not None]
    cell = [_diag(d) for d in diagnostics]
    for t in traces:
        if getattr(t, "graph", None) is None:
            cell.extend(_diag(d) for d in (getattr(t, "diagnostics", None) or ()))
    return {
        "traces": [_trace_entry(t) for t in shown],
        "diagnostics": cell,
        "sources": collect_sources(shown, diagnostics, sources),
    }

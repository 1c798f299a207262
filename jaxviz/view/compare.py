"""Two traces side by side: `jaxviz.compare(a, b)`, its text twin, payload and views.

The diff itself is jaxviz.graph.compare's; this module renders it: `compare_text` (the text
twin: the call paths whose cost or equations changed, with FLOPs and bytes deltas, then each
equation that differs), `compare_payload` (what js/src/entries/compare.js draws: two graph
views whose panes follow each other, the differences coloured), and the `Comparison` a user
holds (rich display, `str()`, `save_html`, `widget`).

Example:
    >>> c = jaxviz.compare(jaxviz.trace(mlp, params_16, x), jaxviz.trace(mlp, params_32, x))
    >>> print(c)            # changed mlp > layer[0]  FLOPs 1.3 kFLOP -> 2.6 kFLOP (+1.3 kFLOP) ...
"""

from __future__ import annotations

import html
import pathlib
import uuid
from typing import Any

import anywidget
import traitlets

from jaxviz.format import fmt_bytes, human
from jaxviz.graph.compare import GraphDiff, GroupDiff, NodeDiff, diff_graphs
from jaxviz.graph.files import shown_line
from jaxviz.graph.trace import CellTrace, Trace
from jaxviz.schema import ComparePayload, GroupDiffEntry, NodeDiffEntry
from jaxviz.view import html as _html
from jaxviz.view.assets import bundle
from jaxviz.view.payload import build_payload

TEXT_NODES = 200  # equations listed in the text/plain twin; str() lists all
_SIG = 60  # characters of a signature in a title


def _label(t: Trace) -> str:
    sig = t.signature
    if len(sig) > _SIG:
        sig = sig[: _SIG - 1] + "…"
    return f"{t.name}({sig})"


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 1)


def _delta(a: float, b: float, fmt) -> str:
    if a == b:
        return fmt(a)
    sign = "+" if b > a else "-"
    ratio = f", x{b / a:.2f}" if a and b else ""
    return f"{fmt(a)} -> {fmt(b)} ({sign}{fmt(abs(b - a))}{ratio})"


def _flops(x: float) -> str:
    return human(x, "FLOP")


def _line(d: NodeDiff) -> str:
    la = shown_line(d.file, d.line_a) if d.line_a else None
    lb = shown_line(d.file, d.line_b) if d.line_b else None
    if la and lb and la != lb:
        return f"line {la} -> {lb}"
    return f"line {la or lb}" if (la or lb) else "no line"


def _types(a: tuple[str, ...], b: tuple[str, ...]) -> str:
    return f"{', '.join(a) or '()'} -> {', '.join(b) or '()'}"


def node_line(d: NodeDiff) -> str:
    """`dot_general (line 3) changed: in f32[8,4], f32[4,16] -> f32[8,4], f32[4,32]; ...`"""
    head = f"{d.op} ({_line(d)}) {d.status}"
    if d.status == "added":
        return f"{head}: {', '.join(d.ins_b)} -> {', '.join(d.out_b)}"
    if d.status == "removed":
        return f"{head}: {', '.join(d.ins_a)} -> {', '.join(d.out_a)}"
    what = []
    if d.ins_a != d.ins_b:
        what.append(f"in {_types(d.ins_a, d.ins_b)}")
    if d.out_a != d.out_b:
        what.append(f"out {_types(d.out_a, d.out_b)}")
    if d.params_a or d.params_b:
        what.append(f"params {_types(d.params_a, d.params_b)}")
    return f"{head}: " + "; ".join(what)


def group_line(g: GroupDiff) -> str:
    counts = ", ".join(
        f"{n} {k}"
        for k, n in (("changed", g.changed), ("added", g.added), ("removed", g.removed))
        if n
    )
    return (
        f"{g.status:<8} {g.path}: FLOPs {_delta(g.flops_a, g.flops_b, _flops)} · "
        f"bytes {_delta(g.bytes_a, g.bytes_b, fmt_bytes)}" + (f" · {counts}" if counts else "")
    )


def compare_text(d: GraphDiff, a: Trace, b: Trace, max_nodes: int | None = None) -> str:
    """The text twin: a summary, the call paths that differ, the equations that differ."""
    n = len(d.nodes)
    head = f"jaxviz compare: a = {_label(a)}, b = {_label(b)}: " + (
        f"{n} equation{'s' if n != 1 else ''} differ ({d.count('changed')} changed, "
        f"{d.count('added')} added, {d.count('removed')} removed), {d.same} the same"
        if n
        else f"the same graph ({d.same} equations)"
    )
    lines = [
        head,
        f"  a: {a.graph.n_eqns} eqns · {_flops(a.graph.flops)} · {fmt_bytes(a.graph.body.bytes)}",
        f"  b: {b.graph.n_eqns} eqns · {_flops(b.graph.flops)} · {fmt_bytes(b.graph.body.bytes)}",
    ]
    moved = [g for g in d.groups if g.status != "same"]
    alike = [g.path for g in d.groups if g.status == "same"]
    if moved:
        lines.append("call paths (a -> b):")
        lines.extend(f"  {group_line(g)}" for g in moved)
    if alike:
        lines.append(f"  same: {', '.join(alike)}")
    if d.nodes:
        lines.append("equations:")
        path = None
        for k, nd in enumerate(d.nodes):
            if max_nodes is not None and k >= max_nodes:
                lines.append(f"  ... {n - k} more (str() lists all)")
                break
            if nd.path != path:
                path = nd.path
                lines.append(f"  {path or '(top level)'}")
            lines.append(f"    {node_line(nd)}")
    return "\n".join(lines)


def _node_entry(d: NodeDiff) -> NodeDiffEntry:
    return {
        "status": d.status,
        "path": d.path,
        "op": d.op,
        "a": list(d.a) if d.a else None,
        "b": list(d.b) if d.b else None,
        "line_a": shown_line(d.file, d.line_a) if d.line_a else None,
        "line_b": shown_line(d.file, d.line_b) if d.line_b else None,
        "ins_a": list(d.ins_a),
        "ins_b": list(d.ins_b),
        "out_a": list(d.out_a),
        "out_b": list(d.out_b),
        "params_a": list(d.params_a),
        "params_b": list(d.params_b),
        "flops_a": _num(d.flops_a),
        "flops_b": _num(d.flops_b),
        "bytes_a": _num(d.bytes_a),
        "bytes_b": _num(d.bytes_b),
    }


def _group_entry(g: GroupDiff) -> GroupDiffEntry:
    return {
        "path": g.path,
        "status": g.status,
        "flops_a": _num(g.flops_a),
        "flops_b": _num(g.flops_b),
        "bytes_a": _num(g.bytes_a),
        "bytes_b": _num(g.bytes_b),
        "eqns_a": g.eqns_a,
        "eqns_b": g.eqns_b,
        "changed": g.changed,
        "added": g.added,
        "removed": g.removed,
    }


def compare_payload(
    d: GraphDiff, a: Trace, b: Trace, sources: dict[str, str] | None = None
) -> ComparePayload:
    """What the compare view reads (docs/graph-json.md, "Compare")."""
    return {
        "kind": "compare",
        "names": [_label(a), _label(b)],
        "a": build_payload([a], sources=sources),
        "b": build_payload([b], sources=sources),
        "diff": {
            "nodes": [_node_entry(x) for x in d.nodes],
            "groups": [_group_entry(g) for g in d.groups],
            "pairs": [list(p) for p in d.pairs],
            "gpairs": [list(p) for p in d.group_pairs],
            "same": d.same,
            "marks": [dict(d.marks_a), dict(d.marks_b)],
        },
        "text": compare_text(d, a, b, TEXT_NODES),
    }


class CompareWidget(anywidget.AnyWidget):
    """The compare view as a Jupyter widget: two graph panes that follow each other.

    Traits: payload (ComparePayload), selected ({"side": "a", "body": 0, "node": 7}: the node
    clicked last, in either pane).
    """

    _esm = bundle("compare.js")
    payload = traitlets.Dict().tag(sync=True)
    selected = traitlets.Dict().tag(sync=True)
    live_token = traitlets.Unicode("").tag(sync=True)


class Comparison:
    """Two traces compared: `str()` is the text twin; in a notebook, two graph views whose
    panes follow each other, the differences coloured. Made by `jaxviz.compare(a, b)`.

    Attributes: a, b (the Traces), diff (jaxviz.graph.compare.GraphDiff).
    """

    def __init__(self, a: Trace, b: Trace, sources: dict[str, str] | None = None):
        self.a, self.b = a, b
        self.diff = diff_graphs(a.graph, b.graph)
        self._sources = sources
        self._widget: CompareWidget | None = None

    def payload(self) -> ComparePayload:
        return compare_payload(self.diff, self.a, self.b, self._sources)

    def __str__(self) -> str:
        return compare_text(self.diff, self.a, self.b)

    def __repr__(self) -> str:
        d = self.diff
        return (
            f"<jaxviz.Comparison {_label(self.a)} vs {_label(self.b)}: {d.count('changed')} "
            f"changed, {d.count('added')} added, {d.count('removed')} removed, {d.same} same>"
        )

    @property
    def widget(self) -> CompareWidget:
        """The compare view as a widget (display it; `.selected` is the node clicked last)."""
        if self._widget is None:
            self._widget = CompareWidget(payload=dict(self.payload()), live_token=uuid.uuid4().hex)
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        payload = self.payload()
        plain = payload["text"]
        try:
            fragment = _html.html_fragment(payload, plain, bundle="compare.js")
        except _html.BundleMissing as e:
            fragment = f"<pre>{html.escape(plain)}\n\n{html.escape(str(e))}</pre>"
        return {"text/plain": plain, "text/html": fragment}

    def save_html(self, path: str | pathlib.Path, title: str | None = None) -> pathlib.Path:
        """Writes the compare view as one self-contained HTML page (works offline)."""
        payload = self.payload()
        fragment = _html.html_fragment(payload, payload["text"], bundle="compare.js")
        path = pathlib.Path(path)
        name = title or f"jaxviz compare: {self.a.name} vs {self.b.name}"
        path.write_text(_html.page(fragment, name), encoding="utf-8")
        return path


def _one_trace(x: Any, which: str) -> Trace:
    if isinstance(x, Trace):
        if x.graph is None or (x.graph.n_eqns == 0 and x.error is not None):
            raise ValueError(f"jaxviz.compare: {which} ({x.name}) has no graph: tracing failed.")
        return x
    if isinstance(x, CellTrace):
        own = [t for t in x.traces if t.user_code]
        if len(own) == 1:
            return own[0]
        names = [t.name for t in own] or [t.name for t in x.traces]
        raise TypeError(
            f"jaxviz.compare: {which} is a CellTrace of {len(own)} functions of your own "
            f"({names}); pick one, e.g. jaxviz.compare(ct_a[{names[0]!r}], ct_b[{names[0]!r}])."
            if names
            else f"jaxviz.compare: {which} is a CellTrace that traced nothing."
        )
    raise TypeError(
        f"jaxviz.compare expects two jaxviz.Trace objects (jaxviz.trace(f, x), or one of "
        f"%%jaxtrace -o ct's ct.traces), got {type(x).__name__} for {which}."
    )


def compare(a: Any, b: Any) -> Comparison:
    """Shows two traces side by side: which equations were added, removed or changed
    (shape, dtype, params), matched by call path and source line, with the FLOPs and bytes
    of each call path in both. `str()` of the result lists the differences.

    Example:
        >>> c = jaxviz.compare(jaxviz.trace(mlp, small, x), jaxviz.trace(mlp, wide, x))
        >>> c                     # in a notebook: both graphs, the changed layer coloured
        >>> print(c)              # the text twin
    """
    ta, tb = _one_trace(a, "a"), _one_trace(b, "b")
    return Comparison(ta, tb)

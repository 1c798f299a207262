"""The text twin and the payload entries of two traces compared (jaxviz.graph.compare).

`compare_text` is what `str(jaxviz.compare(a, b))` prints: the call paths whose cost or
equations changed, with FLOPs and bytes in both, then each equation that differs; `diff_entry`
is the differences as the compare view reads them (schema.DiffEntry). Lines are shown as the
editor numbers them.
"""

from __future__ import annotations

from typing import Any

from jaxviz.format import fmt_bytes, fold_avals, human
from jaxviz.graph.compare import GraphDiff, GroupDiff, NodeDiff
from jaxviz.graph.files import file_label, shown_line
from jaxviz.schema import CompareEntry, DiffEntry, GroupDiffEntry, NodeDiffEntry

TEXT_NODES = 200  # equations listed in the text/plain twin; str() lists all
_SIG = 60  # characters of a signature in a title


def label(t: Any) -> str:
    b = t.graph.body
    sig = fold_avals([b.nodes[i].out[0] for i in b.inputs])
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
    """`line 3 -> 5`; across files (a function copied to another cell) each line says its
    cell: `cell [3] line 27, cell [5] line 6`, which does not read as a move."""
    fb = d.file_b or d.file
    la = shown_line(d.file, d.line_a) if d.line_a else None
    lb = shown_line(fb, d.line_b) if d.line_b else None
    if la and lb and fb != d.file:
        return f"{file_label(d.file)} line {la}, {file_label(fb)} line {lb}"
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


def compare_text(d: GraphDiff, a: Any, b: Any, max_nodes: int | None = None) -> str:
    """The text twin: a summary, the call paths that differ, the equations that differ."""
    n = len(d.nodes)
    head = f"jaxviz compare: a = {label(a)}, b = {label(b)}: " + (
        f"{n} equation{'s differ' if n != 1 else ' differs'} ({d.count('changed')} changed, "
        f"{d.count('added')} added, {d.count('removed')} removed), {d.same} the same"
        if n
        else f"the same graph ({d.same} equations)"
    )
    lines = [
        head,
        f"  a: {a.graph.n_eqns} eqns · {_flops(a.graph.flops)} · {fmt_bytes(a.graph.body.bytes)}",
        f"  b: {b.graph.n_eqns} eqns · {_flops(b.graph.flops)} · {fmt_bytes(b.graph.body.bytes)}",
    ]
    na, nb = d.a.body.path, d.b.body.path
    if na and nb and na != nb:
        lines.append(f"  b's {nb} matched as a's {na}: its call paths are named as a's")
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
        "line_b": shown_line(d.file_b or d.file, d.line_b) if d.line_b else None,
        "file_a": file_label(d.file) if d.a and d.file else "",
        "file_b": file_label(d.file_b or d.file) if d.b and (d.file_b or d.file) else "",
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


def diff_entry(d: GraphDiff) -> DiffEntry:
    """The differences as the compare view reads them (docs/graph-json.md, "Compare")."""
    return {
        "nodes": [_node_entry(x) for x in d.nodes],
        "groups": [_group_entry(g) for g in d.groups],
        "pairs": [list(p) for p in d.pairs],
        "gpairs": [list(p) for p in d.group_pairs],
        "same": d.same,
        "marks": [dict(d.marks_a), dict(d.marks_b)],
    }


def compare_entry(d: GraphDiff, a: Any, b: Any, ia: int, ib: int) -> CompareEntry:
    """A recompile's two traces compared, inside a graph view's payload: `a`, `b` are the
    indices of the traces in the payload."""
    return {
        "a": ia,
        "b": ib,
        "names": [label(a), label(b)],
        "diff": diff_entry(d),
        "text": compare_text(d, a, b, TEXT_NODES),
    }

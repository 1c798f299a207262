"""The memory tab's compiled-memory section: MemoryReports (jaxviz.memory.report) as the
payload's `compiled_memory` entries (jaxviz.schema.CompiledMemoryEntry), which
js/src/graph/buffers.js draws: the schedule's timeline and the buffers at the peak, each row
selecting its graph node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from jaxviz.memory.report import category_totals, padding, summary_lines
from jaxviz.mesh.eager import EagerCollectives, trace_index
from jaxviz.mesh.text import eager_lines
from jaxviz.schema import (
    CompiledBuffer,
    CompiledCollective,
    CompiledDonation,
    CompiledMemoryEntry,
)

MAX_BUFFERS = 200  # rows per function
TIMELINE_POINTS = 400  # points of the timeline kept (the peak among them)


def _timeline(values: tuple[int, ...], peak: int) -> list[list[int]]:
    n = len(values)
    if n <= TIMELINE_POINTS:
        return [[i, int(v)] for i, v in enumerate(values)]
    stride = n / TIMELINE_POINTS
    keep = sorted({int(k * stride) for k in range(TIMELINE_POINTS)} | {peak, n - 1})
    return [[i, int(values[i])] for i in keep]


def report_trace(r: Any, traces: Sequence[Any]) -> int | None:
    """The trace of `traces` the report explains: same name and inputs, else same name."""
    sig = getattr(r, "signature", "")
    named = [k for k, t in enumerate(traces) if getattr(t, "name", None) == r.name]
    for k in named:
        try:
            if sig and traces[k].signature == sig:
                return k
        except Exception:  # a trace without a graph has no signature
            continue
    return named[0] if named else None


def _path(trace: Any, ids: tuple[str, ...]) -> str:
    """The call path of the first graph node of `ids`, less the function's own name
    ("model > block[2] > mlp" in step); "" when there is none."""
    try:
        b, n = (int(x) for x in ids[0].split(":"))
        graph = trace.graph
        path = graph.bodies[b].nodes[n].path
        # a node of a body one equation calls (jax.nn.relu's custom_jvp in block[2]): its
        # caller's path names the layer ("loss > block[2]"), the body's own stops at "block"
        callers = [
            c for body in graph.bodies for c in body.nodes if any(s.body == b for s in c.subs)
        ]
        if b != graph.root and len(callers) == 1 and len(callers[0].path) > len(path):
            path = callers[0].path
    except Exception:  # no node, no graph: the row says its line only
        return ""
    head = f"{getattr(trace, 'name', '')} > "
    return path[len(head) :] if path.startswith(head) else path


def compiled_entry(r: Any, index: int | None = None, trace: Any = None) -> CompiledMemoryEntry:
    buffers: list[CompiledBuffer] = [
        {
            "name": b.name,
            "bytes": int(b.bytes),
            # "f32[3,5]: 2.0 KiB on this TPU (tiles of 4x128)"; on a mesh, one device's part:
            # "f32[256,256] of f32[2048,256], 1/8 on `x`"
            "type": padding(b) or (f"{b.type} of {b.whole}, {b.part}" if b.part else b.type),
            "category": b.category,
            "op": b.op,
            "where": b.where,
            "line": int(b.line),
            "node_ids": list(b.node_ids),
            "inside": b.inside,
            "path": _path(trace, b.node_ids) if b.node_ids and trace is not None else "",
        }
        for b in r.buffers[:MAX_BUFFERS]
    ]
    donations: list[CompiledDonation] = [
        {
            "arg": d.arg,
            "bytes": int(d.bytes),
            "donated": bool(d.donated),
            "saves": None if d.saves is None else int(d.saves),
            "text": d.sentence(),
        }
        for d in r.donations
    ]
    entry: CompiledMemoryEntry = {
        "trace": r.name,
        "index": index,
        "peak_bytes": int(r.peak_bytes),
        "xla_total": r.xla_total,
        "steps": len(r.timeline),
        "peak_step": int(r.peak_step),
        "timeline": _timeline(r.timeline, r.peak_step),
        "buffers": buffers,
        "donations": donations,
        "notes": list(r.notes),
        "text": str(r),
        "summary": [{"text": t, "source": src} for t, src in summary_lines(r)],
        "totals": category_totals(r),
    }
    if r.num_devices > 1:  # its figures are per device
        entry["devices"] = int(r.num_devices)
    if r.mesh is not None:  # a sharded program's: nothing of it on one device
        entry["mesh"] = r.mesh.legend
        entry["collectives"] = [_collective(c) for c in r.collectives[:MAX_BUFFERS]]
        entry["replicated"] = [x.sentence() for x in r.replicated]
        entry["layouts"] = dict(r.layouts)
    return entry


def _collective(c: Any) -> CompiledCollective:
    return {
        "name": c.name,
        "kind": c.kind,
        "bytes": int(c.bytes),
        "axes": list(c.axes),
        "op": c.op,
        "where": c.where,
        "line": int(c.line),
        "cause": c.cause,
        "reason": c.reason,
        "cause_line": int(c.cause_line),
        "node_ids": list(c.node_ids),
        "cause_ids": list(c.cause_ids),
        "times": int(c.times),
    }


def eager_entry(e: EagerCollectives, index: int | None) -> CompiledMemoryEntry:
    """The collectives of a program JAX compiled for an eager op (jaxviz.mesh.eager): an
    entry with no schedule (`steps` 0: the memory tab shows its collectives only)."""
    about = (
        f"the program JAX compiled for `{e.program}` at line {e.line} while the cell ran "
        "(an eager op, outside jax.jit): its collectives, read from that executable"
    )
    return {
        "trace": e.trace or f"line {e.line}: {e.program}", "index": index, "peak_bytes": 0,
        "xla_total": None, "steps": 0, "peak_step": 0, "timeline": [], "buffers": [],
        "donations": [], "notes": [about], "text": "\n".join(eager_lines([e])),
        "summary": [], "totals": [], "devices": e.mesh.size, "mesh": e.mesh.legend,
        "collectives": [_collective(c) for c in e.collectives[:MAX_BUFFERS]],
        "replicated": [], "layouts": {},
    }  # fmt: skip


def compiled_entries(
    reports: Iterable[Any], traces: Iterable[Any] = ()
) -> list[CompiledMemoryEntry]:
    """One entry per MemoryReport (or eager program's collectives, jaxviz.mesh.eager), in
    the order given (`traces`: the payload's traces, whose index each entry names: two
    signatures of one function are two traces of one name)."""
    shown = list(traces)
    out = []
    for r in reports:
        if isinstance(r, EagerCollectives):
            out.append(eager_entry(r, trace_index(r, shown)))
            continue
        k = report_trace(r, shown)
        out.append(compiled_entry(r, k, shown[k] if k is not None else None))
    return out

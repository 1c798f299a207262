"""Folding a cell's look-alike traces: a jitted function made anew at each iteration of a loop
(`f = jax.jit(lambda x: ...)` inside the loop) is traced and compiled once per iteration, and
the capture records one trace per function object: 323 traces of one program, each with its
graph, which the cell's view and the session kept (a real notebook's kernel grew +176 to
+706 MB). Such traces are shown as their first and last (what a recompile finding compares),
the calls of the others added to the first's, with a note of how many there were.

Traces fold when they are the same program from the same place: jitted functions of the same
name, signature, call sites, static arguments and top-level equations, with no error. A
function traced again for another shape is another program: it keeps its own trace.

    >>> import jaxviz  # (jaxviz.trace_cell folds the traces it makes)
    >>> loop = "for i in range(5):\\n    y = jax.jit(lambda x: x * 2)(1.0)\\n"
    >>> ct = jaxviz.trace_cell("import jax\\n" + loop)
    >>> [(t.name, t.calls) for t in ct.traces if t.kind == "jit"]
    [('<lambda>', 4), ('<lambda>', 1)]
"""

from __future__ import annotations

import dataclasses
from typing import Any

FOLD_FROM = 3  # look-alike traces from this many on are folded


def _shape(t: Any) -> Any:
    """What makes two traces one program from one place (None: never folded)."""
    if t.kind != "jit" or t.error is not None or t.jaxpr is None:
        return None
    try:
        ops = tuple(n.op for n in t.graph.body.nodes if n.kind == "eqn")
        return (
            t.name,
            t.signature,
            tuple(t.call_sites),
            repr(t.args_spec),
            repr(sorted(t.kwargs_spec.items())),
            t.static,
            ops,
        )
    except Exception:  # a trace of an odd shape: left as it is
        return None


def fold(traces: list) -> tuple[list, dict[int, int]]:
    """The traces with each group of FOLD_FROM or more look-alikes (see the module) kept as
    its first and its last (a recompile finding compares those two), the first's `calls`
    the group's, both with a note; and where each trace's index went (a dropped one: to its
    group's first or last, whichever is nearer). The dropped traces' graphs and jaxprs go."""
    keys = [_shape(t) for t in traces]
    groups: dict[Any, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key if key is not None else ("one", i), []).append(i)
    keep: dict[int, int] = {}  # old index -> new index, for the traces kept
    where: dict[int, int] = {}  # old index -> the kept one it goes to
    for members in groups.values():
        if len(members) < FOLD_FROM:
            where.update((i, i) for i in members)
            continue
        first, last = members[0], members[-1]
        for i in members:
            where[i] = first if i - first <= last - i else last
        group = [traces[i] for i in members]
        head, tail = traces[first], traces[last]
        head.calls = sum(g.calls for g in group) - tail.calls
        head.calls_uncounted = any(g.calls_uncounted for g in group)
        note = (
            f"{len(group)} look-alike traces, the first and the last shown: the same program, "
            f"made anew as a new jitted function {len(group)} times (each one traced and "
            f"compiled again); the others' calls are added to the first's"
        )
        head.notes.append(note)
        tail.notes.append(note)
    out: list = []
    for i, t in enumerate(traces):
        if where[i] == i:
            keep[i] = len(out)
            out.append(t)
    return out, {i: keep[w] for i, w in where.items()}


def fold_cell(ct: Any) -> None:
    """Look-alike traces (a jitted function made anew at each iteration) kept as two
    (`fold`); the findings' trace pairs (`compare`) follow them."""
    kept, where = fold(ct.traces)
    if len(kept) == len(ct.traces):
        return
    moved = {}
    for d in ct.diagnostics:
        pair = getattr(d, "compare", None)
        if pair:
            moved[id(d)] = dataclasses.replace(d, compare=tuple(where.get(i, i) for i in pair))
    ct.diagnostics[:] = [moved.get(id(d), d) for d in ct.diagnostics]
    for t in kept:
        t.diagnostics[:] = [moved.get(id(d), d) for d in t.diagnostics]
    ct.traces[:] = kept

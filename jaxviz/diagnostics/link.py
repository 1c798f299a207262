"""Where a cell's finding is in the graph: the trace and the nodes it is about.

A finding seen while the cell ran (a NaN, a key consumed twice across calls) or found in its
namespace (a leaked tracer) knows its line, not its node. Each is pointed here at the node
the view should select (the NaN's first op, the key's consumers, the leaked value's
equation), and filed under that trace, so the view's click opens it and its tab counts it.

Example:
    homes = {}
    d = link_nan(d, cell.traces, "log", "f", homes)   # node_ids=("0:3",), trace="f"
    file_under(out, homes)                            # f's Trace.diagnostics lists it
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from jaxviz.diagnostics.diagnostic import Diagnostic

# the ops that consume a PRNG key (what a key reuse draws twice)
KEY_CONSUMERS = frozenset({"random_bits", "random_split", "random_fold_in", "threefry2x32"})


def _nodes(t: Any) -> Iterator[tuple[Any, Any]]:
    for b in t.graph.bodies:
        for n in b.nodes:
            yield b, n


def _at(n: Any, where: tuple) -> bool:
    return n.loc is not None and (n.loc.file, n.loc.line) == tuple(where)


def _aval(s: str) -> str:
    return s.lstrip("~")


def _link(
    d: Diagnostic,
    traces: Iterable[Any],
    pick: Callable[[Any, Any, Any], bool],
    homes: dict[int, Any],
) -> Diagnostic:
    """`d` pointed at the nodes `pick(trace, body, node)` chooses, in the first trace with any."""
    for t in traces:
        if getattr(t, "graph", None) is None:
            continue
        ids = tuple(f"{b.id}:{n.id}" for b, n in _nodes(t) if pick(t, b, n))
        if ids:
            linked = dataclasses.replace(d, node_ids=ids, trace=t.name)
            homes[id(linked)] = t
            return linked
    return d


def _first(traces: Sequence[Any], name: str) -> list[Any]:
    """The traces, those named `name` first."""
    return [t for t in traces if t.name == name] + [t for t in traces if t.name != name]


def link_nan(
    d: Diagnostic, traces: Sequence[Any], op: str, fn: str, homes: dict[int, Any]
) -> Diagnostic:
    """A NaN's finding at the op that made it (`op` at its line; any op there else),
    in the function `fn` it named first."""
    if d.node_ids or d.line is None:
        return d
    where = (d.filename, d.line)
    ordered = _first(traces, fn)
    d2 = _link(d, ordered, lambda t, b, n: n.kind == "eqn" and n.op == op and _at(n, where), homes)
    if d2 is d:
        d2 = _link(d, ordered, lambda t, b, n: n.kind == "eqn" and _at(n, where), homes)
    return d2


def link_key_reuse(d: Diagnostic, traces: Sequence[Any], homes: dict[int, Any]) -> Diagnostic:
    """A key consumed twice across calls: the ops that consume the key (random_bits, split)
    in what ran at the finding's line (an eager statement, or a function called there),
    then at the lines it names (where the key was first consumed)."""
    if d.node_ids or d.line is None:
        return d
    lines = [(d.filename, d.line)] + [(r[0], r[1]) for r in d.related]
    for where in lines:
        ran = [
            t
            for t in traces
            if any((s[0], s[1]) == where for s in (getattr(t, "call_sites", None) or ()))
        ]
        d2 = _link(d, ran, lambda t, b, n: n.kind == "eqn" and n.op in KEY_CONSUMERS, homes)
        if d2 is d:
            d2 = _link(d, traces, _key_op_at(where), homes)
        if d2 is not d:
            return d2
    return d


def _key_op_at(where: tuple) -> Callable[[Any, Any, Any], bool]:
    return lambda t, b, n: n.kind == "eqn" and n.op in KEY_CONSUMERS and _at(n, where)


def link_leak(d: Diagnostic, leak: Any, traces: Sequence[Any], homes: dict[int, Any]) -> Diagnostic:
    """A leaked tracer at the equation that made it (of its type, at the line that made
    it), or at the input it is, in the function that traced it."""
    o = leak.origin
    if d.node_ids or o is None:
        return d
    aval = _aval(leak.aval)
    mine = [t for t in traces if t.name == o.fn]
    if o.created:
        made = tuple(o.created)
        d2 = _link(
            d,
            mine,
            lambda t, b, n: (
                n.kind == "eqn" and _at(n, made) and any(_aval(x) == aval for x in n.out or ())
            ),
            homes,
        )
        if d2 is not d:
            return d2
    return _link(
        d,
        mine,
        lambda t, b, n: (
            n.kind == "in" and b is t.graph.body and any(_aval(x) == aval for x in n.out or ())
        ),
        homes,
    )


def file_under(found: Iterable[Diagnostic], homes: dict[int, Any]) -> None:
    """Lists each linked finding kept in `found` under its trace (the view's tab)."""
    for d in found:
        t = homes.get(id(d))
        if t is not None and d not in t.diagnostics:
            t.diagnostics.append(d)

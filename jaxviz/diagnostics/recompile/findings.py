"""recompile findings: a function traced again (a warning, or an info for one more shape,
static value or context), or made anew at each call (a factory's functions, each called
many times: an info), at the call that traced it, with the trace it repeats.
"""

from __future__ import annotations

from typing import Any

from jaxviz import _compat
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.recompile.retraces import retraces
from jaxviz.diagnostics.recompile.why import hint_variant
from jaxviz.diagnostics.report import finding, library_related, quoted
from jaxviz.diagnostics.rules import RULES
from jaxviz.graph.trace import CellTrace


def recompile_findings(cell: CellTrace, obs: Any, kept: set[int] | None = None) -> list[Diagnostic]:
    """The cell's recompiles (`retraces`), each at the call that traced again; obs: the
    observer (first calls: where, how long), kept: what the user keeps (`kept_ids` of the
    namespace, read as the cell ended)."""
    out = []
    first = obs.first_call if obs is not None else {}

    def first_call(t: Any) -> Any:
        return first.get(id(_compat.open_jaxpr(t.jaxpr))) if t.jaxpr is not None else None

    for r in retraces(cell.traces, first_call, lambda: kept or set()):
        name = r.name or r.trace.name
        if r.remade:
            # one finding for the place that makes a new function each time
            calls = [first_call(t) for t in r.remade]
            took = sum(c.seconds for c in calls if c is not None and c.traced)
            where = calls[-1].site if calls[-1] is not None and calls[-1].site else _site(r.trace)
            prev = _site(r.previous)
            rel: tuple[tuple, ...] = (
                ((prev[0], prev[1], "traced first here"),) if prev and prev != where else ()
            )
            if r.reused:
                # a factory's function, made anew per config and then called many times:
                # jit's cache did its job for each object. One trace per object is meant.
                n, total = len(r.remade), sum(r.calls)
                more = "+" if r.uncounted else ""  # later calls ran unwatched: at least
                cost = f" (tracing and compiling took {took * 1e3:.0f} ms in all)" if took else ""
                each = (
                    f"each one called {r.calls[0]}{more} times"
                    if len(set(r.calls)) == 1
                    else f"each one called {min(r.calls)} to {max(r.calls)}{more} times"
                )
                msg = (
                    f"{quoted(where)}{name} is made anew {len(r.calls)} times (a new function "
                    f"object each time), {each} here: one trace per object, {n} traces for "
                    f"{total}{more} calls{cost}; jit's cache served the other {total - n}{more}."
                )
                severity, hint = "info", RULES["recompile"].hint_for("factory")
            else:
                cost = f"; tracing and compiling took {took * 1e3:.0f} ms in all" if took else ""
                msg = (
                    f"{quoted(where)}{name} is traced again at each call here "
                    f"({len(r.remade)} traces{cost}): {r.reason}."
                )
                severity, hint = "warning", RULES["recompile"].hint
        else:
            timing = first_call(r.trace)
            where = timing.site if timing is not None and timing.site else _site(r.trace)
            took = f"tracing and compiling took {timing.seconds * 1e3:.0f} ms" if timing else ""
            count = f"{r.signatures} traces in this cell" if r.signatures > 2 else ""
            cost = f" ({'; '.join(x for x in (count, took) if x)})" if count or took else ""
            msg = f"{quoted(where)}{name} is traced again{cost}: {r.reason}."
            prev = _site(r.previous)
            rel = ((prev[0], prev[1], "traced before here"),) if prev else ()
            # One more shape, static value or context (the eval batch, a second config) is
            # often meant: info. A third signature, or an unexplained retrace, is costly.
            meant = r.signatures <= 2 and not r.reason.startswith("the arguments and the")
            variant = hint_variant(r.reason)  # the fix that fits: a shape, a dtype, a class
            severity, hint = ("info" if meant else "warning"), RULES["recompile"].hint_for(variant)
        rel += library_related(r.trace, name)  # the library's line, when a library jitted it
        at = [
            next((i for i, t in enumerate(cell.traces) if t is x), -1)
            for x in (r.previous, r.trace)
        ]
        out.append(
            finding(
                "recompile",
                msg,
                where,
                severity=severity,
                hint=hint,
                related=rel,
                trace=r.trace.name,
                compare=(at[0], at[1]) if min(at) >= 0 else None,
            )
        )
    return out


def _site(t: Any) -> tuple[str, int] | None:
    return (t.call_sites[0][0], t.call_sites[0][1]) if t.call_sites else None


def kept_ids(ns: dict | None) -> set[int]:
    """Ids of what the user keeps: the namespace's values and the items of its lists,
    tuples and dicts (jitted functions kept side by side are distinct functions)."""
    kept: set[int] = set()
    for v in (ns or {}).values():
        kept.add(id(v))
        if isinstance(v, (list, tuple)):
            kept.update(id(x) for x in v)
        elif isinstance(v, dict) and v is not ns:
            kept.update(id(x) for x in v.values())
    return kept

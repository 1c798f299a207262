"""A cell's own jitted functions' compiled memory, cheaply: what the default %%jaxtrace view
(and `trace_cell`, `python -m jaxviz --html`) shows in its memory tab and text twin.

After the cell has called a jitted function, `fun.lower(*specs).compile()` for the same
signature is served from JAX's caches (measured: ~0.2 ms per function on jax 0.10.2 and
0.12, against ~70 ms for the first call's compile), so each MemoryReport costs its analysis
only (parsing the scheduled HLO and simulating its buffers: ~1 ms for a small step). Where
JAX holds no executable for the lowering (`_compat.compiled_already`), nothing is compiled
(on a TPU a transformer step compiles for ~15 s): a note says how to ask for it. The
donation what-if compiles again per argument: it is left to `Trace.memory()` and
`%%jaxtrace --compare`. The cost is bounded (`jaxviz.options.compiled_memory_budget`,
`compiled_memory_max`), and what was skipped is said, with how to get it.

    >>> import jaxviz
    >>> ct = jaxviz.trace_cell("import jax, jax.numpy as jnp\\n"
    ...                        "f = jax.jit(lambda x: x * 2)\\ny = f(jnp.ones(4))\\n")
    >>> [r.name for r in ct.compiled]
    ['<lambda>']
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from typing import Any

from jaxviz.config import options
from jaxviz.memory.buffers import memory_report
from jaxviz.memory.compile import NotCompiled
from jaxviz.memory.report import MemoryReport

# the reports of the session's jitted functions, by function (weakly) and signature: a cell
# run again costs nothing more (the transformer step's analysis is ~0.4-0.7 s)
_done: weakref.WeakKeyDictionary[Any, dict[tuple, MemoryReport]] = weakref.WeakKeyDictionary()


def _key(t: Any) -> tuple:
    return (t.name, repr(t.args_spec), repr(t.kwargs_spec), t.static, tuple(t.donated))


def _cached(t: Any) -> MemoryReport | None:
    try:
        return _done.get(t.fun, {}).get(_key(t))
    except TypeError:  # a function that cannot be weakly referenced: no cache
        return None


def _remember(t: Any, r: MemoryReport) -> None:
    try:
        _done.setdefault(t.fun, {})[_key(t)] = r
    except TypeError:
        pass


# the notes' words for a function without its report (view.text leaves out those about the
# functions whose full report --memory prints below)
NOT_COMPUTED = "compiled memory not computed for "
NOT_AVAILABLE = ": compiled memory not available"


def eligible(t: Any) -> bool:
    """The user's own jitted function, traced cleanly and called by the cell (so compiled
    already: JAX's cache serves it), whose jitted object jaxviz saw (a re-jitted one would
    run the user's Python again)."""
    return (
        t.kind == "jit"
        and t.error is None
        and t.fun is not None
        and bool(t.user_code)
        and not t.rejitted
        and t.calls > 0
    )


def cell_reports(traces: Sequence[Any]) -> tuple[list[MemoryReport], list[str]]:
    """(a MemoryReport per eligible trace, notes on what was skipped and how to get it),
    within `options.compiled_memory_budget` seconds and `options.compiled_memory_max`
    functions. Never raises: a function jaxviz cannot compile is noted."""
    budget, most = options.compiled_memory_budget, options.compiled_memory_max
    todo = [t for t in traces if eligible(t)]
    if not todo or budget <= 0 or most <= 0:
        return [], []
    reports: list[MemoryReport] = []
    notes: list[str] = []
    skipped: list[str] = []
    uncompiled: list[str] = []
    made = 0
    t0 = time.perf_counter()
    for t in todo:
        known = _cached(t)
        if known is not None:
            reports.append(known)
            continue
        if made >= most or time.perf_counter() - t0 > budget:
            skipped.append(t.name)
            continue
        try:
            made += 1
            reports.append(memory_report(t, what_if=False, only_cached=True))
            _remember(t, reports[-1])
        except NotCompiled:  # never a second compile of the user's program unasked
            made -= 1
            uncompiled.append(t.name)
        except Exception as e:  # jaxviz's failure, never the cell's
            notes.append(f"{t.name}{NOT_AVAILABLE} ({type(e).__name__}: {e!s:.100})")
    if uncompiled:
        names = ", ".join(uncompiled)
        notes.append(
            f"{NOT_COMPUTED}{names}: JAX holds no executable for the "
            f"signature the cell called, and jaxviz never compiles your program again "
            f"unasked; get it with ct['{uncompiled[0]}'].memory() (use %%jaxtrace -o ct), "
            f"which compiles it"
        )
    if skipped:
        why = (
            f"at most {most} function{'s' if most != 1 else ''}"
            if made >= most
            else f"the {budget:g} s budget was spent"
        )
        names = ", ".join(skipped)
        notes.append(
            f"{NOT_COMPUTED}{names} ({why}: "
            f"jaxviz.options.compiled_memory_budget / compiled_memory_max); get it with "
            f"ct['{skipped[0]}'].memory() (use %%jaxtrace -o ct)"
        )
    return reports, notes


def with_donations(traces: Sequence[Any], reports: list[MemoryReport]) -> list[MemoryReport]:
    """The reports again with the donation what-if (compiles once more per argument):
    `%%jaxtrace --compare`. A report whose function cannot be compiled again stays."""
    by_name = {t.name: t for t in traces if eligible(t)}
    out = []
    for r in reports:
        t = by_name.get(r.name)
        try:
            out.append(memory_report(t, what_if=True) if t is not None else r)
        except Exception:
            out.append(r)
    return out

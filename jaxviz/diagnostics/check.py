"""Diagnostics: the analyses that fill Trace.diagnostics and CellTrace.diagnostics.

The flow: the Recorder's observer (jaxviz.diagnostics.observer) notes what the calls reveal while a
cell runs (keys consumed, non-finite outputs, first-call timings); afterwards
`diagnose_trace` runs the static rules on each staged function and `diagnose_cell` adds the
cell's own: its exception, tracers left in its namespace, and what the observer saw. Each
rule family's module holds its analysis and its messages; this module calls them in order.

  rule                   module      reads
  concretization family  errors      the exception and its user frames
  non-jax-type           errors      the exception
  use-after-donate       errors      the exception + the donating traces
  leaked-tracer          leaks       the namespace, then the source
  large-constant         constants   the graph's constant nodes
  out-of-bounds          bounds      the jaxpr's constants (static) + eager ops' indices (runtime)
  donation-unusable      donation    the jaxpr's avals and donation flags
  recompile              recompile/  the cell's traces + first-call timings
  key-reuse              keys/       the jaxpr (static) + keys consumed (runtime); the loop's
                                     source, for a key a loop consumes again (keys/fixed.py)
  nan                    nan         non-finite outputs (and jax_debug_nans' FloatingPointError),
                                     localised by re-running

Rules and messages: docs/diagnostics.md; names, default severities and hints:
jaxviz.diagnostics.rules.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import TYPE_CHECKING, Any

from jaxviz import _compat
from jaxviz.config import options
from jaxviz.diagnostics.bounds import INDEXING, eager_out_of_bounds, static_out_of_bounds
from jaxviz.diagnostics.constants import large_constant_findings
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.donation import donation_findings
from jaxviz.diagnostics.errors import (
    classify,
    donated_use,
    donating_sites,
    error_diagnostic,
    pick_frame,
)
from jaxviz.diagnostics.keys.findings import runtime_key_reuse, static_key_reuse
from jaxviz.diagnostics.keys.fixed import key_names
from jaxviz.diagnostics.leaks import (
    leak_findings,
    leaks_read_by,
    scan_namespace,
    trace_leaks,
    unlocated_leak,
)
from jaxviz.diagnostics.link import file_under, link_key_reuse, link_leak
from jaxviz.diagnostics.nans.findings import later_lines, nan_findings
from jaxviz.diagnostics.recompile.findings import kept_ids, recompile_findings
from jaxviz.diagnostics.report import code_of
from jaxviz.diagnostics.unwatched import unwatched_findings
from jaxviz.graph.trace import CellTrace, Trace

if TYPE_CHECKING:
    from jaxviz.diagnostics.observer import CellObserver

_RANDOM_OPS = {"random_bits", "random_split", "random_fold_in"}


# --- one staged function ------------------------------------------------------------------


def diagnose_trace(trace: Trace) -> list[Diagnostic]:
    """Static checks on one staged function."""
    out: list[Diagnostic] = []
    if trace.error is not None:
        d = error_diagnostic(trace.error, trace.error_frames, None, trace=trace.name)
        if d is not None:
            out.append(d)
    if trace.jaxpr is not None:
        # read from the jaxpr: the graph is built only where a finding points into it
        names, biggest = staged_summary(trace.jaxpr)
        if biggest > options.large_constant_bytes:
            out.extend(large_constant_findings(trace))
        if not names.isdisjoint(INDEXING):
            out.extend(static_out_of_bounds(trace))
        if not names.isdisjoint(_RANDOM_OPS):
            out.extend(static_key_reuse(trace))
    elif trace.graph is not None:  # failed to trace: the graph of what was staged
        out.extend(large_constant_findings(trace))
    if trace.jaxpr is not None:
        out.extend(donation_findings(trace))
    if trace.kind == "trace" and trace.fun is not None:
        out.extend(trace_leaks(trace))
    return unique(out)


def unique(found: list[Diagnostic]) -> list[Diagnostic]:
    """One finding per rule, place and message: the same fact found twice (two signatures
    of one function, two paths to one equation) is reported once, first come first kept."""
    seen: set[tuple] = set()
    out = []
    for d in found:
        k = (d.rule, d.filename, d.line, d.message)
        if k not in seen:
            seen.add(k)
            out.append(d)
    return out


# each jaxpr's summary, held as long as JAX holds the jaxpr (its tracing cache): a cell run
# again checks the same jaxpr objects (an 800-equation train step's walk: ~0.8 ms a cell)
_SUMMARIES: weakref.WeakKeyDictionary[Any, tuple[frozenset[str], int]] = weakref.WeakKeyDictionary()


def staged_summary(jaxpr: Any) -> tuple[frozenset[str], int]:
    """The primitives a jaxpr stages, its sub-jaxprs' included, and the bytes of its largest
    constant (each body's constvars): what tells the static checks whether to read the
    graph at all (a trace's graph is built when first read)."""
    return _compat.per_jaxpr(_SUMMARIES, jaxpr, _summary)


def _summary(jaxpr: Any) -> tuple[frozenset[str], int]:
    names: set[str] = set()
    biggest = 0
    todo, seen = [jaxpr], set()
    while todo:
        j = todo.pop()
        if id(j) in seen:
            continue
        seen.add(id(j))
        open_j = _compat.open_jaxpr(j)
        consts = _compat.jaxpr_consts(j)
        for i, v in enumerate(open_j.constvars):
            n = int(getattr(consts[i], "nbytes", 0)) if i < len(consts) else 0
            biggest = max(biggest, n or _compat.aval_nbytes(v.aval))
        for eqn in open_j.eqns:
            names.add(eqn.primitive.name)
            todo.extend(sub.jaxpr for sub in _compat.sub_jaxprs(eqn))
    return frozenset(names), biggest


# --- a whole cell -------------------------------------------------------------------------


@dataclasses.dataclass
class CellEnd:
    """What a cell's namespace held when it ended, read then: the rest of the cell's analysis
    (`diagnose_cell`) may run later (after the reply, or when a -q cell's CellTrace is first
    read), when later cells may have changed the namespace. It holds no user value: the
    tracers left there as Leak records, the names bound to a NaN a later call made (LaterNan:
    read now, as the cell ends), the ids of what the user keeps."""

    leaks: list | None  # scan_namespace's (None: no namespace)
    later: list  # later_nans' LaterNan records
    kept: set[int]  # recompile's: ids of the namespace's values and their items
    used_at: Any = None  # the leaked tracer's use (the failing line), if the cell failed so
    key_names: dict = dataclasses.field(default_factory=dict)  # reused key -> its name there


def cell_end(
    cell: CellTrace, namespace: dict | None = None, obs: CellObserver | None = None
) -> CellEnd:
    """The namespace's part of `diagnose_cell`, read as the cell ends (namespace: the cell's
    globals, else the observer's)."""
    ns = namespace if namespace is not None else (obs.namespace if obs is not None else None)
    used_at = None
    if cell.error is not None:
        c = classify(cell.error)
        if c is not None and c[0] == "leaked-tracer":
            used_at = pick_frame(cell.error_frames, cell.filename)
    leaks = None
    if ns is not None:
        # tracers an earlier cell left are its findings, unless this cell used them
        used = {lk.name for lk in leaks_read_by(code_of(*used_at))} if used_at else set()
        leaks = scan_namespace(ns, obs.present if obs is not None else None, used)
    later = later_lines(obs, cell, ns) if obs is not None else []
    kept = kept_ids(ns)
    names = {}
    if obs is not None:
        names = key_names(obs)
        obs.namespace = None
    return CellEnd(leaks, later, kept, used_at, names)


def diagnose_cell(
    cell: CellTrace,
    namespace: dict | None = None,
    obs: CellObserver | None = None,
    end: CellEnd | None = None,
) -> list[Diagnostic]:
    """Checks on a whole cell: every trace's diagnostics, then the cell's own.

    namespace: the cell's globals, scanned for leaked tracers (else the observer's);
    obs: what the capture's observer saw while the cell ran (keys, NaNs, first calls);
    end: what the namespace held as the cell ended (`cell_end`), read then, when this runs
    later (the namespace is then not read).
    """
    if end is None:
        end = cell_end(cell, namespace, obs)
    out: list[Diagnostic] = []
    for t in cell.traces:
        if not t.diagnostics:
            t.diagnostics.extend(diagnose_trace(t))
        out.extend(t.diagnostics)
    own: list[Diagnostic] = []
    homes: dict[int, Any] = {}  # a finding linked to its node -> its trace (link.py)
    used_at = end.used_at
    stopped = None  # the nan of a FloatingPointError (jax_debug_nans), if not localised
    if cell.error is not None:
        c = classify(cell.error)
        use = related = None
        if c is not None and c[0] == "use-after-donate":
            use = donated_use(cell.error, cell.filename)
            related = donating_sites(cell, use.type if use is not None else "")
        d = error_diagnostic(
            cell.error, cell.error_frames, cell.filename, related=related or (), donated=use
        )
        if d is not None and c is not None and c[0] == "nan":
            stopped = d
        elif d is not None and used_at is None:
            own.append(d)
    if end.leaks is not None:
        prefer = {t.name for t in cell.traces}
        found = leak_findings(end.leaks, cell.source, cell.filename, 0, "", used_at, prefer)
        own.extend(link_leak(d, lk, cell.traces, homes) for d, lk in zip(found, end.leaks))
    if used_at is not None and not any(d.rule == "leaked-tracer" for d in own):
        own.extend(unlocated_leak(cell, used_at))
    if obs is not None:
        own.extend(eager_out_of_bounds(obs, cell))
        own.extend(
            link_key_reuse(d, cell.traces, homes) if d.rule == "key-reuse" else d
            for d in runtime_key_reuse(obs, cell.traces, end.key_names)
        )
        own.extend(nan_findings(obs, cell, end.later, homes))
        own.extend(unwatched_findings(obs))
    own.extend(recompile_findings(cell, obs, end.kept))
    if stopped is not None and (
        obs is None or obs.nan.debug_stop is None or not obs.nan.debug_stop.filename
    ):  # JAX stopped an eager op, or a call jaxviz could not run again: JAX's own frames
        own.append(stopped)
    for d in own:  # a recompile under its later trace's tab
        if d.compare and id(d) not in homes and d.compare[1] < len(cell.traces):
            homes[id(d)] = cell.traces[d.compare[1]]
    out = unique(out)
    seen = {(d.rule, d.filename, d.line) for d in out}
    for d in own:
        k = (d.rule, d.filename, d.line)
        if k not in seen:
            seen.add(k)
            out.append(d)
    file_under(out, homes)
    return out


def link_failed_traces(ct: CellTrace) -> None:
    """Points the cell's error diagnostics at the nodes of the line that failed to trace."""
    failed = [t for t in ct.traces if t.error is not None and t.graph.n_eqns]
    if not failed:
        return
    for k, d in enumerate(ct.diagnostics):
        if d.node_ids or d.line is None or d.severity != "error":
            continue
        for t in failed:
            ids = tuple(
                f"{b.id}:{n.id}"
                for b in t.graph.bodies
                for n in b.nodes
                if n.kind == "eqn"
                and n.loc is not None
                and (n.loc.file, n.loc.line) == (d.filename, d.line)
            )
            if ids:
                linked = dataclasses.replace(d, node_ids=ids, trace=d.trace or t.name)
                ct.diagnostics[k] = linked
                t.diagnostics[:] = [x for x in t.diagnostics if x != d] + [linked]
                break

"""Diagnostics: the analyses that fill Trace.diagnostics and CellTrace.diagnostics.

The flow: the Recorder's observer (jaxviz.diagnostics.observer) notes what the calls reveal while a
cell runs (keys consumed, non-finite outputs, first-call timings); afterwards
`diagnose_trace` runs the static rules on each staged function and `diagnose_cell` adds the
cell's own: its exception, tracers left in its namespace, and what the observer saw.

  rule                   module     reads
  concretization family  errors     the exception and its user frames
  non-jax-type           errors     the exception
  use-after-donate       errors     the exception + the donating traces
  leaked-tracer          leaks      the namespace, then the source
  large-constant         static     the graph's constant nodes
  out-of-bounds          bounds     the jaxpr's constants (static) + eager ops' indices (runtime)
  donation-unusable      static     the jaxpr's avals and donation flags
  recompile              static     the cell's traces + first-call timings
  key-reuse              keys       the jaxpr (static) + keys consumed (runtime);
                         fixedkeys  the loop's source, for a key a loop consumes again
  nan                    nan        non-finite outputs (and jax_debug_nans' FloatingPointError),
                                    localised by re-running

Rules and messages: docs/diagnostics.md; names, default severities and hints:
jaxviz.diagnostics.rules.
"""

from __future__ import annotations

import types
from collections.abc import Set
from typing import TYPE_CHECKING, Any

from jaxviz import _compat
from jaxviz.capture.places import library_label
from jaxviz.config import options
from jaxviz.diagnostics.bounds import INDEXING, OutOfBounds, chose_mode, out_of_bounds
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.errors import (
    classify,
    created_at,
    donated_use,
    error_diagnostic,
    pick_frame,
    traced_function,
)
from jaxviz.diagnostics.keys.findings import runtime_key_reuse, static_key_reuse
from jaxviz.diagnostics.leaks import (
    any_store_line,
    leaks_read_by,
    origin_store_lines,
    scan_namespace,
    store_lines,
)
from jaxviz.diagnostics.nan import chain_line
from jaxviz.diagnostics.nan_findings import nan_findings
from jaxviz.diagnostics.report import code_of, finding, quoted
from jaxviz.diagnostics.retrace_why import hint_variant
from jaxviz.diagnostics.rules import RULES
from jaxviz.diagnostics.static import (
    donated_flat,
    large_constants,
    retraces,
    staged_summary,
    unusable_donations,
)
from jaxviz.format import fmt_bytes
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
            out.extend(_large_constants(trace))
        if not names.isdisjoint(INDEXING):
            out.extend(_out_of_bounds(trace))
        if not names.isdisjoint(_RANDOM_OPS):
            out.extend(static_key_reuse(trace))
    elif trace.graph is not None:  # failed to trace: the graph of what was staged
        out.extend(_large_constants(trace))
    if trace.jaxpr is not None:
        out.extend(_donations(trace))
    if trace.kind == "trace" and trace.fun is not None:
        out.extend(_trace_leaks(trace))
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


def _node_index(graph: Any) -> dict[int, str]:
    return graph.eqn_ids()


def _oob_message(where: tuple[str, int] | None, oob: OutOfBounds, name: str = "") -> str:
    inside = f" in {name}" if name else ""
    return f"{quoted(where)}{oob.what()}{inside}: JAX does not raise; {oob.instead()}."


def _oob_hint(oob: OutOfBounds, where: tuple[str, int]) -> str:
    """lax.dynamic_slice and dynamic_update_slice, called by the line, have no mode=: their
    own hint (`x[10]` is a dynamic_slice too, but `x.at[10].get(mode=...)` has one)."""
    own = oob.op.startswith("dynamic_") and oob.op in code_of(*where)
    return RULES["out-of-bounds"].hint_for("slice" if own else "")


def _out_of_bounds(t: Trace) -> list[Diagnostic]:
    """Indices known at trace time outside their array, at the line that indexes, unless
    that line chose a mode (mode='drop', 'fill', 'clip')."""
    out, seen = [], set()
    for f in out_of_bounds(t.jaxpr):
        where = chain_line(f.chain)
        if where is None and t.call_sites:
            where = t.call_sites[0][:2]
        if where is None or where in seen or chose_mode(*where):
            continue
        seen.add(where)
        index = _node_index(t.graph)  # the graph: built for a finding only
        nodes = tuple(index[id(e)] for e in reversed(f.chain) if id(e) in index)[:1]
        name = t.name if t.kind in ("jit", "trace") else ""
        out.append(
            finding(
                "out-of-bounds",
                _oob_message(where, f.oob, name),
                where,
                hint=_oob_hint(f.oob, where),
                node_ids=nodes,
                trace=t.name,
            )
        )
    return out


def _large_constants(t: Trace) -> list[Diagnostic]:
    """One finding per line and consumer: the arrays of one object one op reads (a sparse
    BCOO matrix's data and indices, read by bcoo_dot_general) are one finding."""
    groups: dict[tuple, list] = {}
    for c in large_constants(t.graph):
        where = (c.loc.file, c.loc.line) if c.loc is not None else None
        groups.setdefault((where, c.consumer or id(c)), []).append(c)
    out = []
    for (where, _by), cs in groups.items():
        mib = sum(c.nbytes for c in cs) / (1 << 20)
        types = " and ".join(c.type for c in cs)
        what, it = (
            (f"a {types} array ({mib:.1f} MiB) is captured as a constant", "it")
            if len(cs) == 1
            else (
                f"{len(cs)} arrays, {types} ({mib:.1f} MiB in all), are captured as constants",
                "them",
            )
        )
        msg = (
            f"{quoted(where)}{what} of {t.name} (closed over instead of passed in)"
            + (f"; {cs[0].consumer} reads {it}" if cs[0].consumer else "")
            + f". {'It is' if len(cs) == 1 else 'They are'} baked into the compiled program "
            f"and copied at every compile (threshold {fmt_bytes(options.large_constant_bytes)})."
        )
        out.append(
            finding(
                "large-constant",
                msg,
                where,
                hint=RULES["large-constant"].hint,
                node_ids=tuple(dict.fromkeys(c.node_id for c in cs)),
                trace=t.name,
            )
        )
    return out


def _donations(t: Trace) -> list[Diagnostic]:
    donated = list(t.donated) or (
        donated_flat(t.fun, t.args_spec, t.kwargs_spec)
        if t.kind == "trace" and t.fun is not None
        else []
    )
    if not any(donated):
        return []
    bad = unusable_donations(t.jaxpr, donated, t.arg_names)
    if not bad:
        return []
    where = t.call_sites[0][:2] if t.call_sites else _def_line(t)
    index = t.graph.body.inputs if t.graph is not None else []
    via = _library_related(t)
    out = []
    for u in bad:
        msg = (
            f"{quoted(where)}`{u.name}` ({u.type}) is donated to {t.name} but cannot be "
            f"reused: {u.why}."
        )
        nid = (f"{t.graph.root}:{index[u.index]}",) if u.index < len(index) else ()
        out.append(
            finding(
                "donation-unusable",
                msg,
                where,
                hint=RULES["donation-unusable"].hint,
                node_ids=nid,
                related=via,
                trace=t.name,
            )
        )
    return out


def _library_related(t: Trace, name: str = "") -> tuple[tuple[str, int, str], ...]:
    """The library lines that called `t` (the user's function `name`) on the user's behalf,
    as related places."""
    name = name or t.name
    return tuple((f, l, f"{library_label(f)} calls {name} here") for f, l in t.library_sites[:2])


def _def_line(t: Trace) -> tuple[str, int] | None:
    code = getattr(_compat.unwrap(t.fun), "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code is not None else None


def _trace_leaks(t: Trace) -> list[Diagnostic]:
    """jaxviz.trace: tracers left in the globals the function names, or its closure."""
    fn = _compat.unwrap(t.fun)
    if not isinstance(fn, types.FunctionType):
        return []
    names = set(fn.__code__.co_names)
    for c in fn.__code__.co_consts:
        if isinstance(c, types.CodeType):
            names.update(c.co_names)
    ns = {k: fn.__globals__[k] for k in names if k in fn.__globals__}
    ns["__fn__"] = fn
    for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            ns[var] = cell.cell_contents
        except ValueError:
            pass
    leaks = scan_namespace({k: v for k, v in ns.items() if k != "__fn__"})
    if not leaks:
        return []
    try:
        import inspect
        import textwrap

        src = textwrap.dedent(inspect.getsource(fn))
        first = fn.__code__.co_firstlineno
    except (OSError, TypeError):
        src, first = "", 0
    return _leak_diags(leaks, src, fn.__code__.co_filename, first - 1, t.name, None)


def _leak_place(store: tuple | None, used_at: tuple | None, created: tuple | None) -> tuple:
    """(where, related) of a leak: at the store that let the tracer escape, with where it
    was used; else where it was used (or made), with where it was made."""
    if store is not None:
        return store, (((used_at[0], used_at[1], "used here"),) if used_at else ())
    where = used_at or created
    if created is None or where == created:
        return where, ()
    return where, ((created[0], created[1], "the tracer was created here"),)


def _leak_diags(
    leaks, source, filename, offset, trace, used_at, prefer: Set[str] = frozenset()
) -> list[Diagnostic]:
    out = []
    for lk in leaks:
        # the traced function that made the tracer (maybe in an earlier cell), then the
        # source at hand, then the rest of the traced function's file
        o = lk.origin
        found = origin_store_lines([lk], o.fn, o.file, o.line) if o is not None else None
        if found is None:
            lines = store_lines(source, lk, prefer)
            found = (filename, [n + offset for n in lines]) if lines else None
        if found is None and o is not None and o.file != filename:
            found = origin_store_lines([lk], o.fn, o.file, o.line, whole_file=True)
        created = tuple(o.created) if o is not None and o.created else None
        where, rel = _leak_place((found[0], found[1][0]) if found else None, used_at, created)
        msg = (
            f"{quoted(where)}a {lk.tracer_type} ({lk.aval}) escaped its transformation into "
            f"{lk.where}; it holds no value and using it later raises UnexpectedTracerError."
        )
        out.append(
            finding(
                "leaked-tracer",
                msg,
                where,
                hint=RULES["leaked-tracer"].hint,
                related=rel,
                trace=trace,
            )
        )
    return out


# --- a whole cell -------------------------------------------------------------------------


def diagnose_cell(
    cell: CellTrace, namespace: dict | None = None, obs: CellObserver | None = None
) -> list[Diagnostic]:
    """Checks on a whole cell: every trace's diagnostics, then the cell's own.

    namespace: the cell's globals, scanned for leaked tracers (else the observer's);
    obs: what the capture's observer saw while the cell ran (keys, NaNs, first calls).
    """
    ns = namespace if namespace is not None else (obs.namespace if obs is not None else None)
    out: list[Diagnostic] = []
    for t in cell.traces:
        if not t.diagnostics:
            t.diagnostics.extend(diagnose_trace(t))
        out.extend(t.diagnostics)
    own: list[Diagnostic] = []
    used_at = None
    stopped = None  # the nan of a FloatingPointError (jax_debug_nans), if not localised
    if cell.error is not None:
        c = classify(cell.error)
        if c is not None and c[0] == "leaked-tracer":
            used_at = pick_frame(cell.error_frames, cell.filename)
        use = related = None
        if c is not None and c[0] == "use-after-donate":
            use = donated_use(cell.error, cell.filename)
            related = _donating_sites(cell, use.type if use is not None else "")
        d = error_diagnostic(
            cell.error, cell.error_frames, cell.filename, related=related or (), donated=use
        )
        if d is not None and c is not None and c[0] == "nan":
            stopped = d
        elif d is not None and used_at is None:
            own.append(d)
    if ns is not None:
        # tracers an earlier cell left are its findings, unless this cell used them
        used = {lk.name for lk in leaks_read_by(code_of(*used_at))} if used_at else set()
        leaks = scan_namespace(ns, obs.present if obs is not None else None, used)
        prefer = {t.name for t in cell.traces}
        own.extend(_leak_diags(leaks, cell.source, cell.filename, 0, "", used_at, prefer))
    if used_at is not None and not any(d.rule == "leaked-tracer" for d in own):
        own.extend(_unlocated_leak(cell, used_at))
    if obs is not None:
        own.extend(_eager_out_of_bounds(obs, cell))
        own.extend(runtime_key_reuse(obs, cell.traces))
        own.extend(nan_findings(obs, cell, ns))
        own.extend(_recompiles(cell, obs, ns))
        obs.namespace = None
    else:
        own.extend(_recompiles(cell, None, ns))
    if stopped is not None and (
        obs is None or obs.nan.debug_stop is None or not obs.nan.debug_stop.filename
    ):  # JAX stopped an eager op, or a call jaxviz could not run again: JAX's own frames
        own.append(stopped)
    out = unique(out)
    seen = {(d.rule, d.filename, d.line) for d in out}
    for d in own:
        k = (d.rule, d.filename, d.line)
        if k not in seen:
            seen.add(k)
            out.append(d)
    return out


def _donating_sites(cell: CellTrace, type_: str = "") -> tuple:
    """The calls that donate; when the deleted array's type is known, those that donate
    an argument of that type (all of them if none does)."""
    rel, matching = [], []
    for t in cell.traces:
        if any(t.donated):
            names = [n for n, d in zip(t.arg_names, t.donated) if d]
            b = t.graph.body
            types_ = {b.nodes[i].out[0].lstrip("~") for i, d in zip(b.inputs, t.donated) if d}
            for f, l, _n in t.call_sites[:2]:
                site = (f, l, f"{t.name} donates {', '.join(names)} here")
                rel.append(site)
                if type_ and type_.lstrip("~") in types_:
                    matching.append(site)
    return tuple(matching or rel)


def _unlocated_leak(cell: CellTrace, used_at) -> list[Diagnostic]:
    """A leaked tracer used in this cell but not in its namespace (reported earlier, or no
    namespace): the store in the traced function JAX names, into what the use line reads;
    else the use, with where the tracer was created."""
    text = str(cell.error)
    tf = traced_function(text)
    created = created_at(text)
    where = None
    if tf is not None:
        code = code_of(*used_at) if used_at else ""
        found = origin_store_lines(leaks_read_by(code), *tf) if code else None
        if found is None and code:
            found = origin_store_lines(leaks_read_by(code), *tf, whole_file=True)
        line = found[1][0] if found is not None else any_store_line(tf[1], tf[0], tf[2])
        where = (tf[1], line) if line else None
    where, rel = _leak_place(where, used_at, created)
    msg = (
        f"{quoted(where)}a tracer escaped "
        + (f"{tf[0]} " if tf else "its transformation ")
        + "and was used later, where JAX raised UnexpectedTracerError."
    )
    return [finding("leaked-tracer", msg, where, hint=RULES["leaked-tracer"].hint, related=rel)]


def _eager_out_of_bounds(obs: Any, cell: CellTrace) -> list[Diagnostic]:
    """Eager indexing ops whose concrete index was out of bounds, at the user's line."""
    out = []
    for where, oob in obs.bounds.findings:
        if chose_mode(*where):
            continue
        # the node of the eager statement's trace that ran it (names repeat: one
        # statement's ops split by a jitted call make two traces), which lists it too
        t, node = next(
            (
                (t, f"{b.id}:{n.id}")
                for t in cell.traces
                if t.kind == "eager"
                for b in t.graph.bodies
                for n in b.nodes
                if n.op == oob.op and n.loc is not None and (n.loc.file, n.loc.line) == where
            ),
            (None, ""),
        )
        d = finding(
            "out-of-bounds",
            _oob_message(where, oob),
            where,
            hint=_oob_hint(oob, where),
            node_ids=(node,) if node else (),
            trace=t.name if t is not None else "",
        )
        if t is not None:
            t.diagnostics.append(d)
        out.append(d)
    return out


def _recompiles(cell: CellTrace, obs: Any, ns: dict | None = None) -> list[Diagnostic]:
    out = []
    first = obs.first_call if obs is not None else {}

    def first_call(t: Any) -> Any:
        return first.get(id(_compat.open_jaxpr(t.jaxpr))) if t.jaxpr is not None else None

    for r in retraces(cell.traces, first_call, lambda: _kept_ids(ns)):
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
        rel += _library_related(r.trace, name)  # the library's line, when a library jitted it
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


def _kept_ids(ns: dict | None) -> set[int]:
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

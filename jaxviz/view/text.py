"""Text twins: the graph and diagnostics as plain text, in jaxviz's own stable format.

    jit mlp(x: f32[8,4], w: f32[4,2]) · 1 call · 2 eqns · 136 FLOP
      %0 = in x : f32[8,4]
      %1 = in w : f32[4,2]
      %2 = dot_general %0 %1 : f32[8,2]                        line 3 (mlp)
      %3 = tanh %2 : f32[8,2]                                  line 3 (mlp)
      out %3 : f32[8,2]

Never JAX's pretty-printer (which drifts across versions); params are shown only when asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jaxviz.format import fmt_bytes, fold_avals, human
from jaxviz.graph.files import place, shown_line
from jaxviz.graph.model import Body, Graph
from jaxviz.memory.peaks import NOT_AVAILABLE, NOT_COMPUTED
from jaxviz.memory.report import buffer_line
from jaxviz.mesh.text import collectives_lines, eager_lines, replicated_lines
from jaxviz.view.compiled import report_trace

TEXT_LINES = 400  # the text/plain twin of a big graph is cut here; str() shows all

if TYPE_CHECKING:
    from jaxviz.graph.trace import CellTrace, Trace

LOC_COLUMN = 56


class _Printer:
    def __init__(
        self,
        graph: Graph,
        params: bool,
        max_lines: int | None,
        node_us: dict[str, float] | None = None,
        layouts: dict[str, str] | None = None,
    ):
        self.g, self.params, self.max_lines = graph, params, max_lines
        self.node_us = node_us or {}  # a profiled cell's device time per node, per step
        self.layouts = layouts or {}  # "body:node" -> its type on the mesh as XLA compiled it
        self.lines: list[str] = []
        self.printed: set[int] = set()
        self.cut = 0

    def emit(self, text: str) -> bool:
        if self.max_lines is not None and len(self.lines) >= self.max_lines:
            self.cut += 1
            return False
        self.lines.append(text)
        return True

    def body(self, b: Body, indent: str) -> None:
        self.printed.add(b.id)
        ins: dict[int, list[tuple[int, str]]] = {}
        for e in b.edges:
            src = b.nodes[e.src]
            if src.kind == "lit":
                ref = src.value
            elif len(src.out) > 1:
                ref = f"%{e.src}.{e.src_port}"
            else:
                ref = f"%{e.src}"
            ins.setdefault(e.dst, []).append((e.port, ref))
        for n in b.nodes:
            args = " ".join(a for _, a in sorted(ins.get(n.id, [])))
            if n.kind == "lit":
                continue
            if n.kind == "out":
                self.emit(f"{indent}out {args} : {n.out[0]}")
                continue
            if n.kind == "in":
                name = f" {n.op}" if n.op else ""
                self.emit(f"{indent}%{n.id} = in{name} : {n.out[0]}")
                continue
            if n.kind == "const":
                self.emit(f"{indent}%{n.id} = const : {n.out[0]}  ({fmt_bytes(n.nbytes)})")
                continue
            typ = self._typed(f"{b.id}:{n.id}", n.out)
            head = f"{indent}%{n.id} = {n.op}{' ' + args if args else ''} : {typ}"
            if self.params and n.params:
                head += "  {" + ", ".join(n.params) + "}"
            if n.loc is not None:
                line = shown_line(n.loc.file, n.loc.line)
                where = f"line {line}" + (f" ({n.loc.fn})" if n.loc.fn else "")
                head = head.ljust(LOC_COLUMN) + " " + where
            us = self.node_us.get(f"{b.id}:{n.id}")
            if us is not None:  # --profile: the time column
                head = head.ljust(LOC_COLUMN + 18) + f" {_fmt_us(us):>9}/step"
            self.emit(head)
            for s in n.subs:
                sub = self.g.bodies[s.body]
                times = f" x{s.times}" if s.times != 1 else ""
                if s.body in self.printed:
                    self.emit(f"{indent}  [{sub.label}{times}: {sub.n_eqns} eqns, as above]")
                else:
                    self.emit(f"{indent}  [{sub.label}{times}]")
                    self.body(sub, indent + "    ")

    def _typed(self, ref: str, out: list[str]) -> str:
        """The node's types; a sharded program's layout as compiled where known
        (`f32[64@data,512]`, `f32[64,512] (replicated)`: whole on each device)."""
        typ = self.layouts.get(ref)
        if typ is None:
            return ", ".join(out)
        return typ if "@" in typ or typ.endswith("[]") else f"{typ} (replicated)"


def _fmt_us(us: float) -> str:
    from jaxviz.profile.report import fmt_us

    return fmt_us(us)


def graph_text(
    graph: Graph,
    *,
    params: bool = False,
    max_lines: int | None = None,
    node_us: dict[str, float] | None = None,
    layouts: dict[str, str] | None = None,
) -> str:
    """The graph as text; `node_us` (a profiled cell's device time per node and step) adds
    a time column; `layouts` ("body:node" -> `f32[64@data,512]`, a sharded program's
    MemoryReport.layouts) gives each equation its type on the mesh as XLA compiled it."""
    p = _Printer(graph, params, max_lines, node_us, layouts)
    p.body(graph.body, "  ")
    if p.cut:
        p.lines.append(f"  ... {p.cut} more lines (str(trace) shows all)")
    return "\n".join(p.lines)


def _calls(t: Trace) -> str:
    sites = ", ".join(
        f"line {shown_line(file, line)}" + (f" x{n}" if n > 1 else "")
        for file, line, n in sorted(t.call_sites, key=lambda s: (s[1], s[0]))
    )
    more = "+" if t.calls_uncounted else ""  # later calls ran unwatched
    word = "call" if t.calls == 1 and not more else "calls"
    return f"{t.calls}{more} {word}" + (f" ({sites})" if sites else "")


def trace_header(t: Trace) -> str:
    b = t.graph.body
    # (a step over 400 parameters: `400 x ~f32[3,5], f32[2,3]`, not 400 of them in a row)
    args = fold_avals([b.nodes[i].out[0] for i in b.inputs], [b.nodes[i].op for i in b.inputs])
    static = f"; {t.static}" if getattr(t, "static", "") else ""
    title = f"eager {t.name}" if t.kind == "eager" else f"{t.kind} {t.name}({args}{static})"
    parts = [title, _calls(t), f"{t.graph.n_eqns} eqns", human(t.graph.flops, "FLOP")]
    return " · ".join(parts)


def related_lines(d) -> list[str]:
    """One `FILE:LINE: note: why` line per related place of a diagnostic."""
    return [f"{place(f, line)}: note: {why}" for f, line, why in d.related]


def compare_line(d, script: str | None = None) -> str | None:
    """How a text reader sees a recompile's two signatures side by side (None for other
    findings): `jaxviz.compare(ct[i], ct[j])`, i and j the finding's two traces in the cell's
    CellTrace; for `python -m jaxviz SCRIPT`, how to get that CellTrace, or the HTML page.

    Example (a recompile of traces 0 and 1):
        compare them: jaxviz.compare(ct[0], ct[1])  (ct: the cell's CellTrace, %%jaxtrace -o ct)
    """
    if not getattr(d, "compare", None):
        return None
    i, j = d.compare
    call = f"jaxviz.compare(ct[{i}], ct[{j}])"
    if script is None:
        return f"compare them: {call}  (ct: the cell's CellTrace, %%jaxtrace -o ct)"
    return (
        f"compare them: {call} with ct = jaxviz.trace_cell(pathlib.Path({script!r}).read_text()), "
        f"or side by side: --html PAGE.html, then the finding's compare button"
    )


def diagnostic_lines(diags, indent: str = "", home: str | None = None) -> list[str]:
    """`LINE: severity: rule: message`; the file goes first when it is not `home` (another
    cell, a module), so `cell [2]:10: error: ...` says which cell."""
    out = []
    for d in diags:
        where = f"{shown_line(d.filename, d.line)}" if d.line is not None else "?"
        if d.filename and d.filename != home:
            where = place(d.filename, d.line)
        out.append(f"{indent}{where}: {d.severity}: {d.rule}: {d.message}")
        out.extend(f"{indent}  {line}" for line in fix_lines(d))
        out.extend(f"{indent}  {line}" for line in related_lines(d))
        if cmp := compare_line(d):
            out.append(f"{indent}  {cmp}")
    return out


def fix_lines(d) -> list[str]:
    """The fix, right under the finding: `fix: <what to change>`, then its bad -> good
    example as the rule writes it ([] without a hint).

        fix: Split the key and use each piece once:
            bad:  a = random.normal(key, s); b = random.uniform(key, s)
    """
    if not d.hint:
        return []
    first, *example = d.hint.splitlines()
    return [f"fix: {first}", *example]


def trace_text(
    t: Trace,
    *,
    params: bool = False,
    max_lines: int | None = None,
    home: str | None = None,
    node_us: dict[str, float] | None = None,
    layouts: dict[str, str] | None = None,
) -> str:
    """One trace's text twin; `layouts`: its equations' types on the mesh as compiled (the
    cell's MemoryReport of it), under Auto mesh axes."""
    lines = [trace_header(t)]
    if t.error is not None:
        lines.append(f"  tracing failed: {type(t.error).__name__}: {_first_line(t.error)}")
        if t.graph.n_eqns:
            lines.append(f"  staged before the failure ({t.graph.n_eqns} eqns):")
    lines.append(
        graph_text(t.graph, params=params, max_lines=max_lines, node_us=node_us, layouts=layouts)
    )
    lines.extend(f"  note: {n}" for n in t.notes)
    lines.extend(f"  note: {n}" for n in _sharding_note(t, layouts or {}))
    if t.diagnostics:
        lines.append("  diagnostics:")
        lines.extend(diagnostic_lines(t.diagnostics, "    ", home))
    return "\n".join(lines)


def _sharding_note(t: Trace, layouts: dict[str, str]) -> list[str]:
    """Where the `@axis` of a sharded function's types come from: JAX's own avals (explicit
    mesh axes), or the arguments' shardings as passed in and each equation's layout as XLA
    compiled it (`layouts`, Auto axes); [] when none is shown."""
    b = t.graph.body
    typed = [b.nodes[i].out[0] for i in b.inputs if b.nodes[i].out and "@" in b.nodes[i].out[0]]
    compiled = [typ for typ in layouts.values() if "@" in typ]
    if not typed and not compiled:
        return []
    axis = (typed or compiled)[0].split("@", 1)[1].split(",", 1)[0].split("]")[0]
    split = f"@{axis}: a dimension split over mesh axis {axis}"
    if any("@" in o for _b, n in t.graph.eqns() for o in n.out):
        return [f"{split}; the shardings are JAX's own types (explicit mesh axes)"]
    if compiled:
        return [f"{split}; the arguments' shardings as passed in, each equation's as XLA "
                "compiled it (Auto axes; `(replicated)`: whole on each device; a type with "
                "neither was fused away: its layout is not known)"]  # fmt: skip
    return [f"{split}; the arguments' shardings as passed in (Auto axes: XLA lays out the "
            "rest, and the compiled memory lists its collectives)"]  # fmt: skip


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else ""


def cell_text(
    c: CellTrace,
    *,
    params: bool = False,
    max_lines: int | None = None,
    memory_below: frozenset[str] = frozenset(),
) -> str:
    """The cell's text twin. `memory_below`: the functions whose full compiled memory report
    follows (`python -m jaxviz --text --memory`): their buffers, collectives and replicated
    arguments are listed there once, not summarised here as well."""
    n = len(c.traces)
    head = f"jaxviz: {n} function{'s' if n != 1 else ''} traced in {c.label}"
    if c.error is not None:
        head += f"; the cell raised {type(c.error).__name__}: {_first_line(c.error)}"
    lines = [head]
    processes = getattr(c, "processes", None)
    if processes is not None:  # a jax.distributed run merged on process 0 (its findings once)
        from jaxviz.view.processes import merged_lines

        lines += ["", *merged_lines(processes)]
    profile = getattr(c, "profile", None)
    layouts = _layouts(c)
    for t in c.traces:
        lines.append("")
        per_step = None
        if profile is not None and t.name in profile.node_us:  # --profile: a time column
            steps = max(profile.steps, 1)
            per_step = {k: us / steps for k, us in profile.node_us[t.name].items()}
        lines.append(
            trace_text(t, params=params, max_lines=max_lines, home=c.filename, node_us=per_step,
                       layouts=layouts.get(id(t)))
        )  # fmt: skip
    cell_only = [d for d in c.diagnostics if not any(d in t.diagnostics for t in c.traces)]
    if cell_only:
        lines.append("")
        lines.append("diagnostics:")
        lines.extend(diagnostic_lines(cell_only, "  ", c.filename))
    reports = [r for r in getattr(c, "compiled", ()) if r.name not in memory_below]
    notes = [n for n in getattr(c, "compiled_notes", ()) if not _said_below(n, memory_below)]
    compiled = compiled_lines(reports, notes)
    if compiled:  # each function's top buffers at its compiled peak (jaxviz.memory.peaks)
        lines.append("")
        lines.extend(compiled)
    eager = eager_lines(getattr(c, "eager_collectives", ()))
    if eager:  # the collectives of its eager ops on several devices (jaxviz.mesh.eager)
        lines.append("")
        lines.extend(eager)
    if profile is not None:  # %%jaxtrace --profile: the top lines by device time
        lines.append("")
        lines.append(str(profile))
    if c.cost is not None:
        lines.append("")
        lines.append(str(c.cost))
    failed = getattr(c, "analysis_error", None)
    if failed is not None:  # an analysis that ran later, which failed: what it had is above
        lines.append("")
        lines.append(analysis_note(failed))
    notes = [m for m in getattr(c, "memory", None) or () if m.note]
    if notes:  # the memory tab's notes: functions %%jaxtrace did not run, and why
        lines.append("")
        lines.append("memory:")
        lines.extend(f"  {m.trace}: {m.note}" for m in notes)
    return "\n".join(lines)


def _layouts(c: CellTrace) -> dict[int, dict[str, str]]:
    """{id(trace): its equations' compiled layouts} from the cell's compiled memory reports
    of sharded programs (each matched to its trace by name and inputs)."""
    out: dict[int, dict[str, str]] = {}
    for r in getattr(c, "compiled", ()) or ():
        k = report_trace(r, c.traces) if getattr(r, "layouts", ()) else None
        if k is not None:
            out[id(c.traces[k])] = dict(r.layouts)
    return out


def _said_below(note: str, below: frozenset[str]) -> bool:
    """Whether a compiled-memory note is only about functions whose full report follows
    (`--memory`): "not computed for f, g (at most 8 functions ...)" above f's and g's."""
    if not below:
        return False
    if note.startswith(NOT_COMPUTED):
        names = note[len(NOT_COMPUTED) :].split(" (", 1)[0].split(":", 1)[0]
        return all(n.strip() in below for n in names.split(","))
    return note.split(NOT_AVAILABLE, 1)[0] in below


def analysis_note(e: BaseException) -> str:
    """The note a cell's view shows for jaxviz's own failure in its analysis."""
    return (
        f"jaxviz: could not finish this cell's analysis (a bug in jaxviz; the cell itself ran "
        f"as usual): {type(e).__name__}: {_first_line(e)}"
    )


def _short_signature(t: Trace) -> str:
    b = t.graph.body
    return fold_avals([b.nodes[i].out[0] for i in b.inputs])


def summary_lines(c: CellTrace) -> list[str]:
    """One line per trace: name, signature, calls, equation count (for the CLI)."""
    return [
        (
            f"eager {t.name}"
            if t.kind == "eager"
            else f"{t.kind} {t.name}({_short_signature(t)}{'; ' + t.static if t.static else ''})"
        )
        + f": {_calls(t)}, {t.graph.n_eqns} eqns"
        for t in c.traces
    ]


COMPILED_TOP = 3  # buffers the cell's text twin lists per function at its compiled peak


def compiled_lines(reports: Sequence[Any], notes: Sequence[str] = ()) -> list[str]:
    """The text twin's short section: each function's compiled peak and top buffers."""
    if not reports and not notes:
        return []
    lines = ["compiled memory (XLA's schedule of each jitted function, not run):"]
    for r in reports:
        xla = ""
        if r.xla_total is not None:
            xla = f" (XLA's memory_analysis(): {fmt_bytes(r.xla_total)})"
        lines.append(
            f"  {r.name}: peak {fmt_bytes(r.peak_bytes)}{xla} at step {r.peak_step + 1} "
            f"of {len(r.timeline)}; largest buffers at the peak:"
        )
        lines += ["    " + buffer_line(b) for b in r.buffers[:COMPILED_TOP]]
        rest = r.buffers[COMPILED_TOP:]
        if rest:
            more = f"... and {len(rest)} more, full list: ct['{r.name}'].memory()"
            lines.append(f"    {'':>10}  {more}")
        lines += [f"    donation: {d.sentence()}" for d in r.donations]
        lines += ["    " + line for line in collectives_lines(r.collectives, r.mesh, COMPILED_TOP)]
        lines += ["    " + line for line in replicated_lines(r.replicated, COMPILED_TOP)]
    lines += [f"  note: {n}" for n in notes]
    return lines

"""Where the compiled program's memory goes, without running it.

`memory_report(trace)` compiles the trace's jitted function (as `Trace.compile()` does),
reads the optimised, scheduled HLO and simulates every buffer's lifetime over XLA's
schedule: parameters and outputs are allocated for the whole run, every other buffer from the
instruction that writes it to its last reader (tuples, get-tuple-element, bitcasts and while
loops' state share their operands' buffers; fusions allocate their output only; a while,
conditional or call adds its body's own temporaries at its step; temporaries share an
operand's or an output's allocation as XLA's buffer assignment does; docs/memory.md). That
gives

- a timeline: live bytes at each step of the schedule, as XProf's memory viewer draws it;
- the buffers live at the peak, largest first, each with its category and where it came
  from: the argument path for arguments, the user's line (XLA's op metadata) for the rest,
  and the graph nodes of that line;
- per-argument donation savings, measured by compiling again with the argument donated (or
  not donated) and comparing XLA's figures (jaxviz.memory.whatif).

The totals reconcile with `compiled.memory_analysis()`: arguments + outputs + temporaries -
aliased, see `MemoryReport.reconciled`. The text twin is `str(report)`.

    >>> import jax, jax.numpy as jnp, jaxviz
    >>> r = jaxviz.trace(lambda x: (x @ x).sum(), jnp.ones((256, 256))).memory()
    >>> r.buffers[0].category
    'argument'
"""

from __future__ import annotations

import bisect
import dataclasses
import time
from typing import Any

from jaxviz import _compat
from jaxviz._compat import HloInstr as Instr
from jaxviz._compat import HloModule
from jaxviz.memory.compile import CompileReport, compile_with_executable
from jaxviz.memory.report import Buffer, MemoryReport
from jaxviz.memory.whatif import donation_savings

# instructions whose result is (part of) an operand's buffer: no allocation of their own
_ALIAS = {"bitcast", "while", "optimization-barrier", "add-dependency", "domain"}

# --- analysis ------------------------------------------------------------------------------


def memory_report(trace: Any, what_if: bool = True) -> MemoryReport:
    """Compiles `trace` and explains its memory (what_if: also measure donation savings)."""
    compiled_report, _lowered, compiled = compile_with_executable(trace)
    report = analyze(trace, compiled_report, compiled)
    if what_if:
        per_arg: dict[str, int] = {}
        for b in report.buffers:
            if b.category in ("argument", "donated argument"):
                name = b.where.split("[", 1)[0]
                per_arg[name] = per_arg.get(name, 0) + b.bytes
        donations = donation_savings(trace, compiled_report, per_arg)
        report = dataclasses.replace(report, donations=donations)
    return report


def analyze(trace: Any, cr: CompileReport, compiled: Any = None) -> MemoryReport:
    """The MemoryReport of an already compiled trace (no donation savings)."""
    t0 = time.perf_counter()
    hlo = cr.hlo
    if not hlo and compiled is not None:
        try:
            hlo = compiled.as_text() or ""
        except Exception:
            hlo = ""
    notes: list[str] = []
    if not hlo:
        notes.append(f"XLA printed no optimised HLO on {cr.platform}: no buffers to show")
        return _empty(trace, cr, notes, time.perf_counter() - t0)
    module = _compat.parse_hlo_module(hlo)
    sim = _Simulation(module)
    sim.run()
    nodes = _NodeIndex(getattr(trace, "graph", None))
    buffers = sorted(
        (sim.describe(b, nodes) for b in sim.at_peak()), key=lambda b: (-b.bytes, b.start)
    )
    unnamed = [b for b in buffers if not b.named]
    if unnamed:
        lost = sum(b.bytes for b in unnamed)
        notes.append(
            f"XLA kept no source for {len(unnamed)} of the {len(buffers)} buffers at the peak "
            f"({lost:,} bytes): shown by their HLO instruction, not guessed"
        )
    if sim.no_schedule:
        notes.append("the module is not scheduled (is_scheduled=false): the order is XLA's text")
    graph = getattr(trace, "graph", None)
    return MemoryReport(
        name=getattr(trace, "name", "f"),
        platform=cr.platform,
        num_devices=cr.memory.num_devices,
        timeline=tuple(sim.timeline),
        ops=tuple(i.name for i in sim.instrs),
        peak_step=sim.peak,
        peak_bytes=sim.timeline[sim.peak] if sim.timeline else 0,
        buffers=tuple(buffers),
        argument_bytes=sim.category_bytes(("argument", "donated argument")),
        output_bytes=sim.category_bytes(("output",)),
        temp_bytes=sum(b.bytes for b in buffers if b.category in ("temporary", "activation")),
        xla=cr.memory,
        notes=tuple(notes),
        analysis_seconds=time.perf_counter() - t0,
        compile_seconds=cr.compile_seconds,
        n_eqns=graph.n_eqns if graph is not None else 0,
        signature=_signature(trace),
    )


def _signature(trace: Any) -> str:
    try:
        return str(trace.signature)
    except Exception:  # a duck-typed trace without a graph
        return ""


def _empty(trace: Any, cr: CompileReport, notes: list[str], seconds: float) -> MemoryReport:
    return MemoryReport(
        name=getattr(trace, "name", "f"),
        platform=cr.platform,
        num_devices=cr.memory.num_devices,
        timeline=(),
        ops=(),
        peak_step=0,
        peak_bytes=0,
        buffers=(),
        argument_bytes=0,
        output_bytes=0,
        temp_bytes=0,
        xla=cr.memory,
        notes=tuple(notes),
        analysis_seconds=seconds,
        compile_seconds=cr.compile_seconds,
        signature=_signature(trace),
    )


@dataclasses.dataclass
class _Buf:
    bytes: int
    type: str
    instr: Instr
    start: int
    end: int
    category: str = "temporary"
    inside: str = ""
    defined: int = 0  # the step that writes it (an output's allocation starts at 0)
    out_index: int = -1  # the output it is (the entry ROOT's element), -1 when none


class _Simulation:
    """Buffers and their lifetimes over the entry computation's schedule."""

    def __init__(self, module: HloModule):
        self.m = module
        self.instrs = module.entry_instructions()
        self.no_schedule = not module.scheduled
        self.bufs: list[_Buf] = []
        self.timeline: list[int] = []
        self.peak = 0
        self._sub_peak: dict[str, tuple[int, list[_Buf]]] = {}
        self.transient: dict[int, list[_Buf]] = {}  # step -> loop-body buffers at its peak

    def run(self) -> None:
        bufs, extra = self._simulate(self.instrs, entry=True)
        self.bufs = bufs
        n = len(self.instrs)
        delta = [0] * (n + 1)
        for b in bufs:
            delta[b.start] += b.bytes
            delta[b.end + 1] -= b.bytes
        live, tl = 0, []
        # XLA allocates outputs for the whole run, but may place one temporary at a time in
        # an output's allocation until the output is written: it adds nothing then
        later_outs = sorted(
            ((b.defined, b.bytes) for b in bufs if b.category == "output" and b.bytes), reverse=True
        )
        temps = [b for b in bufs if b.bytes and b.category in ("temporary", "constant")]
        temps.sort(key=lambda b: -b.bytes)  # largest first: an index order is a size order
        starts: dict[int, list[int]] = {}
        for k, b in enumerate(temps):
            starts.setdefault(b.start, []).append(k)
        active: set[int] = set()
        for i in range(n):
            live += delta[i]
            inner = list(extra.get(i, ()))
            while later_outs and later_outs[-1][0] <= i:
                later_outs.pop()
            active.update(starts.get(i, ()))
            active = {k for k in active if temps[k].end >= i}
            hidden = 0
            if later_outs:
                holders = [temps[k] for k in sorted(active)] + inner
                hidden = _fit_in_outputs(holders, later_outs, i)
            tl.append(live + sum(x.bytes for x in inner) - hidden)
        self.timeline = tl
        self.transient = extra
        self.peak = max(range(n), key=tl.__getitem__) if n else 0

    def _simulate(
        self, instrs: list[Instr], entry: bool, depth: int = 0
    ) -> tuple[list[_Buf], dict[int, list[_Buf]]]:
        """(buffers, {step: sub-computation buffers live at that step's inner peak}).

        Not the entry: parameters and what reaches ROOT are the caller's buffers (a loop's
        state), so only the computation's own temporaries are counted."""
        val: dict[str, Any] = {}
        bufs: list[_Buf] = []
        extra: dict[int, list[_Buf]] = {}
        n = len(instrs)
        external: set[int] = set()
        shapes = {ins.name: ins.shape for ins in instrs}

        def alloc(ins: Instr, step: int, shape: Any) -> Any:
            if isinstance(shape, list):
                return [alloc(ins, step, s) for s in shape]
            bufs.append(_Buf(shape[1], shape[0], ins, step, step))
            return len(bufs) - 1

        def flat(v: Any) -> list[int]:
            if isinstance(v, list):
                return [x for e in v for x in flat(e)]
            return [] if v is None else [v]

        for i, ins in enumerate(instrs):
            op = ins.opcode
            first = val.get(ins.operands[0]) if ins.operands else None
            if op == "parameter":
                v = alloc(ins, 0, ins.shape)
                for b in flat(v):
                    bufs[b].category = "argument"
                    if not entry:
                        external.add(b)
            elif op == "tuple":
                v = [val.get(o) for o in ins.operands]
            elif op == "get-tuple-element":
                v = _element(first, ins.index)
            elif op in _ALIAS and first is not None:
                v = first
            elif op == "call" and first is not None and _same(ins.shape, shapes[ins.operands[0]]):
                v = first  # CPU wraps loops in a call of the loop's state: its buffers
            elif op.endswith("-done") and first is not None:
                v = first[-1] if isinstance(first, list) else first
            else:
                v = alloc(ins, i, ins.shape)
                if op == "constant":
                    for b in flat(v):
                        bufs[b].category = "constant"
            val[ins.name] = v
            for o in ins.operands:
                for b in flat(val.get(o)):
                    if bufs[b].end < i:
                        bufs[b].end = i
            if ins.calls and depth < 8:
                inner = self._inner_peak(ins, depth)
                if inner:
                    extra[i] = inner
        shared = _share_operands(instrs, val, bufs)
        root = next((ins for ins in instrs if ins.root), instrs[-1] if instrs else None)
        if root is not None:
            rv = val.get(root.name)
            for k, v in enumerate(rv if isinstance(rv, list) else [rv]):
                for b in flat(v):
                    if entry and bufs[b].out_index < 0:
                        bufs[b].out_index = k
            for b in flat(rv):
                if entry:  # an output's allocation exists for the whole run, as XLA's does
                    bufs[b].end = n - 1
                    if bufs[b].category != "argument":
                        bufs[b].category = "output"
                        bufs[b].defined = bufs[b].start
                        bufs[b].start = 0
                else:
                    external.add(b)
        if entry:
            for buf in bufs:
                if buf.category == "argument":
                    buf.end = n - 1
            out_val = val.get(root.name) if root is not None else None
            for p, b in self._params(bufs).items():
                if p in self.m.aliases:
                    bufs[b].category = "donated argument"
                    for k in _flat_at(out_val, self.m.aliases[p]):  # written into the argument
                        if bufs[k].category == "output":
                            bufs[k].bytes = 0
            for b, into in shared.items():  # a temporary kept in an output's allocation
                while into in shared:
                    into = shared[into]
                if bufs[into].category in ("output", "donated argument") or bufs[into].bytes == 0:
                    bufs[b].bytes = 0
                    # the output's allocation is taken from when the temporary is written
                    bufs[into].defined = min(bufs[into].defined, bufs[b].start)
        else:
            bufs = [b for k, b in enumerate(bufs) if k not in external]
        return bufs, extra

    def _params(self, bufs: list[_Buf]) -> dict[int, int]:
        return {b.instr.index: k for k, b in enumerate(bufs) if b.instr.opcode == "parameter"}

    def _inner_peak(self, ins: Instr, depth: int) -> list[_Buf]:
        """The largest set of temporaries any computation `ins` calls holds at once."""
        best: list[_Buf] = []
        for name in ins.calls:
            if name not in self._sub_peak:
                self._sub_peak[name] = (0, [])  # recursion guard
                instrs = self.m.computation(name)
                bufs, extra = self._simulate(instrs, entry=False, depth=depth + 1)
                label = f"{ins.opcode} {'body' if ins.opcode == 'while' else 'branch'} {name}"
                self._sub_peak[name] = _peak_set(bufs, extra, len(instrs), label)
            total, held = self._sub_peak[name]
            if total > sum(b.bytes for b in best):
                best = held
        return best

    def at_peak(self) -> list[_Buf]:
        p = self.peak
        out = [b for b in self.bufs if b.start <= p <= b.end and b.bytes > 0]
        return out + list(self.transient.get(p, ()))

    def category_bytes(self, cats: tuple[str, ...]) -> int:
        return sum(b.bytes for b in self.bufs if b.category in cats)

    def describe(self, b: _Buf, nodes: _NodeIndex) -> Buffer:
        ins = b.instr
        cat = b.category
        forward = _compat.is_forward_of_grad(ins.op_name)
        if cat == "temporary" and forward and self._read_backward(b):
            cat = "activation"
        if ins.opcode == "parameter":
            path = ins.op_name
            return Buffer(ins.name, b.bytes, b.type, cat, "", path, path, "", 0, "",
                          nodes.inputs.get(path, ()), b.start, b.end, b.inside)  # fmt: skip
        stack = self.m.stack(ins.frame)
        if stack:
            f = stack[0]
            file, line, fn = f.file, f.line, f.fn
        elif ins.source is not None:
            file, line, fn = ins.source[0], ins.source[1], ""
        else:
            file, line, fn = "", 0, ""
        prim = _compat.op_primitive(ins.op_name) if ins.op_name else ""
        where = ""
        if file:
            where = f"{_short(file)}:{line}" + (f" ({fn})" if fn else "")
        ids = nodes.outputs.get(b.out_index, ()) if cat == "output" else ()
        ids = ids or nodes.lookup(
            prim, [(f.file, f.line) for f in stack] or [(file, line)], ins.op_name
        )
        return Buffer(ins.name, b.bytes, b.type, cat, prim, ins.op_name, where, file, line, fn,
                      ids, b.start, b.end, b.inside)  # fmt: skip

    def _read_backward(self, b: _Buf) -> bool:
        """A forward buffer that a backward op reads (an activation kept for the gradient)."""
        if b.inside or b.end >= len(self.instrs):
            return False
        reader = self.instrs[b.end]
        return _compat.is_backward(reader.op_name)


def _fit_in_outputs(holders: list[_Buf], outs: list[tuple[int, int]], step: int) -> int:
    """Bytes of `holders` (largest first) that fit in output allocations not yet written:
    one value at a time in an allocation (the smallest that fits, written soonest after the
    value's last read). outs: (step that writes the output, its bytes)."""
    groups: dict[int, list[int]] = {}
    for d, sz in outs:
        groups.setdefault(sz, []).append(d)
    for g in groups.values():
        g.sort()
    caps = sorted(groups)
    hidden = 0
    for b in holders:
        if not caps:
            break
        end = step if b.inside else b.end
        for c in caps[bisect.bisect_left(caps, b.bytes) :]:
            g = groups[c]
            k = bisect.bisect_right(g, end)
            if k < len(g):
                g.pop(k)
                hidden += b.bytes
                if not g:
                    caps.remove(c)
                break
    return hidden


def _same(a: Any, b: Any) -> bool:
    """Two shapes with the same arrays (layouts aside)."""
    if isinstance(a, list) != isinstance(b, list):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a[0] == b[0])


_ELEMENTWISE = {
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "exponential",
    "log", "tanh", "logistic", "sqrt", "rsqrt", "abs", "select", "convert", "power", "sine",
    "cosine", "compare", "and", "or", "not", "clamp", "floor", "ceil", "sign",
}  # fmt: skip


def _share_operands(instrs: list[Instr], val: dict[str, Any], bufs: list[_Buf]) -> dict[int, int]:
    """XLA writes an elementwise result into an operand's buffer that dies at that
    instruction (buffer assignment's CanShareOperandBufferWithUser), and a
    dynamic-update-slice, sort or scatter into its operand in place: such pairs share one
    allocation.
    Returns {operand buffer: the buffer that took its place}."""
    shared: dict[int, int] = {}
    for i, ins in enumerate(instrs):
        out = val.get(ins.name)
        if not isinstance(out, int) or bufs[out].instr is not ins:
            continue
        in_place = "dynamic-update-slice" in ins.name or ins.opcode in (
            "dynamic-update-slice",
            "sort",
            "scatter",
        )
        if not (in_place or ins.opcode in _ELEMENTWISE or ins.kind == "kLoop"):
            continue
        for o in ins.operands[:1] if in_place else ins.operands:
            b = val.get(o)
            if (
                isinstance(b, int)
                and b != out
                and bufs[b].end == i
                and bufs[b].start < i
                and bufs[b].category == "temporary"
                and bufs[b].bytes == bufs[out].bytes
            ):
                bufs[b].end = i - 1
                shared[b] = out
                break
    return shared


def _flat_at(v: Any, path: tuple[int, ...]) -> list[int]:
    """The buffers at output index `path` of a (nested) value."""
    for k in path:
        if not isinstance(v, list) or k >= len(v):
            return []
        v = v[k]
    if isinstance(v, list):
        return [x for e in v for x in _flat_at(e, ())]
    return [] if v is None else [v]


def _peak_set(
    bufs: list[_Buf], extra: dict[int, list[_Buf]], n: int, label: str
) -> tuple[int, list[_Buf]]:
    if not n:
        return 0, []
    delta = [0] * (n + 1)
    for b in bufs:
        delta[b.start] += b.bytes
        delta[b.end + 1] -= b.bytes
    live, best, at = 0, -1, 0
    for i in range(n):
        live += delta[i]
        total = live + sum(x.bytes for x in extra.get(i, ()))
        if total > best:
            best, at = total, i
    at_peak = [b for b in bufs if b.start <= at <= b.end] + list(extra.get(at, ()))
    held = [dataclasses.replace(b, inside=b.inside or label) for b in at_peak]
    return max(best, 0), [b for b in held if b.bytes > 0]


def _short(file: str) -> str:
    from jaxviz.graph.files import file_label

    return file_label(file)


class _NodeIndex:
    """Graph nodes by (primitive, call chain of (file, line)), innermost frame first."""

    def __init__(self, graph: Any):
        self.by_chain: dict[tuple, list[tuple[str, str]]] = {}
        self.inputs: dict[str, tuple[str, ...]] = {}  # argument path -> its input node
        self.outputs: dict[int, tuple[str, ...]] = {}  # output index -> the node writing it
        if graph is None:
            return
        root = graph.bodies[graph.root]
        for i in root.inputs:
            self.inputs[root.nodes[i].op] = (f"{root.id}:{i}",)
        src = {e.dst: e.src for e in root.edges}
        for k, o in enumerate(root.outputs):
            if o in src and root.nodes[src[o]].kind == "eqn":
                self.outputs[k] = (f"{root.id}:{src[o]}",)
        for body in graph.bodies:
            groups = {g.id: g for g in body.groups}
            for n in body.nodes:
                if n.kind != "eqn" or n.loc is None:
                    continue
                chain = [(n.loc.file, n.loc.line)]
                g = groups.get(n.group)
                while g is not None:
                    if g.loc is not None:
                        chain.append((g.loc.file, g.loc.line))
                    g = groups.get(g.parent)
                ref = (f"{body.id}:{n.id}", n.ns)
                for k in range(1, len(chain) + 1):
                    self.by_chain.setdefault((n.op, tuple(chain[:k])), []).append(ref)
                    self.by_chain.setdefault(("", tuple(chain[:k])), []).append(ref)

    def lookup(self, prim: str, chain: list[tuple[str, int]], op_name: str) -> tuple[str, ...]:
        for op in (prim, ""):
            for k in range(len(chain), 0, -1):
                refs = self.by_chain.get((op, tuple(chain[:k])))
                if refs:
                    same_ns = [r for r, ns in refs if ns and ns in op_name]
                    return tuple((same_ns or [r for r, _ in refs])[:8])
        return ()


def _element(v: Any, k: int) -> Any:
    """Element k of a tuple value (the value itself when it is not a tuple)."""
    return v[k] if isinstance(v, list) and k < len(v) else v


NodeIndex = _NodeIndex  # the graph nodes of an HLO op's source: jaxviz.profile reads them too

"""From executed kernels to source lines: each op event's device time, through the compiled
HLO's metadata, to the lines (or named XLA categories) it computed.

An op event names an HLO instruction of its module. Its device time goes to the instruction's
"leaves": a fusion's fused instructions; a call's, while's or conditional's called computations' (a
while's times its known trip count) when the profile has no events of its own for them (CPU runs a
while loop as one event); else the instruction itself. A leaf's line is its `stack_frame_id`'s
innermost frame of the user's code (`users_frame`, as the memory view reads it). The time is split
over the leaves in proportion to their estimated work (`work`): a dot's 2·M·N·K FLOPs, one per
element computed or reduced, one per element a standalone copy writes (an index operation inside a
fusion costs none). A kernel whose leaves all sit on one line is measured, not estimated.

A computing leaf XLA kept no source for takes the line of the op reading its result, or of its
kernel (estimated too). Leaves without a source line are named for what they are (`category`): a
copy or layout change, a collective, the while loop's own overhead, ... never dropped. Each call is
matched to the program it ran (`attribute`).

    >>> from jaxviz._compat.profiler import DeviceTrace
    >>> attribute(DeviceTrace([], [], "cpu"), []).total_us
    0.0
"""

from __future__ import annotations

import dataclasses
import linecache
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

from jaxviz import _compat
from jaxviz._compat import HloInstr, HloModule
from jaxviz._compat.profiler import DeviceTrace, OpEvent
from jaxviz.capture.places import users_frame
from jaxviz.profile.inserted import inserted_row


@dataclasses.dataclass
class Program:
    """One compiled module whose HLO jaxviz has: what the op events are matched against."""

    module: HloModule
    trace: str = ""  # the Trace's name, "step"
    nodes: Any = None  # jaxviz.memory.buffers' node index of that trace's graph
    flops_per_call: float | None = None  # XLA's cost analysis
    eager: bool = False  # an eager op's, whose HLO jaxviz.mesh.eager kept (its collectives')
    _found: dict[str, tuple[HloInstr, str] | None] = dataclasses.field(
        default_factory=dict, repr=False
    )
    _by_name: dict[str, dict[str, HloInstr]] = dataclasses.field(default_factory=dict, repr=False)
    _provenance: Any = dataclasses.field(default=None, repr=False)  # jaxviz.profile.inserted's

    @property
    def name(self) -> str:
        return self.module.name

    def find(self, op: str) -> tuple[HloInstr, str] | None:
        """The instruction named `op` and its computation (None when the module has none)."""
        if op not in self._found:
            comp = self.module.computation_of(op)
            names = self._by_name.get(comp)
            if comp and names is None:
                names = self._by_name[comp] = {i.name: i for i in self.module.computation(comp)}
            ins = names.get(op) if names else None
            self._found[op] = (ins, comp) if ins is not None else None
        return self._found[op]


@dataclasses.dataclass
class Share:
    """Where a slice of device time went: a line, or a named category."""

    # ("line", file, line), ("cat", name), ("coll", file, line, "all-reduce"), or an op XLA
    # inserted, at the line of the op it serves: ("xla", file, line, "convert")
    key: tuple
    fn: str = ""
    prim: str = ""
    node: tuple[str, ...] = ()
    guessed: bool = False  # the line of an op reading it: XLA kept no source for this one
    bytes: int = 0  # a collective's: the bytes each device holds through it, a call


@dataclasses.dataclass
class Kernel:
    """One (module, op) pair's time and what it maps to."""

    module: str
    op: str
    program: int = -1  # the index of the Program its calls ran (-1: none jaxviz has)
    us: float = 0.0
    calls: int = 0
    category: str = ""  # the profiler's own category (TPU), else ""
    bytes: float = 0.0
    split: list[tuple[Share, float]] = dataclasses.field(default_factory=list)  # fractions
    kind: str = ""
    flops: float = 0.0  # estimated per call
    trace: str = ""


@dataclasses.dataclass
class Attribution:
    """The attribution's result, before the report's formatting (jaxviz.profile.session)."""

    kernels: list[Kernel]
    total_us: float
    raw_us: float  # the op events' durations summed, nested ones once (outermost_us)
    runs: dict[str, int]  # module -> calls
    module_us: dict[str, float]
    notes: list[str]
    # module -> XLA's FLOPs over all its profiled calls, each call by the program it ran
    # (None: a call of a program without a cost analysis)
    module_flops: dict[str, float | None] = dataclasses.field(default_factory=dict)
    module_trace: dict[str, str] = dataclasses.field(default_factory=dict)
    # run -> its op events' device time (nested events once), as the lines count it
    run_us: dict[str, float] = dataclasses.field(default_factory=dict)


# --- work estimate ---------------------------------------------------------------------------

_NO_WORK = {
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
    "partition-id", "replica-id", "opt-barrier", "optimization-barrier", "add-dependency",
    "domain", "get-dimension-size",
}  # fmt: skip
# index operations: inside a fusion they are addressing, not work of their own
_INDEXING = {
    "broadcast", "reshape", "transpose", "slice", "dynamic-slice", "dynamic-update-slice",
    "concatenate", "pad", "reverse", "iota", "copy", "convert", "gather", "select",
}  # fmt: skip
_DIMS = re.compile(r"\[([0-9,]*)\]")


def _dims(leaf_type: str) -> list[int]:
    m = _DIMS.search(leaf_type)
    return [int(d) for d in m.group(1).split(",") if d] if m else []


def _elements(shape: Any) -> int:
    return sum(math.prod(_dims(leaf.type)) for leaf in _compat.hlo_leaves(shape))


def work(ins: HloInstr, shapes: dict[str, Any], fused: bool) -> float:
    """The instruction's estimated work: FLOPs for a dot or convolution, one per element
    computed, reduced or (outside a fusion) moved; 0 for what moves no data."""
    op = ins.opcode
    if op in _NO_WORK:
        return 0.0
    out = _elements(ins.shape)
    if op == "dot" and ins.operands:
        lhs = shapes.get(ins.operands[0])
        dims = _dims(_compat.hlo_leaves(lhs)[0].type) if lhs is not None else []
        k = math.prod(dims[d] for d in ins.contracting if d < len(dims)) if dims else 1
        return 2.0 * out * max(k, 1)
    if op == "convolution" and len(ins.operands) > 1:
        rhs = shapes.get(ins.operands[1])
        dims = _dims(_compat.hlo_leaves(rhs)[0].type) if rhs is not None else []
        # kernel elements per output feature: the kernel over its largest (feature) dim
        per = math.prod(dims) / max(dims) if dims else 1
        return 2.0 * out * max(per, 1)
    if op in ("reduce", "reduce-window") and ins.operands:
        src = shapes.get(ins.operands[0])
        return float(_elements(src)) if src is not None else float(out)
    if fused and op in _INDEXING:
        return 0.0
    return float(out)


# --- categories ------------------------------------------------------------------------------

_COLLECTIVE = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


def category(ins: HloInstr | None, op: str = "") -> str:
    """What an op with no source line is: "copy / layout change", "collective: all-reduce",
    "while loop overhead", ..."""
    code = ins.opcode if ins is not None else ""
    name = code or op
    if any(name.startswith(c) for c in _COLLECTIVE):
        return "collective: " + next(c for c in _COLLECTIVE if name.startswith(c))
    if name.startswith(("copy", "transpose")) or "copy" in op:
        return "copy / layout change"
    if name.startswith(("infeed", "outfeed", "send", "recv")):
        return "infeed / outfeed"
    if name in ("while", "conditional", "call", "get-tuple-element", "tuple", "parameter"):
        return "while loop overhead" if name != "conditional" else "conditional overhead"
    if name == "custom-call":
        return "custom call (no source)"
    return f"XLA {name or 'op'} (no source)"


# --- leaves ----------------------------------------------------------------------------------


def _leaves(
    p: Program, ins: HloInstr, comp: str, mult: float, own: set[str], depth: int = 0
) -> Iterator[tuple[HloInstr, float, float, str]]:
    """(leaf, multiplicity, work, its computation) of an executed instruction."""
    m = p.module
    if depth < 12 and ins.opcode == "fusion" and ins.fused:
        instrs = m.computation(ins.fused)
        shapes = {i.name: i.shape for i in instrs}
        for i in instrs:
            if i.opcode == "fusion" and i.fused:
                yield from _leaves(p, i, ins.fused, mult, own, depth + 1)
            else:
                yield i, mult, work(i, shapes, fused=True), ins.fused
        return
    called = ins.calls if ins.opcode in ("while", "call", "conditional") else ()
    if depth < 12 and called and not any(i.name in own for c in called for i in m.computation(c)):
        times = mult * (ins.trips or 1) if ins.opcode == "while" else mult
        if ins.opcode == "conditional":
            times = mult / max(len(called), 1)  # which branch ran is not known: each alike
        for c in called:
            for i in m.computation(c):
                yield from _leaves(p, i, c, times, own, depth + 1)
        yield ins, mult, 0.0, comp
        return
    shapes = {i.name: i.shape for i in m.computation(comp)}
    yield ins, mult, work(ins, shapes, fused=False), comp


def _reader_line(p: Program, ins: HloInstr, comp: str) -> Share | None:
    """The line of the first op in `comp` that reads `ins`'s result and has one."""
    for user in p.module.computation(comp):
        if ins.name in user.operands and user.frame:
            uprim = _compat.op_primitive(user.op_name) if user.op_name else ""
            stack = p.module.stack(user.frame)
            if uprim != "while" and stack:
                f = users_frame(stack)
                return Share(("line", f.file, f.line), f.fn, uprim, guessed=True)
    return None


def _collective_share(p: Program, ins: HloInstr, comp: str) -> Share | None:
    """A collective's own row, at the line of the op it serves (XLA's metadata; an async
    pair's `-done` takes its `-start`'s; where XLA kept no source, the first op reading its
    result that has a line, as jaxviz.mesh names it): ("coll", file, line, kind), never
    folded into that line's compute. None for other ops, or a collective serving no line."""
    code = ins.opcode
    kind = next((c for c in _COLLECTIVE if code == c or code in (c + "-start", c + "-done")), "")
    if not kind:
        return None
    src = ins
    if code.endswith("-done") and ins.operands and comp:
        src = next((i for i in p.module.computation(comp) if i.name == ins.operands[0]), ins)
    stack = p.module.stack(src.frame)
    if stack:
        file, line, fn = (f := users_frame(stack)).file, f.line, f.fn
    elif src.source is not None:
        file, line, fn = src.source[0], src.source[1], ""
    else:  # the op reading its result (an async pair's: its -done's)
        ops = p.module.computation(comp) if comp else []
        done = next((i for i in ops if i.opcode.endswith("-done") and ins.name in i.operands), ins)
        if (reader := _reader_line(p, done, comp) if comp else None) is None:
            return None
        file, line, fn = reader.key[1], reader.key[2], reader.fn
    leaves = _compat.hlo_leaves(src.shape)
    # (an async start's shape: operand, result, ...contexts: the data's largest)
    big = src.opcode.endswith("-start")
    nbytes = max((lf.bytes for lf in leaves), default=0) if big else sum(lf.bytes for lf in leaves)
    if code.endswith("-done"):
        return Share(("coll", file, line, kind), fn, kind)  # (its -start counts them)
    return Share(("coll", file, line, kind), fn, kind, bytes=nbytes)


def _share_of(
    p: Program, ins: HloInstr, comp: str = "", outer: tuple[HloInstr, str] | None = None
) -> Share:
    """The line (innermost source frame) or category a leaf's time goes to. A compute op
    XLA kept no source for (a dot in a while body on jax 0.10.2; half of a reduce XLA split
    in two) takes the line of the first op reading its result that has one, or that of the
    kernel it runs in (`outer`), or of the first op reading the kernel's (`guessed`)."""
    own = _collective_share(p, ins, comp)
    if own is not None:
        return own
    prim = _compat.work_primitive(ins)  # (a weight gradient's dot named `transpose`: dot_general)
    stack = p.module.stack(ins.frame)
    if not stack and ins.source is None and comp and ins.opcode not in _NO_WORK | _INDEXING:
        found = _reader_line(p, ins, comp)
        if found is None and outer is not None and outer[0] is not ins:
            ostack = p.module.stack(outer[0].frame)
            oprim = _compat.op_primitive(outer[0].op_name) if outer[0].op_name else ""
            if ostack and oprim != "while":
                f = users_frame(ostack)
                found = Share(("line", f.file, f.line), f.fn, oprim, guessed=True)
            else:
                found = _reader_line(p, outer[0], outer[1])
        if found is not None:
            found.prim = found.prim or ins.opcode
            return found
    if stack and not (prim == "while" and ins.opcode not in ("dot", "convolution")):
        f = users_frame(stack)
        nodes = ()
        if p.nodes is not None:
            nodes = p.nodes.lookup(prim, [(s.file, s.line) for s in stack], ins.op_name)
        return Share(("line", f.file, f.line), f.fn, prim, nodes)
    if ins.source is not None and prim != "while":
        return Share(("line", ins.source[0], ins.source[1]), "", prim)
    return _inserted_share(p, ins, comp) or Share(("cat", category(ins)), "", prim)


def _inserted_share(p: Program, ins: HloInstr, comp: str) -> Share | None:
    """A convert or copy XLA inserted: a row of its own at the line of the op it serves,
    marked as XLA's (jaxviz.profile.inserted); None for another op, or one serving none."""
    row = inserted_row(p, ins, comp)
    return Share(row[0], row[1], row[0][3], row[2]) if row else None


def split_kernel(p: Program, ins: HloInstr, comp: str, own: set[str]) -> list[tuple[Share, float]]:
    """The instruction's time as fractions per line / category (summing to 1)."""
    xla = _inserted_share(p, ins, comp)  # a wrapped convert XLA inserted: all of it
    if xla is not None:
        return [(xla, 1.0)]
    parts: dict[tuple, tuple[Share, float]] = {}
    total = 0.0
    leaves = list(_leaves(p, ins, comp, 1.0, own))
    for leaf, mult, w, at in leaves:
        if w <= 0:
            continue
        s = _share_of(p, leaf, at, (ins, comp))
        key = (s.key, s.prim)
        old = parts.get(key)
        parts[key] = (old[0] if old else s, (old[1] if old else 0.0) + w * mult)
        total += w * mult
    if total <= 0:  # no leaf does work by the estimate: the instruction's own line, or even
        named = (
            [(lf, m) for lf, m, _, _ in leaves if lf.frame or lf.source]
            or [(lf, m) for lf, m, _, _ in leaves if lf.root and lf is not ins]
            or [(ins, 1.0)]
        )
        for leaf, mult in named:
            s = _share_of(p, leaf)
            key = (s.key, s.prim)
            old = parts.get(key)
            parts[key] = (old[0] if old else s, (old[1] if old else 0.0) + mult)
            total += mult
    return [(s, w / total) for s, w in parts.values()]


def _kernel_flops(p: Program, ins: HloInstr, comp: str, own: set[str]) -> float:
    return sum(
        w * m
        for leaf, m, w, _ in _leaves(p, ins, comp, 1.0, own)
        if leaf.opcode in ("dot", "convolution") or leaf.opcode not in _INDEXING | _NO_WORK
    )


# --- the attribution -------------------------------------------------------------------------


_TICK = 1e-3  # us: the resolution of the traces' timestamps (1 ns)


def exclusive(ops: Sequence[OpEvent]) -> list[float]:
    """Each event's own time: its duration less that of the events nested in it on its lane.
    An event is nested in another only when the other's span holds it whole (a while loop's
    body op inside the while's event, jax 0.10.2 on CPU); two that merely overlap (the TPU's
    ops, a copy-done starting before the op ahead of it ended) are each the device time
    recorded, as XProf's op profile and `outermost_us` count them."""
    own = [e.dur for e in ops]
    by_lane: dict[str, list[int]] = {}
    for k, e in enumerate(ops):
        by_lane.setdefault(e.lane, []).append(k)
    for idx in by_lane.values():
        idx.sort(key=lambda k: (ops[k].start, -ops[k].dur))
        stack: list[int] = []
        for k in idx:
            e = ops[k]
            # the events open around e: those that end no earlier than it does (to the
            # traces' resolution: a nested op's end rounded past its parent's is nested)
            while stack and ops[stack[-1]].start + ops[stack[-1]].dur < e.start + e.dur - _TICK:
                stack.pop()
            if stack:
                parent = ops[stack[-1]]
                inside = min(e.dur, parent.start + parent.dur - e.start)
                own[stack[-1]] = max(0.0, own[stack[-1]] - max(inside, 0.0))
            stack.append(k)
    return own


def outermost_us(ops: Sequence[OpEvent]) -> float:
    """The op events' durations summed, an event nested in another on its lane (a while
    loop's body op inside the while's event, jax 0.10.2 on CPU) not counted again: the
    device time the events record."""
    total = 0.0
    by_lane: dict[str, list[OpEvent]] = {}
    for e in ops:
        by_lane.setdefault(e.lane, []).append(e)
    for es in by_lane.values():
        end = float("-inf")
        for e in sorted(es, key=lambda e: (e.start, -e.dur)):
            if e.start + e.dur <= end + _TICK:
                continue  # inside the outer event still open
            total += e.dur
            end = e.start + e.dur
    return total


def attribute(
    trace: DeviceTrace,
    programs: Sequence[Program],
    eager: dict[str, list[tuple[str, int]]] | None = None,
    calls: dict[str, list[tuple[str, int, int]]] | None = None,
) -> Attribution:
    """Every op event's device time, to kernels and from them to lines / categories
    (eager: primitive -> the lines of the cell's eager statements that ran it: an eager
    op's module, "jit_sin", goes to them; calls: module -> (file, line, calls) of the
    lines that called a jitted function jaxviz has no HLO of, "jit_multiply")."""
    own = exclusive(trace.ops)
    by_name: dict[str, list[Program]] = {}
    for p in programs:
        by_name.setdefault(p.name, []).append(p)
    runs_of = _Runs(trace, programs, by_name)
    kernels: dict[tuple[str, int, str], Kernel] = {}
    run_us: dict[str, float] = {}
    for e, t in zip(trace.ops, own):
        run_us[e.run] = run_us.get(e.run, 0.0) + t
        key = (e.module, runs_of.program[e.run], e.op)
        k = kernels.get(key)
        if k is None:
            k = kernels[key] = Kernel(e.module, e.op, key[1], category=e.category)
        k.us += t
        k.calls += 1
        k.bytes += e.bytes
    lost: set[str] = set()
    for k in kernels.values():
        if k.calls:
            k.bytes /= k.calls
        if _place(k, programs, by_name, runs_of.ops_of, eager, calls):
            lost.add(k.module)
    notes: list[str] = []
    if runs_of.ambiguous:
        notes.append(
            ", ".join(sorted(runs_of.ambiguous)) + ": several compiled signatures whose ops "
            "have the same names, and the profile names no shapes (CPU): their calls are "
            "counted as the first signature's (lines are right; FLOP/s may not be)"
        )
    if lost:
        notes.append(
            "some ops of " + ", ".join(sorted(lost)) + " are not in the HLO jaxviz compiled "
            "(a function with several signatures?): named by their module"
        )
    runs: dict[str, int] = {}
    for r in trace.runs:
        runs[r.module] = runs.get(r.module, 0) + 1
    module_us: dict[str, float] = {}
    for k in kernels.values():
        module_us[k.module] = module_us.get(k.module, 0.0) + k.us
    flops, traces = runs_of.flops_and_traces(programs)
    return Attribution(
        sorted(kernels.values(), key=lambda k: -k.us),
        float(sum(own)),
        outermost_us(trace.ops),
        runs,
        module_us,
        notes,
        flops,
        traces,
        run_us,
    )


class _Runs:
    """Which compiled program each call (run) of the trace ran: the candidate (by module
    name) that has all its ops; two signatures of one function are two programs of one
    name, with ops of the same names, told apart by the shapes the TPU's events name."""

    def __init__(
        self, trace: DeviceTrace, programs: Sequence[Program], by_name: dict[str, list[Program]]
    ) -> None:
        run_ops: dict[str, set[str]] = {}
        self.module: dict[str, str] = {}  # run -> its module
        run_text: dict[str, dict[str, str]] = {}
        for e in trace.ops:
            run_ops.setdefault(e.run, set()).add(e.op)
            self.module[e.run] = e.module
            if e.text:
                run_text.setdefault(e.run, {})[e.op] = e.text
        index = {id(p): i for i, p in enumerate(programs)}
        self.program: dict[str, int] = {}  # run -> index into programs (-1: none)
        self.ambiguous: set[str] = set()  # modules whose runs two programs fit equally
        for run, ops in run_ops.items():
            scored = []
            for p in _candidates(self.module[run], programs, by_name):
                hit = [(op, p.find(op)) for op in ops]
                hits = sum(1 for _, f in hit if f is not None)
                texts = run_text.get(run, {})
                # the TPU names each op's shapes (long_name): the program whose instructions
                # have them
                shapes = sum(
                    1
                    for op, f in hit
                    if f is not None and op in texts and _same_shape(f[0], texts[op])
                )
                scored.append((hits, shapes, -index[id(p)]))
            scored = [s for s in scored if s[0] > 0]
            if not scored:
                self.program[run] = -1
                continue
            best = max(scored)
            self.program[run] = -best[2]
            if sum(1 for s in scored if s[:2] == best[:2]) > 1:
                self.ambiguous.add(self.module[run])
        self.ops_of: dict[int, set[str]] = {}  # program -> the op names its runs ran
        for run, ops in run_ops.items():
            self.ops_of.setdefault(self.program[run], set()).update(ops)

    def flops_and_traces(
        self, programs: Sequence[Program]
    ) -> tuple[dict[str, float | None], dict[str, str]]:
        """{module: FLOPs of all its runs (None: a run's program unknown)}, {module: the
        trace of its first known program}."""
        flops: dict[str, float | None] = {}
        traces: dict[str, str] = {}
        for run, i in self.program.items():
            m = self.module[run]
            fpc = programs[i].flops_per_call if i >= 0 else None
            prev = flops.get(m, 0.0)
            flops[m] = None if fpc is None or prev is None else prev + fpc
            if i >= 0:
                traces.setdefault(m, programs[i].trace)
        return flops, traces


def _place(
    k: Kernel,
    programs: Sequence[Program],
    by_name: dict[str, list[Program]],
    ops_of: dict[int, set[str]],
    eager: dict[str, list[tuple[str, int]]] | None,
    calls: dict[str, list[tuple[str, int, int]]] | None = None,
) -> bool:
    """Sets kernel k's split over lines or a category, its kind and FLOPs; True when its op is
    not in the HLO of a program of its module's name (ops lost). A module with no HLO (or only
    eager ops', without its op) goes to the lines that called it (`calls`), else eager ones."""
    jitted = any(not q.eager for q in by_name.get(k.module, ()))
    found: tuple[Program, HloInstr, str] | None = None
    if k.program >= 0:
        at_op = programs[k.program].find(k.op)
        if at_op is not None:
            found = (programs[k.program], at_op[0], at_op[1])
    sites = calls.get(k.module) if calls and found is None and not jitted else None
    if sites:
        n = sum(c for _, _, c in sites)
        by_line: dict[tuple[str, int], int] = {}
        for f, line, c in sites:
            by_line[(f, line)] = by_line.get((f, line), 0) + c
        prim = k.module[4:]
        k.split = [(Share(("line", f, line), "", prim), c / n) for (f, line), c in by_line.items()]
        k.kind = "eager op"
        return False
    prim = k.module[4:] if k.module.startswith("jit_") else ""
    if found is None and not jitted and eager and eager.get(prim):
        at = sorted(set(eager[prim]))
        k.split = [(Share(("line", f, n), "", prim), 1.0 / len(at)) for f, n in at]
        k.kind = "eager op"
        return False
    if found is None:
        cat = (
            f"eager op ({k.module})"
            if k.module.startswith("jit_") and not jitted
            else f"not in the compiled HLO ({k.module})"
        )
        k.split = [(Share(("cat", cat)), 1.0)]
        k.kind = k.category or "op"
        return jitted
    p, ins, comp = found
    names = ops_of.get(k.program, set())
    k.split = split_kernel(p, ins, comp, names)
    k.kind = k.category or (f"fusion ({ins.kind})" if ins.opcode == "fusion" else ins.opcode)
    k.flops = _kernel_flops(p, ins, comp, names)
    k.trace = p.trace
    return False


def _same_shape(ins: HloInstr, text: str) -> bool:
    """The event's instruction text (TPU's long_name) has the instruction's result type."""
    head = text.split("=", 1)[-1].lstrip()[:200]
    return all(leaf.type in head for leaf in _compat.hlo_leaves(ins.shape)[:4])


def _candidates(
    module: str, programs: Sequence[Program], by_name: dict[str, list[Program]]
) -> list[Program]:
    """The programs a call of `module` may have run: those of its name; else one whose name
    the event's module contains ("jit_step.1"); else the only program."""
    return (
        by_name.get(module)
        or [p for p in programs if p.name and p.name in module]
        or (list(programs) if len(programs) == 1 and not module else [])
    )


def line_text(file: str, line: int) -> str:
    """The source line's text, as linecache has it (a cell's source is registered there)."""
    try:
        return linecache.getline(file, line).rstrip("\n")
    except Exception:
        return ""

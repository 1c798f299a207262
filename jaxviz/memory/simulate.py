"""The compiled program's buffers over XLA's schedule (jaxviz.memory.buffers reads the result).

Parameters and outputs are allocated for the whole run, every other buffer from the
instruction that writes it to its last reader (tuples, get-tuple-element, bitcasts and while
loops' state share their operands' buffers; fusions allocate their output only; a while,
conditional or call adds its body's own temporaries at its step; temporaries share an
operand's or an output's allocation as XLA's buffer assignment does; docs/memory.md).

Sizes are the device's own: a buffer takes the bytes of its layout (`f32[3,5]{1,0:T(4,128)}`
takes 2 KiB on a TPU, jaxviz._compat.hlo.array_leaf), and only buffers in the device's main
memory count (a TPU layout's `S(1)` is the core's VMEM, `S(2)` its sync flags). What the
platform's buffer assignment adds is in `Rules` (measured against XLA's dumped buffer
assignment, tools/xla_dump.py).
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Any

from jaxviz._compat import HloInstr as Instr
from jaxviz._compat import HloModule
from jaxviz._compat.hlo import Leaf

# instructions whose result is (part of) an operand's buffer: no allocation of their own
_ALIAS = {"bitcast", "while", "optimization-barrier", "add-dependency", "domain"}


@dataclasses.dataclass(frozen=True)
class Rules:
    """What a platform's buffer assignment does beyond the arrays' own bytes.

    TPU (XLA's TPU buffer assignment, read from its dump on a v5e, jax 0.10.2): every
    temporary in HBM starts at a 16 KiB-aligned offset of the temporaries' allocation, so it
    takes its size rounded up to 16 KiB; a tuple-shaped value (an async copy's or a multi-
    output fusion's result, a loop's state) has a 512-byte index table in HBM, and each
    table has its own 16 KiB slot for the whole run, but for a loop's state: the while's
    operand tuple, its body's result and the loop's result share one (one offset in the scan
    RNN's dump); the entry's result tuple's table is an output of 512 bytes. CPU:
    temporaries at 64-byte-aligned offsets (a step over 400 small arrays: its 4-byte sums 64
    bytes apart in the dump). A donated argument's allocation holding temporaries between
    its last read and its output's write: seen in the TPU's dumps (the d=512 step's), not in
    the CPU's (its temporaries all in the temporaries' allocation). GPU: none of this (not
    measured)."""

    temp_align: int = 1  # a temporary's bytes are rounded up to this
    donated_holes: bool = False  # a donated argument's allocation holds temporaries in between
    tuple_table: int = 0  # bytes of a tuple's index table (0: not counted)
    table_slot: int = 0  # what one table takes of the temporaries' allocation

    @staticmethod
    def runtime_holds_temps(platform: str, analysis_temp_bytes: int | None) -> bool:
        """Whether the device's runtime allocates the temporaries the buffer assignment
        lists. A TPU's (v5e, jax 0.10.2: its allocator's counters around one run of each of
        11 programs) reserves exactly them when memory_analysis() counts temporaries (four
        sorts, a 256-step scan's gradient, the d=512 step), and none when it counts 0: the
        tuple index tables and scalars of small programs (0.1 to 12.5 MiB listed; there,
        in use less the code = arguments + outputs to 0.01 MiB). Elsewhere: held."""
        return not (platform == "tpu" and analysis_temp_bytes == 0)

    @staticmethod
    def for_platform(platform: str) -> Rules:
        if platform == "tpu":
            return Rules(temp_align=16384, tuple_table=512, table_slot=16384, donated_holes=True)
        if platform == "cpu":  # XLA's CPU temporaries sit 64 bytes apart at least (dumps)
            return Rules(temp_align=64)
        return Rules()


TABLE = "tuple table"  # the type of a tuple's index table buffer
RESULT_TABLE = "the result's index table (XLA's)"  # how its table of the outputs is named

# tuple-shaped results that are no new tuple: an operand's (or a loop's state) tuple
_NO_TABLE = {"parameter", "get-tuple-element", "while", "call", "conditional", "bitcast",
             "optimization-barrier", "add-dependency", "domain"}  # fmt: skip


def _tables(shape: Any, opcode: str) -> int:
    """Index tables a tuple-shaped result defines: a `tuple` defines its top level only
    (its elements are its operands'), others every tuple in their shape."""
    if not isinstance(shape, list) or opcode in _NO_TABLE or opcode.endswith("-done"):
        return 0
    if opcode == "tuple":
        return 1
    return 1 + sum(_tables(s, opcode) for s in shape)


@dataclasses.dataclass
class Buf:
    bytes: int
    type: str
    instr: Instr
    start: int
    end: int
    category: str = "temporary"
    inside: str = ""
    defined: int = 0  # the step that writes it (an output's allocation starts at 0)
    out_index: int = -1  # the output it is (the entry ROOT's element), -1 when none
    leaf: Leaf | None = None  # its array's layout (None: a tuple's index table)
    hole: tuple[int, int] | None = None  # a donated argument's allocation free in between


class Simulation:
    """Buffers and their lifetimes over the entry computation's schedule."""

    def __init__(self, module: HloModule, platform: str = "cpu", temps_held: bool = True):
        self.m = module
        self.rules = Rules.for_platform(platform)
        # False: the runtime allocates none of the temporaries the buffer assignment lists
        # (a TPU's, where memory_analysis() counts none: Rules); `listed_peak` then says
        # the peak with them
        self.temps_held = temps_held
        self.listed_peak = 0
        self.instrs = module.entry_instructions()
        self.no_schedule = not module.scheduled
        self.bufs: list[Buf] = []
        self.timeline: list[int] = []
        self.peak = 0
        self._sub_peak: dict[str, tuple[int, list[Buf]]] = {}
        self.transient: dict[int, list[Buf]] = {}  # step -> loop-body buffers at its peak

    def run(self) -> None:
        bufs, extra = self._simulate(self.instrs, entry=True)
        n = len(self.instrs)
        bufs += self._table_bufs(n)
        if not self.temps_held:
            self.listed_peak = max(self._timeline(bufs, extra, n), default=0)
            bufs, extra = [b for b in bufs if b.category != "temporary"], {}
        self.bufs = bufs
        tl = self._timeline(bufs, extra, n)
        self.timeline = tl
        self.transient = extra
        self.peak = max(range(n), key=tl.__getitem__) if n else 0

    def _timeline(self, bufs: list[Buf], extra: dict[int, list[Buf]], n: int) -> list[int]:
        """Bytes live at each step of the entry's schedule."""
        delta = [0] * (n + 1)
        for b in bufs:
            delta[b.start] += b.bytes
            delta[b.end + 1] -= b.bytes
        live, tl = 0, []
        # XLA allocates outputs for the whole run, but may place one temporary at a time in
        # an output's allocation until the output is written, or in a donated argument's
        # between its last read and the write of the output it holds: it adds nothing then
        holes = [(b.defined, b.bytes, -1) for b in bufs if b.category == "output" and b.bytes]
        if self.rules.donated_holes:
            holes += [(b.hole[1], b.bytes, b.hole[0]) for b in bufs if b.hole and b.bytes]
        later_outs = sorted(holes, reverse=True)
        temps = [b for b in bufs if b.bytes and b.category in ("temporary", "constant") and b.leaf]
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
                free = [h for h in later_outs if h[2] < i]
                hidden = _fit_in_outputs(holders, free, i) if free else 0
            tl.append(live + sum(x.bytes for x in inner) - hidden)
        return tl

    def _simulate(
        self, instrs: list[Instr], entry: bool, depth: int = 0
    ) -> tuple[list[Buf], dict[int, list[Buf]]]:
        """(buffers, {step: sub-computation buffers live at that step's inner peak}).

        Not the entry: parameters and what reaches ROOT are the caller's buffers (a loop's
        state), so only the computation's own temporaries are counted."""
        val: dict[str, Any] = {}
        bufs: list[Buf] = []
        extra: dict[int, list[Buf]] = {}
        n = len(instrs)
        external: set[int] = set()
        shapes = {ins.name: ins.shape for ins in instrs}

        def alloc(ins: Instr, step: int, shape: Any) -> Any:
            if isinstance(shape, list):
                return [alloc(ins, step, s) for s in shape]
            main = shape.bytes if shape.space == 0 else 0  # another memory space: not here
            bufs.append(Buf(main, shape.type, ins, step, step, leaf=shape))
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
            elif op.endswith("-start") and isinstance(ins.shape, list) and len(ins.shape) > 1:
                v = self._start(ins, i, alloc, val, first)
            elif op == "copy-done" and isinstance(first, list):
                v = first[0]  # copy-start: (destination, source, context)
            elif op.endswith("-done") and first is not None:
                # an async start's result: ((operands), result, context...)
                v = first[1] if isinstance(first, list) and len(first) > 1 else first
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
        out = val.get(root.name) if root is not None else None
        if entry:
            _outputs_whole_run(bufs, out, n)
            self._arguments_whole_run(bufs, out, n)
            _shared_into_outputs(bufs, shared)
        else:  # what reaches ROOT is the caller's buffers (a loop's state)
            external.update(flat(out))
            bufs = [b for k, b in enumerate(bufs) if k not in external]
        _align_temporaries(bufs, self.rules.temp_align)
        return bufs, extra

    @staticmethod
    def _start(ins: Instr, i: int, alloc: Any, val: dict[str, Any], first: Any) -> Any:
        """An async start's value: copy-start (destination, source, context), others
        ((operands), result, context...); the source or operands are the operands' own."""
        shape = ins.shape
        assert isinstance(shape, list)
        if ins.opcode == "copy-start":
            return [alloc(ins, i, shape[0]), first] + [alloc(ins, i, x) for x in shape[2:]]
        ops = [val.get(o) for o in ins.operands]
        head = ops if isinstance(shape[0], list) else first
        return [head] + [alloc(ins, i, x) for x in shape[1:]]

    def _arguments_whole_run(self, bufs: list[Buf], out: Any, n: int) -> None:
        """The entry's arguments live for the whole run; a donated one's allocation holds the
        outputs written into it (they add no bytes of their own), and is free between its
        last read and the first such write (`Buf.hole`)."""
        last_read = {k: b.end for k, b in enumerate(bufs) if b.category == "argument"}
        for buf in bufs:
            if buf.category == "argument":
                buf.end = n - 1
        for p, b in self._params(bufs).items():
            if p in self.m.aliases:
                bufs[b].category = "donated argument"
                writes = []
                for k in _flat_at(out, self.m.aliases[p]):  # written into the argument
                    if bufs[k].category == "output":
                        bufs[k].bytes = 0
                        writes.append(bufs[k].defined)
                if writes and last_read[b] < min(writes) - 1:
                    bufs[b].hole = (last_read[b], min(writes))

    def _table_bufs(self, n: int) -> list[Buf]:
        """The tuple index tables of every computation the entry runs (not fused code), for
        the whole run: a Buf per instruction that defines tables (Rules)."""
        rules = self.rules
        if not rules.tuple_table:
            return []
        out: list[Buf] = []
        seen: set[str] = set()
        bodies: set[str] = set()  # loop bodies: their result is the loop's state, one table
        todo = [self.m.entry]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for ins in self.m.computation(name):
                todo.extend(ins.calls)
                if ins.opcode == "while" and len(ins.calls) == 2:
                    bodies.add(ins.calls[1])
                k = _tables(ins.shape, ins.opcode)
                if not k or (ins.root and name in bodies):
                    continue
                if ins.root and name == self.m.entry:  # the result's table: an output
                    out.append(Buf(k * rules.tuple_table, TABLE, ins, 0, n - 1, "output"))
                else:
                    out.append(Buf(k * rules.table_slot, TABLE, ins, 0, n - 1))
        return out

    def _params(self, bufs: list[Buf]) -> dict[int, int]:
        return {b.instr.index: k for k, b in enumerate(bufs) if b.instr.opcode == "parameter"}

    def _inner_peak(self, ins: Instr, depth: int) -> list[Buf]:
        """The largest set of temporaries any computation `ins` calls holds at once."""
        best: list[Buf] = []
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

    def at_peak(self) -> list[Buf]:
        p = self.peak
        out = [b for b in self.bufs if b.start <= p <= b.end and b.bytes > 0]
        return out + list(self.transient.get(p, ()))

    def category_bytes(self, cats: tuple[str, ...]) -> int:
        return sum(b.bytes for b in self.bufs if b.category in cats)


def _outputs_whole_run(bufs: list[Buf], out: Any, n: int) -> None:
    """Marks the entry's outputs (the ROOT's elements): each buffer its output index, and an
    output's allocation exists for the whole run, as XLA's does (`defined`: when written)."""
    for k, v in enumerate(out if isinstance(out, list) else [out]):
        for b in _flat_at(v, ()):
            if bufs[b].out_index < 0:
                bufs[b].out_index = k
    for b in _flat_at(out, ()):
        bufs[b].end = n - 1
        if bufs[b].category != "argument":
            bufs[b].category = "output"
            bufs[b].defined = bufs[b].start
            bufs[b].start = 0


def _shared_into_outputs(bufs: list[Buf], shared: dict[int, int]) -> None:
    """A temporary kept in an output's (or a donated argument's) allocation adds no bytes."""
    for b, into in shared.items():
        while into in shared:
            into = shared[into]
        if bufs[into].category in ("output", "donated argument") or bufs[into].bytes == 0:
            bufs[b].bytes = 0
            # the output's allocation is taken from when the temporary is written
            bufs[into].defined = min(bufs[into].defined, bufs[b].start)


def _align_temporaries(bufs: list[Buf], align: int) -> None:
    """The temporaries' allocation places each at an offset aligned to `align` (Rules)."""
    if align > 1:
        for t in bufs:
            if t.category == "temporary" and t.bytes:
                t.bytes = -(-t.bytes // align) * align


def _fit_in_outputs(holders: list[Buf], outs: list[tuple[int, int, int]], step: int) -> int:
    """Bytes of `holders` (largest first) that fit in allocations free for their lifetime:
    one value at a time in an allocation (the smallest that fits, written soonest after the
    value's last read). outs: (step that writes the allocation, its bytes, last step it was
    read before: -1 for an output, a donated argument's last read)."""
    groups: dict[int, list[tuple[int, int]]] = {}
    for d, sz, f in outs:
        groups.setdefault(sz, []).append((d, f))
    for g in groups.values():
        g.sort()
    caps = sorted(groups)
    hidden = 0
    for b in holders:
        if not caps:
            break
        start, end = (step, step) if b.inside else (b.start, b.end)
        for c in caps[bisect.bisect_left(caps, b.bytes) :]:
            g = groups[c]
            k = bisect.bisect_right(g, (end, len(g) + step + 1))
            while k < len(g) and g[k][1] >= start:  # read after this value is written
                k += 1
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


def _share_operands(instrs: list[Instr], val: dict[str, Any], bufs: list[Buf]) -> dict[int, int]:
    """XLA writes an elementwise result into an operand's buffer that dies at that
    instruction (buffer assignment's CanShareOperandBufferWithUser), and a
    dynamic-update-slice, sort or scatter into its operand in place; a sort of several
    operands (a TPU sorts values with an s32 iota beside them) writes result k into operand
    k: such pairs share one allocation.
    Returns {operand buffer: the buffer that took its place}."""
    shared: dict[int, int] = {}
    for i, ins in enumerate(instrs):
        out = val.get(ins.name)
        if ins.opcode == "sort" and isinstance(out, list):
            for o, k in zip(ins.operands, out):
                if isinstance(k, int) and bufs[k].instr is ins:
                    _share(val.get(o), k, i, bufs, shared)
            continue
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
            if _share(val.get(o), out, i, bufs, shared):
                break
    return shared


def _share(b: Any, out: int, i: int, bufs: list[Buf], shared: dict[int, int]) -> bool:
    """Let `out` (written at step i) take operand buffer `b`'s place when `b` is a
    temporary of its bytes that dies at i."""
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
        return True
    return False


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
    bufs: list[Buf], extra: dict[int, list[Buf]], n: int, label: str
) -> tuple[int, list[Buf]]:
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


def _element(v: Any, k: int) -> Any:
    """Element k of a tuple value (the value itself when it is not a tuple)."""
    return v[k] if isinstance(v, list) and k < len(v) else v

"""MemoryReport and its buffers (the records jaxviz.memory.buffers fills), and their text
twin and HTML.

memory of step (one call, simulated over XLA's schedule; cpu): peak 4.6 MiB at step 812 of
1242 (fusion.3)
  XLA: arguments 2.3 MiB + outputs 2.3 MiB + temporaries 356.8 KiB - aliased 0 B = 4.9 MiB
  buffers live at the peak, largest first (97% named):
      64.0 KiB  f32[64,256]  argument     params['blocks'][3]['w1']
      16.0 KiB  f32[16,256]  activation   models.py:27 (block)  dot_general
  donation:
    donating `params` would lower the peak by 2.3 MiB
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any

from jaxviz.format import fmt_bytes
from jaxviz.memory.compile import Memory
from jaxviz.memory.simulate import TABLE
from jaxviz.mesh import Collective, Mesh
from jaxviz.mesh.devices import Replicated
from jaxviz.mesh.roundtrip import Roundtrip
from jaxviz.mesh.text import collectives_lines, replicated_lines

CATEGORIES = ("argument", "donated argument", "output", "temporary", "activation", "constant")
"""A buffer's category. "activation": a temporary the forward pass of a gradient wrote and
the backward pass reads (what remat trades for compute)."""


@dataclasses.dataclass(frozen=True)
class Buffer:
    """One buffer of the compiled program (per device for sharded programs)."""

    name: str  # "ynn_fusion.12": the HLO instruction that writes it
    bytes: int  # 65536
    type: str  # "f32[64,256]"
    category: str  # one of CATEGORIES
    op: str  # "dot_general": the primitive XLA's metadata names; "" when none
    op_name: str  # "jit(step)/transpose(jvp())/dot_general"; an argument's path for arguments
    where: str  # "params['blocks'][3]['w1']" or "models.py:27 (block)"; "" when XLA kept nothing
    file: str  # the user's file of the innermost frame ("" for arguments and unknown)
    line: int  # its line (0 when unknown)
    fn: str  # the function on that line, "block"
    node_ids: tuple[str, ...] = ()  # graph nodes "body:node" of that line and primitive
    start: int = 0  # schedule step that writes it (0 for arguments)
    end: int = 0  # last step that reads it (the last step for arguments and outputs)
    inside: str = ""  # "while body region_0.4" when it lives inside a loop body at the peak
    via: str = ""  # "copy": XLA kept no source; `where` is the line the HLO's data flow led to
    elements: int = 0  # bytes of its elements when its layout is tiled (bytes: with padding)
    tile: str = ""  # "8x128": the layout's tile (TPU); "" when untiled
    slot: int = 0  # 16384: a temporary's aligned slot, when larger than its layout's bytes
    param: int = -1  # 1: an argument's parameter number (its flat position); -1 for others
    # on a mesh: the global array this buffer is one device's part of, and which part
    whole: str = ""  # "f32[2048,256]" ("" on one device, or when the buffer is whole)
    part: str = ""  # "1/8 on `x`"

    @property
    def named(self) -> bool:
        """Attributed: to a user line, or (arguments) to an argument path."""
        return bool(self.where)


@dataclasses.dataclass(frozen=True)
class DonationSaving:
    """What donating one argument saves, measured by the compiler."""

    arg: str  # "opt_state": the argument's name
    bytes: int  # 50331648: its bytes (per device)
    donated: bool  # donated today
    saves: int | None  # peak bytes donation saves (today, or would save); None: not measured
    note: str = ""  # why it was not measured, or why it saves nothing

    def sentence(self) -> str:
        if self.saves is None:
            return f"{self.arg}: {self.note}"
        if self.donated:
            return f"donating `{self.arg}` lowers the peak by {fmt_bytes(self.saves)} (donated)"
        if self.saves <= 0:
            return f"donating `{self.arg}` would not lower the peak" + (
                f": {self.note}" if self.note else ""
            )
        return f"donating `{self.arg}` would lower the peak by {fmt_bytes(self.saves)}"


@dataclasses.dataclass(frozen=True)
class MemoryReport:
    """The compiled program's memory, simulated over XLA's schedule (plain data)."""

    name: str  # "step"
    platform: str  # "cpu"
    num_devices: int  # 8: figures are per device when > 1
    timeline: tuple[int, ...]  # live bytes at each step of the entry computation's schedule
    ops: tuple[str, ...]  # the instruction at each step, "fusion.3"
    peak_step: int  # index into timeline
    peak_bytes: int  # timeline[peak_step]
    buffers: tuple[Buffer, ...]  # live at the peak, largest first
    argument_bytes: int  # simulated: parameters
    output_bytes: int  # outputs not aliased to a parameter
    temp_bytes: int  # temporaries live at the peak (inside loop bodies included)
    xla: Memory  # XLA's memory_analysis figures
    donations: tuple[DonationSaving, ...] = ()  # per argument
    notes: tuple[str, ...] = ()  # what the reader should know (dropped metadata, ...)
    analysis_seconds: float = 0.0  # parsing + simulation + attribution (compile excluded)
    compile_seconds: float = 0.0  # XLA's compile of the program itself
    n_eqns: int = 0  # the trace's equations (for per-1k-equation figures)
    signature: str = ""  # "f32[512,512], f32[256,512]": the trace's inputs (which trace it is)
    # (arg, bytes) of the arguments not donated whose leaves an output of the same shape and
    # dtype could reuse (the donation table's hints): at most what donating them would save
    donatable: tuple[tuple[str, int], ...] = ()
    mesh: Mesh | None = None  # the device mesh of a sharded program (None: one device)
    # every collective of the compiled program, largest bytes per device first (jaxviz.mesh)
    collectives: tuple[Collective, ...] = ()
    # the arguments several devices hold the same bytes of, largest total first (jaxviz.mesh)
    replicated: tuple[Replicated, ...] = ()
    # ("body:node", "f32[2048@x,1024]"): graph equations' layouts as compiled (Auto axes)
    layouts: tuple[tuple[str, str], ...] = ()
    # values resharded back and forth in each iteration of a loop (jaxviz.mesh.roundtrip)
    roundtrips: tuple[Roundtrip, ...] = ()

    @property
    def xla_total(self) -> int | None:
        """XLA's figure: arguments + outputs + temporaries - aliased (None when unknown)."""
        return self.xla.total_bytes

    @property
    def reconciled(self) -> float | None:
        """peak_bytes / xla_total - 1 (0.02: 2% above XLA); None when XLA has no figures."""
        total = self.xla_total
        return None if not total else self.peak_bytes / total - 1

    @property
    def named_fraction(self) -> float:
        """The share of the peak's bytes attributed to a user line or an argument path."""
        total = sum(b.bytes for b in self.buffers)
        return sum(b.bytes for b in self.buffers if b.named) / total if total else 1.0

    def __str__(self) -> str:
        return report_text(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": report_text(self), "text/html": report_html(self)}


TOP = 12  # buffers the text twin lists at the peak


PADDED = 2.0  # a buffer this many times its elements' bytes or more: its padding is shown


def padding(b: Buffer, at_least: float = PADDED) -> str:
    """`f32[4,16]: 2.0 KiB on this TPU (tiles of 4x128)` when the layout's tiles (and the
    temporaries' alignment) make the buffer `at_least` times its elements or more; else ""."""
    if not b.tile or not b.elements or b.bytes < at_least * b.elements:
        return ""
    slot = f", in a {fmt_bytes(b.slot)}-aligned slot" if b.slot else ""
    return f"{b.type}: {fmt_bytes(b.bytes)} on this TPU (tiles of {b.tile}{slot})"


def buffer_line(b: Buffer) -> str:
    """`  64.0 KiB  f32[64,256]  activation  models.py:27 (block)  dot_general`."""
    where = b.where or f"{b.name} (XLA kept no source)"
    op = f"  {b.op}" if b.op and b.category not in ("argument", "donated argument") else ""
    inside = f"  [in {b.inside}]" if b.inside else ""
    pad = padding(b)
    pad = f"  ({pad}, {fmt_bytes(b.elements)} of elements)" if pad else ""
    part = f"  (of {b.whole}: {b.part})" if b.part else ""
    return f"{fmt_bytes(b.bytes):>10}  {b.type:<14} {b.category:<16} {where}{op}{inside}{pad}{part}"


def headline(r: MemoryReport) -> str:
    per = f", per device of {r.num_devices}" if r.num_devices > 1 else ""
    at = r.ops[r.peak_step] if r.ops else "-"
    return (
        f"memory of {r.name} (one call, simulated over XLA's schedule; {r.platform}{per}): peak "
        f"{fmt_bytes(r.peak_bytes)} at step {r.peak_step + 1} of {len(r.timeline)} ({at})"
    )


def xla_line(r: MemoryReport) -> str:
    m = r.xla
    total = r.xla_total
    rec = r.reconciled
    agree = f" (simulated peak {rec:+.1%})" if rec is not None else ""
    return (
        f"XLA: arguments {fmt_bytes(m.argument_bytes)} + outputs {fmt_bytes(m.output_bytes)} "
        f"+ temporaries {fmt_bytes(m.temp_bytes)} - aliased {fmt_bytes(m.alias_bytes or 0)} "
        f"= {fmt_bytes(total)}{agree}"
    )


def category_sums(r: MemoryReport) -> dict[str, list[int]]:
    """{category: [bytes, buffers]} of the buffers live at the peak."""
    sums: dict[str, list[int]] = {}
    for b in r.buffers:
        s = sums.setdefault(b.category, [0, 0])
        s[0] += b.bytes
        s[1] += 1
    return sums


def category_totals(r: MemoryReport) -> list[str]:
    """`["argument 2.3 MiB (244)", "output 2.3 MiB (123)", ...]`, largest first."""
    order = sorted(category_sums(r).items(), key=lambda kv: -kv[1][0])
    return [f"{c} {fmt_bytes(n)} ({k})" for c, (n, k) in order]


def category_summary(r: MemoryReport) -> str:
    """`argument 2.3 MiB (244), output 2.3 MiB (123), activation 1.1 MiB (40)`."""
    return ", ".join(category_totals(r))


def _args(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def donated_args(r: MemoryReport) -> dict[str, int]:
    """{argument: bytes} of the donated arguments, from the buffers at the peak, in the
    function's argument order (`w`, `m` of step(w, m, x); buffers of equal bytes come in
    whatever order XLA's schedule lists its parameters, which a TPU's does not keep)."""
    out: dict[str, int] = {}
    donated = [b for b in r.buffers if b.category == "donated argument"]
    for b in sorted(donated, key=lambda b: b.param):
        name = b.where.split("[", 1)[0] or b.name
        out[name] = out.get(name, 0) + b.bytes
    return out


def summary_lines(r: MemoryReport) -> list[tuple[str, str]]:
    """The three lines the memory tab opens with, each (what, where the number comes from):
    the peak, what donation saves now, and what donating more would save.

        [("peak 84.4 MiB for one call of step", "its compiled program, ..."), ...]
    """
    xla = f"; XLA's memory_analysis() says {fmt_bytes(r.xla_total)}" if r.xla_total else ""
    lines = [(f"peak {fmt_bytes(r.peak_bytes)} for one call of {r.name}",
              f"its compiled program, simulated over XLA's schedule, not run{xla}")]  # fmt: skip
    measured = [d for d in r.donations if d.saves is not None]
    now = donated_args(r)
    mine = [d for d in measured if d.donated]
    if mine:
        saved = sum(max(d.saves or 0, 0) for d in mine)
        lines.append((f"donating {_args([d.arg for d in mine])} saves {fmt_bytes(saved)} now",
                      "measured: compiled again without donating it"))  # fmt: skip
    elif now:
        alias = r.xla.alias_bytes
        saved = alias if alias else sum(now.values())
        lines.append((f"donating {_args(list(now))} saves {fmt_bytes(saved)} now: outputs "
                      "reuse those inputs' buffers",
                      "XLA's aliased bytes for this program" if alias
                      else "the donated arguments' bytes at the peak"))  # fmt: skip
    else:
        lines.append(("nothing is donated now", "the function's donate_argnums"))
    more = [d for d in measured if not d.donated and (d.saves or 0) > 0]
    too = " too" if now or mine else ""
    if more:
        lines.append((f"donating {_args([d.arg for d in more])}{too} would save "
                      f"{fmt_bytes(sum(d.saves or 0 for d in more))} more",
                      "measured: compiled again with it donated"))  # fmt: skip
    elif r.donatable and not measured:
        names = [a for a, _ in r.donatable]
        lines.append((f"donating {_args(names)}{too} could save up to "
                      f"{fmt_bytes(sum(n for _, n in r.donatable))} more",
                      "the donation table: an output has its shape and dtype; "
                      "%%jaxtrace --compare measures it"))  # fmt: skip
    else:
        lines.append(("donating more would save nothing",
                      "measured: no other argument lowers the peak" if measured
                      else "no output has the shape and dtype of another argument"))  # fmt: skip
    return lines


def report_text(r: MemoryReport, top: int = TOP) -> str:
    lines = [headline(r)]
    lines += [f"  {what} ({source})" for what, source in summary_lines(r)]
    lines.append("  " + xla_line(r))
    if r.buffers:
        lines.append("  at the peak: " + category_summary(r))
        lines.append(
            f"  buffers live at the peak, largest first ({r.named_fraction:.0%} of the bytes "
            f"named by a line or an argument):"
        )
        rows = _rows(r.buffers)
        lines += [line for _, _, line in rows[:top]]
        rest = rows[top:]
        if rest:
            n, size = sum(k for _, k, _ in rest), sum(b for b, _, _ in rest)
            lines.append(f"  {'':>10}  ... and {n} more, {fmt_bytes(size)}")
    lines += ["  " + line for line in collectives_lines(r.collectives, r.mesh, top)]
    lines += ["  " + line for line in replicated_lines(r.replicated)]
    if r.donations:
        lines.append("  donation (measured by compiling with and without):")
        lines += ["    " + d.sentence() for d in r.donations]
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)


def _rows(buffers: tuple[Buffer, ...]) -> list[tuple[int, int, str]]:
    """(bytes, buffers, line) of the text twin, largest first: a TPU's tuple tables (many
    16 KiB rows of one kind) are one row; each keeps its line in `buffers`."""
    tables = [b for b in buffers if b.type == TABLE and b.category == "temporary"]
    if len(tables) < 2:
        return [(b.bytes, 1, "  " + buffer_line(b)) for b in buffers]
    grouped = {id(b) for b in tables}
    rows = [(b.bytes, 1, "  " + buffer_line(b)) for b in buffers if id(b) not in grouped]
    size = sum(b.bytes for b in tables)
    each = fmt_bytes(max(b.bytes for b in tables))
    what = f"{len(tables)} tuple values' index tables, {each} each (their lines: .buffers)"
    rows.append((size, len(tables), f"  {fmt_bytes(size):>10}  {'tuple tables':<14} "
                                    f"{'temporary':<16} {what}"))  # fmt: skip
    return sorted(rows, key=lambda row: -row[0])


_CSS = (
    "<style>.jaxviz-mem table{border-collapse:collapse;font:12px monospace}"
    ".jaxviz-mem td,.jaxviz-mem th{padding:1px 8px;text-align:left;"
    "border-bottom:1px solid #ddd}.jaxviz-mem td.n{text-align:right}</style>"
)


def report_html(r: MemoryReport, top: int = 50) -> str:
    """Self-contained HTML: escaped text only."""
    e = html.escape
    rows = "".join(
        f"<tr><td class='n'>{e(fmt_bytes(b.bytes))}</td>"
        f"<td>{e(b.type)}{e(f' ({padding(b)})' if padding(b) else '')}</td>"
        f"<td>{e(b.category)}</td><td>{e(b.where or b.name + ' (no source)')}</td>"
        f"<td>{e(b.op)}</td></tr>"
        for b in r.buffers[:top]
    )
    don = "".join(f"<div>{e(d.sentence())}</div>" for d in r.donations)
    notes = "".join(f"<div>note: {e(n)}</div>" for n in r.notes)
    return (
        f"{_CSS}<div class='jaxviz-mem'><div>{e(headline(r))}</div><div>{e(xla_line(r))}</div>"
        "<table><tr><th>bytes</th><th>type</th><th>category</th><th>where</th><th>op</th></tr>"
        f"{rows}</table>{don}{notes}</div>"
    )

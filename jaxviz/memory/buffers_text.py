"""The text twin and HTML of a MemoryReport (jaxviz.memory.buffers).

memory of step (compiled, not run; cpu): peak 4.6 MiB at step 812 of 1242 (fusion.3)
  XLA: arguments 2.3 MiB + outputs 2.3 MiB + temporaries 356.8 KiB - aliased 0 B = 4.9 MiB
  buffers live at the peak, largest first (97% named):
      64.0 KiB  f32[64,256]  argument     params['blocks'][3]['w1']
      16.0 KiB  f32[16,256]  activation   models.py:27 (block)  dot_general
  donation:
    donating `params` would lower the peak by 2.3 MiB
"""

from __future__ import annotations

import html

from jaxviz.format import fmt_bytes
from jaxviz.memory.buffers import Buffer, MemoryReport

TOP = 12  # buffers the text twin lists at the peak


def buffer_line(b: Buffer) -> str:
    """`  64.0 KiB  f32[64,256]  activation  models.py:27 (block)  dot_general`."""
    where = b.where or f"{b.name} (XLA kept no source)"
    op = f"  {b.op}" if b.op and b.category not in ("argument", "donated argument") else ""
    inside = f"  [in {b.inside}]" if b.inside else ""
    return f"{fmt_bytes(b.bytes):>10}  {b.type:<14} {b.category:<16} {where}{op}{inside}"


def headline(r: MemoryReport) -> str:
    per = f", per device of {r.num_devices}" if r.num_devices > 1 else ""
    at = r.ops[r.peak_step] if r.ops else "-"
    return (
        f"memory of {r.name} (compiled, not run; {r.platform}{per}): peak "
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


def category_summary(r: MemoryReport) -> str:
    """`argument 2.3 MiB (244), output 2.3 MiB (123), activation 1.1 MiB (40)`."""
    sums: dict[str, list[int]] = {}
    for b in r.buffers:
        s = sums.setdefault(b.category, [0, 0])
        s[0] += b.bytes
        s[1] += 1
    order = sorted(sums.items(), key=lambda kv: -kv[1][0])
    return ", ".join(f"{c} {fmt_bytes(n)} ({k})" for c, (n, k) in order)


def report_text(r: MemoryReport, top: int = TOP) -> str:
    lines = [headline(r), "  " + xla_line(r)]
    if r.buffers:
        lines.append("  at the peak: " + category_summary(r))
        lines.append(
            f"  buffers live at the peak, largest first ({r.named_fraction:.0%} of the bytes "
            f"named by a line or an argument):"
        )
        lines += ["  " + buffer_line(b) for b in r.buffers[:top]]
        rest = r.buffers[top:]
        if rest:
            lines.append(
                f"  {'':>10}  ... and {len(rest)} more, {fmt_bytes(sum(b.bytes for b in rest))}"
            )
    if r.donations:
        lines.append("  donation (measured by compiling with and without):")
        lines += ["    " + d.sentence() for d in r.donations]
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)


_CSS = (
    "<style>.jaxviz-mem table{border-collapse:collapse;font:12px monospace}"
    ".jaxviz-mem td,.jaxviz-mem th{padding:1px 8px;text-align:left;"
    "border-bottom:1px solid #ddd}.jaxviz-mem td.n{text-align:right}</style>"
)


def report_html(r: MemoryReport, top: int = 50) -> str:
    """Self-contained HTML: escaped text only."""
    e = html.escape
    rows = "".join(
        f"<tr><td class='n'>{e(fmt_bytes(b.bytes))}</td><td>{e(b.type)}</td>"
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

"""Converts and copies XLA inserted, at the line of the op they serve.

XLA adds ops no line of the user's asked for and keeps no source for them: a CPU computes
a bf16 convolution or `a @ a.T` in f32, with a `convert` before it (`wrapped_convert`, a
fusion of one convert) and one after; a layout change is a `copy` or `transpose`. Their
time belongs to the op they serve. `served` follows the module's own edges, never a
shape: forward through what passes a value on, to the first op with a source line that
reads it (the convolution a convert feeds); else back, as the memory view names a
buffer's origin (`jaxviz.memory.provenance.Provenance.origin`), to the op whose result it
converts or copies. The time goes to a row of its own at that op's line, marked as XLA's:
("xla", file, line, "convert") -> "XLA's convert at train.py:5", never folded into the
line's own compute.

    >>> inserted_kind(None, None)
    ''
"""

from __future__ import annotations

from typing import Any

from jaxviz._compat import HloInstr, op_primitive
from jaxviz.memory.provenance import Provenance

# what XLA inserts to convert or move a value, named by what it does
_KIND = {
    "convert": "convert", "bitcast-convert": "convert", "copy": "copy", "copy-start": "copy",
    "copy-done": "copy", "transpose": "transpose",
}  # fmt: skip
# what only passes a value on (forward, to the op it is for)
_PASS = set(_KIND) | {"bitcast", "reshape", "broadcast", "get-tuple-element"}
_FREE = {"parameter", "constant", "bitcast", "reshape", "tuple", "get-tuple-element"}
_DEPTH = 8


def _sourced(p: Any, ins: HloInstr) -> bool:
    return bool(p.module.stack(ins.frame)) or ins.source is not None


def inserted_kind(p: Any, ins: HloInstr | None) -> str:
    """ "convert", "copy" or "transpose" for an op XLA inserted (no source): the op itself,
    or a fusion that only wraps such ops ("wrapped_convert"); "" for any other."""
    if p is None or ins is None or _sourced(p, ins):
        return ""
    if ins.opcode in _KIND:
        return _KIND[ins.opcode]
    if ins.opcode != "fusion" or not ins.fused:
        return ""
    kinds = []
    for i in p.module.computation(ins.fused):
        if i.opcode in _FREE:
            continue
        if i.opcode not in _KIND or _sourced(p, i):
            return ""
        kinds.append(_KIND[i.opcode])
    return kinds[0] if kinds else ""


def served(p: Any, ins: HloInstr, comp: str) -> HloInstr | None:
    """The op with a source line that `ins` (an inserted convert or copy) serves: the
    first reading its value, through what passes it on; else the op whose value it
    converts or copies (Provenance.origin; an argument is no line). None when neither."""
    instrs = p.module.computation(comp) if comp else []
    users: dict[str, list[HloInstr]] = {}
    for i in instrs:
        for o in i.operands:
            users.setdefault(o, []).append(i)
    todo, seen = [(ins, 0)], {ins.name}
    while todo:
        cur, depth = todo.pop(0)
        for u in users.get(cur.name, ()):
            if u.name in seen:
                continue
            seen.add(u.name)
            if _sourced(p, u) and op_primitive(u.op_name or "") != "while":
                return u
            if depth < _DEPTH and (u.opcode in _PASS or inserted_kind(p, u)):
                todo.append((u, depth + 1))
    o = _provenance(p).origin(ins)
    if o is not None and o.ins.opcode != "parameter" and _sourced(p, o.ins):
        return o.ins
    return None


def _provenance(p: Any) -> Any:
    """The program's Provenance (built once: it indexes the whole module)."""
    if p._provenance is None:
        p._provenance = Provenance(p.module)
    return p._provenance


def inserted_row(p: Any, ins: HloInstr, comp: str) -> tuple[tuple, str, tuple[str, ...]] | None:
    """(("xla", file, line, kind), the function, the served op's graph nodes) for an op XLA
    inserted that serves a line; None for another op, or one serving none."""
    kind = inserted_kind(p, ins)
    u = served(p, ins, comp) if kind and comp else None
    if u is None:
        return None
    stack = p.module.stack(u.frame)
    if not stack:
        return (("xla", u.source[0], u.source[1], kind), "", ()) if u.source else None
    f = stack[0]
    nodes: tuple[str, ...] = ()
    if p.nodes is not None:
        prim = op_primitive(u.op_name) if u.op_name else ""
        nodes = p.nodes.lookup(prim, [(s.file, s.line) for s in stack], u.op_name)
    return ("xla", f.file, f.line, kind), f.fn, nodes

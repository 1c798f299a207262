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
from jaxviz.capture.places import users_frame
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
    first reading its value, through what passes it on and through a loop's state (a
    weight converted once for a scan's body: the body's op reading that element); else
    the op whose value it converts or copies (Provenance.origin; an argument is no line).
    None when neither."""
    prov = _provenance(p)
    # (a value, the tuple element it is in: None when it is the value itself)
    todo: list[tuple[HloInstr, int | None, int]] = [(ins, None, 0)]
    seen: set[tuple[str, int | None]] = {(ins.name, None)}
    while todo:
        cur, idx, depth = todo.pop(0)
        for u, k in prov.users.get(cur.name, ()):
            nxt: tuple[HloInstr, int | None] | None = None
            if idx is None and u.opcode != "tuple" and _sourced(p, u) and not _loop(u):
                return u
            if idx is None:
                if u.opcode == "tuple":
                    nxt = (u, k)
                elif u.opcode in _PASS or inserted_kind(p, u):
                    nxt = (u, None)
            elif u.opcode == "get-tuple-element" and u.index == idx:
                nxt = (u, None)
            elif u.opcode == "while" and len(u.calls) > 1:  # into the body: its state
                param = next((i for i in p.module.computation(u.calls[1])
                              if i.opcode == "parameter"), None)  # fmt: skip
                nxt = (param, idx) if param is not None else None
            if nxt is not None and depth < _DEPTH and (nxt[0].name, nxt[1]) not in seen:
                seen.add((nxt[0].name, nxt[1]))
                todo.append((nxt[0], nxt[1], depth + 1))
    o = prov.origin(ins)
    if o is not None and o.ins.opcode != "parameter" and _sourced(p, o.ins):
        return o.ins
    return None


def _loop(ins: HloInstr) -> bool:
    """A while loop (its metadata names the loop, not an op of the user's)."""
    return op_primitive(ins.op_name or "") == "while"


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
    f = users_frame(stack)
    nodes: tuple[str, ...] = ()
    if p.nodes is not None:
        prim = op_primitive(u.op_name) if u.op_name else ""
        nodes = p.nodes.lookup(prim, [(s.file, s.line) for s in stack], u.op_name)
    return ("xla", f.file, f.line, kind), f.fn, nodes

"""Where a buffer came from when XLA kept no source for it: followed through the HLO.

XLA writes many buffers with instructions of its own that carry no metadata: copies
(`copy.5`), async copies into and out of a TPU core's memory (`copy-start`), broadcasts of
a constant (`wrapped_broadcast`), a TPU's `AllocateBuffer`, the tuples of a loop's state.
The bytes still belong to a line of the user's. `Provenance.origin` follows the module's
own edges, never a shape:

- back, through what passes a value on (copy, copy-start / -done, slice-start / -done,
  bitcast, reshape, transpose, convert, broadcast, slice, get-tuple-element, tuple, a fusion
  that only wraps one of these) and through while loops' carries (a loop's element is what
  the body's result writes there, else the loop's initial value), to an instruction with a
  source line or to an argument: "(via copy)", "(via loop carry)";
- forward, when the value itself has none (zeros, an allocated buffer): to what writes into
  it in place (a dynamic-update-slice, in a fusion, in a loop's body, through the loop
  state's tuple), and from there back to the line of the value written: a scan's stacked
  residuals are the body's lines, "(via loop)".

    >>> p = Provenance(module)            # doctest: +SKIP
    >>> o = p.origin(instr)               # doctest: +SKIP
    >>> o.ins.op_name, o.via              # doctest: +SKIP
    ('jit(f)/jvp()/while/body/tanh', 'loop')
"""

from __future__ import annotations

import dataclasses

from jaxviz._compat import HloInstr as Instr
from jaxviz._compat import HloModule, op_primitive

# ops whose result is their first operand's value (or part of it), in another buffer
_PASS = {
    "copy", "bitcast", "reshape", "transpose", "convert", "broadcast", "slice",
    "dynamic-slice", "bitcast-convert", "reduce-precision", "copy-done",
}  # fmt: skip
_DEPTH = 48
# primitives that wrap a computation: their metadata on a copy names no computation of its own
_WRAPPERS = {"while", "scan", "closed_call", "call", "pjit", "remat", "checkpoint", "cond",
             "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr"}  # fmt: skip


def _wrapper(op_name: str) -> bool:
    prim = op_primitive(op_name)
    return prim in _WRAPPERS or prim.startswith(("jit(", "pjit(", "checkpoint(", "remat("))


@dataclasses.dataclass(frozen=True)
class Origin:
    """The instruction a buffer's bytes come from, and how they got to the buffer."""

    ins: Instr  # has a source line, or is an entry parameter (an argument)
    via: str  # "copy", "broadcast", "loop carry", "loop", "in-place update"


class Provenance:
    """Origins of a module's instructions (memoised; built once per analysis)."""

    def __init__(self, module: HloModule):
        self.m = module
        self.comp_of: dict[str, str] = {}
        self.by_name: dict[str, Instr] = {}
        self.users: dict[str, list[tuple[Instr, int]]] = {}
        self.callers: dict[str, list[Instr]] = {}  # computation -> the while/call running it
        self._memo: dict[tuple[str, tuple[int, ...]], Origin | None] = {}
        todo, seen = [module.entry], set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            self._index(name)
            for ins in module.computation(name):
                for c in ins.calls:
                    self.callers.setdefault(c, []).append(ins)
                    todo.append(c)

    def _index(self, comp: str) -> None:
        for ins in self.m.computation(comp):
            self.comp_of[ins.name] = comp
            self.by_name[ins.name] = ins
            for k, o in enumerate(ins.operands):
                self.users.setdefault(o, []).append((ins, k))

    def has_source(self, ins: Instr) -> bool:
        if ins.opcode == "parameter":
            return self.comp_of.get(ins.name) == self.m.entry and bool(ins.op_name)
        return bool(self.m.stack(ins.frame)) or ins.source is not None

    def origin(self, ins: Instr) -> Origin | None:
        """Where `ins`'s result comes from (None: the HLO does not say)."""
        return self._back(ins, (), "", 0) or self._forward(ins, (), "", 0)

    # --- back: what the value is a copy of ------------------------------------------------

    def _back(self, ins: Instr | None, idx: tuple[int, ...], via: str, depth: int) -> Origin | None:
        if ins is None or depth > _DEPTH:
            return None
        key = (ins.name, idx)
        if key in self._memo:
            o = self._memo[key]
            return dataclasses.replace(o, via=via or o.via) if o else None
        self._memo[key] = None  # a cycle through a loop ends here
        o = self._back_step(ins, idx, via, depth)
        self._memo[key] = o
        return o

    def _back_step(self, ins: Instr, idx: tuple[int, ...], via: str, depth: int) -> Origin | None:
        op = ins.opcode
        d = depth + 1
        structural = op in ("tuple", "get-tuple-element", "while", "call", "parameter", "bitcast")
        if depth and not structural and self.has_source(ins):
            if op in _PASS and _wrapper(ins.op_name) and ins.operands:
                # a copy XLA made of a loop's state, with the loop's (or its body's call's)
                # own metadata: the value's line is further back (the carry), else that line
                return self._back(self._op(ins, 0), (), via or op, d) or Origin(ins, via)
            return Origin(ins, via)
        if op == "parameter":
            if self.comp_of.get(ins.name) == self.m.entry:
                return Origin(ins, via) if ins.op_name else None
            return self._param(ins, idx, via, d)
        if op == "get-tuple-element":
            return self._back(self._op(ins, 0), (ins.index, *idx), via, d)
        if op == "tuple":
            if idx:
                return self._back(self._op(ins, idx[0]), idx[1:], via, d)
            for k in range(len(ins.operands)):  # the tuple's table: its first element's
                o = self._back(self._op(ins, k), (), via or "tuple", d)
                if o:
                    return o
            return None
        if op == "while":
            body = ins.calls[1] if len(ins.calls) > 1 else ""
            root = self._root(body)
            return self._back(root, idx, via or "loop carry", d) or self._back(
                self._op(ins, 0), idx, via or "loop carry", d
            )
        if op == "call" and ins.calls:
            return self._back(self._root(ins.calls[0]), idx, via, d)
        if op == "copy-start" or op.endswith("-start"):
            if op == "copy-start" and idx[:1] == (1,):
                return self._back(self._op(ins, 0), idx[1:], via, d)
            return self._back(self._op(ins, 0), (), via or op[: -len("-start")], d)
        if op.endswith("-done"):
            start = self._op(ins, 0)
            name = op[: -len("-done")]
            return self._back(self._op(start, 0) if start else None, (), via or name, d)
        if op in _PASS:
            return self._back(self._op(ins, 0), (), via or op, d)
        if op == "fusion" and ins.fused:
            return self._through_fusion(ins, via, d)
        if self.has_source(ins):
            return Origin(ins, via)
        return None

    def _param(self, ins: Instr, idx: tuple[int, ...], via: str, d: int) -> Origin | None:
        """A called computation's parameter: a loop's carry (the body's result, else the
        loop's initial value), or a call's operand."""
        comp = self.comp_of.get(ins.name, "")
        for caller in self.callers.get(comp, ()):
            if caller.opcode == "while":
                body = caller.calls[1] if len(caller.calls) > 1 else ""
                if body == comp:
                    root = self._root(comp)
                    if root is not None and self._element_of(root, idx) is not None:
                        o = self._back(root, idx, via or "loop carry", d)
                        if o:
                            return o
                o = self._back(self._op(caller, 0), idx, via or "loop carry", d)
            else:
                o = self._back(self._op(caller, ins.index), idx, via, d)
            if o:
                return o
        return None

    def _through_fusion(self, ins: Instr, via: str, d: int) -> Origin | None:
        """A fusion without source that only passes one operand on (a wrapped copy or
        broadcast): that operand's origin."""
        inner = self.m.computation(ins.fused)
        root = next((i for i in inner if i.root), None)
        names = {i.name: i for i in inner}
        kind = ""
        while root is not None and root.opcode in _PASS:
            kind = kind or root.opcode
            root = names.get(root.operands[0]) if root.operands else None
        if root is not None and root.opcode == "parameter":
            return self._back(self._op(ins, root.index), (), via or kind or "fusion", d)
        return None

    # --- forward: what writes into the buffer in place ------------------------------------

    def _forward(self, ins: Instr, idx: tuple[int, ...], via: str, depth: int) -> Origin | None:
        if depth > _DEPTH:
            return None
        d = depth + 1
        for user, k in self.users.get(ins.name, ()):
            op = user.opcode
            o: Origin | None = None
            if op == "tuple":
                o = self._forward(user, (k, *idx), via, d)
            elif op == "get-tuple-element" and idx[:1] == (user.index,):
                o = self._forward(user, idx[1:], via, d)
            elif op in ("bitcast", "optimization-barrier"):
                o = self._forward(user, idx, via, d)
            elif op == "while" and len(user.calls) > 1:
                body = user.calls[1]
                for p in self.m.computation(body):
                    if p.opcode == "parameter":
                        o = o or self._forward(p, idx, via or "loop", d)
                root = self._root(body)  # the loop's state: the body's result is written here
                if o is None and root is not None and self._element_of(root, idx) is not None:
                    o = self._back(root, idx, via or "loop carry", d)
            elif op == "call" and user.calls:  # CPU runs a loop in a call of its state
                for p in self.m.computation(user.calls[0]):
                    if p.opcode == "parameter" and p.index == k:
                        o = o or self._forward(p, idx, via, d)
            elif op in ("dynamic-update-slice", "scatter") and k == 0 and not idx:
                update = self._op(user, 2 if op == "scatter" else 1)
                o = self._written(update, via or "in-place update", d)
                if o is None and self.has_source(user):
                    o = Origin(user, via or "in-place update")
            elif op == "fusion" and user.fused and not idx:
                o = self._fused_update(user, k, via or "in-place update", d)
            if o:
                return o
        return None

    def _written(self, update: Instr | None, via: str, d: int) -> Origin | None:
        return self._back(update, (), via, max(d, 1)) if update is not None else None

    def _fused_update(self, fusion: Instr, k: int, via: str, d: int) -> Origin | None:
        """A fusion that updates its operand k in place: the line of the value it writes."""
        if not self.m.mentions(fusion.fused, ("dynamic-update-slice(", "scatter(")):
            return None  # (most fusions: read without parsing their instructions)
        inner = self.m.computation(fusion.fused)
        names = {i.name: i for i in inner}
        param = next((i for i in inner if i.opcode == "parameter" and i.index == k), None)
        if param is None:
            return None
        for i in inner:
            if i.opcode not in ("dynamic-update-slice", "scatter") or not i.operands:
                continue
            if i.operands[0] != param.name:
                continue
            u = names.get(i.operands[2 if i.opcode == "scatter" else 1])
            fallback = None  # a reshape's own line (JAX's index update): when nothing better
            while u is not None and (u.opcode in _PASS or not self.has_source(u)):
                if fallback is None and self.has_source(u) and not _wrapper(u.op_name):
                    fallback = Origin(u, via)
                if u.opcode in _PASS:
                    u = names.get(u.operands[0]) if u.operands else None
                elif u.opcode == "parameter":
                    break
                else:
                    u = _data_operand(u, names)
            o = None
            if u is not None and u.opcode == "parameter":
                o = self._written(self._op(fusion, u.index), via, d)
            elif u is not None and self.has_source(u):
                o = Origin(u, via)
            if o or fallback:
                return o or fallback
        return None

    # --- helpers ------------------------------------------------------------------------

    def _op(self, ins: Instr, k: int) -> Instr | None:
        return self.by_name.get(ins.operands[k]) if k < len(ins.operands) else None

    def _root(self, comp: str) -> Instr | None:
        instrs = self.m.computation(comp)
        return next((i for i in instrs if i.root), instrs[-1] if instrs else None)

    def _element_of(self, root: Instr, idx: tuple[int, ...]) -> Instr | None:
        """The operand a tuple root writes at idx[0], unless it only passes the body's
        parameter on (the carry is then the loop's initial value)."""
        if root.opcode != "tuple" or not idx or idx[0] >= len(root.operands):
            return root
        el = self.by_name.get(root.operands[idx[0]])
        if el is not None and el.opcode == "get-tuple-element":
            src = self._op(el, 0)
            if src is not None and src.opcode == "parameter" and el.index == idx[0]:
                return None
        return el


def _constant_only(ins: Instr | None, names: dict[str, Instr], depth: int = 0) -> bool:
    """The value is made of constants alone (a broadcast zero)."""
    if ins is None or depth > 8:
        return False
    if ins.opcode in ("constant", "iota"):
        return True
    return bool(ins.operands) and all(
        _constant_only(names.get(o), names, depth + 1) for o in ins.operands
    )


def _data_operand(ins: Instr, names: dict[str, Instr]) -> Instr | None:
    """The one operand of a fused op without source that carries data: a select between a
    broadcast constant and a value (XLA's fold of a loop's first step) writes the value."""
    ops = ins.operands[1:] if ins.opcode == "select" else ins.operands
    data = [names.get(o) for o in ops if not _constant_only(names.get(o), names)]
    return data[0] if len(data) == 1 else None

"""key-reuse, fixed keys: is what a loop's key drew fed back into a later iteration?

The dataflow is an interpreter over the function's (or cell's) statements, in the shape of
an abstract `exec`: a value is the set of family executions it derives from, each labelled
with the iterations of its enclosing loops it ran in ("this iteration" or "an earlier
one"); a loop's body runs until nothing changes, its labels aged at the back edge. The
rule it serves, and what "family" means: keys/fixed.py.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from typing import Any

from jaxviz.diagnostics.keys.fixed_source import COMPS, Index, base_name, bound_names

_MAX_PASSES = 12

Label = frozenset  # frozenset of (loop id, age): age 0 "this iteration", 1 "an earlier one"
Taint = frozenset  # frozenset of Labels
_NONE: frozenset = frozenset()


def _merge(states: Iterable[dict | None]) -> dict | None:
    out: dict | None = None
    for s in states:
        if s is None:
            continue
        if out is None:
            out = dict(s)
            continue
        for k, v in s.items():
            out[k] = out.get(k, _NONE) | v
    return out


def _age(state: dict | None, loop: int) -> dict | None:
    """At a loop's back edge: what this iteration made was made in an earlier one."""
    if state is None:
        return None
    now = (loop, 0)
    return {
        k: frozenset(
            frozenset((loop, 1) if e == now else e for e in lab) if now in lab else lab for lab in v
        )
        for k, v in state.items()
    }


# --- the interpreter -----------------------------------------------------------------------


class LoopFlow:
    """An abstract `exec` of one function's statements: each name's value is its Taint."""

    def __init__(self, index: Index, s0: ast.Call, consumers: dict[ast.Call, list[bool]]):
        self.index = index
        self.s0 = s0
        self.consumers = consumers
        self.state: dict[str, Taint] | None = {}
        self.loops: list[int] = []  # the enclosing loops, outermost first
        self.breaks: list[dict | None] = []
        self.continues: list[dict | None] = []
        self.defs: dict[str, frozenset[str]] = {}  # local function -> the names it reads
        self.fed_back = False
        self.same_call = False
        self.gave_up = False
        self.draws = 0
        self.mutable: frozenset[str] = frozenset()  # names the function binds (not imports)
        self.keynames: set[str] = set()  # names that hold keys the family derived
        self.derived: set[ast.Call] = set()  # the family's derivations (split, fold_in)

    def run(self, unit: ast.AST) -> None:
        self.mutable = bound_names(unit)
        if isinstance(unit, ast.Lambda):
            self.expr(unit.body)
        else:
            self.stmts(getattr(unit, "body", []))

    # --- values --------------------------------------------------------------------------

    def now(self) -> Label:
        return frozenset((lp, 0) for lp in self.loops)

    def _current(self, lab: Label) -> bool:
        """Made in this iteration of every loop that encloses both."""
        return all(age == 0 for lp, age in lab if lp in self.loops)

    def read(self, name: str) -> Taint:
        if self.state is None:
            return _NONE
        t = self.state.get(name, _NONE)
        free = self.defs.get(name)
        if free:
            for n in free:
                if n != name:
                    t = t | self.state.get(n, _NONE)
        return t

    def bind(self, target: ast.AST, t: Taint, key: bool = False) -> None:
        """An assignment: a name gets `t`; an item or attribute adds `t` to its container.
        key: the value is keys the family derived (`ka, kb = random.split(eval_key)`)."""
        if self.state is None:
            return
        if isinstance(target, ast.Name):
            self.state[target.id] = t
            self.defs.pop(target.id, None)
            if key:
                self.keynames.add(target.id)
            else:
                self.keynames.discard(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self.bind(e, t, key)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, t, key)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            extra = self.expr(target.slice) if isinstance(target, ast.Subscript) else _NONE
            self.expr(target.value)
            self.add(base_name(target), t | extra)

    def keyish(self, e: ast.AST) -> bool:
        """The expression is keys the family derived: such a call, a name holding them, a
        part of them."""
        if isinstance(e, ast.Call):
            return e in self.derived
        if isinstance(e, ast.Name):
            return e.id in self.keynames
        if isinstance(e, (ast.Subscript, ast.Starred)):
            return self.keyish(e.value)
        if isinstance(e, (ast.Tuple, ast.List)):
            return bool(e.elts) and all(map(self.keyish, e.elts))
        return False

    def add(self, name: str | None, t: Taint) -> None:
        if name and t and self.state is not None:
            self.state[name] = self.state.get(name, _NONE) | t

    # --- expressions ---------------------------------------------------------------------

    def expr(self, node: ast.AST | None) -> Taint:
        if node is None or self.state is None:
            return _NONE
        if isinstance(node, ast.Name):
            return self.read(node.id)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.NamedExpr):
            t = self.expr(node.value)
            self.bind(node.target, t, self.keyish(node.value))
            return t
        if isinstance(node, COMPS):
            return self.comprehension(node)
        if isinstance(node, ast.Lambda):
            out = _NONE
            for n in ast.walk(node.body):
                if isinstance(n, ast.Name):
                    out = out | self.read(n.id)
            return out
        out = _NONE
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                out = out | self.expr(child)
            elif isinstance(child, ast.keyword):
                out = out | self.expr(child.value)
            elif isinstance(child, ast.comprehension):  # pragma: no cover (handled above)
                out = out | self.expr(child.iter)
        return out

    def call(self, node: ast.Call) -> Taint:
        func = node.func
        receiver = None
        if isinstance(func, ast.Attribute):
            ins = self.expr(func.value)
            receiver = base_name(func.value)
        else:
            ins = self.expr(func)
        args = _NONE
        for a in node.args:
            args = args | self.expr(a)
        for k in node.keywords:
            args = args | self.expr(k.value)
        ins = ins | args
        c = self.consumers.get(node)
        if c is not None and (node is self.s0 or c[1] or any(map(self._current, ins))):
            if not all(map(self._current, ins)):
                self.fed_back = True  # an earlier iteration's draws reach this one's
            if c[0]:
                self.derived.add(node)
            else:
                self.draws += 1
                if not self._changes(node):
                    self.same_call = True
            ins = ins | {self.now()}
        if receiver in self.mutable:  # a method may keep its arguments: lst.append(x)
            self.add(receiver, args)
        return ins

    def _changes(self, node: ast.Call) -> bool:
        """The call's arguments other than its keys read a name its loop rebinds (or it
        runs in no loop): the calls differ in more than their key."""
        loop = self.index.loop_of(node)
        if loop is None:
            return True
        rebound = self.index.rebound(loop) - self.keynames
        parts: list[ast.expr] = list(node.args) + [k.value for k in node.keywords]
        if isinstance(node.func, ast.Attribute):
            parts.append(node.func.value)
        return any(isinstance(n, ast.Name) and n.id in rebound for p in parts for n in ast.walk(p))

    def comprehension(self, node: ast.AST) -> Taint:
        gens = node.generators  # type: ignore[attr-defined]
        # its targets are its own (a walrus in it binds in the function: not restored)
        targets = {n.id for g in gens for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        saved = {k: self.state.get(k) for k in targets} if self.state is not None else {}
        out: list[Taint] = []

        def level(i: int) -> None:
            if i == len(gens):
                if isinstance(node, ast.DictComp):
                    out.append(self.expr(node.key) | self.expr(node.value))
                else:
                    out.append(self.expr(node.elt))  # type: ignore[attr-defined]
                return
            g = gens[i]
            it = self.expr(g.iter)
            key = self.keyish(g.iter)

            def body() -> None:
                self.bind(g.target, it, key)
                for cond in g.ifs:
                    self.expr(cond)
                level(i + 1)

            self.loop(id(g), body)

        level(0)
        if self.state is not None:
            for k, v in saved.items():
                if v is None:
                    self.state.pop(k, None)
                else:
                    self.state[k] = v
        t = _NONE
        for x in out:
            t = t | x
        return t

    # --- statements ----------------------------------------------------------------------

    def stmts(self, body: Sequence[ast.stmt]) -> None:
        for s in body:
            if self.state is None:
                return
            self.stmt(s)

    def loop(self, lid: int, body: Any) -> None:
        """Runs `body` as a loop's body until the state at the loop's head is stable; the
        state after it is the head's (the loop ends there) with its breaks'."""
        entry = self.state
        head = entry
        saved = self.breaks, self.continues
        self.loops.append(lid)
        breaks: list[dict | None] = []
        try:
            for _ in range(_MAX_PASSES):
                self.breaks, self.continues = [], []
                self.state = dict(head) if head is not None else None
                body()
                back = _age(_merge([self.state, *self.continues]), lid)
                breaks = self.breaks
                new = _merge([entry, back])
                if new == head:
                    break
                head = new
            else:
                self.gave_up = True
        finally:
            self.loops.pop()
            self.breaks, self.continues = saved
        self.state = _merge([head, *breaks])

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Assign):
            t = self.expr(s.value)
            key = self.keyish(s.value)
            for target in s.targets:
                self.bind(target, t, key)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.bind(s.target, self.expr(s.value), self.keyish(s.value))
        elif isinstance(s, ast.AugAssign):
            t = self.expr(s.value)
            if isinstance(s.target, ast.Name):
                self.state[s.target.id] = self.read(s.target.id) | t  # type: ignore[index]
            else:
                self.bind(s.target, t)
        elif isinstance(s, ast.Expr):
            t = self.expr(s.value)
            v = s.value
            if isinstance(v, ast.Call) and not isinstance(v.func, ast.Attribute):
                # a call made for its effect may change the containers it is given
                for a in [*v.args, *(k.value for k in v.keywords)]:
                    self.add(base_name(a), t)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self._for(s)
        elif isinstance(s, ast.While):
            self._while(s)
        elif isinstance(s, ast.If):
            self._if(s)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                t = self.expr(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, t)
            self.stmts(s.body)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            self._try(s)
        elif isinstance(s, ast.Match):
            self._match(s)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in s.decorator_list:
                self.expr(d)
            if self.state is not None:
                self.state[s.name] = _NONE
                self.defs[s.name] = frozenset(n.id for n in ast.walk(s) if isinstance(n, ast.Name))
        elif isinstance(s, ast.Return):
            self.expr(s.value)
            self.state = None
        elif isinstance(s, ast.Raise):
            self.expr(s.exc)
            self.state = None
        elif isinstance(s, ast.Break):
            self.breaks.append(self.state)
            self.state = None
        elif isinstance(s, ast.Continue):
            self.continues.append(self.state)
            self.state = None
        elif isinstance(s, ast.Delete):
            for target in s.targets:
                if isinstance(target, ast.Name) and self.state is not None:
                    self.state.pop(target.id, None)
                else:
                    self.expr(target)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            if self.state is not None:
                for alias in s.names:
                    self.state[(alias.asname or alias.name).split(".")[0]] = _NONE
        else:  # Assert, Global, Nonlocal, Pass, type aliases: their expressions
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    self.expr(child)

    def _for(self, s: ast.For | ast.AsyncFor) -> None:
        it = self.expr(s.iter)
        key = self.keyish(s.iter)
        target, body = s.target, s.body

        def run() -> None:
            self.bind(target, it, key)
            self.stmts(body)

        self.loop(id(s), run)
        self.stmts(s.orelse)

    def _while(self, s: ast.While) -> None:
        test, body = s.test, s.body

        def run_while() -> None:
            self.expr(test)
            self.stmts(body)

        self.expr(test)
        self.loop(id(s), run_while)
        self.stmts(s.orelse)

    def _if(self, s: ast.If) -> None:
        self.expr(s.test)
        entry = self.state
        self.state = dict(entry) if entry is not None else None
        self.stmts(s.body)
        taken = self.state
        self.state = dict(entry) if entry is not None else None
        self.stmts(s.orelse)
        self.state = _merge([taken, self.state])

    def _try(self, s: Any) -> None:
        entry = dict(self.state) if self.state is not None else None
        self.stmts(s.body)
        body = self.state
        outs: list[dict | None] = []
        for h in s.handlers:
            self.state = _merge([entry, body])  # raised anywhere in the body
            self.expr(h.type)
            if h.name and self.state is not None:
                self.state[h.name] = _NONE
            self.stmts(h.body)
            outs.append(self.state)
        self.state = body
        self.stmts(s.orelse)
        outs.append(self.state)
        self.state = _merge(outs)
        if s.finalbody:
            if self.state is None:
                self.state = _merge([entry, body])
            self.stmts(s.finalbody)

    def _match(self, s: ast.Match) -> None:
        t = self.expr(s.subject)
        entry = self.state
        outs: list[dict | None] = [entry]
        for case in s.cases:
            self.state = dict(entry) if entry is not None else None
            for n in ast.walk(case.pattern):
                name = getattr(n, "name", None) or getattr(n, "rest", None)
                if isinstance(name, str) and self.state is not None:
                    self.state[name] = t
            self.expr(case.guard)
            self.stmts(case.body)
            outs.append(self.state)
        self.state = _merge(outs)

"""key-reuse, static: which of KeyFlow's reuses are alternatives, their results meeting
only in a select (`jnp.where`, `lax.select`, what jax.vmap makes of a cond on a batched
index); KeyFlow drops those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxviz import _compat
from jaxviz.diagnostics.keys.uses import RANDOM, Reuse
from jaxviz.graph import walk

_MAX_ALTS = 64
Alts = frozenset  # frozenset of frozensets of use numbers: one per way the selects can go


class Alternatives:
    """Which of a jaxpr's reuses are alternatives: the two consumptions' results meet only
    in a `select_n` (`jnp.where`, `lax.select`; what `jax.vmap` makes of a `lax.cond` or
    `lax.switch` on a batched index: every branch runs and select_n keeps one result per
    example), never in anything that combines them.

    A second walk over the jaxpr (graph/walk.py), whose value of each variable is the set
    of ways the selects before it can go, each way the set of the reuses' consumptions the
    value then derives from. An op combines its inputs' ways (every choice with every
    other), a select keeps its cases' ways apart (each with its predicate's); cond branches
    are alternatives as in KeyFlow; loops and ways past `_MAX_ALTS` collapse into one way
    (everything combined). The jaxpr's outputs are combined with each other (the caller
    gets them all). A pair is dropped when some select keeps the two apart and no way
    holds both.
    """

    def __init__(self, pairs: list[Reuse]):
        self.pairs = pairs
        self.ids: dict[tuple, int] = {}  # a consumption's chain (eqn ids) -> its number
        for r in pairs:
            for u in (r.first, r.second):
                self.ids.setdefault(tuple(map(id, u.chain)), len(self.ids))
        self.apart: set[tuple[int, int]] = set()  # kept apart by some select
        self.together: set[tuple[int, int]] = set()  # combined by something
        self.walker = walk.Walker(
            walk.rules(call=self._call, loop=self._loop, cond=self._cond, select_n=self._select),
            self._op,
            literal=None,
            strict=False,
        )
        self.walker.rules["select"] = self._select

    def run(self, j: Any) -> list[Reuse]:
        outs = self.walker.walk(j, (), [None] * len(j.invars), [None] * len(j.constvars))
        self._note(_product(outs))
        out = []
        for r in self.pairs:
            a, b = (self.ids[tuple(map(id, u.chain))] for u in (r.first, r.second))
            pair = (min(a, b), max(a, b))
            if pair in self.apart and pair not in self.together:
                out.append(r)
        return out

    def _note(self, alts: Alts | None) -> Alts | None:
        """Every way that holds two consumptions combines them."""
        if alts:
            for way in alts:
                if len(way) > 1:
                    w: list[int] = sorted(way)
                    self.together.update((x, y) for i, x in enumerate(w) for y in w[i + 1 :])
        return alts

    def _op(self, chain: tuple, eqn: Any, ins: list) -> list:
        alts = self._note(_product(ins))
        me = self.ids.get(tuple(map(id, chain + (eqn,)))) if eqn.primitive.name in RANDOM else None
        if me is not None:
            ways: Alts = alts or frozenset({frozenset()})
            alts = self._note(frozenset(w | {me} for w in ways))
        return [alts] * len(eqn.outvars)

    def _select(self, chain: tuple, eqn: Any, ins: list) -> list:
        pred, cases = ins[0], ins[1:]
        ways = [_product([pred, c]) for c in cases]
        for i, wi in enumerate(ways):
            for wj in ways[i + 1 :]:
                for x in _members(wi):
                    for y in _members(wj):
                        if x != y:
                            self.apart.add((min(x, y), max(x, y)))
        alts = _cap(frozenset().union(*(w for w in ways if w))) if any(ways) else None
        return [self._note(alts)] * len(eqn.outvars)

    def _cond(self, chain: tuple, eqn: Any, ins: list) -> list:
        outs: list = [None] * len(eqn.outvars)
        for s in _compat.sub_jaxprs(eqn):
            branch = walk.eqn_outputs(
                s, self._body(chain + (eqn,), s, ins), [None] * len(eqn.outvars)
            )
            outs = [_either(o, b) for o, b in zip(outs, branch)]
        return [self._note(_product([ins[0], o])) for o in outs]

    def _call(self, chain: tuple, eqn: Any, ins: list) -> list:
        subs = _compat.sub_jaxprs(eqn)
        if len(subs) != 1:  # several bodies (custom rules): everything combined
            return self._loop(chain, eqn, ins)
        return walk.eqn_outputs(
            subs[0], self._body(chain + (eqn,), subs[0], ins), [None] * len(eqn.outvars)
        )

    def _loop(self, chain: tuple, eqn: Any, ins: list) -> list:
        every = _collapse(_product(ins))
        for _ in range(2):  # the carry goes round: everything meets everything
            for s in _compat.sub_jaxprs(eqn):
                body = self._body(chain + (eqn,), s, [every] * len(ins))
                every = _collapse(_product([every, *body]))
        return [self._note(every)] * len(eqn.outvars)

    def _body(self, chain: tuple, s: Any, ins: list) -> list:
        jj = _compat.open_jaxpr(s.jaxpr)
        return self.walker.walk(jj, chain, walk.body_inputs(s, ins), [None] * len(jj.constvars))


def _members(alts: Alts | None) -> set[int]:
    return set().union(*alts) if alts else set()


def _cap(alts: Alts) -> Alts:
    return frozenset({frozenset(_members(alts))}) if len(alts) > _MAX_ALTS else alts


def _collapse(alts: Alts | None) -> Alts | None:
    """One way holding everything: all choices at once."""
    return frozenset({frozenset(_members(alts))}) if alts else alts


def _either(a: Alts | None, b: Alts | None) -> Alts | None:
    if not a:
        return b
    if not b:
        return a
    return _cap(a | b)


def _product(values: Sequence) -> Alts | None:
    """The ways of a value made from all of `values`: every way of each with every way of
    the others."""
    out: Alts | None = None
    for v in values:
        if not v:
            continue
        out = v if out is None else _cap(frozenset(a | b for a in out for b in v))
    return out

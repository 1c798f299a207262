"""key-reuse, static: KeyFlow follows key identities through a jaxpr and records every
consumption, and the reuses among them.

graph/walk.py's walk over a jaxpr, with a rule table. Values are key identities ("vids"):
("in", i) / ("const", i) for inputs, derived ones as tuples of (parent, op, static params).
Loop bodies (scan, while) see their consts as the same key every iteration; cond branches
are alternatives, and so are draws whose results meet only in a select_n
(keys/alternatives.py, a second walk: jax.vmap turns a cond on a batched index into every
branch and a select_n). `consumed_inputs` is what one call of a jaxpr consumes of its
inputs, for the runtime ledger (keys/ledger.py).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from jaxviz import _compat
from jaxviz.diagnostics.keys.alternatives import Alternatives
from jaxviz.diagnostics.keys.uses import FOLD, FULL, RANDOM, Reuse, Use, conflict, is_keyish
from jaxviz.graph import walk

# ops that keep a key's identity
_SAME = {
    "random_wrap",
    "random_unwrap",
    "copy",
    "copy_p",
    "device_put",
    "optimization_barrier",
    "convert_element_type",
    "reshape",
}


class _Scope(NamedTuple):
    """What KeyFlow's rules know while they walk one jaxpr."""

    flow: KeyFlow  # the run: its walker, uses and reuses
    chain: tuple  # eqns from the root jaxpr down to this jaxpr's caller
    loop_consts: set | None  # keys a loop body sees the same every iteration (None: no loop)
    seen: list  # the uses visible here (shared along one path of execution)
    iterdep: set | None  # vars that differ per iteration of the enclosing loop


class KeyFlow:
    """Follows key identities through a jaxpr and records every consumption: a walk whose
    value of each variable is its key identity, or None.

    >>> import jax
    >>> f = lambda k: jax.random.bits(k) + jax.random.bits(k)
    >>> [r.why for r in KeyFlow().run(jax.make_jaxpr(f)(jax.random.key(0))).reuses]
    ['twice']
    """

    def __init__(self):
        self.uses: list[Use] = []
        self.reuses: list[Reuse] = []
        self.walker = walk.Walker(_RULES, _derive, literal=None, strict=False)

    def run(self, jaxpr: Any) -> KeyFlow:
        j = _compat.open_jaxpr(jaxpr)
        consts = [("const", i) if is_keyish(v.aval) else None for i, v in enumerate(j.constvars)]
        inputs = [("in", i) if is_keyish(v.aval) else None for i, v in enumerate(j.invars)]
        self.walker.walk(j, _Scope(self, (), None, [], None), inputs, consts)
        pairs = [r for r in self.reuses if r.first is not r.second]
        if pairs:
            alternatives = Alternatives(pairs).run(j)
            self.reuses = [r for r in self.reuses if not any(r is a for a in alternatives)]
        return self

    def _use(self, use: Use, seen: list) -> None:
        if use.vid is None or use.vid[0] in ("iter", "fresh"):
            return
        self.uses.append(use)
        if use.loop and (use.kind == FULL or not isinstance(use.data, tuple)):
            self.reuses.append(Reuse(use, use, "loop"))
        for prev in seen:
            if prev.vid != use.vid:
                continue
            why = conflict(prev.kind, prev.data, use.kind, use.data)
            if why:
                self.reuses.append(Reuse(prev, use, why))
                break
        seen.append(use)


# --- KeyFlow's rules: rule(scope, eqn, ins, dep) -> outs; `dep`: an input differs per
# iteration of the enclosing loop (see `_iterdep`) -------------------------------------------


def _iterdep(rule: Callable[..., Any]) -> walk.Rule:
    """The rule with the loop bookkeeping every equation shares: inside a loop body, an
    equation with an iteration-dependent input makes iteration-dependent outputs."""

    def tracked(scope: _Scope, eqn: Any, ins: list) -> list:
        it = scope.iterdep
        dep = it is not None and any(v in it for v in eqn.invars if not _compat.is_literal(v))
        outs = rule(scope, eqn, ins, dep)
        if dep and it is not None:
            it.update(v for v in eqn.outvars if not _compat.is_dropvar(v))
        return outs

    tracked.__doc__ = rule.__doc__
    return tracked


def _full(scope: _Scope, eqn: Any, ins: list, dep: bool) -> list:
    """random_bits, random_split: a full use of the key; split's output derives from it."""
    name = eqn.primitive.name
    outs: list[Any] = [None] * len(eqn.outvars)
    loopish = scope.loop_consts is not None and _from_consts(
        ins[0], scope.loop_consts, eqn, scope.iterdep
    )
    scope.flow._use(Use(ins[0], FULL, None, name, scope.chain + (eqn,), loopish), scope.seen)
    if name == "random_split" and ins[0] is not None:
        outs[0] = (
            ("iter", id(eqn.outvars[0]))
            if dep
            else (ins[0], "split", tuple(eqn.params.get("shape", ())))
        )
    return outs


def _fold(scope: _Scope, eqn: Any, ins: list, dep: bool) -> list:
    """random_fold_in: a use of the key with its data; the output derives from both."""
    outs: list[Any] = [None] * len(eqn.outvars)
    d = eqn.invars[1]
    data = _compat.literal_value(d) if _compat.is_literal(d) else ("var", id(d))
    try:
        data = int(data) if not isinstance(data, tuple) else data
    except (TypeError, ValueError):
        data = ("var", id(d))
    loopish = (
        scope.loop_consts is not None
        and not dep
        and _from_consts(ins[0], scope.loop_consts, eqn, scope.iterdep)
    )
    scope.flow._use(
        Use(ins[0], FOLD, data, eqn.primitive.name, scope.chain + (eqn,), loopish), scope.seen
    )
    if ins[0] is not None:
        outs[0] = ("iter", id(eqn.outvars[0])) if dep else (ins[0], "fold", data)
    return outs


def _same(scope: _Scope, eqn: Any, ins: list, dep: bool) -> list:
    """Ops that keep a key's identity (wrap, unwrap, copy, reshape, ...)."""
    if not ins or ins[0] is None:
        return _derived(scope, eqn, ins, dep)
    outs: list[Any] = [None] * len(eqn.outvars)
    outs[0] = ins[0]
    return outs


def _select(scope: _Scope, eqn: Any, ins: list, dep: bool) -> list:
    """select_n between one key in every case (jax.vmap's batched cond passes each branch
    its key so) is that key."""
    cases = ins[1:]
    if cases and cases[0] is not None and all(c == cases[0] for c in cases):
        return [cases[0]] + [None] * (len(eqn.outvars) - 1)
    return _derived(scope, eqn, ins, dep)


def _derived(scope: _Scope, eqn: Any, ins: list, dep: bool) -> list:
    """Any other op on a key: a part or a function of it (`keys[0]`), one identity per
    output and static params; a fresh key when it depends on traced data or the iteration."""
    subs = _compat.sub_jaxprs(eqn) if eqn.primitive.name not in RANDOM else ()
    if subs:
        return _call(scope, eqn, ins, dep)
    outs: list[Any] = [None] * len(eqn.outvars)
    if any(x is not None for x in ins):
        base = next(x for x in ins if x is not None)
        params = tuple(sorted((k, str(v)) for k, v in eqn.params.items()))
        dynamic = any(
            x is None and not _compat.is_literal(v) for v, x in zip(eqn.invars[1:], ins[1:])
        )
        for k, ov in enumerate(eqn.outvars):
            if is_keyish(ov.aval):
                outs[k] = (
                    ("fresh", id(ov)) if (dynamic or dep) else (base, eqn.primitive.name, params, k)
                )
    return outs


def _call(scope: _Scope, eqn: Any, ins: list, dep: bool) -> list:
    """jit, remat, custom_jvp/vjp, shard_map, ...: keys flow through the body."""
    subs = _compat.sub_jaxprs(eqn)
    if not subs:
        return _derived(scope, eqn, ins, dep)
    outs: list[Any] = [None] * len(eqn.outvars)
    for s in subs:
        walk.eqn_outputs(s, _enter(scope, eqn, s, ins, scope.seen), outs)
    return outs


def _cond(scope: _Scope, eqn: Any, ins: list, dep: bool) -> list:
    """cond: the branches are alternatives; each sees the uses before the cond, not the
    other branches'; after it, all of them count."""
    subs = _compat.sub_jaxprs(eqn)
    if not subs:
        return _derived(scope, eqn, ins, dep)
    outs: list = [None] * len(eqn.outvars)
    merged: list = []
    seen = scope.seen
    for s in subs:
        branch_seen = list(seen)
        branch = walk.eqn_outputs(s, _enter(scope, eqn, s, ins, branch_seen), [None] * len(outs))
        merged.extend(branch_seen[len(seen) :])
        outs = [o if o is not None else b for o, b in zip(outs, branch)]
    seen.extend(merged)
    return outs


def _loop(scope: _Scope, eqn: Any, ins: list, dep: bool) -> list:
    """scan, while: a body sees its consts as the same key every iteration, its carry and
    xs as keys that differ per iteration; the loop's outputs are fresh keys."""
    subs = _compat.sub_jaxprs(eqn)
    if not subs:
        return _derived(scope, eqn, ins, dep)
    name = eqn.primitive.name
    consts: set = set()  # the loop's consts, cond's and body's together
    body_iter: set = set()  # the bodies' invars past their consts
    seen = scope.seen
    for s in subs:
        jj = _compat.open_jaxpr(s.jaxpr)
        n_consts = _loop_consts(eqn, s)
        sub_consts = [("const-loop", id(v)) if is_keyish(v.aval) else None for v in jj.constvars]
        inputs: list = []
        for i, v in enumerate(jj.invars):
            src = s.in_map[i] if i < len(s.in_map) else -1
            if i < n_consts and src >= 0 and ins[src] is not None:
                inputs.append(ins[src])
                consts.add(ins[src])
            else:
                inputs.append(("iter", id(v)) if is_keyish(v.aval) else None)
                if i >= n_consts:
                    body_iter.add(v)
        times = s.times if name == "scan" else 2
        loop_seen = list(seen)
        body = _Scope(
            scope.flow, scope.chain + (eqn,), consts if times > 1 else None, loop_seen, body_iter
        )
        scope.flow.walker.walk(jj, body, inputs, sub_consts)
        seen.extend(loop_seen[len(seen) :])
    return [("fresh", id(ov)) if is_keyish(ov.aval) else None for ov in eqn.outvars]


def _enter(scope: _Scope, eqn: Any, s: Any, ins: list, seen: list) -> list:
    """Walks a body that runs once (a call, a cond branch); its outputs' key identities."""
    jj = _compat.open_jaxpr(s.jaxpr)
    consts = [("subconst", id(v)) if is_keyish(v.aval) else None for v in jj.constvars]
    inputs = walk.body_inputs(s, ins)
    sub_iter = (
        None
        if scope.iterdep is None
        else {v for v, x in zip(jj.invars, inputs) if x is not None and x[0] == "iter"}
    )
    inner = _Scope(scope.flow, scope.chain + (eqn,), scope.loop_consts, seen, sub_iter)
    return scope.flow.walker.walk(jj, inner, inputs, consts)


_RULES: dict[str, walk.Rule] = {
    name: _iterdep(rule)
    for name, rule in walk.rules(
        call=_call,
        loop=_loop,
        cond=_cond,
        random_bits=_full,
        random_split=_full,
        random_fold_in=_fold,
        select_n=_select,
        **dict.fromkeys(_SAME, _same),
    ).items()
}
_derive = _iterdep(_derived)


def _loop_consts(eqn: Any, s: Any) -> int:
    if eqn.primitive.name == "scan":
        return _compat.scan_counts(eqn)[0]
    p = eqn.params
    return p["cond_nconsts"] if s.role == "cond" else p["body_nconsts"]


def _from_consts(vid: Any, consts: set, eqn: Any, iterdep: set | None) -> bool:
    """The key is the same in every iteration: it derives from a loop const only."""
    while isinstance(vid, tuple) and vid:
        if vid in consts:
            return True
        if vid[0] in ("iter", "fresh"):
            return False
        if vid[0] in ("in", "const", "const-loop", "subconst"):
            return vid[0] == "const-loop"
        vid = vid[0]
    return False


# JAX's jaxpr -> its consumed_inputs, while JAX holds the jaxpr (a cell run again, or a
# train step taking a dropout key: its KeyFlow walk once, not at each cell's first call)
_CONSUMED: weakref.WeakKeyDictionary[Any, list] = weakref.WeakKeyDictionary()


def consumed_inputs(jaxpr: Any) -> list[tuple[int, str, Any, str]]:
    """[(flat input index, kind, fold data, op)] for the inputs a jaxpr consumes as keys
    (remembered weakly by the jaxpr's identity: callers must not change the list)."""
    return _compat.per_jaxpr(_CONSUMED, jaxpr, _consumed_inputs)


def _consumed_inputs(jaxpr: Any) -> list[tuple[int, str, Any, str]]:
    j = _compat.open_jaxpr(jaxpr)
    if not any(is_keyish(v.aval) for v in j.invars):
        return []
    flow = KeyFlow().run(jaxpr)
    # One call consumes each input once for the runtime ledger: uses inside the function
    # (both branches of a cond, a reuse the static analysis reports) do not collide here.
    full: dict[int, str] = {}
    folds: dict[tuple, str] = {}
    for u in flow.uses:
        if u.vid[0] == "in" and len(u.vid) == 2:
            i = u.vid[1]
            if u.kind == FULL:
                full.setdefault(i, u.what)
            else:
                data = u.data if not isinstance(u.data, tuple) else ("?",)
                folds.setdefault((i, data), u.what)
    out = [(i, FULL, None, what) for i, what in full.items()]
    out += [(i, FOLD, data, what) for (i, data), what in folds.items() if i not in full]
    return out

"""key-reuse: a PRNG key consumed twice.

Two analyses, one vocabulary. A key is *consumed* by a sampler (`random_bits`), by
`random_split` (both "full" uses) or by `random_fold_in` ("fold" with its data). Two full
uses of one key, a full use and a fold (`split(k)[i] == fold_in(k, i)`), or two folds with
the same data give the same random numbers twice.

  * Static (`KeyFlow`): graph/walk.py's walk over a jaxpr, with a rule table. Values are
    key identities ("vids"): ("in", i) / ("const", i) for inputs, derived ones as tuples of
    (parent, op, static params). Loop bodies (scan, while) see their consts as the same key
    every iteration; cond branches are alternatives, and so are draws whose results meet
    only in a select_n (`_Alternatives`, a second walk: jax.vmap turns a cond on a batched
    index into every branch and a select_n).
  * Runtime (`KeyLedger`): keys consumed by the calls the Recorder sees, by object identity
    (weak references), following eager `random_wrap` / `random_unwrap` back to the user's key;
    every stack that consumed keys (`sites`) with the eager splits and fold_ins that made
    them, for diagnostics/fixedkeys.py (is a key a loop consumes again a fixed key?).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from jaxviz import _compat
from jaxviz.capture.places import is_library, is_user_file, library_label, user_site
from jaxviz.graph import walk

FULL = "full"
FOLD = "fold"
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
_RANDOM = {
    "random_bits",
    "random_split",
    "random_fold_in",
    "random_wrap",
    "random_unwrap",
    "random_seed",
    "threefry2x32",
}


@dataclasses.dataclass
class Use:
    vid: Any
    kind: str  # FULL | FOLD
    data: Any  # fold data: a Python int, a var id, or None
    what: str  # "random_bits", "random_split", "random_fold_in"
    chain: tuple  # eqns from the root jaxpr down to the consuming one
    loop: bool = False  # inside a loop body, on a key from outside the loop


@dataclasses.dataclass
class Reuse:
    first: Use
    second: Use
    why: str  # "twice" | "split-fold" | "loop" | "fold"


_DTYPE_KIND: dict[Any, str] = {}  # dtype -> "key" or its name (jax.dtypes.issubdtype is slow)


def _dtype_kind(dt: Any) -> str:
    kind = _DTYPE_KIND.get(dt)
    if kind is None:
        kind = _DTYPE_KIND[dt] = "key" if _compat.is_key_dtype(dt) else str(dt)
    return kind


def _is_keyish(aval: Any) -> bool:
    """A typed key, or uint32 data (legacy keys are uint32[..., 2])."""
    dt = getattr(aval, "dtype", None)
    return dt is not None and _dtype_kind(dt) in ("key", "uint32")


def maybe_key(x: Any) -> bool:
    """A typed key array, or uint32 data shaped like legacy keys (last axis 2)."""
    if _compat.is_key_array(x):
        return True
    dt = getattr(x, "dtype", None)
    if dt is None:
        return False
    kind = _dtype_kind(dt)
    if kind == "key":
        return True
    shape: Any = getattr(x, "shape", ())
    return kind == "uint32" and len(shape) >= 1 and shape[-1] == 2


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
        consts = [("const", i) if _is_keyish(v.aval) else None for i, v in enumerate(j.constvars)]
        inputs = [("in", i) if _is_keyish(v.aval) else None for i, v in enumerate(j.invars)]
        self.walker.walk(j, _Scope(self, (), None, [], None), inputs, consts)
        pairs = [r for r in self.reuses if r.first is not r.second]
        if pairs:
            alternatives = _Alternatives(pairs).run(j)
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
            why = _conflict(prev.kind, prev.data, use.kind, use.data)
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
    subs = _compat.sub_jaxprs(eqn) if eqn.primitive.name not in _RANDOM else ()
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
            if _is_keyish(ov.aval):
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
        sub_consts = [("const-loop", id(v)) if _is_keyish(v.aval) else None for v in jj.constvars]
        inputs: list = []
        for i, v in enumerate(jj.invars):
            src = s.in_map[i] if i < len(s.in_map) else -1
            if i < n_consts and src >= 0 and ins[src] is not None:
                inputs.append(ins[src])
                consts.add(ins[src])
            else:
                inputs.append(("iter", id(v)) if _is_keyish(v.aval) else None)
                if i >= n_consts:
                    body_iter.add(v)
        times = s.times if name == "scan" else 2
        loop_seen = list(seen)
        body = _Scope(
            scope.flow, scope.chain + (eqn,), consts if times > 1 else None, loop_seen, body_iter
        )
        scope.flow.walker.walk(jj, body, inputs, sub_consts)
        seen.extend(loop_seen[len(seen) :])
    return [("fresh", id(ov)) if _is_keyish(ov.aval) else None for ov in eqn.outvars]


def _enter(scope: _Scope, eqn: Any, s: Any, ins: list, seen: list) -> list:
    """Walks a body that runs once (a call, a cond branch); its outputs' key identities."""
    jj = _compat.open_jaxpr(s.jaxpr)
    consts = [("subconst", id(v)) if _is_keyish(v.aval) else None for v in jj.constvars]
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


# --- draws that are alternatives: their results meet only in a select ----------------------

_SELECT = {"select_n", "select"}
_MAX_ALTS = 64
Alts = frozenset  # frozenset of frozensets of use numbers: one per way the selects can go


class _Alternatives:
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
        me = self.ids.get(tuple(map(id, chain + (eqn,)))) if eqn.primitive.name in _RANDOM else None
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


def _conflict(k1: str, d1: Any, k2: str, d2: Any) -> str:
    if k1 == FULL and k2 == FULL:
        return "twice"
    if k1 == FOLD and k2 == FOLD:
        return "fold" if (d1 == d2 and not isinstance(d1, tuple)) else ""
    return "split-fold"


# JAX's jaxpr -> its consumed_inputs, while JAX holds the jaxpr (a cell run again, or a
# train step taking a dropout key: its KeyFlow walk once, not at each cell's first call)
_CONSUMED: weakref.WeakKeyDictionary[Any, list] = weakref.WeakKeyDictionary()


def consumed_inputs(jaxpr: Any) -> list[tuple[int, str, Any, str]]:
    """[(flat input index, kind, fold data, op)] for the inputs a jaxpr consumes as keys
    (remembered weakly by the jaxpr's identity: callers must not change the list)."""
    return _compat.per_jaxpr(_CONSUMED, jaxpr, _consumed_inputs)


def _consumed_inputs(jaxpr: Any) -> list[tuple[int, str, Any, str]]:
    j = _compat.open_jaxpr(jaxpr)
    if not any(_is_keyish(v.aval) for v in j.invars):
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


# --- runtime: keys consumed by the calls a cell makes -----------------------------------


@dataclasses.dataclass
class Site:
    """One stack of user frames at which the cell consumed keys, and what it did there."""

    stack: tuple  # the user frames (_compat.UserFrame), outermost first
    whats: set[str]  # the consuming ops or functions: {"random_split"}, {"mc_predict"}
    parents: set[tuple]  # the sites (their keys) of the derivations that made the keys
    # consumed here: the eager split or fold_in whose output this is, or a part of


def site_key(stack: Sequence[Any]) -> tuple:
    """The key of a stack of user frames in `KeyLedger.sites`."""
    return tuple((f.code_id, f.lasti) for f in stack)


@dataclasses.dataclass
class RuntimeReuse:
    site: tuple[str, int] | None  # the second consumption
    first: tuple[str, int] | None  # the first one
    what: str  # "normal", "random_split", ...
    first_what: str
    why: str
    key: tuple = ()  # the key's identity: (id(root object), path to the part)
    stack: tuple = ()  # the second consumption's user frames (_compat.UserFrame), outermost first
    first_stack: tuple = ()  # the first one's


# Eager ops that take a part of a key array (`keys[0]`, `k1, k2 = keys` on legacy keys): the
# part's identity is its parent's plus the op and its static params, so `keys[0]` taken twice
# is one key, as in KeyFlow.
_PART = {"slice", "squeeze", "unstack", "dynamic_slice", "index_in_dim", "reshape", "expand_dims"}
# the eager key ops that consume their key: a loop's summarised runs follow keys through
# these only (a wrapped key is its data: KeyLedger._root), not into their parts
CONSUMING = frozenset({"random_bits", "random_split", "random_fold_in"})
# the eager op that makes a device scalar of a host value: fold_in(key, 3) binds its data
# through it (jax 0.10.2 and 0.12), whose value the ledger then knows without a device read
SCALAR = "convert_element_type"


def _part_step(name: str, args: tuple, params: dict, index: int) -> tuple | None:
    """The hashable step from a key array to one of its parts, or None when unknown."""
    try:
        if name == "dynamic_slice":
            starts = tuple(int(a) for a in args[1:])  # concrete: this is an eager op
            return (name, starts, tuple(params.get("slice_sizes", ())))
        items = tuple(
            sorted(
                (k, v if isinstance(v, (int, str, type(None))) else tuple(v))
                for k, v in params.items()
            )
        )
        hash(items)
    except (TypeError, ValueError):
        return None
    return (name, items, index)


class KeyLedger:
    """Keys consumed at top level, by object identity (weak references only).

    A key's identity is the object it was derived from without change (random_wrap /
    random_unwrap) or, for a part of a key array, that array's identity and the path to the
    part: (root object, (step, ...)).
    """

    def __init__(self, top: str | None = None):
        self.top = top  # the cell's or script's filename: its module frame is the outermost
        # id(out) -> (out, root, path): resolved when derived, as the temporaries between
        # (the slice before a squeeze) are gone by the time the part is consumed
        self._parent: dict[int, tuple[weakref.ref, weakref.ref, tuple]] = {}
        self._uses: dict[tuple, list[tuple[weakref.ref, str, Any, tuple | None, str, tuple]]] = {}
        # key -> (its `_uses` list, a use there other than a fold-in, the values folded in)
        self._folded: dict[tuple, tuple[list, bool, set]] = {}
        self.reuses: list[RuntimeReuse] = []
        # every stack that consumed a key, and where the keys it consumed were made
        self.sites: dict[tuple, Site] = {}
        # id(key) -> (key, the site key of the eager split or fold_in that made it)
        self._made: dict[int, tuple[weakref.ref, tuple]] = {}
        # the Python stack's (id(code), lasti) pairs -> `where`'s answer there
        self._where: dict[tuple, tuple] = {}
        self._site_keys: dict[int, tuple[tuple, tuple]] = {}  # id(stack) -> (it, site_key)
        # a counted run's consumption places (consume_at) -> (site, stack, site key)
        self._slots: dict[tuple, tuple] = {}
        self._scalar: tuple | None = None  # (the last device scalar of a host int, its value)

    def where(self, frame: Any) -> tuple[tuple[str, int] | None, tuple]:
        """(the user's line, the user frames of the current stack, outermost first, from the
        cell's or script's module frame on) of a consumption seen at `frame`; remembered
        by the Python stack's places (a loop consumes at the same places again)."""
        places: list[int] = []  # id(code), lasti, id(code), lasti, ... (flat: cheaper)
        top = self.top
        f = frame
        n = 0
        while f is not None and n < 64:
            code = f.f_code
            places.append(id(code))
            places.append(f.f_lasti)
            if code.co_filename == top and code.co_name == "<module>":
                break
            f = f.f_back
            n += 1
        key = tuple(places)
        found = self._where.get(key)
        if found is None:
            if len(self._where) > 4096:
                self._where.clear()
                self._site_keys.clear()
            found = self._where[key] = self._where_now(frame)
        return found

    def _where_now(self, frame: Any) -> tuple[tuple[str, int] | None, tuple]:
        site = user_site(frame, self.top)
        tb = _compat.new_traceback()
        frames = _compat.user_frames(tb) if tb is not None else []
        for i in range(len(frames) - 1, -1, -1):
            if frames[i].file == self.top and frames[i].fn == "<module>":
                frames = frames[i:]
                break
        return (site[:2] if site is not None else None), tuple(frames)

    def _root(self, x: Any) -> tuple[Any, tuple]:
        p = self._parent.get(id(x))
        if p is None or p[0]() is not x:
            # A typed key not derived here is its uint32 data: an eager random_wrap's output
            # holds its input as that data, random_unwrap returns it (_compat.key_base), so a
            # key wrapped again is the same key without following each wrap (a loop's
            # summarised runs do not)
            base = _compat.key_base(x)
            if base is None:
                return x, ()
            p = self._parent.get(id(base))
            if p is None or p[0]() is not base:
                return base, ()
            x = base
        root = p[1]()
        return (x, ()) if root is None else (root, p[2])

    def derive(self, out: Any, src: Any, step: tuple | None = None) -> None:
        """`out` is `src` (step None) or the part of it that `step` takes."""
        root, path = self._root(src)
        try:
            self._parent[id(out)] = (
                weakref.ref(out),
                weakref.ref(root),
                path + (step,) if step is not None else path,
            )
        except TypeError:
            pass
        if self._made:
            made = self.made_at(src, root)
            if made is not None:
                self._note_made(out, made)

    def made_at(self, x: Any, root: Any = None) -> tuple | None:
        """The site key of the eager split or fold_in whose output `x` is (or is a part of,
        or wraps), or None. root: `x`'s root, when known."""
        made = self._made
        if root is None:
            root = self._root(x)[0]
        for y in (x, root):
            hit = made.get(id(y))
            if hit is not None and hit[0]() is y:
                return hit[1]
        base = _compat.key_base(x)  # a typed key's parts are parts of its uint32 data
        if base is not None and base is not root:  # (a wrap's root is its data: asked)
            for y in (base, self._root(base)[0]):
                hit = made.get(id(y))
                if hit is not None and hit[0]() is y:
                    return hit[1]
        return None

    def _note_made(self, out: Any, made: tuple) -> None:
        if len(self._made) > 4096:  # the dead ones go
            self._made = {k: v for k, v in self._made.items() if v[0]() is not None}
        for y in (out, _compat.key_base(out)):
            if y is not None:
                try:
                    self._made[id(y)] = (weakref.ref(y), made)
                except TypeError:
                    pass

    def consume(
        self, obj: Any, kind: str, data: Any, site: tuple | None, what: str, stack: tuple = ()
    ) -> tuple:
        """Notes a consumption of `obj`; returns its site's key (`sites`)."""
        known = self._site_keys.get(id(stack))  # `where` hands out one stack per place
        if known is not None and known[0] is stack:
            skey = known[1]
        else:
            skey = site_key(stack)
            if len(self._site_keys) > 4096:
                self._site_keys.clear()
            self._site_keys[id(stack)] = (stack, skey)
        at = self.sites.get(skey)
        if at is None:
            at = self.sites[skey] = Site(stack, set(), set())
        at.whats.add(what)
        root, path = self._root(obj)
        made = self.made_at(obj, root)
        if made is not None:
            at.parents.add(made)
        try:
            ref = weakref.ref(root)
        except TypeError:
            return skey
        self._use((id(root), path), root, (ref, kind, data, site, what, stack))
        return skey

    def _use(self, key: tuple, root: Any, use: tuple) -> None:
        """Adds `use` (`_uses`' entry: a weak reference to `root`, kind, data, site, what,
        stack) to the key's uses, a reuse noted if it conflicts with one of them."""
        _ref, kind, data, site, what, stack = use
        uses = self._uses.get(key)
        if uses is None:  # a key not consumed before: the loop's usual case
            self._uses[key] = [use]
            return
        if not uses or uses[0][0]() is not root:  # (uses of an object gone, whose id it took)
            uses[:] = [u for u in uses if u[0]() is root]
            self._folded.pop(key, None)
        # A key folded in with a new value at each step (`fold_in(key, i)`, blackjax's and
        # numpyro's loops) conflicts with none of its uses: they are not scanned (a scan at
        # each of a loop's steps made the ledger quadratic: 2,000 steps cost ~0.5 s)
        full, folds = self._kinds(key, uses)
        if full or kind != FOLD or isinstance(data, tuple) or data in folds:
            for _r, k, d, s, w, st in uses:
                why = _conflict(k, d, kind, data)
                if why:
                    self.reuses.append(RuntimeReuse(site, s, what, w, why, key, stack, st))
                    break
        uses.append(use)
        if kind == FOLD and not isinstance(data, tuple):
            folds.add(data)
        elif kind != FOLD:
            self._folded[key] = (uses, True, folds)

    def _kinds(self, key: tuple, uses: list) -> tuple[bool, set]:
        """Whether `uses` (a key's) hold a consumption other than a fold-in, and the values
        its fold-ins folded in (those told: not a ("?",) unknown one), remembered while
        `uses` is the key's list."""
        known = self._folded.get(key)
        if known is None or known[0] is not uses:
            folds = {u[2] for u in uses if u[1] == FOLD and not isinstance(u[2], tuple)}
            known = (uses, any(u[1] != FOLD for u in uses), folds)
            self._folded[key] = known
        return known[1], known[2]

    def consume_at(
        self, slot: tuple | None, obj: Any, kind: str, data: Any, what: str, frame: Any
    ) -> tuple:
        """`consume` at `frame`'s stack (`where`) or, for a counted run's slot
        (Recorder._key_slot), at the stack its first consumption there had: a loop's
        summarised statement consumes at the same places in each run, and its first runs,
        recorded, told where its keys come from (Site.parents: not noted again). Only the
        key's own uses are looked at; a key alive with an earlier use is a full `consume`."""
        return self.consume_placed(slot, self.place(slot, frame), obj, kind, data, what)

    def place(self, slot: tuple | None, frame: Any) -> tuple | None:
        """consume_at's look at the stack, for a consumption recorded later (in order,
        before any other: `consume_placed`): `where` at `frame`, or None for a slot whose
        first consumption was placed already."""
        return None if slot is not None and slot in self._slots else self.where(frame)

    def consume_placed(
        self, slot: tuple | None, placed: tuple | None, obj: Any, kind: str, data: Any, what: str
    ) -> tuple:
        """consume_at, at the place `place` found."""
        memo = self._slots.get(slot) if slot is not None else None
        if memo is None:
            site, stack = placed if placed is not None else (None, ())
            skey = self.consume(obj, kind, data, site, what, stack)
            if slot is not None:
                if len(self._slots) > 4096:
                    self._slots.clear()
                self._slots[slot] = (site, stack, skey)
            return skey
        site, stack, skey = memo
        root, path = self._root(obj)
        key = (id(root), path)
        uses = self._uses.get(key)
        if uses and uses[0][0]() is root:  # a key alive with earlier uses (`_use` keeps
            # one object's only): checked against them, as `consume` would, without what the
            # slot's first consumption noted (its site, its names); a sampler's
            # `fold_in(key, i)` at each step is not scanned (_use)
            made = self.made_at(obj, root)
            if made is not None:
                self.sites[skey].parents.add(made)
            self._use(key, root, (uses[0][0], kind, data, site, what, stack))
            return skey
        try:
            self._uses[key] = [(weakref.ref(root), kind, data, site, what, stack)]
        except TypeError:
            pass
        return skey

    def consume_args(
        self, args_flat: list, consumed: list, site: tuple | None, name: str, stack: tuple = ()
    ) -> None:
        for i, kind, data, _what in consumed:
            if i < len(args_flat):
                self.consume(args_flat[i], kind, data, site, name, stack)

    def on_eager(
        self, name: str, args: tuple, params: dict, out: Any, frame: Any, slot: tuple | None = None
    ) -> None:
        """An eager op's part in the ledger: a wrap or a part derives a key, a split, bits or
        fold_in consumes one (slot: its place in a counted run, `consume_at`)."""
        if name == SCALAR:
            self._note_scalar(args, out)
        elif name in ("random_wrap", "random_unwrap") and args:
            self.derive(out, args[0])
        elif name in _PART and args:
            outs = out if isinstance(out, (list, tuple)) else [out]
            for i, o in enumerate(outs):
                step = _part_step(name, args, params, i)
                if step is not None:
                    self.derive(o, args[0], step)
        elif name in ("random_bits", "random_split") and args:
            skey = self.consume_at(slot, args[0], FULL, None, name, frame)
            if name == "random_split":
                self._note_made(out, skey)
        elif name == "random_fold_in" and len(args) > 1:
            data, made = args[1], self._scalar
            if made is not None and made[0]() is data:
                data = made[1]
            else:
                try:
                    data = int(data)
                except (TypeError, ValueError):
                    data = None
            fold = data if data is not None else ("?",)
            self._note_made(out, self.consume_at(slot, args[0], FOLD, fold, name, frame))

    def _note_scalar(self, args: tuple, out: Any) -> None:
        """The device scalar an eager convert made of a host integer, and its value: a
        fold-in's data read from the device would wait for every computation queued before
        it (~30 us a step of a sampler's loop, its dispatch no longer ahead of the device)."""
        x = args[0] if len(args) == 1 else None
        if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iub":
            try:
                self._scalar = (weakref.ref(out), int(x.astype(out.dtype)))
            except (TypeError, ValueError, AttributeError):
                self._scalar = None

    def key_object(self, key: tuple) -> Any:
        """The key a reuse names (`RuntimeReuse.key`), while it lives and is not a part of
        another key; else None."""
        if key[1]:
            return None
        for ref, *_rest in self._uses.get(key, ()):
            obj = ref()
            if obj is not None:
                return obj
        return None

    def family(self, origin: tuple) -> set[tuple]:
        """The sites that consumed keys made, at any remove, by the consumptions at `origin`
        (a site key), with `origin` itself."""
        out = {origin}
        grew = True
        while grew:
            grew = False
            for k, s in self.sites.items():
                if k not in out and s.parents & out:
                    out.add(k)
                    grew = True
        return out


# --- where a reuse belongs: the line to change ------------------------------------------------


class ReusePlace(NamedTuple):
    """Where the user must change something for one reuse, from the two consumptions'
    user frames (outermost first)."""

    where: tuple[str, int]  # the line to change
    first: tuple[str, int] | None  # the first consumption's line there (None in a loop)
    loop: bool  # the same code consumed the key again: a Python loop ran it once more
    sampler: tuple[str, int, str] | None  # (file, line, function) of the consuming call, when
    # it is not `where` (inside the helper or library the user's line called)
    frame: Any = None  # in a loop: the frame (_compat.UserFrame) whose loop ran the call again
    # the installed package that consumed the key twice within one call of the user's line
    # (every user frame the same, not in a loop; the stacks part inside the library's code):
    # numpyro's MCMC.run tracing the model with a key, then drawing initial values from it
    library: str | None = None


def _same_frame(a: Any, b: Any) -> bool:
    return a.code_id == b.code_id and a.lasti == b.lasti


def _in_loop(f: Any) -> bool:
    return any(a <= f.lasti <= b for a, b in _compat.loop_ranges(f.code_id))


def reuse_place(
    first: Sequence[Any], second: Sequence[Any], top: str | None = None
) -> ReusePlace | None:
    """The line to change for a key consumed at `first` and again at `second` (user frames,
    `_compat.UserFrame`, outermost first; None without frames).

    Two calls of one helper (`a = noise(key); b = noise(key)`) differ first in the caller:
    the line to change is the second call there, not the sampler inside the helper. When
    every frame is the same, one piece of code ran twice: the innermost frame inside a loop
    (`for p in layers: x = dropout(x, key)`) is where a fresh key must be split. A library's
    frames are passed by, outwards, to the user's line that called it.
    """
    if not second:
        return None
    k = 0
    while k < len(first) and k < len(second) and _same_frame(first[k], second[k]):
        k += 1
    loop = False
    if k == len(first) == len(second):
        at = next((i for i in range(len(second) - 1, -1, -1) if _in_loop(second[i])), None)
        loop = at is not None
        idx = at if at is not None else len(second) - 1
    else:
        idx = min(k, len(second) - 1)
    j = idx
    while j > 0 and not is_user_file(second[j].file, top):
        j -= 1
    if not is_user_file(second[j].file, top):
        j = idx
    w = second[j]
    one = None
    if not loop and j >= k and first:
        f = first[min(j, len(first) - 1)]
        one = (f.file, f.line)
    inner = second[-1]
    sampler = (
        (inner.file, inner.line, inner.fn.rsplit(".", 1)[-1])
        if (inner.file, inner.line) != (w.file, w.line)
        else None
    )
    library = None
    if (
        not loop
        and k < min(len(first), len(second))
        and is_library(first[k].file)
        and is_library(second[k].file)
        and (
            (j < k and is_user_file(w.file, top) and not _in_loop(w))  # one call of the user's
            or not any(is_user_file(f.file, top) for f in second)  # a library's own jaxpr
        )
    ):
        library = library_label(second[k].file)
    return ReusePlace((w.file, w.line), one, loop, sampler, second[idx] if loop else None, library)

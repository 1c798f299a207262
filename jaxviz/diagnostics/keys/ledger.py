"""key-reuse, runtime: the KeyLedger, keys consumed by the calls a cell makes.

Keys are followed by object identity (weak references), through eager `random_wrap` /
`random_unwrap` back to the user's key; every stack that consumed keys (`sites`) is kept
with the eager splits and fold_ins that made them, for keys/fixed.py (is a key a loop
consumes again a fixed key?). What a jitted call consumes of its inputs is KeyFlow's
`consumed_inputs` (keys/flow.py), which the capture's observer hands to `consume_args`.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxviz import _compat
from jaxviz.capture.places import user_site
from jaxviz.diagnostics.keys.uses import FOLD, FULL, conflict


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
PARTS = {"slice", "squeeze", "unstack", "dynamic_slice", "index_in_dim", "reshape", "expand_dims"}
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
                why = conflict(k, d, kind, data)
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
        elif name in PARTS and args:
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

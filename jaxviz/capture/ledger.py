"""Signatures and counts: what the capture learns of each jitted function it sees.

One `JitEntry` per function and signature (JAX's cached jaxpr object tells them apart),
made on JAX's Python path (`entry_of`) or from a signature an earlier recording saw
(`known_call`: `Known`, remembered in `KNOWN` by `remember` until release_monitoring()).
Between, the handlers count each call at its place (`counts`: by jit, place and first
argument, which is all a CALL event or the call counter sees of a call), and the Python path
tells whose signature a place's calls were (`learn`). When the recording ends, `settle`
turns the counts into each entry's call sites, exact or, where the watch policy stopped
watching (policy.py), lower bounds (`JitEntry.uncounted`: "16+ calls").

The handlers (calls.py) read and write `counts`, `sig_first` and `unheard` at each event under
their own names (the recorder holds these tables: one attribute lookup); the rest of the
ledger is written when a place or a signature is new.
"""

from __future__ import annotations

import collections
import dataclasses
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz._compat import Loc
from jaxviz.capture import places
from jaxviz.capture.events import JIT_TYPE, line_of
from jaxviz.capture.staged import flat_arg_names, specs
from jaxviz.config import options

dispatch_key = _compat.dispatch_key


@dataclasses.dataclass
class JitEntry:
    """One distinct (function, signature): JAX's cached jaxpr object identifies it."""

    name: str
    jaxpr: Any
    fun: Callable
    jitted: Any  # the PjitFunction when known, for compile/run
    args_spec: tuple
    kwargs_spec: dict
    arg_names: list[str]
    donated: tuple[bool, ...]
    order: int
    sites: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    # (filename, line) in a library that made the calls on the user's behalf (the user's
    # lines, the calls into the library, are in `sites`)
    library_sites: dict = dataclasses.field(default_factory=dict)
    first_loc: Loc | None = None
    root_code: Any = None  # the function's code object: frames above it are the caller's
    static: str = ""  # static arguments, "act='gelu'"
    uncounted: bool = False  # Python < 3.12: later calls ran on JAX's fast path, unseen
    own: bool = False  # the user's own function (not a library's, nor JAX's jnp functions)
    # donating, called with JAX's warning about unusable donations ignored by its message
    # (equinox's filter_jit(donate="all") sets that filter around its call)
    donation_quiet: bool = False
    call_mesh: Any = None  # the meshes set at its first call (_compat.MeshContext)


@dataclasses.dataclass
class Known:
    """Python >= 3.12, and 3.11 with the call counter: one signature of a jitted function a
    recording saw with a few, each told by its first argument's type, shape and weak type
    (`a0`), whose C++ dispatch cache
    held those signatures' entries alone when it ended (made while it watched). A later
    recording may leave its calls on JAX's fast path: while the cache still holds as many
    entries, a call it serves is of the signature its first argument names (one of another
    misses, and takes the Python path, where it is seen). Held weakly: neither the function
    nor its jaxpr is kept alive; JAX dropping a jaxpr (jax.clear_caches) ends them."""

    jitted: weakref.ref
    jaxpr: weakref.ref  # JAX's cached jaxpr of the signature
    a0: tuple  # its first argument's (type, shape, weak type), as _on_call_event keys calls
    name: str
    args_spec: tuple
    kwargs_spec: dict
    arg_names: list[str]
    donated: tuple[bool, ...]
    root_code: Any
    static: str
    own: bool
    donation_quiet: bool = False


# dispatch key -> its signatures' Known, by a0: remembered across recordings
# (Ledger.remember), until release_monitoring()
KNOWN: dict[tuple, dict[tuple, Known]] = {}
_KNOWN_MAX = 1024


# JAX's warning when a donated buffer cannot be reused (jax 0.10.2 and 0.12)
DONATION_WARNING = "Some donated buffers were not usable"


def donation_warning_ignored() -> bool:
    """Whether a filter in force ignores JAX's warning about unusable donations by its
    message: someone chose to silence it for this call (equinox's filter_jit(donate="all")
    wraps its call in `warnings.filterwarnings("ignore", message="Some donated buffers
    were not usable*")`). A blanket `simplefilter("ignore")` is no such choice."""
    for action, message, *_rest in warnings.filters:
        if action == "ignore" and message is not None and message.match(DONATION_WARNING):
            return True
    return False


def known_dead(knowns: dict[tuple, Known], jitted: Any = None) -> bool:
    """Whether a function's remembered signatures are no longer `jitted`'s (without it:
    their function is gone)."""
    first = next(iter(knowns.values()), None)
    if first is None:
        return True
    live = first.jitted()
    return live is None if jitted is None else live is not jitted


def find_jitted(fun: Any, frame: Any) -> Any:
    """The jitted object behind `fun`, from the names the calling user code sees (its locals,
    its globals, `self`'s attributes), when no CALL event named it (Python 3.11). Running it
    again then hits JAX's caches instead of tracing the user's Python a second time."""
    frame = _compat.user_frame(frame)
    if frame is None:
        return None
    scopes = [frame.f_locals, frame.f_globals]
    owner = frame.f_locals.get("self")
    if owner is not None:
        scopes.append(getattr(owner, "__dict__", {}))
        scopes.append(vars(type(owner)))
    for scope in scopes:
        try:
            values = list(scope.values())
        except Exception:
            continue
        for v in values:
            if type(v) is JIT_TYPE and _compat.jit_wrapped_fun(v) is fun:
                return v
    return None


def static_args(call: _compat.JitCall, jitted: Any) -> str:
    """A signature's static arguments as text (its jaxpr, JAX's cache entry, is theirs:
    read once per entry)."""
    if jitted is not None:
        return _compat.static_args(jitted, call.args, call.kwargs)
    return _compat.static_args_of_call(call.fun, call.jaxpr, call.args, call.kwargs)


class Ledger:
    """A recording's signatures and counts (the module's docstring tells the story)."""

    def __init__(self, top_filename: str | None, order: Any) -> None:
        self.top_filename = top_filename
        self.order = order  # the recording's first-call order, shared with eager runs
        self.entries: dict[int, JitEntry] = {}  # id(JAX's jaxpr) -> its entry
        self.counts: dict[tuple, int] = {}  # (id(pjit), code, offset, arg0 key) -> calls
        self.library: dict[tuple, tuple] = {}  # count key -> the library's (file, line)
        self.sig_of: dict[tuple, int] = {}  # (id(pjit), arg0 key) -> entry key
        self.sig_clash: set[tuple] = set()  # (id(pjit), arg0 key) of several signatures
        self.sig_then: dict[tuple, int] = {}  # count key -> sig_of's at its first call
        # (count key, entry key) -> the calls there that took the Python path. One count
        # key (a place, a jit, its first argument's type) can serve several signatures
        # (jax.random.normal(key, shape) for two shapes on one line of an init): the first
        # one seen there keeps the fast path, the jit's others take the Python path
        # (`ambiguous`: ids of such jits -> the calls refused the fast path so far), so its
        # fast calls there are the first one's. After JIT_CALLS_WATCHED refused calls (a
        # loop whose shapes keep changing: buckets) its calls keep the fast path and its
        # counts are lower bounds ("+"): the place's fast calls are no one signature's
        self.sig_calls: dict[tuple, int] = {}
        self.sig_first: dict[tuple, int] = {}  # count key -> the first signature's key
        # keys of the entries known_call made (dropped when no call had their signature)
        self.guesses: set[int] = set()
        # (id(jitted), a0) -> jaxpr: a known signature no call of the cell had yet: the
        # observers hear of its first (on_known), at its CALL event
        self.unheard: dict[tuple, Any] = {}
        self.ambiguous: dict[int, int] = {}
        self.mixed: set[int] = set()  # ids of jits whose refusals ran out
        self.by_pjit: dict[int, list[int]] = collections.defaultdict(list)
        self.keep: dict[int, Any] = {}  # PjitFunctions and code objects seen (ids stay valid)
        self.hot: set[tuple] = set()  # count keys of call sites no longer watched
        self.hot_funs: set[int] = set()  # ids of jits some of whose calls went unwatched

    def entry_of(
        self, call: _compat.JitCall, key: int, pending: tuple | None, frame: Any
    ) -> tuple[JitEntry, Any, bool]:
        """On JAX's Python path: the entry of `call`'s function and signature (`key`: its
        jaxpr's id), made at its first call; the jitted object called (the pending CALL
        event's, else found by name from the calling code; None: not found); and whether
        the entry is new (a signature not called before in this recording)."""
        entry = self.entries.get(key)
        jitted = pending[0] if pending and _compat.jit_wrapped_fun(pending[0]) is call.fun else None
        if jitted is None and (entry is None or entry.jitted is None):
            jitted = find_jitted(call.fun, frame)
        if entry is not None:
            if entry.jitted is None and jitted is not None:
                entry.jitted = jitted
                entry.static = static_args(call, jitted)
            return entry, jitted, False
        names = list(call.arg_names)
        if not names or all(n.startswith("arg") for n in names):
            names = flat_arg_names(call.args, call.kwargs, _compat.param_names(call.fun))
        # a library's jit called on the user's behalf: the user's names for its arguments
        via = places.user_arg_names(frame, call.args_flat, self.top_filename)
        if via is not None and len(names) == len(call.args_flat):
            names = [via[1].get(i, n) for i, n in enumerate(names)]
        entry = JitEntry(
            name=call.name or _compat.fun_name(call.fun),
            jaxpr=call.jaxpr,
            fun=call.fun,
            jitted=jitted,
            args_spec=specs(call.args),
            kwargs_spec=specs(call.kwargs),
            arg_names=names,
            donated=call.donated,
            order=next(self.order),
            root_code=_compat.user_code(call.fun),
            donation_quiet=any(call.donated) and donation_warning_ignored(),
            call_mesh=_compat.context_mesh(),
        )
        code = entry.root_code
        entry.own = code is not None and places.is_user_file(code.co_filename, self.top_filename)
        self.entries[key] = entry
        entry.static = static_args(call, jitted)
        return entry, jitted, True

    def learn(self, pending: tuple, key: int, jitted: Any) -> None:
        """A counted call (its CALL event's or the counter's: `pending`) took the Python
        path: its place's and first argument's calls have signature `key` (several at one
        place or one first argument: `ambiguous`, `sig_clash`)."""
        both = (pending[1], key)  # this site and arg0: exact
        self.sig_calls[both] = self.sig_calls.get(both, 0) + 1
        if self.sig_first.setdefault(pending[1], key) != key:
            self.ambiguous.setdefault(id(jitted), 0)
        pa = (id(jitted), pending[3])
        if self.sig_of.setdefault(pa, key) != key:  # learn its signature
            self.sig_clash.add(pa)  # (several: the CALL event cannot tell them)
            self.sig_of[pa] = key
        if key not in self.by_pjit[id(jitted)]:
            self.by_pjit[id(jitted)].append(key)

    def new_place(self, jitted: Any, key: tuple, a0: tuple, known: int | None) -> None:
        """A place's first call of `jitted` (count key `key`). Unless an earlier recording
        knew the signature (`known`), its calls are the signature its first argument names
        (the only one it may name: any other took the Python path here first), or, when
        several share that first argument (a key, then states of two shapes), the one its
        first call here shows, through Python: the jit's entries are emptied."""
        self.keep[id(jitted)] = jitted  # ids in the keys stay valid
        if known is None:
            pa = (id(jitted), a0)
            if pa in self.sig_clash:
                _compat.clear_fun_cache(jitted)
            elif pa in self.sig_of:
                self.sig_then[key] = self.sig_of[pa]

    def known_call(
        self, jitted: Any, dkey: tuple, a0: tuple, frame: Any, obs_known: list
    ) -> int | None:
        """At the first call of `jitted` in the recording (its CALL event): when an earlier
        recording saw the signatures its C++ entries serve (Known), and this call's first
        argument names one of them, that signature's entry (key), made here from what was
        remembered, as are the others' (kept only if a call has theirs), and the call keeps
        the fast path (its Python path, ~0.8 ms of a jitted function's first call in a
        cell, is skipped; its outputs go unchecked: jaxviz.diagnostics.nan_later.later_nans
        looks at what the cell kept). None: its entries must be emptied, its call seen on
        the Python path."""
        knowns = KNOWN.get(dkey)
        if knowns is None or options.check_every_call:
            return None
        known = knowns.get(a0)
        if (
            known is None
            or known.jitted() is not jitted
            or _compat.cache_entries(jitted) != len(knowns)
        ):
            return None
        jaxprs = {k.a0: k.jaxpr() for k in knowns.values()}
        if any(j is None for j in jaxprs.values()):  # JAX dropped one (jax.clear_caches):
            del KNOWN[dkey]  # its entries may be others'
            return None
        pid = id(jitted)
        for k in knowns.values():
            jaxpr = jaxprs[k.a0]
            key = id(_compat.open_jaxpr(jaxpr))
            if key not in self.entries:
                self.guesses.add(key)
                self.entries[key] = JitEntry(
                    name=k.name,
                    jaxpr=jaxpr,
                    fun=_compat.jit_wrapped_fun(jitted),
                    jitted=jitted,
                    args_spec=k.args_spec,
                    kwargs_spec=k.kwargs_spec,
                    arg_names=list(k.arg_names),
                    donated=k.donated,
                    order=next(self.order),
                    root_code=k.root_code,
                    static=k.static,
                    own=k.own,
                    donation_quiet=k.donation_quiet,
                    call_mesh=_compat.context_mesh(),
                )
                if k is known:
                    for obs in obs_known:
                        obs.on_known(jaxpr, frame)
                else:
                    self.unheard[(pid, k.a0)] = jaxpr
            self.sig_of[(pid, k.a0)] = key
            if key not in self.by_pjit[pid]:
                self.by_pjit[pid].append(key)
        return id(_compat.open_jaxpr(jaxprs[a0]))

    def remember(self, refused: dict, obs_known: list) -> None:
        """When a recording that counted its calls ends (CALL events on Python >= 3.12, the
        call counter on 3.11): each of the user's own jitted functions it saw with one
        signature (at its places' CALL events and on the Python path), whose C++ cache now
        holds that signature's entry alone, is remembered as Known; unless an observer must
        see its first call in each cell (`first_call_needed`: a key it consumes). Libraries'
        jits (jnp.log, called eagerly) are not: the outputs of their first calls in each
        cell are checked for NaN and Inf; but for those whose results are integers or
        booleans (jnp.eye's `add` and `equal` under jax.jacfwd), which can hold neither."""
        if options.check_every_call:
            return
        a0s: dict[int, dict[tuple, int]] = collections.defaultdict(dict)  # pid -> a0 -> key
        for (pid, a0), key in self.sig_of.items():
            a0s[pid][a0] = key
        for pid, keys in self.by_pjit.items():
            by_a0 = a0s.get(pid, {})
            # each signature told by its first argument: as many as the keys, one each
            if not keys or len(by_a0) != len(keys) or set(by_a0.values()) != set(keys):
                continue
            if any(k not in self.entries for k in keys):
                continue
            entries = [self.entries[k] for k in keys]
            jitted = entries[0].jitted
            if (
                jitted is None
                or any(e.jitted is not jitted for e in entries)
                or id(jitted) != pid
                or pid in self.mixed
                or pid in refused
                or _compat.cache_entries(jitted) != len(keys)
                # (a library's jit, jnp.log: eager code's NaNs are its)
                or not all(e.own or _compat.exact_results(e.jaxpr) for e in entries)
                or any(o.first_call_needed(e.jaxpr) for o in obs_known for e in entries)
            ):
                continue
            knowns = _knowns(jitted, {a0: self.entries[k] for a0, k in by_a0.items()})
            if knowns is None:  # not weakly referable
                continue
            if len(KNOWN) >= _KNOWN_MAX:  # the dead first, then all
                for k in [k for k, v in KNOWN.items() if known_dead(v)]:
                    del KNOWN[k]
                if len(KNOWN) >= _KNOWN_MAX:
                    KNOWN.clear()
            KNOWN[dispatch_key(jitted)] = knowns

    def settle(self) -> None:
        """Attributes the CALL-event counts to the signatures the Python path revealed: a
        place's calls that took it to their own signatures, its fast ones to the first
        signature seen there (the only one of the place's that keeps the fast path)."""
        by_place: dict[tuple, list[tuple[int, int]]] = collections.defaultdict(list)
        for (ckey, key), m in self.sig_calls.items():
            by_place[ckey].append((key, m))
        for ckey, n in self.counts.items():
            pid, *where, a0 = ckey
            key = self.sig_first.get(ckey)  # the one that keeps the fast path there
            if key is None:
                key = self.sig_then.get(ckey)
            if key is None:
                key = self.sig_of.get((pid, a0))
            if key is None:
                keys = self.by_pjit.get(pid, [])
                if not keys:
                    continue
                key = keys[-1]
            if isinstance(where[0], str):  # resolved at the call: (file, line)
                file, line = where
                fn = ""
            else:
                code, offset = self.keep[where[0]], where[1]
                file, line, fn = code.co_filename, line_of(code, offset), code.co_name
            shares = [(k, m) for k, m in by_place.get(ckey, ()) if k != key]
            rest = n - sum(m for _k, m in shares)
            mixed = pid in self.mixed and bool(shares)
            if mixed:  # its fast calls there are no one signature's: each gets its own
                shares = by_place[ckey]  # Python-path calls, and "+"
            elif rest < 1 and key not in self.guesses:  # (more Python-path calls than
                shares, rest = [], n  # events: the counts are not exact)
            for k, m in shares if mixed else [*shares, (key, rest)]:
                if m < 1:  # a known signature the place's calls did not have (known_call)
                    continue
                entry = self.entries[k]
                entry.sites[(file, line)] += m
                if mixed or (k == key and pid in self.hot_funs):
                    entry.uncounted = True
                if ckey in self.library:
                    entry.library_sites[self.library[ckey]] = None
                if entry.first_loc is None:
                    entry.first_loc = Loc(file, line, 0, fn if fn != "<module>" else "")
        if self.hot:
            self._hot_lines()
        for k in self.guesses:  # taken for the known signature, called with others only
            if k in self.entries and not self.entries[k].sites:
                del self.entries[k]
        self._forget()

    def _forget(self) -> None:
        """The recording's tables emptied (its entries stay, for Recorder.take)."""
        self.guesses.clear()
        self.unheard.clear()
        self.counts.clear()
        self.sig_calls.clear()
        self.sig_first.clear()
        self.sig_then.clear()
        self.ambiguous.clear()
        self.mixed.clear()
        self.hot.clear()
        self.hot_funs.clear()
        self.library.clear()
        self.keep.clear()

    def _hot_lines(self) -> None:
        """A place turned off counts no call after it, whatever it calls:
        every function counted on its line is a lower bound (one first called there
        after the event went off came through the Python path once, then unseen)."""
        lines: set[tuple] = set()
        for k in self.hot:
            place = k[1:-1]
            if isinstance(place[0], str):
                lines.add(place)
            elif place[0] in self.keep:
                hot_code = self.keep[place[0]]
                lines.add((hot_code.co_filename, line_of(hot_code, place[1])))
        for entry in self.entries.values():
            if not entry.uncounted and not lines.isdisjoint(entry.sites):
                entry.uncounted = True


def _knowns(jitted: Any, by_a0: dict[tuple, JitEntry]) -> dict[tuple, Known] | None:
    """A function's signatures to remember, by first argument (None: it or a jaxpr is not
    weakly referable)."""
    try:
        return {
            a0: Known(
                weakref.ref(jitted),
                weakref.ref(entry.jaxpr),
                a0,
                entry.name,
                entry.args_spec,
                entry.kwargs_spec,
                list(entry.arg_names),
                entry.donated,
                entry.root_code,
                entry.static,
                entry.own,
                entry.donation_quiet,
            )
            for a0, entry in by_a0.items()
        }
    except TypeError:
        return None

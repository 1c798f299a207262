"""The handlers of the calls JAX's C++ fast path may serve: a CALL event before each call the
watched code makes (Python >= 3.12: `_on_call_event`) and the call counter's (Python 3.11:
`_on_counted_call`). Each counts a jitted call at its place and first argument (the
ledger's `counts`), marks it for the live memory chart, and tells the observers; the first
call of a function in the cell, or of a place whose signature is not known, takes JAX's
Python path (its entries emptied), where pypath.py sees its jaxpr. Places that call no
jit go quiet (their events off) as the watch policy says (policy.py: which places, after
how many calls); the mechanism that raises the events is events.py's.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from jaxviz import _compat
from jaxviz.capture import places
from jaxviz.capture.events import (
    DISABLE,
    FILE_WHOSE_MAX,
    FUNCTION,
    JAX,
    JIT_TYPE,
    METHOD,
    MONITOR,
    PARTIAL,
    SAFE_OFF,
    TOP,
    USER,
    calls_users_code,
    first_arg,
    line_of,
    whose_code,
)
from jaxviz.capture.ledger import KNOWN
from jaxviz.capture.policy import CALLS_WATCHED, MAX_CALL_MARKS, NEVER_JIT, may_stop_watching
from jaxviz.capture.state import CaptureState, Place

_ARRAY: Any = _compat.ARRAY_TYPE
_is_top_level = _compat.is_top_level
_clear_fun_cache = _compat.clear_fun_cache
_dispatch_key = _compat.dispatch_key
_get_ident = threading.get_ident
_perf_counter = time.perf_counter


class CallHandlers(CaptureState):
    """The Recorder's handlers of CALL events and counted calls (a base of Recorder)."""

    def _on_counted_call(self, jitted: Any, args: tuple) -> None:
        """Python < 3.12, the call counter: a call of a jitted function, before JAX
        dispatches it, on its fast path or not. What a CALL event is on Python >= 3.12
        (_on_call_event), for the user's own places only: the call is counted at its place
        and first argument, and marked on the live chart's time axis; a call that then
        takes JAX's Python path is recorded against this count (_record_jit's counted
        path), and keeps the fast path after it unless a diagnostic must see every call
        (_keep_fast). A library's or JAX's place (an operator's jnp function) is left to
        the Python path, as before.

        One piece, not split into helpers: the hot path of a loop of jitted calls on Python
        3.11 (every call: ~1.2 us more than a plain call with the chart's marks, the
        counter's own frame included, a repeated call at its place; a helper's call would add
        ~18 ns); what runs once per place is the ledger's (`Ledger.new_place`) and the
        place's memo's (`Place`)."""
        if self._busy or _get_ident() != self._thread or not _is_top_level():
            return
        t0 = _perf_counter()
        try:
            known = None
            seen = self._canon.get(id(jitted))
            if seen is not None and seen[0] is jitted:
                canon = seen[1]
                if canon is None:  # JAX's per-primitive jit: its eager op is seen at bind
                    return
            elif _compat.is_per_primitive(jitted):
                self._canon[id(jitted)] = (jitted, None)
                return
            # (after the per-primitive jits, which run every eager op: they need neither)
            frame = sys._getframe(2)  # (the counter's __call__ is 1 up)
            code = frame.f_code
            offset = frame.f_lasti
            place = self._again.get((id(code), offset))
            if type(place) is Place:  # the same call again at the user's place? (as a
                # CALL event's repeat, _on_call_event: ~0.5 us less a call)
                arg0: Any = args[0] if args else None
                if (
                    place.jitted is jitted
                    and (
                        (
                            type(arg0) is _ARRAY
                            and (
                                (aval := arg0.aval) is place.aval
                                or (aval.shape == place.shape and aval.weak_type == place.weak)
                            )
                        )
                        if place.array
                        else first_arg(arg0) == place.a0
                    )
                    and not (self._unheard and (id(jitted), place.a0) in self._unheard)
                ):
                    place.n += 1
                    calls = self.calls
                    if calls is not None:
                        if len(calls) < MAX_CALL_MARKS:
                            calls.append((t0, jitted, code, offset))
                        else:
                            self.calls_dropped += 1
                    self._pending = place.pending
                    self._run_break = True
                    return
                self._unplace((id(code), offset))  # the full count decides
            a0 = first_arg(args[0] if args else None)
            if seen is None or seen[0] is not jitted:
                # one object per function (`jax.jit(step)(x)` in a loop: a new one each)
                dkey = _dispatch_key(jitted)
                canon = self._cleared.get(dkey)
                if canon is None:  # its first call in the cell
                    canon, known = jitted, self._first_call(jitted, dkey, a0, frame)
                self._canon[id(jitted)] = (jitted, canon)
            whose = self._user_code.get(id(code))
            if whose is None:
                whose = self._user_code[id(code)] = whose_code(code, self.top_filename)
                self._ledger.keep[id(code)] = code  # its id stays valid
            if whose < USER:  # a library's or JAX's place: its Python path tells
                self._pending = None
                return
            key = (id(canon), id(code), offset, a0)
            counts = self._counts
            n = counts.get(key, 0)
            if not n:
                self._ledger.keep[id(code)] = code
                self._ledger.new_place(canon, key, a0, known)
            if known is not None or self._unheard:  # (a known signature's first call)
                self._known_place(key, known, canon, a0, frame)
            counts[key] = n + 1
            calls = self.calls
            if calls is not None:
                if len(calls) < MAX_CALL_MARKS:
                    calls.append((_perf_counter(), canon, code, offset))
                else:
                    self.calls_dropped += 1
            self._pending = (canon, key, None, a0)
            self._run_break = True
            if canon is jitted:  # its next call here: the repeat's (Place)
                arg0 = args[0] if args else None
                self._again[(id(code), offset)] = Place(
                    canon, arg0, a0, key, n + 1, code, offset, False, ()
                )
        except Exception as e:  # jaxviz's own failure must never become the user's
            self.internal_errors.append(e)
        finally:
            self.hook_seconds += _perf_counter() - t0

    def _watched(self, jitted: Any) -> bool:
        """Whether an observer records something at each CALL event of `jitted` (the
        keys jax.random's jits consume)."""
        for watches in self._watchers:  # noqa: SIM110 (a generator costs ~1 us: every such call)
            if watches(jitted):
                return True
        return False

    def _later(self, code: Any) -> None:
        """A place in `code` turned off now must fire again in the next recording."""
        if self._kept_on:
            MONITOR.keep(code)
        else:
            self._stale = True

    def _on_call_event(
        self, code: Any, offset: int, callable_: Any, arg0: Any, local: bool = False
    ) -> Any:
        # The hot path: runs before every call the watched code makes (Python >= 3.12).
        # One piece, not split into helpers: a busy cell raises a million events, each call
        # of a helper costs ~15 ns more, and a watched jitted call repeated at its place costs
        # ~1.2 us more than a plain one, the event's own raising (~0.2 us) included
        # (measured, Python 3.12: bench_dispatch.py cells; bench_cells.py and bench_soak.py
        # time whole cells). Only what runs once per place or function, or
        # a bounded number of times, is in helpers (_first_call, _known_place,
        # _no_jit_place, _jax_place_done, Ledger.new_place). What it decides, and for how
        # long, is the watch policy's (policy.py): it applies those limits. An exception
        # raised here would surface in the user's code, so none may escape.
        if not local and self._local_open and id(code) in MONITOR.live:
            return DISABLE  # the local events see its places
        if type(callable_) is JIT_TYPE:
            place = self._hot_place  # (the last place repeated: a loop's one jitted call)
            if place is None or place.code is not code or place.offset != offset:
                place = self._again.get((id(code), offset))
            if type(place) is Place:
                # The same call again at a place of the user's (a loop's jitted step: the
                # usual event), told by what the place's first call decided (Place): the
                # same jit, no observer watching it, at top level in the cell's thread,
                # the same first argument's signature, a count below the watch policy's
                # (or the live chart marking every call), no known signature unheard of.
                # Counted, marked and told as the full event would, ~1.3 us less a call.
                t0 = _perf_counter()
                try:
                    if self._busy or _get_ident() != self._thread:
                        # inside jaxviz's or JAX's work, or another thread's call: the full
                        # event's answer, the place's memo left as it is (the cell's thread's)
                        if place.top:
                            self._call_at = offset
                        return None
                    n = place.n + 1
                    if (
                        place.jitted is callable_
                        and (
                            (
                                type(arg0) is _ARRAY
                                and (
                                    (aval := arg0.aval) is place.aval
                                    or (aval.shape == place.shape and aval.weak_type == place.weak)
                                )
                            )
                            if place.array
                            else first_arg(arg0) == place.a0
                        )
                        and (n < CALLS_WATCHED or self.calls is not None)
                        and not (self._unheard and (id(callable_), place.a0) in self._unheard)
                        and _is_top_level()
                    ):
                        place.n = n
                        calls = self.calls
                        if calls is not None:
                            if len(calls) < MAX_CALL_MARKS:
                                calls.append((t0, callable_, code, offset))
                            else:
                                self.calls_dropped += 1
                        self._pending = place.pending
                        self._run_break = True
                        if place.obs:
                            frame = sys._getframe(1)
                            if not (self._tally and self._summarised(frame)):
                                for obs in place.obs:
                                    if obs.on_call(callable_, arg0, frame, None):
                                        place.obs = tuple(o for o in place.obs if o is not obs)
                        if place.top:
                            self._call_at = offset
                        self._hot_place = place
                        return None
                    self._unplace((id(code), offset))  # the full event decides
                except Exception as e:  # jaxviz's own failure must never become the user's
                    self.internal_errors.append(e)
                    return None
                finally:
                    if not self._busy:
                        self.hook_seconds += _perf_counter() - t0
        whose = self._user_code.get(id(code))  # by id: hashing a code object is slow
        if whose == TOP and type(callable_) is FUNCTION:
            # the cell's own call of a Python function (most of its calls): only its place
            # matters, which tells one run of a loop's statement from the next
            self._call_at = offset
            return None
        t0 = _perf_counter()  # (its own time is jaxviz's: the cell's cost line counts it)
        try:
            memo = self._again.get((id(code), offset))
            if type(memo) is Place:  # (a jit called through a bound method or partial)
                if not self._busy and _get_ident() == self._thread:  # (else: not counted)
                    self._unplace((id(code), offset))
            elif memo is not None and self._call_again(memo, callable_, arg0):
                if whose == TOP:
                    self._call_at = offset
                return None
            if whose is None:
                whose = self._user_code[id(code)] = whose_code(code, self.top_filename)
                self._ledger.keep[id(code)] = code  # its id stays valid
            user = whose >= USER
            if whose == TOP:
                self._call_at = offset
                if type(callable_) is FUNCTION:  # (its first call here: see above)
                    return None
            kind = type(callable_)
            if kind is not JIT_TYPE:
                func: Any = None
                if kind is PARTIAL and not callable_.args:
                    func = callable_.func  # partial(jitted, **static): jax.random's samplers
                elif kind is METHOD:
                    func = callable_.__func__  # a jitted method, bound
                if type(func) is not JIT_TYPE:
                    if user and kind in NEVER_JIT and type(arg0) is JIT_TYPE:
                        # a jit the user's code hands to C code (`map(f, xs)`, which
                        # calls it where no event fires): its calls take the Python path
                        self._handed(arg0)
                        return None
                    # a library call site that calls no jit; one of the user's that calls
                    # a builtin: its event off, mostly (once per place)
                    if not user or kind in NEVER_JIT:
                        return self._no_jit_place(code, offset, callable_, whose)
                    # one in a function of the user's that called no jit CALLS_WATCHED
                    # times (a helper a loop calls). The cell's own sites stay: their calls
                    # tell one run of a loop's statement from the next (_call_at)
                    if whose == USER:
                        at = (id(code), offset)
                        n = self._plain_sites.get(at, 0) + 1
                        self._plain_sites[at] = n
                        if n >= CALLS_WATCHED and may_stop_watching():
                            self._later(code)
                            return DISABLE
                    return None
                callable_ = func
            if self._busy or _get_ident() != self._thread or not _is_top_level():
                # a jit JAX calls inside the work of a call jaxviz is watching (an eager
                # op's primitive, 1 in 2 events of an eager loop): never the user's call
                if self._busy and whose == JAX:
                    if not _compat.is_impl_code(code):  # (an array operator's place: the
                        self._later(code)  # user's own call next time)
                    return DISABLE
                return None
            # tells signatures apart, cheaply: a loop's carried state is weakly typed at its
            # first call only (`w = jnp.full(n, 0.01)`, then `w = step(w, x)`), which made one
            # place of two signatures whose calls all took the Python path (_refuse_mixed)
            a0 = first_arg(arg0)
            frame = sys._getframe(1)
            known = None
            seen = self._canon.get(id(callable_))
            if seen is not None and seen[0] is callable_:
                canon = seen[1]
            else:
                dkey = _dispatch_key(callable_)
                canon = self._cleared.get(dkey)
                if canon is None:  # its first call in the cell
                    canon, known = callable_, self._first_call(callable_, dkey, a0, frame)
                self._canon[id(callable_)] = (callable_, canon)
            # One object per function, for its entries and its counts: `jax.jit(step)(x)`
            # in a loop makes a new one at each call, which the same entries serve (emptied
            # at each, every call took JAX's Python path: a %timeit of such a loop read
            # 4.5x its plain time, each object counted apart, its call site never "16+")
            callable_ = canon
            watched = bool(self._watchers) and self._watched(callable_)
            if user:
                key: tuple = (id(callable_), id(code), offset, a0)  # id: hashing code is slow
            else:  # a library calling a jit: blame the user's line
                if (
                    whose == JAX
                    and self.calls is None
                    and not watched
                    and self._jax_place_done(code, offset, callable_)
                ):
                    return DISABLE
                site = self._library_site(code, offset, whose, frame)
                key = (
                    (id(callable_), site[0], site[1], a0)
                    if site
                    else (id(callable_), id(code), offset, a0)
                )
                if site is not None and key not in self._counts:
                    self._ledger.library[key] = (code.co_filename, line_of(code, offset))
            counts = self._counts
            n = counts.get(key, 0)
            if not n:  # a new place
                self._ledger.new_place(callable_, key, a0, known)
            if known is not None or self._unheard:  # (a known signature's first call)
                self._known_place(key, known, callable_, a0, frame)
            counts[key] = n + 1
            calls = self.calls
            if (
                n + 1 >= CALLS_WATCHED
                and user
                and calls is None
                and not watched
                and may_stop_watching()
            ):
                self._ledger.hot.add(key)  # later calls here go unseen: "16+ calls"
                self._pending = None
                if whose == USER:  # (the cell's module code is compiled anew each run)
                    self._later(code)
                return DISABLE
            if calls is not None:
                if len(calls) < MAX_CALL_MARKS:
                    where = code if type(key[1]) is int else key[1]  # the code, or (file, line)
                    calls.append((time.perf_counter(), callable_, where, key[2]))
                else:
                    self.calls_dropped += 1
            self._pending = (callable_, key, None, a0)
            self._run_break = True
            # each observer sees the call, fast path or not; in a summarised statement they
            # saw its first runs (as its eager ops', _on_eager)
            if self._obs_call and (watched or not self._summarised(frame)):
                slot = self._key_slot(id(callable_)) if watched else None
                for obs in self._obs_call:  # (a key's consumption is recorded at every call)
                    obs.on_call(callable_, arg0, frame, slot)
            if user and not watched:  # its next event here: the repeat's (Place)
                top, obs = whose == TOP, tuple(self._obs_call)
                self._again[(id(code), offset)] = Place(
                    callable_, arg0, a0, key, n + 1, code, offset, top, obs
                )
                return None
            back = frame.f_back
            if watched and n and calls is None and (user or site is not None) and back:
                # a watched jit called again at this place (a jax.random sampler in an
                # eager loop, for the user's line; a sampler's step): its next event here
                # is `_call_again`'s
                memo = (callable_, id(back.f_code), back.f_lasti, a0, key, frame.f_code)
                self._again[(id(code), offset)] = memo
        except Exception as e:
            self.internal_errors.append(e)
        finally:
            if not self._busy:  # (inside a hook its time counts already)
                self.hook_seconds += _perf_counter() - t0
        return None

    def _first_call(self, jitted: Any, dkey: tuple, a0: tuple, frame: Any) -> int | None:
        """A function's first call in the cell (its first object seen, `_cleared`): through
        Python, where its jaxpr is seen (entries from earlier cells are dropped), unless an
        earlier recording saw the one signature its entries serve: then the known
        signature's entry key (Ledger.known_call), and the call keeps the fast path."""
        self._cleared[dkey] = jitted
        known = self._ledger.known_call(jitted, dkey, a0, frame, self._obs_known)
        if known is None:
            _clear_fun_cache(jitted)
        return known

    def _known_place(
        self, key: tuple, known: int | None, jitted: Any, a0: tuple, frame: Any
    ) -> None:
        """A place's call of a function an earlier recording knew: at its first call in the
        cell (`known`: its entry key), the place's fast calls are that signature's; else,
        when a known signature no call of the cell had yet (`_unheard`) is this call's,
        the observers hear of it (on_known)."""
        if known is not None:
            self._sig_first.setdefault(key, known)
            return
        jaxpr = self._unheard.pop((id(jitted), a0), None)
        if jaxpr is not None:
            for obs in self._obs_known:
                obs.on_known(jaxpr, frame)

    def _no_jit_place(self, code: Any, offset: int, callable_: Any, whose: int) -> Any:
        """A CALL event at a library's or JAX's place calling no jit, or at one of the
        user's calling a builtin (the same name may be a jit next time, a builtin not): its
        event goes off (DISABLE), unless the place may call a jit another time
        (`_passed_in`): then, under %%jaxtrace (events kept on between cells), it is off
        now and fires again in the next traced cell (Monitor.revive); else it stays on for
        its first CALLS_WATCHED calls (a DISABLE would have every place fire again in the
        next cell: ~2,700 events, ~2.5 ms on an eager grad/vmap cell). Once per place,
        but for those."""
        if (
            whose != TOP
            and not self._stale
            and SAFE_OFF.get((id(code), offset)) != (code, id(callable_))
        ):
            if self._passed_in(callable_, whose):
                if self._kept_on:
                    MONITOR.keep(code)
                    return DISABLE
                at = (id(code), offset)
                n = self._passing.get(at, 0) + 1
                self._passing[at] = n
                if n < CALLS_WATCHED:
                    return None
                self._stale = True
            else:  # (a place fires again after its code ran without events, as in a plain
                # cell, or was running when they were set: the same callable each time)
                if len(SAFE_OFF) >= FILE_WHOSE_MAX:
                    SAFE_OFF.clear()
                SAFE_OFF[(id(code), offset)] = (code, id(callable_))
        return DISABLE

    def _jax_place_done(self, code: Any, offset: int, jitted: Any) -> bool:
        """JAX's own place calling a jit (an array operator's jnp function) is watched for
        its first CALLS_WATCHED calls, whichever user lines they serve; True: no longer
        (its event goes off; the function's counts are lower bounds)."""
        at = (id(code), offset)
        hits = self._jax_sites.get(at, 0) + 1
        self._jax_sites[at] = hits
        if hits > CALLS_WATCHED and may_stop_watching():
            self._ledger.hot_funs.add(id(jitted))
            self._pending = None
            self._run_break = True
            self._later(code)
            return True
        return False

    def _call_again(self, memo: tuple, callable_: Any, arg0: Any) -> bool:
        """_on_call_event at a place whose last event was a call of a watched jit
        (`_again`), done again when it is the same call, from the same place of its caller
        (for a library's place: the user's place it serves), with the same signature:
        counted, and its observers see it. False: not the same, or not at top level (the
        full event then decides)."""
        jitted, back_code, back_lasti, a0, key, code = memo
        if callable_ is not jitted:  # (one object per function: `_canon`)
            seen = self._canon.get(id(callable_))
            if seen is None or seen[0] is not callable_ or seen[1] is not jitted:
                return False
        if self._busy or _get_ident() != self._thread or not _is_top_level():
            return False
        frame = sys._getframe(2)  # (the caller of _on_call_event)
        back = frame.f_back
        if (
            frame.f_code is not code
            or back is None
            or id(back.f_code) != back_code
            or back.f_lasti != back_lasti
            or not self._watched(jitted)
        ):
            return False
        if first_arg(arg0) != a0:
            return False  # (another signature: counted apart)
        self._counts[key] += 1
        self._pending = (jitted, key, None, a0)
        self._run_break = True
        slot = self._key_slot(id(jitted))
        for obs in self._obs_call:
            obs.on_call(jitted, arg0, frame, slot)
        return True

    def _unplace(self, at: tuple) -> None:
        """The place's memo of a repeated call (Place) goes: its count back in the ledger's
        `counts` (its next event: the full one's to decide)."""
        self._hot_place = None
        place = self._again.pop(at, None)
        if type(place) is Place:
            self._counts[place.key] = place.n

    def _unplace_all(self) -> None:
        """Every place's count back in the ledger's `counts`, the memos gone (the recording
        ends)."""
        counts = self._counts
        for place in self._again.values():
            if type(place) is Place:
                counts[place.key] = place.n
        self._again.clear()
        self._hot_place = None

    def now_watched(self, jitted: Any) -> None:
        """An observer's `watches(jitted)` turned True (it records something at each of its
        calls): the places that count its calls without asking (Place) ask again."""
        for at in [at for at, m in self._again.items() if type(m) is Place and m.jitted is jitted]:
            self._unplace(at)

    def _handed(self, jitted: Any) -> None:
        """`jitted` was handed to a callable (map, functools.reduce): a known function's
        entries are emptied, so that calls no CALL event shows still come through Python."""
        dkey = _dispatch_key(jitted)
        if dkey in KNOWN and dkey not in self._cleared:
            self._cleared[dkey] = jitted
            _clear_fun_cache(jitted)

    def _passed_in(self, fn: Any, whose: int) -> bool:
        """Whether the place calling `fn` (no jit) may call a jit of the user's another
        time: JAX's or a library's place calling the user's code, or a place of the user's
        that was handed `fn` (an argument or closure variable of its frame: `apply(f, x)`).
        JAX's places handed JAX's own functions stay off (jax.tree.map's place fires no
        event: C code runs it)."""
        if whose < USER:
            kind = type(fn)
            if kind in NEVER_JIT:
                return False
            # the usual case (thousands per eager transformation): a plain function, whose
            # code's owner is remembered
            if (
                kind is FUNCTION
                and "__wrapped__" not in fn.__dict__
                and self._owner(fn.__code__) < USER
            ):
                return False
            return calls_users_code(fn, self.top_filename)
        caller = sys._getframe(3)  # (this, _no_jit_place, then the CALL event's callback)
        code = caller.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount] + code.co_freevars
        local = caller.f_locals
        # (a dataclass's __init__ has its default factories as closure variables)
        return any(local.get(n) is fn for n in names if not n.startswith("__dataclass_"))

    def _owner(self, code: Any) -> int:
        """Whose `code` is (whose_code), remembered by its id (the code kept: the id stays
        valid). _on_call_event asks inline: it runs for every call."""
        whose = self._user_code.get(id(code))
        if whose is None:
            whose = self._user_code[id(code)] = whose_code(code, self.top_filename)
            self._ledger.keep[id(code)] = code
        return whose

    def _library_site(self, code: Any, offset: int, whose: int, frame: Any) -> Any:
        """The user's site of a library's or JAX's call of a jit at (code, offset) in
        `frame` (places.user_site). A JAX function the user's code called directly (a
        jax.random sampler calling its jit, once per step of an eager loop) has its answer
        remembered by the two places: the user's frame decides it alone."""
        back = frame.f_back
        if whose != JAX or back is None:
            return places.user_site(frame, self.top_filename)
        bcode = back.f_code
        if self._owner(bcode) < USER:
            return places.user_site(frame, self.top_filename)
        at = (id(code), offset, id(bcode), back.f_lasti)
        site = self._sites.get(at)
        if site is None:
            site = self._sites[at] = places.user_site(frame, self.top_filename)
        return site

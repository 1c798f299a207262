"""The handlers of a jitted call on JAX's Python path: `_on_jit` records its function and
signature (the ledger's entry, JAX's cached jaxpr: no retrace) and lets the observers wrap
the call; `_keep_fast` says whether JAX's C++ fast path may then cache it (the watch
policy's answer, policy.py: a diagnostic that must see every call, a place of several
signatures, or on the 3.11 fallback a call site still watched, keep it off); and
`_on_top_frame` notes each outermost trace, for the partial record of a trace that fails.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz._compat import Loc
from jaxviz.capture import places
from jaxviz.capture.ledger import JitEntry
from jaxviz.capture.policy import (
    JIT_CALLS_WATCHED,
    MAX_CALL_MARKS,
    fallback_watched,
    may_stop_watching,
)
from jaxviz.capture.state import CaptureState

_frame_line = _compat.frame_line
_get_ident = threading.get_ident


class PythonPathHandlers(CaptureState):
    """The Recorder's handlers of JAX's Python path (a base of Recorder)."""

    def _on_jit(self, call: _compat.JitCall, run: Callable[[], Any]) -> Any:
        __tracebackhide__ = True
        if self._busy or threading.get_ident() != self._thread:
            return run()
        t0 = time.perf_counter()
        run = functools.partial(self._jax_work, run)  # JAX's own: not counted as jaxviz's

        self._busy = True
        self._run_break = True
        opened, self._open_frame = self._open_frame, None  # the trace finished: it dispatched
        try:
            self.trace_seconds = (
                time.perf_counter() - self._opened_at
                if opened is not None and _compat.traced_into(opened[0], call.jaxpr)
                else None
            )
        except Exception as e:  # jaxviz's own failure must never become the user's
            self.internal_errors.append(e)
            self.trace_seconds = None
        try:
            frame = sys._getframe(1)
            self._in_summary = self._summarised(frame)
            try:
                self._record_jit(call, frame)
            except Exception as e:  # jaxviz's own failure must never become the user's
                self.internal_errors.append(e)
            for obs in self._obs_jit:  # each observer wraps the call
                run = functools.partial(self._observed, obs.on_jit, call, frame, run)
            del call
            return run()
        finally:
            self._busy = False
            self.hook_seconds += time.perf_counter() - t0

    def _observed(self, on_jit: Callable, call: Any, frame: Any, run: Callable[[], Any]) -> Any:
        """An observer's `on_jit` around the call, its own failure kept from the user: one
        before the call runs it as if unobserved, one after it returns its result (a
        grad-of-scan's key flow once raised AttributeError out of the user's `step(...)`).
        The call's own exception is the user's, and goes on."""
        __tracebackhide__ = True
        state: list = []  # [None]: the call began; [None, out]: it returned

        def inner() -> Any:
            __tracebackhide__ = True
            state.append(None)
            out = run()
            state.append(out)
            return out

        try:
            return on_jit(call, frame, inner)
        except Exception as e:
            if len(state) == 1:  # the call itself raised: the user's
                raise
            self.internal_errors.append(e)
            return state[1] if state else run()

    def _jax_work(self, run: Callable[[], Any]) -> Any:
        __tracebackhide__ = True
        t1 = time.perf_counter()
        try:
            return run()
        finally:
            self.hook_seconds -= time.perf_counter() - t1

    def _record_jit(self, call: _compat.JitCall, frame: Any) -> None:
        """A jitted call on JAX's Python path: its entry in the ledger (made at its
        signature's first call), and its count: a counted call's (a CALL event's or the
        call counter's, pending) teaches the ledger whose signature its place's calls are;
        any other (Python 3.11, a call the counter did not count) is counted here, at the
        user's site, and marked for the live chart."""
        key = id(_compat.open_jaxpr(call.jaxpr))
        pending = self._pending
        entry, jitted, new = self._ledger.entry_of(call, key, pending, frame)
        call.seen, call.jitted = True, entry.jitted
        counted = self._tool is not None or self._counting  # by the CALL event or counter
        if counted and jitted is not None and pending is not None:
            self._ledger.learn(pending, key, jitted)
            self._pending = None
            return
        site = places.user_site(frame, self.top_filename)
        calls = self.calls
        if calls is not None:  # the Python path (Python 3.11, or no CALL event for it)
            if len(calls) < MAX_CALL_MARKS:
                calls.append((time.perf_counter(), entry.name, *(site[:2] if site else ("", 0))))
            else:
                self.calls_dropped += 1
        if site is not None:
            cur = self._cur
            if new and not self._monitoring and cur is not None and cur[5]:
                top = _compat.module_frame(frame, self.top_filename)
                if top is not None and id(top) == cur[2] and _frame_line(top) == cur[1]:
                    # (not for a new jit a later line calls)
                    self._runs.unsummarise((cur[0], cur[1]))
                    self._cur = self._fast = cur = None
            if self._monitoring or cur is None or not cur[5]:
                entry.sites[site[:2]] += 1
                n = entry.sites[site[:2]]
                if not self._monitoring:
                    self._last_watched(entry, n)
            if cur is not None and not cur[5] and not self._monitoring:
                cur[4].jit_calls.append((key, site[:2]))  # counted again with its run
            # (in a summarised statement, Python < 3.12: counted with its runs, _count_run)
            if site.inner is not None:
                entry.library_sites[site.inner] = None
            if entry.first_loc is None:
                entry.first_loc = Loc(site[0], site[1], 0, site[2])

    def _last_watched(self, entry: JitEntry, n: int) -> None:
        """Python < 3.12 (no CALL events to count fast calls), at a call site's n-th call
        of this function and signature: a site that called it as many times as the watch
        policy says (`fallback_watched`: 2, 4 with the live chart, a library's jit: 1) gets
        JAX's fast path; its later calls go uncounted (the trace says so). The C++ entry a
        watched call left says "never fast", and the one a call is served from cannot be
        replaced while it runs (emptied then, the entry it fills is dropped and the next
        call takes the Python path once more): it is dropped at the call before the last
        watched one, whose call then makes a new one, fast."""
        most = fallback_watched(entry.own, self.calls is not None)
        if n + 1 == most:
            if entry.jitted is not None:
                _compat.clear_fun_cache(entry.jitted)
                self._dropping = id(entry.jitted)
            else:  # (this call's function: not yet noted by the book, see clear_jits_of)
                _compat.clear_jits_of(entry.fun)
        if n >= most:
            self._fast_next = entry.uncounted = True

    def _keep_fast(self, call: _compat.JitCall) -> bool:
        """Whether JAX's C++ fast path may cache the call that just went through Python.
        Calls jaxviz did not record (JAX's own, nested in an eager op) always may."""
        if not call.seen:
            return True
        dropping, self._dropping = self._dropping, None
        if self._tool is None and not self._counting:
            if self._fast_ok():
                return True
        elif self._refuse_mixed(call.jitted):
            pass  # one of several signatures at one place: each of its calls is counted
        elif self._in_summary or not any(
            getattr(o, "needs_every_call", False) for o in self.observers
        ):
            return True
        # its next call must come through Python too: a diagnostic must see it (a key it
        # consumes, --nans), or (Python < 3.12) its call site is still watched
        jitted = call.jitted
        if jitted is None or id(jitted) != dropping:
            self._refused[None if jitted is None else id(jitted)] = jitted
        # (else its entries were emptied while this call ran, _last_watched: the one it
        # fills is dropped, no "never fast" entry stays for the cell's end to drop; the fast
        # one its next call makes serves the user's next plain cell)
        return False

    def _refuse_mixed(self, jitted: Any) -> bool:
        """Python >= 3.12: whether a call of `jitted`, a jit one place of which called it
        with several signatures, must take the Python path again (the ledger's `ambiguous`)."""
        ledger = self._ledger
        n = ledger.ambiguous.get(id(jitted))
        if n is None or self._in_summary or not may_stop_watching():
            return False  # (--nans: every call takes the Python path anyway)
        if n >= JIT_CALLS_WATCHED:
            if id(jitted) not in ledger.mixed:  # its "never fast" entries: dropped (the
                ledger.mixed.add(id(jitted))  # next call of each makes a fast one)
                _compat.clear_fun_cache(jitted)
            return False
        ledger.ambiguous[id(jitted)] = n + 1
        return True

    def _fast_ok(self) -> bool:
        """Python < 3.12: a jitted call may be cached on JAX's fast path while the statement
        calling it is summarised (jaxviz counts it from the statement's runs), or once its
        call site called it as many times as the policy says (_last_watched); never while a
        diagnostic needs to see each call (a key it consumes, --nans)."""
        cur = self._cur
        busy, self._fast_next = self._fast_next, False
        if cur is not None and cur[5]:  # summarised: the diagnostics saw its first runs
            return True
        return busy and not any(getattr(o, "needs_every_call", False) for o in self.observers)

    def _on_top_frame(self, frame: Any, name: str, arg_names: tuple, user: bool = True) -> None:
        # the latest outermost trace: kept until a dispatch shows it finished
        if _get_ident() == self._thread:
            self._open_frame = (frame, name, arg_names, user)
            self._opened_at = time.perf_counter()

"""The handler of eager ops: each primitive applied outside jit at top level
(`_on_eager`, from JAX's dispatch), recorded in its statement's run, or, in a loop's
statement the watch policy summarised (policy.py: EAGER_RUNS_RECORDED runs alike), only
counted on its recorded runs (`_counted_again`, the usual case in a loop: no frame object
made). The runs' bookkeeping, and which statement an op belongs to, are runs.py's.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz.capture.runs import RESUMABLE
from jaxviz.capture.state import CaptureState
from jaxviz.config import options

_is_top_level = _compat.is_top_level
_get_ident = threading.get_ident
_perf_counter = time.perf_counter


class EagerHandlers(CaptureState):
    """The Recorder's handler of eager ops (a base of Recorder)."""

    def _on_eager(self, prim: Any, args: tuple, params: dict, run: Callable[[], Any]) -> Any:
        # The hot path of eager code (every primitive applied at top level): keep it lean.
        # One piece, with _counted_again its usual answer in a loop: a counted op costs
        # ~0.3 us more than a plain one on Python 3.12, ~1.3 us on 3.11 (measured: `y = x + 1`
        # in a loop), and each more call of a helper ~15 ns.
        __tracebackhide__ = True
        if self._busy or _get_ident() != self._thread or not _is_top_level():
            return run()
        self._busy = True
        try:
            out = run()
            t0 = _perf_counter()
            try:
                if self._counted_again():  # (most ops of a loop: no frame object to make)
                    counted, frame = True, None
                else:
                    frame = sys._getframe(1)
                    counted = self._record_eager(prim, args, params, out, frame)
                # a loop's statement summarised (see _settle): the diagnostics saw its first
                # runs; its later ones are checked only when asked (--nans: every call)
                if not counted or options.check_every_call:
                    frame = frame or sys._getframe(1)
                    for obs in self._obs_eager:
                        obs.on_eager(prim, args, params, out, frame)
                elif self._monitoring and prim.name in self._key_prims:
                    # keys are followed in every run: a key a late run consumed may be reused
                    # after the loop (Python 3.11: jax.random's jitted samplers then run on
                    # JAX's fast path, unseen, so their keys cannot be followed anyway)
                    frame = frame or sys._getframe(1)
                    slot = self._key_slot(prim.name)
                    for obs in self._obs_keys:
                        obs.on_key_op(prim, args, params, out, frame, slot)
            except Exception as e:  # jaxviz's own failure must never become the user's
                self.internal_errors.append(e)
            self.hook_seconds += _perf_counter() - t0
            return out
        finally:
            self._busy = False

    def _counted_again(self) -> bool:
        """Whether the eager op just run is counted on a summarised statement's runs (the
        usual case in a loop after its first runs): the cell's frame at the depth it was
        found, at the same or a later place of the same line with no new call of the
        cell's in between (one more op of its current run or, after a jitted call, of its
        next phase), or at a summarised statement's next execution (a loop's next
        statement or iteration). Called from _on_eager only (its depths)."""
        fast, cur = self._fast, self._cur
        if fast is None or cur is None:
            return False
        getframe, code, at = sys._getframe, fast[0], fast[1]
        for depth in self._depths:  # _statement_at's, which is one frame deeper
            try:
                f = getframe(depth - 1)
            except ValueError:
                continue
            if f.f_code is code and id(f) == at:
                break
        else:
            return False
        lasti, call_at = f.f_lasti, self._call_at
        # (marks the callee at each op, as _statement_at; Python >= 3.12, no generator
        # resumed there: no call is fresh, and _fresh_call has nothing to mark)
        callee = getframe(depth - 2)
        if self._mark is None and not callee.f_code.co_flags & RESUMABLE:
            fresh = False
        else:
            fresh = self._fresh_call(callee, f, depth - 2)
        if lasti == cur[3] and call_at is None and not fresh and not self._run_break:
            return True  # one more op at the last one's place: the usual case
        line = fast[2].get(lasti)
        again = lasti < cur[3] or (call_at is not None and call_at <= cur[3]) or line != cur[1]
        again = again or (fresh and lasti == cur[3])
        if again or self._run_break:
            # the next execution of a summarised statement of the loop (this one's again,
            # or the next one's), or the next phase of this one's (after a jitted call):
            # counted on its runs, as _record_eager would (Python < 3.12: once the fast
            # path was given, which _record_eager does first)
            reps = self._tally.get((cur[0], line))
            if reps is None or not (self._monitoring or self._fast_given):
                return False
            phase = 0 if again else cur[6] + 1
            if phase >= len(reps):  # a run unlike those recorded: recorded op by op
                return False
            if again:
                self._count_run(reps)
            self._run_break = False
            cur[1], cur[4], cur[6], cur[7] = line, reps[phase], phase, 0
        self._call_at = None
        cur[3] = lasti
        return True

    def _record_eager(self, prim: Any, args: tuple, params: dict, out: Any, frame: Any) -> bool:
        """Records one eager op in its statement's run; True when the statement is
        summarised (the op was only counted)."""
        top, line, fresh = self._statement_at(frame)
        self._fast = None
        cur: list[Any] | None = self._cur
        if (  # one more op of a recorded statement's current call (a summarised one's
            # come through _counted_again)
            cur is not None
            and not cur[5]
            and top is not None
            and cur[2] == id(top)
            and cur[3] == top.f_lasti
            and cur[1] == line
            and self._call_at is None
            and not self._run_break
            and not fresh
        ):
            return self._record_op(cur[4], prim, args, params, out, frame, None)
        inner = None
        if top is None:
            inner = self._runs.inner_site(frame)
            if inner is None:
                return False
            stmt = (inner[0], inner[1], 0, 0)
        else:
            stmt = (self.top_filename, line, id(top), top.f_lasti)
        # Python >= 3.12: the cell's statement made a call at or before the last op's place
        # since: it runs again (a one-call statement in a loop: its ops all come from one
        # place, and only the call tells one run from the next)
        call_at, self._call_at = self._call_at, None
        again = (
            cur is None
            or (cur[0], cur[1], cur[2]) != stmt[:3]
            or stmt[3] < cur[3]
            or (call_at is not None and call_at <= cur[3] and top is not None)
            or (fresh and stmt[3] == cur[3])  # Python < 3.12: a new call at the same place
        )
        if again or self._run_break:  # a new run
            cur = self._start_run(stmt, cur, again)
        assert cur is not None
        cur[3] = stmt[3]
        if cur[5]:
            if top is not None:  # its next ops: _counted_again, from _on_eager's frame
                code = top.f_code
                self._fast = (code, id(top), _compat.code_lines(code))
            return True
        self._fast = None
        return self._record_op(cur[4], prim, args, params, out, frame, inner)

    def _start_run(self, stmt: tuple, cur: list | None, again: bool) -> list:
        """A new run at `stmt` (file, line, id(frame), offset): of the same statement after
        a jitted call (its next phase), or of a statement (phase 0); the run that ended is
        settled (runs.py: EagerRuns.settle). A summarised statement's run is counted on its
        recorded ones; any other is recorded. Returns the current run (`_cur`)."""
        phase = 0 if again or cur is None else cur[6] + 1
        self._run_break = False
        if cur is not None and not cur[5]:
            self._settle(cur[4], cur[6])
        reps = self._tally.get(stmt[:2])
        if reps is not None and phase < len(reps):  # summarised: its runs are counted
            if phase == 0:
                self._count_run(reps)
            if not self._monitoring and not self._fast_given:
                # Python < 3.12: the C++ cache's entries made while jaxviz watched say
                # "never fast"; dropped, the next call of each may be cached fast
                self._fast_given = True
                _compat.clear_cpp_dispatch_caches()
            cur = self._cur = [*stmt, reps[phase], True, phase, 0]
            return cur
        if self._fast_given and stmt[:2] not in self._runs.stmt_runs:
            # a statement not run before (after the loop): jitted calls must come
            # through Python again. (One of the loop's own that is not summarised
            # keeps the fast path: clearing at each of its runs cost 22x on an eager
            # optimizer loop; its jitted calls of functions a summarised statement
            # also calls may then go uncounted.)
            self._fast_given = False
            _compat.clear_cpp_dispatch_caches()
        cur = self._cur = [*stmt, self._runs.new_run(stmt), False, phase, 0]
        return cur

"""Eager runs: the bookkeeping of a cell's eager statements while it runs.

Each execution of a top-level statement that applies primitives outside jit is a run of
eager ops (eager.py's `EagerRun`). Which statement an op belongs to is told by the cell's
module frame and where it is (`statement_at`), and whether the call it made there is a new
one (`fresh_call`: a new frame, or a generator resumed anew). A statement that ran
`EAGER_RUNS_RECORDED` times alike, as a loop's body does, is summarised (`settle`): its
later executions are counted on its last runs (`count_run`), not recorded op by op
(`record_op`). Which op starts a run, and when a run is counted, is decided per op by the
recorder's eager handler (ops.py), which calls these through its own names (one lookup).
"""

from __future__ import annotations

import inspect
import sys
import weakref
from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz._compat import Loc
from jaxviz.capture.eager import EagerOp, EagerRun, run_key
from jaxviz.capture.policy import EAGER_RUNS_RECORDED, MAX_EAGER_OPS_PER_GROUP
from jaxviz.config import options

_frame_line = _compat.frame_line
_gettrace = sys.gettrace
# a frame's code that is a generator's (or a coroutine's): the cell resumes it (`next(g)`,
# `for x in gen()`), it is not called anew
RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
# the code of a comprehension, a function of its own before Python 3.12 (fresh_call)
_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>"})
# how far the eager handler's caller's frame, which it passes down, lies above
# statement_at's own (statement_at <- _record_eager <- _on_eager <- the dispatch hook)
_OWN_DEPTH = 3


class EagerRuns:
    """A recording's eager runs and the statements they belong to."""

    def __init__(
        self, top_filename: str | None, monitoring: bool, entries: dict, order: Any
    ) -> None:
        self.top_filename = top_filename
        self.monitoring = monitoring  # Python >= 3.12: CALL events tell a call's place
        self.entries = entries  # the ledger's: the jitted calls a run made (Python 3.11)
        self.order = order  # the recording's first-call order, shared with the ledger
        self.runs: list[EagerRun] = []  # every run recorded, in order (Recorder.eager_runs)
        # the memory watch's (Recorder.mark_calls): told of the cell's first eager op
        self.on_first: Callable[[], None] | None = None
        # (file, line) -> the runs of its last executions, one list of phases each
        self.stmt_runs: dict[tuple, list] = {}
        self.unsummarised: set[tuple] = set()  # (file, line): see unsummarise
        # (file, line) -> the runs (one per phase) its later executions count on
        self.tally: dict[tuple, list] = {}
        self.depths: list[int] = []  # statement_at: where the cell's frame was lately
        # Python < 3.12 (no CALL events): the mark an eager op leaves on the frame its
        # statement called (`fresh_call`), unique to this recording
        self.mark: Any = None if monitoring else (lambda *a: None)
        # the ops a generator the cell resumes makes (`next(g)`, `for x in gen()`): the
        # mark they leave on the frame the generator called, and (id(generator frame), its
        # offset) at the last one (`resumed`)
        self.gen_mark: Any = lambda *a: None
        self.gen_at: tuple[int, int] | None = None

    def new_run(self, stmt: tuple) -> EagerRun:
        """A run of the statement at `stmt` (file, line, id(frame), offset), recorded."""
        run = EagerRun(stmt[0], stmt[1], stmt[2], stmt[3], order=next(self.order))
        on_first, self.on_first = self.on_first, None
        if on_first is not None:
            on_first()
        self.runs.append(run)
        return run

    def clear(self) -> None:
        """Recorder.take: the runs handed over, the statements forgotten."""
        self.runs.clear()
        self.stmt_runs.clear()
        self.tally.clear()
        self.unsummarised.clear()

    def statement_at(self, frame: Any) -> tuple[Any, int, bool]:  # frame: _OWN_DEPTH up
        """The cell's module frame at or above `frame` (None: not under it), the line it
        is at (_compat.frame_line: remembered by code object and offset, as an eager loop
        asks for the same few thousands of times) and (Python < 3.12) whether the call it
        makes there is a new one (`fresh_call`)."""
        top_file = self.top_filename
        # The depths (from here) the module frame was found at lately: sys._getframe looks
        # in C, a walk in Python costs ~0.25 us a frame (an eager op is ~15 frames deep).
        # Only one module frame of the cell can be on the stack: a hit is the walk's answer.
        getframe = sys._getframe
        for depth in self.depths:
            try:
                f = getframe(depth)
            except ValueError:  # not that deep
                continue
            code = f.f_code
            if code.co_name == "<module>" and code.co_filename == top_file:
                break
        else:
            f, depth = frame, _OWN_DEPTH
            while f is not None:  # _compat.module_frame, inlined: it runs for every eager op
                code = f.f_code
                if code.co_name == "<module>" and code.co_filename == top_file:
                    break
                f = f.f_back
                depth += 1
            if f is None:
                return None, 0, False
            self.depths.insert(0, depth)
            del self.depths[4:]
        return f, _frame_line(f), self.fresh_call(getframe(depth - 1), f, depth - 1)

    def fresh_call(self, callee: Any, top: Any, depth: int) -> bool:
        """Whether the eager op being recorded starts a new run of the cell's statement at
        `top`'s place, told by `callee`, the frame the statement called there (the
        caller's sys._getframe(depth)):

        - a generator the statement resumes (`x = next(g)`, `for x in gen()`): a new
          resumption (`resumed`), on every Python version; also, before Python 3.12,
          where a comprehension is a function of its own (3.12 inlines it), one its
          comprehension resumes (`[next(g) for _ in range(5)]`: five runs, as on 3.12;
          the calls a comprehension makes stay one run: summarised, jax.random's samplers
          would take JAX's fast path on 3.11, their keys unseen);
        - Python < 3.12: a frame no eager op of this recording saw; it is marked seen.
          Without CALL events, only this tells a one-call statement's next run in a loop
          (`y = jnp.asarray(b)`: each run's ops come from the same place) from more ops of
          the same call: each call is a new frame.

        The mark is the frame's f_trace, which only a tracer reads (none is set: with
        sys.settrace's, no call is fresh); no reference to the frame is kept, so its locals
        go with it."""
        if callee.f_back is not top or _gettrace() is not None:
            return False
        if self.mark is not None and callee.f_code.co_name in _COMPREHENSIONS and depth > 1:
            inner = sys._getframe(depth)  # (Python < 3.12: the frame a comprehension called)
            if inner.f_back is callee and inner.f_code.co_flags & RESUMABLE:
                return self.resumed(inner, sys._getframe(depth - 1))
        if callee.f_code.co_flags & RESUMABLE:
            # (the frame `callee` called: from here, one frame deeper than the caller,
            # the same depth reaches one frame below `callee`)
            return self.resumed(callee, sys._getframe(depth))
        mark = self.mark
        if mark is None or callee.f_trace is mark:  # (Python >= 3.12: CALL events tell)
            return False
        callee.f_trace = mark
        return True

    def resumed(self, gen: Any, inner: Any) -> bool:
        """Whether an eager op made under `gen`, a generator frame the cell's statement
        resumes, belongs to a new resumption: the generator went back in its code since the
        last op under it (its loop came round to the next `yield`), or made a new call at
        the same place (`yield jnp.asarray(b)`: `inner`, the frame it called, is new). A
        resumption is a run of the statement, as a call is: without this, a loop that
        resumes a generator making eager ops (a data loader) was one endless run, every op
        recorded, none counted, as no call of the cell's frame told its runs apart."""
        at, lasti = self.gen_at, gen.f_lasti
        self.gen_at = (id(gen), lasti)
        fresh = False
        if inner.f_back is gen and inner.f_trace is not self.gen_mark:
            inner.f_trace = self.gen_mark
            fresh = True
        if at is None or at[0] != id(gen):
            return True
        return lasti < at[1] or (lasti == at[1] and fresh)

    def record_op(
        self,
        run: EagerRun,
        prim: Any,
        args: tuple,
        params: dict,
        out: Any,
        frame: Any,
        inner: tuple | None,
    ) -> bool:
        """Appends one eager op to `run` (its inputs by reference to the run's earlier outputs,
        literals or avals); False: recorded, not only counted."""
        if inner is None:
            inner = self.inner_site(frame)
        if len(run.ops) >= MAX_EAGER_OPS_PER_GROUP:
            run.truncated += 1
            return False
        ins: list[tuple] = []
        refs = run.refs
        for x in args:
            ref: tuple | None = None
            hit = refs.get(id(x))
            if hit is not None and hit[0]() is x:
                ref = ("ref", hit[1], hit[2])
            if ref is None:
                if isinstance(x, (bool, int, float, complex)):
                    ref = ("lit", x)
                else:
                    ref = ("arg", _compat.aval_of(x))
            ins.append(ref)
        outs = out if prim.multiple_results else (out,)
        op_i = len(run.ops)
        for port, o in enumerate(outs):
            try:
                refs[id(o)] = (weakref.ref(o), op_i, port)
            except TypeError:
                pass
        loc = Loc(inner[0], inner[1], 0, inner[2]) if inner else None
        run.ops.append(EagerOp(prim, dict(params), ins, [_compat.aval_of(o) for o in outs], loc))
        return False

    @staticmethod
    def inner_site(frame: Any) -> tuple | None:
        """(file, line, function) of the user's line that made an eager op."""
        staged = _compat.current_user_frame()  # set when JAX evaluates a staged jaxpr
        if staged is not None:
            return (staged.file, staged.line, staged.fn.rsplit(".", 1)[-1])
        return _compat.site_of(frame)

    def settle(self, run: EagerRun, phase: int) -> None:
        """A statement's run ended: after EAGER_RUNS_RECORDED executions of one statement
        made the same ops on the same types in each phase (the runs between its jitted
        calls), as a Python loop's body does, its later executions are counted on its
        last runs (`counted`), not recorded op by op. (The runs' keys are asked only then:
        a statement that runs once, as most do, never needs its own.)"""
        where = (run.filename, run.line)
        if run.truncated or where in self.unsummarised:
            return
        runs = self.stmt_runs.setdefault(where, [])
        if phase == 0:
            runs.append([])
            if len(runs) > EAGER_RUNS_RECORDED:
                del runs[0]
        if not runs:
            return
        runs[-1].append(run)
        if len(runs) < EAGER_RUNS_RECORDED:
            return
        shape = [run_key(r) for r in runs[-1]]
        if all([run_key(r) for r in rs] == shape for rs in runs[:-1]):
            self.tally[where] = list(runs[-1])

    def unsummarise(self, where: tuple) -> None:
        """Python < 3.12: a summarised statement's execution called a jit through Python
        with a signature its recorded runs' calls did not have (a ragged last batch): its
        runs are not alike after all. This execution is not counted on them; the statement
        is recorded op by op from now on, never summarised again in this recording (with
        two signatures in JAX's cache, a counted run could not tell whose call it made);
        the calls its runs counted are lower bounds, as its later ones run on the fast
        path. (A signature's first call in a recording always comes through Python: the
        jits' entries are emptied at its start.) The recorder's next op starts a new run."""
        reps = self.tally.pop(where, None) or []
        self.unsummarised.add(where)
        self.stmt_runs.pop(where, None)
        for r in reps:  # (count_run counted this execution on them at its start)
            r.counted = max(r.counted - 1, 0)
            for key, site in r.jit_calls:
                entry = self.entries.get(key)
                if entry is not None:
                    if entry.sites.get(site, 0) > 0:
                        entry.sites[site] -= 1
                    entry.uncounted = True

    def count_run(self, reps: list[EagerRun]) -> None:
        """One more execution of a summarised statement: its runs, and on Python < 3.12
        (jitted calls on JAX's fast path then, unseen) the jitted calls they made."""
        for r in reps:
            r.counted += 1
            if not self.monitoring:
                for key, site in r.jit_calls:
                    entry = self.entries.get(key)
                    if entry is not None:
                        entry.sites[site] += 1

    def summarised(self, frame: Any) -> bool:
        """Whether `frame` runs in a statement of the cell's that is summarised (a loop's
        body, seen EAGER_RUNS_RECORDED times alike): the diagnostics saw its first runs, and
        check its later calls only when asked (--nans: every call)."""
        if not self.tally or options.check_every_call:
            return False
        top = _compat.module_frame(frame, self.top_filename)
        return top is not None and (top.f_code.co_filename, top.f_lineno or 0) in self.tally

"""What the recorder's handlers share, declared once.

The handlers (calls.py: CALL events and the call counter; pypath.py: JAX's Python path;
ops.py: eager ops) are measured hot paths: a CALL event runs before every call the watched
code makes. They read and write this state as attributes of one object, the Recorder (one
attribute lookup each, no call in between), so it is declared here, with what each field
means, and the handlers are the Recorder's methods (its bases, one module a job). The
bookkeeping lives in the parts the state names: the signatures and counts (`Ledger`,
ledger.py), the eager runs (`EagerRuns`, runs.py) and the hooks (`Hooks`, events.py). The
few of their tables and methods a handler uses at each event are held here under the names
the handlers use: the same objects, one lookup.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz.capture.events import Hooks
from jaxviz.capture.ledger import JitEntry, Ledger
from jaxviz.capture.runs import EagerRuns

_ARRAY: Any = _compat.ARRAY_TYPE


class Place:
    """A place of the user's whose last jitted call (its CALL event's, or the call
    counter's on Python 3.11) was of a jit no observer watches at each call (`_again`):
    what its next call needs to be counted the same way without deciding anew what the
    full handler decides once per place (calls.py: the repeat). Its count is kept here
    (`n`: hashing the count key cost ~0.1 us a call), written back to the ledger's
    `counts` when the place's memo goes (`_unplace`) and when the recording ends."""

    __slots__ = (
        "a0", "array", "aval", "code", "jitted", "key", "n", "obs", "offset", "pending",
        "shape", "top", "weak",
    )  # fmt: skip

    def __init__(
        self, jitted: Any, arg0: Any, a0: tuple, key: tuple, n: int, code: Any, offset: int,
        top: bool, obs: tuple,
    ) -> None:  # fmt: skip
        self.jitted = jitted
        self.code, self.offset = code, offset  # the place (the code is the ledger's: kept)
        self.a0 = a0  # the first argument's (type, shape, weak type): first_arg
        # a JAX array's: its shape and weak type are its aval's, which a jitted function's
        # outputs share (`x = step(x)`): the same aval object, the same signature
        self.array = a0[0] is _ARRAY
        self.aval = arg0.aval if self.array else None
        self.shape, self.weak = a0[1], a0[2]
        self.key = key  # its count key in the ledger's `counts`
        self.n = n  # its count: `counts[key]` is this place's while the memo is kept
        self.pending = (jitted, key, None, a0)  # the recorder's `_pending` at each call
        self.top = top  # a place of the cell's own code (`_call_at`)
        # the observers told of each call: one whose on_call answered True (it needs no more
        # of this function's calls: a single process's step clock) is left out
        self.obs = obs


class CaptureState:
    """The state of one recording (`Recorder`), shared by its handlers."""

    def __init__(
        self,
        top_filename: str | None,
        observers: list | tuple,
        namespace: dict | None,
        calls_deferred: bool,
    ) -> None:
        self.top_filename = top_filename
        # Python >= 3.12: CALL events from `watch_calls()` on, not from __enter__
        self.calls_deferred = calls_deferred
        self._namespace = namespace  # the cell's globals: its jitted functions, at __enter__
        self.observers = list(observers)
        self._obs_jit = [o for o in self.observers if hasattr(o, "on_jit")]
        self._obs_eager = [o for o in self.observers if hasattr(o, "on_eager")]
        self._obs_call = [o for o in self.observers if hasattr(o, "on_call")]
        self._obs_keys = [o for o in self.observers if hasattr(o, "on_key_op")]
        self._obs_known = [o for o in self.observers if hasattr(o, "on_known")]
        self._obs_compiled = [o for o in self.observers if hasattr(o, "on_compiled")]
        self._obs_reused = [o for o in self.observers if hasattr(o, "on_reused")]
        # the primitives whose eager ops the key observers follow in summarised runs
        self._key_prims = frozenset().union(*(o.key_prims for o in self._obs_keys))
        self._watchers = [o.watches for o in self._obs_call if hasattr(o, "watches")]
        self._busy = False  # in a handler, or jaxviz's own work (own_work): let calls through
        self._own = False  # in jaxviz's own work (own_work) only
        self._thread = threading.get_ident()
        self._monitoring = _compat.has_sys_monitoring()
        self.internal_errors: list[Exception] = []  # jaxviz's own failures, kept for debugging
        # time spent in jaxviz's own work inside the hooks and CALL events (JAX's work they
        # wrap excluded), for the cell's CellCost (Python's own cost of raising each event,
        # ~1 us, and of the hooks' frames, is not: the cost line is a lower bound)
        self.hook_seconds = 0.0
        # Each top-level call of a jitted function, in call order, for the live memory chart
        # (jaxviz.memory.timeline, through `Recorder.mark_calls`): (time.perf_counter(), the
        # jitted function or its name, the calling code object or file, the bytecode offset
        # or line). None: not asked for, and not paid for. Capped at MAX_CALL_MARKS;
        # `calls_dropped` counts the rest.
        self.calls: list[tuple[float, Any, Any, int]] | None = None
        self.calls_dropped = 0
        self._init_parts()
        self._init_call_state()
        self._init_eager_state()

    def _init_parts(self) -> None:
        """The parts that keep the bookkeeping, and the few of their tables and methods the
        handlers use at each event, under the handlers' names (the same objects)."""
        top_filename = self.top_filename
        order = itertools.count()  # first-call order, of jitted entries and eager runs alike
        self._ledger = ledger = Ledger(top_filename, order)
        self._runs = runs = EagerRuns(top_filename, self._monitoring, ledger.entries, order)
        self.hooks = Hooks(self)  # the handlers put on and taken off (events.py)
        # the ledger's: one entry per jitted function and signature (Recorder.take)
        self.entries: dict[int, JitEntry] = ledger.entries
        # the ledger's tables the CALL events write at each call (ledger.py says what)
        self._counts = ledger.counts
        self._sig_first = ledger.sig_first
        self._unheard = ledger.unheard
        # the eager runs' tables and methods the eager handler uses at each op (runs.py)
        self._depths = runs.depths
        self._tally = runs.tally
        self._mark = runs.mark
        self._statement_at = runs.statement_at
        self._fresh_call = runs.fresh_call
        self._record_op = runs.record_op
        self._settle = runs.settle
        self._count_run = runs.count_run
        self._summarised: Callable[[Any], bool] = runs.summarised

    def _init_call_state(self) -> None:
        """The state of the jitted calls' handlers (calls.py, pypath.py), and the hooks'
        registers (set by Hooks, read by the handlers)."""
        self._tool: int | None = None  # Python >= 3.12: the sys.monitoring tool id in use
        # Python < 3.12: whether the call counter counts (the counted path of _record_jit,
        # as CALL events on 3.12)
        self._counting = False
        # the tool's CALL events stay set when the recording ends (Monitor.keep_on)
        self._kept_on = False
        self._local_open = False  # it set the revived places' local events (open_local)
        # a CALL event was turned off where the next recording must see it again (Monitor)
        self._stale = False
        # the functions refused the fast path, whose "never fast" entries are dropped on
        # exit: id -> the PjitFunction, None: one not known, drop them all
        self._refused: dict[int | None, Any] = {}
        self._pending: tuple | None = None  # the last CALL event of a PjitFunction
        # id(code object) -> whose: TOP (the cell's module code), USER, LIBRARY
        # (installed, or the standard library's) or JAX (JAX's or jaxviz's own)
        self._user_code: dict[int, int] = {}
        # (id(code), offset, id(caller's code), its lasti) -> the user's site there
        # (_library_site); the codes are in the ledger's `keep`
        self._sites: dict[tuple, Any] = {}
        # (id(code), offset) of the user's functions' call sites -> calls of callables
        # that are no jit there (_on_call_event)
        self._plain_sites: dict[tuple, int] = {}
        # (id(code), offset) of JAX's or a library's places that called the user's code
        # (_passed_in) -> calls: their events stay on for the first CALLS_WATCHED
        self._passing: dict[tuple, int] = {}
        self._jax_sites: dict[tuple, int] = {}  # (id(code), offset) of JAX's own -> calls
        # Python >= 3.12: the jitted functions whose C++ dispatch entries this cell emptied
        # (each at its first call: that call then comes through Python, where its jaxpr is
        # seen), by _compat.dispatch_key -> the first object seen of the function
        self._cleared: dict[tuple, Any] = {}
        # id(jitted object) -> (it, its function's first object in _cleared): the CALL
        # events after the first (dispatch_key costs ~2 us: a jax.random sampler's jit,
        # called at every step of an eager loop)
        self._canon: dict[int, tuple[Any, Any]] = {}
        # (id(code), offset) of a place whose last event was a jitted call -> what the next
        # one there needs to count the same call again: the user's place calling a jit no
        # observer watches, a `Place` (it holds the place's count), a place
        # calling a watched jit, a tuple (_call_again)
        self._again: dict[tuple[int, int], Any] = {}
        # the Place last found in `_again`, asked first (no key to make and hash: a loop's
        # jitted call); None when a place's memo goes (_unplace)
        self._hot_place: Place | None = None
        self._in_summary = False  # the jitted call being recorded runs in a summarised statement
        self._fast_next = False  # Python < 3.12: the call just recorded may go fast
        # Python < 3.12: id of the jit whose entries _last_watched emptied in the call now
        # running (its "never fast" entry is dropped: not one _exit must drop)
        self._dropping: int | None = None
        self._open_frame: tuple | None = None  # the latest outermost trace frame
        self._opened_at = 0.0  # when it opened (time.perf_counter())
        # For observers, while a jitted call is dispatched (their on_jit): how long JAX took
        # to trace it, or None when JAX's tracing cache served its jaxpr (an earlier cell or
        # call traced it)
        self.trace_seconds: float | None = None

    def _init_eager_state(self) -> None:
        """The state of the eager ops' handler (ops.py)."""
        self._run_break = False  # a jitted call ended the eager run
        self._call_at: int | None = None  # offset of the cell's last call since the last eager op
        # the current eager run: [file, line, frame id, lasti, its EagerRun, counted only,
        # phase (runs of one execution of the statement, split by its jitted calls), the
        # key consumptions seen in this phase of a counted run (_key_slot)]
        self._cur: list | None = None
        # the summarised statement whose call the last eager op belonged to: (the cell's
        # code, id(its frame), its {lasti: line})
        self._fast: tuple | None = None
        self._fast_given = False  # Python < 3.12: the fast path may hold calls (_fast_ok)

    def _key_slot(self, what: Any) -> tuple | None:
        """The place of a key consumption in a counted run (a summarised statement's later
        execution): its statement, its phase, its rank among the phase's consumptions and
        `what` consumes it. Counted runs repeat the recorded ones, so a slot is consumed at
        the same stack in each: the key ledger walks it once per slot, not at each
        consumption (KeyLedger.consume_at). None: not in a counted run, or the run may have
        ended unseen (the cell's frame made a call since its last eager op)."""
        cur = self._cur
        if cur is None or not cur[5] or self._call_at is not None:
            return None
        cur[7] += 1
        return (cur[0], cur[1], cur[6], cur[7], what)

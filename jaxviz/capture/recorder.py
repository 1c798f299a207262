"""Capture: every JAX computation a block of code triggers at top level.

Two hooks on JAX's Python dispatch paths (jaxviz._compat.patched_dispatch) see
  * each jitted call that goes through Python, with its jaxpr (JAX's cached one: no retrace),
  * each eager primitive application (jax.grad(f)(x) outside jit, random ops, x + 1).
Calls served by jaxlib's C++ fast path never reach Python. So the capture first empties the
C++ dispatch caches (the executables stay cached: the next call is one Python-path call,
no recompile), and counts the fast-path calls that follow with sys.monitoring CALL events
(Python >= 3.12; ~1 us a call). There, a function an earlier recording saw with one
signature, whose cache still holds that signature alone, keeps its entry: its calls are
that signature's (`_Known`). On Python 3.11, it keeps the fast path from caching while
it watches, so every call takes the Python path (~70 us instead of ~5 us a call).

Nothing here keeps user arrays: calls are recorded as avals and ShapeDtypeStructs.
`Recorder.take()` hands over one `Staged` record per distinct function and signature (and
per eager statement); `jaxviz.api` builds their graphs and checks them.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import inspect
import itertools
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import jax

from jaxviz import _compat
from jaxviz._compat import Loc
from jaxviz.capture import places
from jaxviz.capture.eager import (
    EAGER_RUNS_RECORDED,
    MAX_EAGER_OPS_PER_GROUP,
    EagerOp,
    EagerRun,
    eager_staged,
    run_key,
)
from jaxviz.capture.lines import shown_line
from jaxviz.capture.staged import Staged, flat_arg_names, partial_jaxpr, specs
from jaxviz.config import options

# A call site's calls of one jit (and signature) after this many are not watched: on Python
# >= 3.12 their CALL events are turned off (unless the live memory chart marks each call);
# on Python < 3.12, with no CALL events, each watched call takes JAX's Python path (~100 us
# against ~5 us on its fast path), so fewer are: the later ones take the fast path. The
# trace then says "16+ calls" ("2+ calls" on Python < 3.12; "4+ calls" while the live memory
# chart marks the calls on its time axis).
JIT_CALLS_WATCHED = 16 if _compat.has_sys_monitoring() else 2
CHARTED_CALLS_WATCHED = 16 if _compat.has_sys_monitoring() else 4
# Python < 3.12 with the call counter (CPython 3.11: _compat.counting_jit_calls): every call
# of a jitted function at the user's places is counted and marked, fast path or not, ~1 us
# a call; each function and signature takes JAX's Python path once, where its jaxpr is seen.
# Its counts are exact: a busy place is never turned off, as a CALL event is on 3.12
COUNTS_EVERY_CALL = not _compat.has_sys_monitoring() and _compat.can_count_jit_calls()
# callables a call site of the user's that calls one will not call a jit with: its CALL
# events are turned off for the cell
_NEVER_JIT = frozenset(
    {
        types.BuiltinFunctionType,  # print, len, builtin methods (x.block_until_ready)
        types.MethodWrapperType,
        types.MethodDescriptorType,
        types.WrapperDescriptorType,
        type,  # range(...), list(...), float(...)
    }
)
MAX_CALL_MARKS = 50_000  # `Recorder.calls` keeps this many; later calls are only counted
_JIT_TYPE = _compat.JIT_FUNCTION_TYPE
_is_top_level = _compat.is_top_level
_clear_fun_cache = _compat.clear_fun_cache
_frame_line = _compat.frame_line
_dispatch_key = _compat.dispatch_key
_get_ident = threading.get_ident
_perf_counter = time.perf_counter
_gettrace = sys.gettrace
# a frame's code that is a generator's (or a coroutine's): the cell resumes it (`next(g)`,
# `for x in gen()`), it is not called anew
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
# the code of a comprehension, a function of its own before Python 3.12 (_fresh_call)
_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>"})
_PARTIAL = functools.partial
_METHOD = types.MethodType
_FUNCTION = types.FunctionType
_DISABLE = getattr(getattr(sys, "monitoring", None), "DISABLE", None)
# how far _on_eager's caller's frame, which it passes down, lies above _statement_at's own
# (_statement_at <- _record_eager <- _on_eager <- the dispatch hook)
_OWN_DEPTH = 3


@dataclasses.dataclass
class _JitEntry:
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


@dataclasses.dataclass
class _Known:
    """Python >= 3.12: one signature of a jitted function a recording saw with a few, each
    told by its first argument's type, shape and weak type (`a0`), whose C++ dispatch cache
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


# dispatch key -> its signatures' _Known, by a0: remembered across recordings
# (Recorder._remember_known), until release_monitoring()
_KNOWN: dict[tuple, dict[tuple, _Known]] = {}
_KNOWN_MAX = 1024


def _known_dead(knowns: dict[tuple, _Known], jitted: Any = None) -> bool:
    """Whether a function's remembered signatures are no longer `jitted`'s (without it:
    their function is gone)."""
    first = next(iter(knowns.values()), None)
    if first is None:
        return True
    live = first.jitted()
    return live is None if jitted is None else live is not jitted


def _find_jitted(fun: Any, frame: Any) -> Any:
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
            if type(v) is _JIT_TYPE and _compat.jit_wrapped_fun(v) is fun:
                return v
    return None


class Recorder:
    """Collects top-level JAX activity while `with Recorder(...)` is active.

    top_filename: the file whose module-level frames are the block's statements (the cell),
    used to group eager ops by statement.
    observers: objects told about the calls (the pipeline passes a
    jaxviz.diagnostics.observer.CellObserver, for the diagnostics); each may define
    enter(recorder), on_jit(call, frame, run) -> run(), on_eager(prim, args, params, out,
    frame), on_call(jitted, arg0, frame, slot) (Python >= 3.12: before each top-level call
    of a jitted function, whether it then takes the C++ fast path or Python's; it must not
    raise), on_key_op(prim, args, params, out, frame, slot) with `key_prims` (Python >= 3.12:
    the eager ops of those primitives in a summarised statement's runs, which on_eager does
    not see) and exit(). A slot (_key_slot) names a key consumption's place in a counted
    run, or is None.
    """

    def __init__(
        self,
        top_filename: str | None = None,
        observers: list | tuple = (),
        namespace: dict | None = None,
        calls_deferred: bool = False,
    ):
        self.top_filename = top_filename
        # Python >= 3.12: CALL events from `watch_calls()` on, not from __enter__
        self.calls_deferred = calls_deferred
        self._calls_on = False  # watch_calls() turned them on (and not off again)
        self._resume_calls = False  # their state when `suspended` stepped aside
        self._namespace = namespace  # the cell's globals: its jitted functions, at __enter__
        self.observers = list(observers)
        self._obs_jit = [o for o in self.observers if hasattr(o, "on_jit")]
        self._obs_eager = [o for o in self.observers if hasattr(o, "on_eager")]
        self._obs_call = [o for o in self.observers if hasattr(o, "on_call")]
        self._obs_keys = [o for o in self.observers if hasattr(o, "on_key_op")]
        self._obs_known = [o for o in self.observers if hasattr(o, "on_known")]
        # the primitives whose eager ops the key observers follow in summarised runs
        self._key_prims = frozenset().union(*(o.key_prims for o in self._obs_keys))
        self._watchers = [o.watches for o in self._obs_call if hasattr(o, "watches")]
        self.entries: dict[int, _JitEntry] = {}
        self.eager_runs: list[EagerRun] = []
        self._busy = False
        self._thread = threading.get_ident()
        self._monitoring = _compat.has_sys_monitoring()
        self._tool: int | None = None
        # Python < 3.12: the call counter (_compat.counting_jit_calls), while on; and
        # whether it counts (the counted path of _record_jit, as CALL events on 3.12)
        self._counter: Any = None
        self._counting = False
        # the tool's CALL events stay set when the recording ends (_Monitor.keep_on)
        self._kept_on = False
        self._local_open = False  # it set the revived places' local events (open_local)
        # a CALL event was turned off where the next recording must see it again (_Monitor)
        self._stale = False
        # the local events' callback (_Monitor.open_local): their places are not the
        # global events' to see
        self._on_local_event = functools.partial(self._on_call_event, local=True)
        self._pending: tuple | None = None  # the last CALL event of a PjitFunction
        self._counts: dict[tuple, int] = {}  # (id(pjit), code, offset, arg0 key) -> calls
        self._library: dict[tuple, tuple] = {}  # count key -> the library's (file, line)
        # id(code object) -> whose: _TOP (the cell's module code), _USER, _LIBRARY
        # (installed, or the standard library's) or _JAX (JAX's or jaxviz's own)
        self._user_code: dict[int, int] = {}
        # (id(code), offset, id(caller's code), its lasti) -> the user's site there
        # (_library_site); the codes are in _keep
        self._sites: dict[tuple, Any] = {}
        # (id(code), offset) of the user's functions' call sites -> calls of callables
        # that are no jit there (_on_call_event)
        self._plain_sites: dict[tuple, int] = {}
        # (id(code), offset) of JAX's or a library's places that called the user's code
        # (_passed_in) -> calls: their events stay on for the first JIT_CALLS_WATCHED
        self._passing: dict[tuple, int] = {}
        self._depths: list[int] = []  # _statement_at: where the cell's frame was lately
        # the summarised statement whose call the last eager op belonged to: (the cell's
        # code, id(its frame), its {lasti: line})
        self._fast: tuple | None = None
        self._sig_of: dict[tuple, int] = {}  # (id(pjit), arg0 key) -> entry key
        self._sig_clash: set[tuple] = set()  # (id(pjit), arg0 key) of several signatures
        self._sig_then: dict[tuple, int] = {}  # count key -> _sig_of's at its first call
        # (count key, entry key) -> the calls there that took the Python path. One count
        # key (a place, a jit, its first argument's type) can serve several signatures
        # (jax.random.normal(key, shape) for two shapes on one line of an init): the first
        # one seen there keeps the fast path, the jit's others take the Python path
        # (`_ambiguous`: ids of such jits -> the calls refused the fast path so far), so its
        # fast calls there are the first one's. After JIT_CALLS_WATCHED refused calls (a
        # loop whose shapes keep changing: buckets) its calls keep the fast path and its
        # counts are lower bounds ("+"): the place's fast calls are no one signature's
        self._sig_calls: dict[tuple, int] = {}
        self._sig_first: dict[tuple, int] = {}  # count key -> the first signature's key
        # keys of the entries _known_call made (dropped when no call had their signature)
        self._guesses: set[int] = set()
        # (id(jitted), a0) -> jaxpr: a known signature no call of the cell had yet: the
        # observers hear of its first (on_known), at its CALL event
        self._unheard: dict[tuple, Any] = {}
        self._ambiguous: dict[int, int] = {}
        self._mixed: set[int] = set()  # ids of jits whose refusals ran out
        self._by_pjit: dict[int, list[int]] = collections.defaultdict(list)
        self._keep: dict[int, Any] = {}  # PjitFunctions seen (ids stay valid)
        self._ctx: Any = None  # the dispatch hooks, while active
        self._order = itertools.count()
        self._run_break = False  # a jitted call ended the eager run
        self._call_at: int | None = None  # offset of the cell's last call since the last eager op
        # Python < 3.12 (no CALL events): the mark an eager op leaves on the frame its
        # statement called (`_fresh_call`), unique to this recording
        self._mark: Any = None if self._monitoring else (lambda *a: None)
        # the ops a generator the cell resumes makes (`next(g)`, `for x in gen()`): the
        # mark they leave on the frame the generator called, and (id(generator frame), its
        # offset) at the last one (`_resumed`)
        self._gen_mark: Any = lambda *a: None
        self._gen_at: tuple[int, int] | None = None
        # the current eager run: [file, line, frame id, lasti, its EagerRun, counted only,
        # phase (runs of one execution of the statement, split by its jitted calls), the
        # key consumptions seen in this phase of a counted run (_key_slot)]
        self._cur: list | None = None
        # (file, line) -> the runs of its last executions, one list of phases each
        self._stmt_runs: dict[tuple, list] = {}
        self._unsummarised: set[tuple] = set()  # (file, line): see _unsummarise
        self._tally: dict[tuple, list] = {}  # (file, line) -> the runs (one per phase) its
        # later executions count on
        self._fast_given = False  # Python < 3.12: the fast path may hold calls (_fast_ok)
        # Python >= 3.12: the jitted functions whose C++ dispatch entries this cell emptied
        # (each at its first call: that call then comes through Python, where its jaxpr is
        # seen), by _compat.dispatch_key -> the first object seen of the function; and (any
        # Python) those refused the fast path, whose "never fast" entries are dropped on
        # exit: id -> the PjitFunction, None: one not known, drop them all
        self._cleared: dict[tuple, Any] = {}
        # id(jitted object) -> (it, its function's first object in _cleared): the CALL
        # events after the first (dispatch_key costs ~2 us: a jax.random sampler's jit,
        # called at every step of an eager loop)
        self._canon: dict[int, tuple[Any, Any]] = {}
        # (id(code), offset) of a library's place calling a watched jit -> what its last
        # event there found (_call_again)
        self._again: dict[tuple[int, int], tuple] = {}
        self._refused: dict[int | None, Any] = {}
        self._in_summary = False  # the jitted call being recorded runs in a summarised statement
        self._hot: set[tuple] = set()  # count keys of call sites no longer watched
        self._jax_sites: dict[tuple, int] = {}  # (id(code), offset) of JAX's own -> calls
        self._hot_funs: set[int] = set()  # ids of jits some of whose calls went unwatched
        self._fast_next = False  # Python < 3.12: the call just recorded may go fast
        # Python < 3.12: id of the jit whose entries _last_watched emptied in the call now
        # running (its "never fast" entry is dropped: not one _exit must drop)
        self._dropping: int | None = None
        self.internal_errors: list[Exception] = []  # jaxviz's own failures, kept for debugging
        self._open_frame: tuple | None = None  # the latest outermost trace frame
        self._opened_at = 0.0  # when it opened (time.perf_counter())
        # For observers, while a jitted call is dispatched (their on_jit): how long JAX took
        # to trace it, or None when JAX's tracing cache served its jaxpr (an earlier cell or
        # call traced it)
        self.trace_seconds: float | None = None
        self._frames_ctx: Any = None  # the trace-frame watch, while active
        # Each top-level call of a jitted function, in call order, for the live memory chart
        # (jaxviz.memory.timeline): (time.perf_counter(), the jitted function or its name,
        # the calling code object or file, the bytecode offset or line). None: not asked
        # for, and not paid for. Capped at MAX_CALL_MARKS; `calls_dropped` counts the rest.
        self.calls: list[tuple[float, Any, Any, int]] | None = None
        self.calls_dropped = 0
        # time spent in jaxviz's own work inside the hooks and CALL events (JAX's work they
        # wrap excluded), for the cell's CellCost (Python's own cost of raising each event,
        # ~1 us, and of the hooks' frames, is not: the cost line is a lower bound)
        self.hook_seconds = 0.0

    # --- the hooks ------------------------------------------------------------------------

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
                run = functools.partial(obs.on_jit, call, frame, run)
            del call
            return run()
        finally:
            self._busy = False
            self.hook_seconds += time.perf_counter() - t0

    def _jax_work(self, run: Callable[[], Any]) -> Any:
        __tracebackhide__ = True
        t1 = time.perf_counter()
        try:
            return run()
        finally:
            self.hook_seconds -= time.perf_counter() - t1

    def _record_jit(self, call: _compat.JitCall, frame: Any) -> None:
        jaxpr = call.jaxpr
        key = id(_compat.open_jaxpr(jaxpr))
        entry = self.entries.get(key)
        pending = self._pending
        jitted = pending[0] if pending and _compat.jit_wrapped_fun(pending[0]) is call.fun else None
        if jitted is None and (entry is None or entry.jitted is None):
            jitted = _find_jitted(call.fun, frame)
        new = entry is None  # a signature not called before in this recording
        if entry is None:
            names = list(call.arg_names)
            if not names or all(n.startswith("arg") for n in names):
                names = flat_arg_names(call.args, call.kwargs, _compat.param_names(call.fun))
            # a library's jit called on the user's behalf: the user's names for its arguments
            via = places.user_arg_names(frame, call.args_flat, self.top_filename)
            if via is not None and len(names) == len(call.args_flat):
                names = [via[1].get(i, n) for i, n in enumerate(names)]
            entry = _JitEntry(
                name=call.name or _compat.fun_name(call.fun),
                jaxpr=jaxpr,
                fun=call.fun,
                jitted=jitted,
                args_spec=specs(call.args),
                kwargs_spec=specs(call.kwargs),
                arg_names=names,
                donated=call.donated,
                order=next(self._order),
                root_code=_compat.user_code(call.fun),
            )
            code = entry.root_code
            entry.own = code is not None and places.is_user_file(
                code.co_filename, self.top_filename
            )
            self.entries[key] = entry
            entry.static = _static_args(call, jitted)
        elif entry.jitted is None and jitted is not None:
            entry.jitted = jitted
            entry.static = _static_args(call, jitted)
        call.seen, call.jitted = True, entry.jitted
        counted = self._tool is not None or self._counting  # by the CALL event or counter
        if counted and jitted is not None and pending is not None:
            both = (pending[1], key)  # this site and arg0: exact
            self._sig_calls[both] = self._sig_calls.get(both, 0) + 1
            if self._sig_first.setdefault(pending[1], key) != key:
                self._ambiguous.setdefault(id(jitted), 0)
            pa = (id(jitted), pending[3])
            if self._sig_of.setdefault(pa, key) != key:  # learn its signature
                self._sig_clash.add(pa)  # (several: the CALL event cannot tell them)
                self._sig_of[pa] = key
            if key not in self._by_pjit[id(jitted)]:
                self._by_pjit[id(jitted)].append(key)
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
                    self._unsummarise(cur)  # (not for a new jit a later line calls)
                    cur = None
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

    def _last_watched(self, entry: _JitEntry, n: int) -> None:
        """Python < 3.12 (no CALL events to count fast calls), at a call site's n-th call
        of this function and signature: a site that called it JIT_CALLS_WATCHED times (a
        library's jit: once) gets JAX's fast path; its later calls go uncounted (the trace
        says so). The C++ entry a watched call left says "never fast", and the one a call
        is served from cannot be replaced while it runs (emptied then, the entry it fills
        is dropped and the next call takes the Python path once more): it is dropped at
        the call before the last watched one, whose call then makes a new one, fast."""
        if not entry.own:
            most = 1
        else:
            most = JIT_CALLS_WATCHED if self.calls is None else CHARTED_CALLS_WATCHED
        if n + 1 == most:
            if entry.jitted is not None:
                _compat.clear_fun_cache(entry.jitted)
                self._dropping = id(entry.jitted)
            else:  # (this call's function: not yet noted by the book, see clear_jits_of)
                _compat.clear_jits_of(entry.fun)
        if n >= most:
            self._fast_next = entry.uncounted = True

    def _count_calls(self, on: bool) -> None:
        """Python < 3.12: the call counter on (every jitted call is told to
        _on_counted_call) or off again."""
        if on and self._counter is None and not self._monitoring:
            self._counter = _compat.counting_jit_calls(self._on_counted_call)
            self._counting = self._counter.__enter__()
        elif not on and self._counter is not None:
            counter, self._counter = self._counter, None
            self._counting = False
            counter.__exit__(None, None, None)

    def _on_counted_call(self, jitted: Any, args: tuple) -> None:
        """Python < 3.12, the call counter: a call of a jitted function, before JAX
        dispatches it, on its fast path or not. What a CALL event is on Python >= 3.12
        (_on_call_event), for the user's own places only: the call is counted at its place
        and first argument, and marked on the live chart's time axis; a call that then
        takes JAX's Python path is recorded against this count (_record_jit's counted
        path), and keeps the fast path after it unless a diagnostic must see every call
        (_keep_fast). A library's or JAX's place (an operator's jnp function) is left to
        the Python path, as before. The hot path of a loop of jitted calls: keep it lean."""
        if self._busy or _get_ident() != self._thread or not _is_top_level():
            return
        t0 = _perf_counter()
        try:
            known = None
            a0 = _first_arg(args[0] if args else None)
            frame = sys._getframe(2)  # (the counter's __call__ is 1 up)
            seen = self._canon.get(id(jitted))
            if seen is not None and seen[0] is jitted:
                canon = seen[1]
                if canon is None:  # JAX's per-primitive jit: its eager op is seen at bind
                    return
            elif _compat.is_per_primitive(jitted):
                self._canon[id(jitted)] = (jitted, None)
                return
            else:  # one object per function (`jax.jit(step)(x)` in a loop: a new one each)
                dkey = _dispatch_key(jitted)
                canon = self._cleared.get(dkey)
                if canon is None:  # its first call in the cell: through Python, where its
                    # jaxpr is seen (entries from earlier cells are dropped), unless an
                    # earlier recording saw the one signature its entries serve
                    self._cleared[dkey] = canon = jitted
                    known = self._known_call(jitted, dkey, a0, frame)
                    if known is None:
                        _clear_fun_cache(jitted)
                self._canon[id(jitted)] = (jitted, canon)
            code = frame.f_code
            whose = self._user_code.get(id(code))
            if whose is None:
                whose = self._user_code[id(code)] = _whose(code, self.top_filename)
                self._keep[id(code)] = code  # its id stays valid
            if whose < _USER:  # a library's or JAX's place: its Python path tells
                self._pending = None
                return
            offset = frame.f_lasti
            key = (id(canon), id(code), offset, a0)
            counts = self._counts
            n = counts.get(key, 0)
            if not n:
                self._keep[id(canon)] = canon
                self._keep[id(code)] = code
                if known is None:
                    pa = (id(canon), a0)
                    if pa in self._sig_clash:
                        _clear_fun_cache(canon)  # its first call here shows which signature
                    elif pa in self._sig_of:
                        self._sig_then[key] = self._sig_of[pa]
            if known is not None:  # the place's fast calls are the known signature's
                self._sig_first.setdefault(key, known)
            elif self._unheard:  # another known signature's first call
                jaxpr = self._unheard.pop((id(canon), a0), None)
                if jaxpr is not None:
                    for obs in self._obs_known:
                        obs.on_known(jaxpr, frame)
            counts[key] = n + 1
            calls = self.calls
            if calls is not None:
                if len(calls) < MAX_CALL_MARKS:
                    calls.append((_perf_counter(), canon, code, offset))
                else:
                    self.calls_dropped += 1
            self._pending = (canon, key, None, a0)
            self._run_break = True
        except Exception as e:  # jaxviz's own failure must never become the user's
            self.internal_errors.append(e)
        finally:
            self.hook_seconds += _perf_counter() - t0

    def _on_eager(self, prim: Any, args: tuple, params: dict, run: Callable[[], Any]) -> Any:
        # The hot path of eager code (every primitive applied at top level): keep it lean.
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
        if self._mark is None and not callee.f_code.co_flags & _RESUMABLE:
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

    def _statement_at(self, frame: Any) -> tuple[Any, int, bool]:  # frame: _OWN_DEPTH up
        """The cell's module frame at or above `frame` (None: not under it), the line it
        is at (_compat.frame_line: remembered by code object and offset, as an eager loop
        asks for the same few thousands of times) and (Python < 3.12) whether the call it
        makes there is a new one (`_fresh_call`)."""
        top_file = self.top_filename
        # The depths (from here) the module frame was found at lately: sys._getframe looks
        # in C, a walk in Python costs ~0.25 us a frame (an eager op is ~15 frames deep).
        # Only one module frame of the cell can be on the stack: a hit is the walk's answer.
        getframe = sys._getframe
        for depth in self._depths:
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
            self._depths.insert(0, depth)
            del self._depths[4:]
        return f, _frame_line(f), self._fresh_call(getframe(depth - 1), f, depth - 1)

    def _fresh_call(self, callee: Any, top: Any, depth: int) -> bool:
        """Whether the eager op being recorded starts a new run of the cell's statement at
        `top`'s place, told by `callee`, the frame the statement called there (the
        caller's sys._getframe(depth)):

        - a generator the statement resumes (`x = next(g)`, `for x in gen()`): a new
          resumption (`_resumed`), on every Python version; also, before Python 3.12,
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
        if self._mark is not None and callee.f_code.co_name in _COMPREHENSIONS and depth > 1:
            inner = sys._getframe(depth)  # (Python < 3.12: the frame a comprehension called)
            if inner.f_back is callee and inner.f_code.co_flags & _RESUMABLE:
                return self._resumed(inner, sys._getframe(depth - 1))
        if callee.f_code.co_flags & _RESUMABLE:
            # (the frame `callee` called: from here, one frame deeper than the caller,
            # the same depth reaches one frame below `callee`)
            return self._resumed(callee, sys._getframe(depth))
        mark = self._mark
        if mark is None or callee.f_trace is mark:  # (Python >= 3.12: CALL events tell)
            return False
        callee.f_trace = mark
        return True

    def _resumed(self, gen: Any, inner: Any) -> bool:
        """Whether an eager op made under `gen`, a generator frame the cell's statement
        resumes, belongs to a new resumption: the generator went back in its code since the
        last op under it (its loop came round to the next `yield`), or made a new call at
        the same place (`yield jnp.asarray(b)`: `inner`, the frame it called, is new). A
        resumption is a run of the statement, as a call is: without this, a loop that
        resumes a generator making eager ops (a data loader) was one endless run, every op
        recorded, none counted, as no call of the cell's frame told its runs apart."""
        at, lasti = self._gen_at, gen.f_lasti
        self._gen_at = (id(gen), lasti)
        fresh = False
        if inner.f_back is gen and inner.f_trace is not self._gen_mark:
            inner.f_trace = self._gen_mark
            fresh = True
        if at is None or at[0] != id(gen):
            return True
        return lasti < at[1] or (lasti == at[1] and fresh)

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
            inner = self._inner_site(frame)
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
        if again or self._run_break:
            # a new run: of the same statement after a jitted call (its next phase), or of
            # a statement (phase 0)
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
            else:
                if self._fast_given and stmt[:2] not in self._stmt_runs:
                    # a statement not run before (after the loop): jitted calls must come
                    # through Python again. (One of the loop's own that is not summarised
                    # keeps the fast path: clearing at each of its runs cost 22x on an eager
                    # optimizer loop; its jitted calls of functions a summarised statement
                    # also calls may then go uncounted.)
                    self._fast_given = False
                    _compat.clear_cpp_dispatch_caches()
                run = EagerRun(stmt[0], stmt[1], stmt[2], stmt[3], order=next(self._order))
                self.eager_runs.append(run)
                cur = self._cur = [*stmt, run, False, phase, 0]
        assert cur is not None
        cur[3] = stmt[3]
        if cur[5]:
            if top is not None:  # its next ops: _counted_again, from _on_eager's frame
                code = top.f_code
                self._fast = (code, id(top), _compat.code_lines(code))
            return True
        self._fast = None
        return self._record_op(cur[4], prim, args, params, out, frame, inner)

    def _record_op(
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
            inner = self._inner_site(frame)
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
    def _inner_site(frame: Any) -> tuple | None:
        """(file, line, function) of the user's line that made an eager op."""
        staged = _compat.current_user_frame()  # set when JAX evaluates a staged jaxpr
        if staged is not None:
            return (staged.file, staged.line, staged.fn.rsplit(".", 1)[-1])
        return _compat.site_of(frame)

    def _settle(self, run: EagerRun, phase: int) -> None:
        """A statement's run ended: after EAGER_RUNS_RECORDED executions of one statement
        made the same ops on the same types in each phase (the runs between its jitted
        calls), as a Python loop's body does, its later executions are counted on its
        last runs (`counted`), not recorded op by op. (The runs' keys are asked only then:
        a statement that runs once, as most do, never needs its own.)"""
        where = (run.filename, run.line)
        if run.truncated or where in self._unsummarised:
            return
        runs = self._stmt_runs.setdefault(where, [])
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
            self._tally[where] = list(runs[-1])

    def _unsummarise(self, cur: list) -> None:
        """Python < 3.12: a summarised statement's execution called a jit through Python
        with a signature its recorded runs' calls did not have (a ragged last batch): its
        runs are not alike after all. This execution is not counted on them; the statement
        is recorded op by op from now on, never summarised again in this recording (with
        two signatures in JAX's cache, a counted run could not tell whose call it made);
        the calls its runs counted are lower bounds, as its later ones run on the fast
        path. (A signature's first call in a recording always comes through Python: the
        jits' entries are emptied at its start.) The next op starts a new run."""
        where = (cur[0], cur[1])
        reps = self._tally.pop(where, None) or []
        self._unsummarised.add(where)
        self._stmt_runs.pop(where, None)
        for r in reps:  # (_count_run counted this execution on them at its start)
            r.counted = max(r.counted - 1, 0)
            for key, site in r.jit_calls:
                entry = self.entries.get(key)
                if entry is not None:
                    if entry.sites.get(site, 0) > 0:
                        entry.sites[site] -= 1
                    entry.uncounted = True
        self._cur = self._fast = None

    def _count_run(self, reps: list[EagerRun]) -> None:
        """One more execution of a summarised statement: its runs, and on Python < 3.12
        (jitted calls on JAX's fast path then, unseen) the jitted calls they made."""
        for r in reps:
            r.counted += 1
            if not self._monitoring:
                for key, site in r.jit_calls:
                    entry = self.entries.get(key)
                    if entry is not None:
                        entry.sites[site] += 1

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
        with several signatures, must take the Python path again (`_ambiguous`)."""
        n = self._ambiguous.get(id(jitted))
        if n is None or self._in_summary or not self._may_stop_watching():
            return False  # (--nans: every call takes the Python path anyway)
        if n >= JIT_CALLS_WATCHED:
            if id(jitted) not in self._mixed:  # its "never fast" entries: dropped (the
                self._mixed.add(id(jitted))  # next call of each makes a fast one)
                _compat.clear_fun_cache(jitted)
            return False
        self._ambiguous[id(jitted)] = n + 1
        return True

    def _may_stop_watching(self) -> bool:
        """Python >= 3.12: whether a busy call site's CALL events may be turned off; not
        while a diagnostic must see every call (--nans). The event is off at that place for
        any callable: a jit the cell calls there only, never before, and JAX had cached
        (an earlier cell called it) goes unseen; a loop calls one function at one place."""
        return not options.check_every_call

    def _watched(self, jitted: Any) -> bool:
        """Whether an observer records something at each CALL event of `jitted` (the
        keys jax.random's jits consume)."""
        for watches in self._watchers:  # noqa: SIM110 (a generator costs ~1 us: every such call)
            if watches(jitted):
                return True
        return False

    def _summarised(self, frame: Any) -> bool:
        """Whether `frame` runs in a statement of the cell's that is summarised (a loop's
        body, seen EAGER_RUNS_RECORDED times alike): the diagnostics saw its first runs, and
        check its later calls only when asked (--nans: every call)."""
        if not self._tally or options.check_every_call:
            return False
        top = _compat.module_frame(frame, self.top_filename)
        return top is not None and (top.f_code.co_filename, top.f_lineno or 0) in self._tally

    def _fast_ok(self) -> bool:
        """Python < 3.12: a jitted call may be cached on JAX's fast path while the statement
        calling it is summarised (jaxviz counts it from the statement's runs), or once its
        call site called it JIT_CALLS_WATCHED times; never while a diagnostic needs to see
        each call (a key it consumes, --nans)."""
        cur = self._cur
        busy, self._fast_next = self._fast_next, False
        if cur is not None and cur[5]:  # summarised: the diagnostics saw its first runs
            return True
        return busy and not any(getattr(o, "needs_every_call", False) for o in self.observers)

    def _later(self, code: Any) -> None:
        """A place in `code` turned off now must fire again in the next recording."""
        if self._kept_on:
            _MONITOR.keep(code)
        else:
            self._stale = True

    def _on_call_event(
        self, code: Any, offset: int, callable_: Any, arg0: Any, local: bool = False
    ) -> Any:
        # The hot path: runs before every call the watched code makes. Keep it lean; an
        # exception raised here would surface in the user's code, so none may escape.
        if not local and self._local_open and id(code) in _MONITOR.live:
            return _DISABLE  # the local events see its places
        whose = self._user_code.get(id(code))  # by id: hashing a code object is slow
        if whose == _TOP and type(callable_) is _FUNCTION:
            # the cell's own call of a Python function (most of its calls): only its place
            # matters, which tells one run of a loop's statement from the next
            self._call_at = offset
            return None
        t0 = _perf_counter()  # (its own time is jaxviz's: the cell's cost line counts it)
        try:
            memo = self._again.get((id(code), offset))
            if memo is not None and self._call_again(memo, callable_, arg0):
                if whose == _TOP:
                    self._call_at = offset
                return None
            if whose is None:
                whose = self._user_code[id(code)] = _whose(code, self.top_filename)
                self._keep[id(code)] = code  # its id stays valid
            user = whose >= _USER
            if whose == _TOP:
                self._call_at = offset
                if type(callable_) is _FUNCTION:  # (its first call here: see above)
                    return None
            kind = type(callable_)
            if kind is not _JIT_TYPE:
                func: Any = None
                if kind is _PARTIAL and not callable_.args:
                    func = callable_.func  # partial(jitted, **static): jax.random's samplers
                elif kind is _METHOD:
                    func = callable_.__func__  # a jitted method, bound
                if type(func) is not _JIT_TYPE:
                    if user and kind in _NEVER_JIT and type(arg0) is _JIT_TYPE:
                        # a jit the user's code hands to C code (`map(f, xs)`, which
                        # calls it where no event fires): its calls take the Python path
                        self._handed(arg0)
                        return None
                    # a library call site that calls no jit; one of the user's that calls
                    # a builtin (the same name may be a jit next time, a builtin not); one
                    # in a function of the user's that called no jit JIT_CALLS_WATCHED times
                    # (a helper a loop calls). The cell's own sites stay: their calls tell
                    # one run of a loop's statement from the next (_call_at)
                    if not user or kind in _NEVER_JIT:
                        if (
                            whose != _TOP
                            and not self._stale
                            and _SAFE_OFF.get((id(code), offset)) != (code, id(callable_))
                        ):
                            if self._passed_in(callable_, whose):
                                # a place the next cell may call a jit at: seen again
                                # then (_Monitor.revive); without events between cells,
                                # its event stays on (a DISABLE would have every place
                                # fire again in the next cell: ~2,700 events, ~2.5 ms on
                                # an eager grad/vmap cell), unless it is busy
                                if self._kept_on:
                                    _MONITOR.keep(code)
                                    return _DISABLE
                                at = (id(code), offset)
                                n = self._passing.get(at, 0) + 1
                                self._passing[at] = n
                                if n < JIT_CALLS_WATCHED:
                                    return None
                                self._stale = True
                            else:  # (a place fires again after its code ran without
                                # events, as in a plain cell, or was running when they were
                                # set: the same callable each time)
                                if len(_SAFE_OFF) >= _FILE_WHOSE_MAX:
                                    _SAFE_OFF.clear()
                                _SAFE_OFF[(id(code), offset)] = (code, id(callable_))
                        return _DISABLE
                    if whose == _USER:
                        at = (id(code), offset)
                        n = self._plain_sites.get(at, 0) + 1
                        self._plain_sites[at] = n
                        if n >= JIT_CALLS_WATCHED and self._may_stop_watching():
                            self._later(code)
                            return _DISABLE
                    return None
                callable_ = func
            if self._busy or _get_ident() != self._thread or not _is_top_level():
                # a jit JAX calls inside the work of a call jaxviz is watching (an eager
                # op's primitive, 1 in 2 events of an eager loop): never the user's call
                if self._busy and whose == _JAX:
                    if not _compat.is_impl_code(code):  # (an array operator's place: the
                        self._later(code)  # user's own call next time)
                    return _DISABLE
                return None
            # tells signatures apart, cheaply: a loop's carried state is weakly typed at its
            # first call only (`w = jnp.full(n, 0.01)`, then `w = step(w, x)`), which made one
            # place of two signatures whose calls all took the Python path (_refuse_mixed)
            a0 = _first_arg(arg0)
            frame = sys._getframe(1)
            known = None
            seen = self._canon.get(id(callable_))
            if seen is not None and seen[0] is callable_:
                canon = seen[1]
            else:
                dkey = _dispatch_key(callable_)
                canon = self._cleared.get(dkey)
                if canon is None:  # its first call in the cell: through Python, where its
                    # jaxpr is seen (entries from earlier cells are dropped), unless an
                    # earlier recording saw the one signature its entries serve
                    self._cleared[dkey] = canon = callable_
                    known = self._known_call(callable_, dkey, a0, frame)
                    if known is None:
                        _clear_fun_cache(callable_)
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
                if whose == _JAX and self.calls is None and not watched:
                    # JAX's own place calling a jit (an array operator's jnp function):
                    # watched for its first calls, whichever user lines they serve
                    at = (id(code), offset)
                    hits = self._jax_sites.get(at, 0) + 1
                    self._jax_sites[at] = hits
                    if hits > JIT_CALLS_WATCHED and self._may_stop_watching():
                        self._hot_funs.add(id(callable_))
                        self._pending = None
                        self._run_break = True
                        self._later(code)
                        return _DISABLE
                site = self._library_site(code, offset, whose, frame)
                key = (
                    (id(callable_), site[0], site[1], a0)
                    if site
                    else (id(callable_), id(code), offset, a0)
                )
                if site is not None and key not in self._counts:
                    self._library[key] = (code.co_filename, _line_of(code, offset))
            counts = self._counts
            n = counts.get(key, 0)
            if not n:
                self._keep[id(callable_)] = callable_  # ids in the keys stay valid
                if known is None:
                    # a new place's calls are the signature its first argument names (the
                    # only one it may name: any other took the Python path here first), or,
                    # when several share that first argument (a key, then states of two
                    # shapes), the one its first call here shows, through Python
                    pa = (id(callable_), a0)
                    if pa in self._sig_clash:
                        _clear_fun_cache(callable_)
                    elif pa in self._sig_of:
                        self._sig_then[key] = self._sig_of[pa]
            if known is not None:  # the place's fast calls are the known signature's
                self._sig_first.setdefault(key, known)
            elif self._unheard:  # another known signature's first call
                jaxpr = self._unheard.pop((id(callable_), a0), None)
                if jaxpr is not None:
                    for obs in self._obs_known:
                        obs.on_known(jaxpr, frame)
            counts[key] = n + 1
            calls = self.calls
            if (
                n + 1 >= JIT_CALLS_WATCHED
                and user
                and calls is None
                and not watched
                and self._may_stop_watching()
            ):
                self._hot.add(key)  # later calls here go unseen: "16+ calls"
                self._pending = None
                if whose == _USER:  # (the cell's module code is compiled anew each run)
                    self._later(code)
                return _DISABLE
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
        if _first_arg(arg0) != a0:
            return False  # (another signature: counted apart)
        self._counts[key] += 1
        self._pending = (jitted, key, None, a0)
        self._run_break = True
        slot = self._key_slot(id(jitted))
        for obs in self._obs_call:
            obs.on_call(jitted, arg0, frame, slot)
        return True

    def _known_call(self, jitted: Any, dkey: tuple, a0: tuple, frame: Any) -> int | None:
        """At the first call of `jitted` in the recording (its CALL event): when an earlier
        recording saw the signatures its C++ entries serve (_Known), and this call's first
        argument names one of them, that signature's entry (key), made here from what was
        remembered, as are the others' (kept only if a call has theirs), and the call keeps
        the fast path (its Python path, ~0.8 ms of a jitted function's first call in a
        cell, is skipped; its outputs go unchecked: jaxviz.diagnostics.nans.later.later_nans
        looks at what the cell kept). None: its entries must be emptied, its call seen on
        the Python path."""
        knowns = _KNOWN.get(dkey)
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
            del _KNOWN[dkey]  # its entries may be others'
            return None
        pid = id(jitted)
        for k in knowns.values():
            jaxpr = jaxprs[k.a0]
            key = id(_compat.open_jaxpr(jaxpr))
            if key not in self.entries:
                self._guesses.add(key)
                self.entries[key] = _JitEntry(
                    name=k.name,
                    jaxpr=jaxpr,
                    fun=_compat.jit_wrapped_fun(jitted),
                    jitted=jitted,
                    args_spec=k.args_spec,
                    kwargs_spec=k.kwargs_spec,
                    arg_names=list(k.arg_names),
                    donated=k.donated,
                    order=next(self._order),
                    root_code=k.root_code,
                    static=k.static,
                    own=k.own,
                )
                if k is known:
                    for obs in self._obs_known:
                        obs.on_known(jaxpr, frame)
                else:
                    self._unheard[(pid, k.a0)] = jaxpr
            self._sig_of[(pid, k.a0)] = key
            if key not in self._by_pjit[pid]:
                self._by_pjit[pid].append(key)
        return id(_compat.open_jaxpr(jaxprs[a0]))

    def _handed(self, jitted: Any) -> None:
        """`jitted` was handed to a callable (map, functools.reduce): a known function's
        entries are emptied, so that calls no CALL event shows still come through Python."""
        dkey = _dispatch_key(jitted)
        if dkey in _KNOWN and dkey not in self._cleared:
            self._cleared[dkey] = jitted
            _clear_fun_cache(jitted)

    def _remember_known(self) -> None:
        """When a recording that counted its calls ends (CALL events on Python >= 3.12, the
        call counter on 3.11): each of the user's own jitted functions it saw with one
        signature (at its places' CALL events and on the Python path), whose C++ cache now
        holds that signature's entry alone, is remembered as _Known; unless an
        observer must see its first call in each cell (`first_call_needed`: a key it
        consumes). Libraries' jits (jnp.log, called eagerly) are not: the outputs of their
        first calls in each cell are checked for NaN and Inf; but for those whose results
        are integers or booleans (jnp.eye's `add` and `equal` under jax.jacfwd), which can
        hold neither."""
        if options.check_every_call:
            return
        a0s: dict[int, dict[tuple, int]] = collections.defaultdict(dict)  # pid -> a0 -> key
        for (pid, a0), key in self._sig_of.items():
            a0s[pid][a0] = key
        for pid, keys in self._by_pjit.items():
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
                or pid in self._mixed
                or pid in self._refused
                or _compat.cache_entries(jitted) != len(keys)
                # (a library's jit, jnp.log: eager code's NaNs are its)
                or not all(e.own or _compat.exact_results(e.jaxpr) for e in entries)
                or any(o.first_call_needed(e.jaxpr) for o in self._obs_known for e in entries)
            ):
                continue
            try:
                knowns = {
                    a0: _Known(
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
                    )
                    for a0, entry in ((a0, self.entries[k]) for a0, k in by_a0.items())
                }
            except TypeError:  # not weakly referable
                continue
            if len(_KNOWN) >= _KNOWN_MAX:  # the dead first, then all
                for k in [k for k, v in _KNOWN.items() if _known_dead(v)]:
                    del _KNOWN[k]
                if len(_KNOWN) >= _KNOWN_MAX:
                    _KNOWN.clear()
            _KNOWN[_dispatch_key(jitted)] = knowns

    def _passed_in(self, fn: Any, whose: int) -> bool:
        """Whether the place calling `fn` (no jit) may call a jit of the user's another
        time: JAX's or a library's place calling the user's code, or a place of the user's
        that was handed `fn` (an argument or closure variable of its frame: `apply(f, x)`).
        JAX's places handed JAX's own functions stay off (jax.tree.map's place fires no
        event: C code runs it)."""
        if whose < _USER:
            kind = type(fn)
            if kind in _NEVER_JIT:
                return False
            # the usual case (thousands per eager transformation): a plain function, whose
            # code's owner is remembered
            if (
                kind is _FUNCTION
                and "__wrapped__" not in fn.__dict__
                and self._owner(fn.__code__) < _USER
            ):
                return False
            return _calls_users_code(fn, self.top_filename)
        caller = sys._getframe(2)  # (this, then the CALL event's callback)
        code = caller.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount] + code.co_freevars
        local = caller.f_locals
        # (a dataclass's __init__ has its default factories as closure variables)
        return any(local.get(n) is fn for n in names if not n.startswith("__dataclass_"))

    def _owner(self, code: Any) -> int:
        """Whose `code` is (_whose), remembered by its id (the code kept: the id stays
        valid). _on_call_event asks inline: it runs for every call."""
        whose = self._user_code.get(id(code))
        if whose is None:
            whose = self._user_code[id(code)] = _whose(code, self.top_filename)
            self._keep[id(code)] = code
        return whose

    def _library_site(self, code: Any, offset: int, whose: int, frame: Any) -> Any:
        """The user's site of a library's or JAX's call of a jit at (code, offset) in
        `frame` (places.user_site). A JAX function the user's code called directly (a
        jax.random sampler calling its jit, once per step of an eager loop) has its answer
        remembered by the two places: the user's frame decides it alone."""
        back = frame.f_back
        if whose != _JAX or back is None:
            return places.user_site(frame, self.top_filename)
        bcode = back.f_code
        if self._owner(bcode) < _USER:
            return places.user_site(frame, self.top_filename)
        at = (id(code), offset, id(bcode), back.f_lasti)
        site = self._sites.get(at)
        if site is None:
            site = self._sites[at] = places.user_site(frame, self.top_filename)
        return site

    def _on_top_frame(self, frame: Any, name: str, arg_names: tuple, user: bool = True) -> None:
        # the latest outermost trace: kept until a dispatch shows it finished
        if _get_ident() == self._thread:
            self._open_frame = (frame, name, arg_names, user)
            self._opened_at = time.perf_counter()

    def partial_staged(self, error: BaseException) -> Staged | None:
        """What the last trace staged before `error` stopped it (else None)."""
        opened, self._open_frame = self._open_frame, None
        if opened is None:
            return None
        frame, name, arg_names, user = opened
        jaxpr = partial_jaxpr(frame)
        if jaxpr is None:
            return None
        frames = _compat.error_frames(error)
        if not user:  # a JAX wrapper's trace that _compat could not see through
            name = _user_names(frames, name, self.top_filename)
        names = list(arg_names) if len(arg_names) == len(jaxpr.invars) else []
        top = [(f, line, 1) for f, line, fn in frames if f == self.top_filename][:1]
        return Staged(
            name,
            jaxpr,
            kind="jit",
            arg_names=names,
            calls=1,
            call_sites=top,
            error=error,
            error_frames=frames,
            notes=[
                f"tracing {name} failed; the graph holds the {len(jaxpr.eqns)} "
                f"equations staged before the failure"
            ],
        )

    # --- install / remove -----------------------------------------------------------------

    def __enter__(self) -> Recorder:
        if self._monitoring:
            mon = sys.monitoring  # type: ignore[attr-defined]  # Python >= 3.12
            self._tool = _MONITOR.take()
            # the magic's: its events stay set after the cell, its places off
            self._kept_on = (
                self._tool is not None and self.calls_deferred and _MONITOR.keep_on(self._tool)
            )
            if self._tool is not None and not self._kept_on:
                mon.register_callback(self._tool, mon.events.CALL, self._on_call_event)
                if not self.calls_deferred:
                    mon.set_events(self._tool, mon.events.CALL)
                    # (trace_cell after traced cells: the places they kept are off)
                    self._open_local()
        if self._tool is None:
            # Python < 3.12: no CALL events show the calls JAX's fast path serves. The call
            # counter tells each call (_on_counted_call), and empties each function's
            # entries at its first call, as a CALL event does; without it, every jitted
            # function's first call must come through Python, where its jaxpr is seen
            self._count_calls(True)
            if not self._counting:
                _compat.clear_cpp_dispatch_caches()
        else:
            # a CALL event empties each function's entries at its first call; those called
            # where no event fires (by map() or C code) are the cell's own: emptied now
            for v in list((self._namespace or {}).values()):
                if type(v) is _JIT_TYPE:
                    dkey = _dispatch_key(v)
                    knowns = _KNOWN.get(dkey)
                    if knowns is not None and not _known_dead(knowns, v):
                        continue  # its first CALL event decides (_known_call); handed to
                        # C code, it is emptied then (_handed)
                    self._cleared[dkey] = v
                    _compat.clear_fun_cache(v)
        self._ctx = _compat.patched_dispatch(self._on_jit, self._on_eager, self._keep_fast)
        self._ctx.__enter__()
        self._frames_ctx = _compat.watching_top_frames(self._on_top_frame)
        self._frames_ctx.__enter__()
        for obs in self.observers:
            if hasattr(obs, "enter"):
                obs.enter(self)
        return self

    def watch_calls(self, on: bool = True) -> None:
        """CALL events on (or off again) when the Recorder was made with `calls_deferred`
        (the magic: on while IPython runs the cell's statements, not through IPython's
        machinery before and after them, whose code would be instrumented for the events
        and back each cell: code that runs without events loses its places' DISABLEs).
        They stay on between the cell's statements, which IPython runs one by one: turning
        them off and on again at each has the code that runs next instrumented again
        (~1-2 ms on an eager grad/vmap cell of 14 statements)."""
        if self._tool is not None and self.calls_deferred and self._calls_on != on:
            self._calls_on = on
            mon = sys.monitoring  # type: ignore[attr-defined]
            if self._kept_on:  # set already: the callbacks change, the revived places fire
                mon.register_callback(
                    self._tool, mon.events.CALL, self._on_call_event if on else _idle_call_event
                )
                if on:
                    self._open_local()
                else:
                    self._close_local()
                return
            mon.set_events(self._tool, mon.events.CALL if on else 0)

    def suspended(self) -> Any:
        """A context in which jaxviz steps aside (IPython's %timeit inside a traced cell):
        JAX's dispatch and the CALL events are as without jaxviz, and the functions refused
        JAX's fast path so far get it back; nothing the block runs is recorded
        (jaxviz.capture.aside)."""
        from jaxviz.capture.aside import Aside

        return Aside(self)

    def _open_local(self) -> None:
        if self._tool == _MONITOR.tool and not self._local_open and _MONITOR.revive:
            self._local_open = _MONITOR.open_local(self._on_local_event)

    def _close_local(self) -> None:
        if self._local_open:
            self._local_open = False
            _MONITOR.close_local()

    def __exit__(self, *exc) -> None:
        try:
            with self.own_work():
                for obs in reversed(self.observers):
                    if hasattr(obs, "exit"):
                        obs.exit()
        finally:
            self._exit(*exc)

    @contextlib.contextmanager
    def own_work(self) -> Iterator[None]:
        """jaxviz's own JAX calls (a NaN check's reduction on the device) in its block: the
        hooks let them through unrecorded, as they do JAX's work inside a watched call."""
        busy, self._busy = self._busy, True
        try:
            yield
        finally:
            self._busy = busy

    def _exit(self, *exc) -> None:
        counting = self._tool is not None or self._counting  # (CALL events or the counter)
        try:
            if self._tool is not None:
                mon = sys.monitoring  # type: ignore[attr-defined]
                if self._kept_on:
                    self.watch_calls(False)
                else:
                    self._close_local()
                    if self._calls_on or not self.calls_deferred:  # (set_events walks
                        mon.set_events(self._tool, 0)  # every running frame: ~30 us)
                    mon.register_callback(self._tool, mon.events.CALL, None)
                _MONITOR.give_back(self._tool, stale=self._stale)
        finally:
            self._count_calls(False)
            self._frames_ctx.__exit__(*exc)
            self._ctx.__exit__(*exc)
            self._ctx = None
            # the entries made while jaxviz watched that say "never fast": dropped (only
            # theirs: the entries the cell's other calls made, JAX's own for its eager
            # ops among them, serve the user's next plain cell; clearing them all cost
            # that cell ~11 ms on an eager grad/vmap cell, Python 3.11)
            if None in self._refused:
                _compat.clear_cpp_dispatch_caches()
            else:
                for jitted in self._refused.values():
                    _compat.clear_fun_cache(jitted)
            if counting:
                try:
                    self._remember_known()
                except Exception as e:  # jaxviz's own failure must never become the user's
                    self.internal_errors.append(e)
            self._refused.clear()
            self._cleared.clear()
            self._canon.clear()
            self._again.clear()
            self._tool = None
            self._settle_counts()

    def _settle_counts(self) -> None:
        """Attributes the CALL-event counts to the signatures the Python path revealed: a
        place's calls that took it to their own signatures, its fast ones to the first
        signature seen there (the only one of the place's that keeps the fast path)."""
        by_place: dict[tuple, list[tuple[int, int]]] = collections.defaultdict(list)
        for (ckey, key), m in self._sig_calls.items():
            by_place[ckey].append((key, m))
        for ckey, n in self._counts.items():
            pid, *where, a0 = ckey
            key = self._sig_first.get(ckey)  # the one that keeps the fast path there
            if key is None:
                key = self._sig_then.get(ckey)
            if key is None:
                key = self._sig_of.get((pid, a0))
            if key is None:
                keys = self._by_pjit.get(pid, [])
                if not keys:
                    continue
                key = keys[-1]
            if isinstance(where[0], str):  # resolved at the call: (file, line)
                file, line = where
                fn = ""
            else:
                code, offset = self._keep[where[0]], where[1]
                file, line, fn = code.co_filename, _line_of(code, offset), code.co_name
            shares = [(k, m) for k, m in by_place.get(ckey, ()) if k != key]
            rest = n - sum(m for _k, m in shares)
            mixed = pid in self._mixed and bool(shares)
            if mixed:  # its fast calls there are no one signature's: each gets its own
                shares = by_place[ckey]  # Python-path calls, and "+"
            elif rest < 1 and key not in self._guesses:  # (more Python-path calls than
                shares, rest = [], n  # events: the counts are not exact)
            for k, m in shares if mixed else [*shares, (key, rest)]:
                if m < 1:  # a known signature the place's calls did not have (_known_call)
                    continue
                entry = self.entries[k]
                entry.sites[(file, line)] += m
                if mixed or (k == key and pid in self._hot_funs):
                    entry.uncounted = True
                if ckey in self._library:
                    entry.library_sites[self._library[ckey]] = None
                if entry.first_loc is None:
                    entry.first_loc = Loc(file, line, 0, fn if fn != "<module>" else "")
        if self._hot:  # a place turned off counts no call after it, whatever it calls:
            # every function counted on its line is a lower bound (one first called there
            # after the event went off came through the Python path once, then unseen)
            lines: set[tuple] = set()
            for k in self._hot:
                place = k[1:-1]
                if isinstance(place[0], str):
                    lines.add(place)
                elif place[0] in self._keep:
                    hot_code = self._keep[place[0]]
                    lines.add((hot_code.co_filename, _line_of(hot_code, place[1])))
            for entry in self.entries.values():
                if not entry.uncounted and not lines.isdisjoint(entry.sites):
                    entry.uncounted = True
        for k in self._guesses:  # taken for the known signature, called with others only
            if k in self.entries and not self.entries[k].sites:
                del self.entries[k]
        self._guesses.clear()
        self._unheard.clear()
        self._counts.clear()
        self._sig_calls.clear()
        self._sig_first.clear()
        self._sig_then.clear()
        self._ambiguous.clear()
        self._mixed.clear()
        self._hot.clear()
        self._hot_funs.clear()
        self._jax_sites.clear()
        self._library.clear()
        self._sites.clear()
        self._plain_sites.clear()
        self._passing.clear()
        self._keep.clear()
        self._pending = None

    # --- results --------------------------------------------------------------------------

    def take(self) -> list[Staged]:
        """Hands over (and forgets) one Staged record per distinct jitted (function,
        signature) and per eager statement.

        The user's own jitted functions come first, then library jits (jax.random.*, jnp
        functions) and eager statements, each in first-call order.
        """
        items: list[Staged] = [_jit_staged(entry) for entry in self.entries.values()]
        groups: dict[tuple, list[EagerRun]] = {}
        for run in self.eager_runs:
            if run.ops:
                groups.setdefault(run_key(run), []).append(run)
        for runs in groups.values():
            try:
                staged = eager_staged(runs)
            except Exception as e:  # one statement jaxviz cannot re-stage must not hide the others
                self.internal_errors.append(e)
                continue
            if staged is not None:
                items.append(staged)
        # the user's own functions first, then library calls and eager statements; each
        # group in first-call order
        items.sort(key=lambda s: (not (s.kind == "jit" and s.user_code), s.order))
        self.entries.clear()
        self.eager_runs.clear()
        self._cur = self._fast = None
        self._stmt_runs.clear()
        self._tally.clear()
        self._unsummarised.clear()
        return items


def _user_names(frames: list, name: str, top_filename: str | None) -> str:
    """The user's function name for a trace JAX opened on a wrapper of it: the function
    the failure happened in, below the cell's own statement."""
    inner = [fn for f, _line, fn in frames if not (f == top_filename and fn == "<module>")]
    return inner[0] if inner else name


def call_mark(call: tuple[float, Any, Any, int]) -> tuple[float, str, str, int]:
    """One entry of `Recorder.calls` as (time, function name, file, line), the line as the
    editor numbers it (a %%jaxtrace cell's line 1 is its magic's)."""
    t, fn, where, at = call
    name = fn if isinstance(fn, str) else _compat.fun_name(fn)
    if isinstance(where, str):
        return t, name, where, shown_line(where, at)
    return t, name, where.co_filename, shown_line(where.co_filename, _line_of(where, at))


_TOP, _USER, _LIBRARY, _JAX = 3, 2, 1, 0


class _Monitor:
    """jaxviz's sys.monitoring tool id (Python >= 3.12), held from one recording to the
    next, and whether the places the last recordings turned off (DISABLE) must be turned on
    again first.

    Held by %%jaxtrace (`keep_on`), the tool's CALL events stay set between cells, with a
    callback that turns each place off at its first call (`_idle_call_event`): a place
    turned off stays off, and the next traced cell does not pay ~2,500 events, each place's
    code instrumented again, to learn it anew (~10 ms, a third of an eager grad/vmap cell).
    The places a traced cell must see again (the user's functions', JAX's or a library's
    calling a jit or the user's code, those turned off for their many calls) are kept in
    `revive`: while a traced cell's statements run, a second tool id has local CALL events
    on their code objects (`open_local`), which start afresh each time they are set.

    A DISABLE lasts until sys.monitoring.restart_events(), which turns every place of every
    tool back on; each then fires once more, its code instrumented again (a jitted call's
    first trip through JAX's Python path took ~110 us instead of ~55 us, a cell ~0.3 ms
    more). Most places may stay off: JAX's, a library's or jaxviz's own code calling what is
    neither a jit nor the user's code, and the cell's module code (compiled anew each run).
    A place in the user's functions, one that called the user's code, and one turned off
    for its many jit calls ("16+ calls") are turned on again before the next recording.
    (Code that runs while no events are set, as a plain cell's, loses its places' DISABLE
    anyway: they fire once more in the next recording.)"""

    def __init__(self) -> None:
        self.tool: int | None = None  # the id held, between recordings and during one
        self.active = False  # a recording uses it now
        self.stale = True  # places are off that the next recording must see
        self.on = False  # `tool`'s CALL events stay set between recordings (keep_on)
        self.local: int | None = None  # the second id: local events on `revive`'s code
        # id(code) -> weak reference: code objects whose places the next traced cell must
        # see (a redefined function's old code goes with it)
        self.revive: dict[int, weakref.ref] = {}
        self.live: dict[int, Any] = {}  # the codes whose local events are on now

    def take(self) -> int | None:
        """A tool id for a recording, its places turned back on where they must be."""
        mon = sys.monitoring  # type: ignore[attr-defined]
        held = self.tool
        tool: int | None = held
        if held is None or self.active or mon.get_tool(held) != "jaxviz":
            tool = next((t for t in range(5, -1, -1) if mon.get_tool(t) is None), None)
            if tool is None:
                return None
            mon.use_tool_id(tool, "jaxviz")
            if self.tool is None or self.tool == tool or mon.get_tool(self.tool) != "jaxviz":
                self.tool, self.stale = tool, True  # hold it (another tool's off places)
        if tool != self.tool or self.stale:
            mon.restart_events()
            self.stale = False
        if tool == self.tool:
            self.active = True
        return tool

    def give_back(self, tool: int, *, stale: bool) -> None:
        """The recording on `tool` ended, its events off; `stale`: it turned off places the
        next recording must see (a nested recording's id is freed)."""
        if tool == self.tool and self.active:
            self.active = False
            self.stale = self.stale or stale
        else:
            sys.monitoring.free_tool_id(tool)  # type: ignore[attr-defined]
            if tool == self.tool:
                self.tool = None

    def keep_on(self, tool: int) -> bool:
        """Keeps the held tool's CALL events set from now on, between recordings too (with
        `_idle_call_event`), with a second id for the places to revive; False (the events
        go off after the recording, as before) if `tool` is not the held one or no second
        id is free."""
        mon = sys.monitoring  # type: ignore[attr-defined]
        if tool != self.tool:
            return False
        if self.local is None or mon.get_tool(self.local) != "jaxviz":
            local = next((t for t in range(5, -1, -1) if mon.get_tool(t) is None), None)
            if local is None:
                return False
            mon.use_tool_id(local, "jaxviz")
            self.local = local
        call = mon.events.CALL
        if not self.on or mon.get_events(tool) != call:  # (a recording without set them off)
            mon.register_callback(tool, call, _idle_call_event)
            mon.set_events(tool, call)
            self.on = True
        return True

    def keep(self, code: Any) -> None:
        """`code`'s places must fire again in the next traced cell."""
        revive = self.revive
        key = id(code)
        if key not in revive:
            if len(revive) >= _REVIVE_MAX:  # then every place, once
                revive.clear()
                self.stale = True
            revive[key] = weakref.ref(code, lambda _r: revive.pop(key, None))

    def open_local(self, callback: Callable) -> bool:
        """Local CALL events on the revived code objects, to `callback`, until close_local;
        False if none were set (no second id, or another recording has them)."""
        mon = sys.monitoring  # type: ignore[attr-defined]
        local = self.local
        if local is None or self.live or mon.get_tool(local) != "jaxviz":
            return False
        mon.register_callback(local, mon.events.CALL, callback)
        call = mon.events.CALL
        live = {k: c for k, r in list(self.revive.items()) if (c := r()) is not None}
        self.live = live
        for code in live.values():
            mon.set_local_events(local, code, call)
        return bool(live)

    def close_local(self) -> None:
        mon = sys.monitoring  # type: ignore[attr-defined]
        local = self.local
        if local is None:
            return
        if mon.get_tool(local) == "jaxviz":  # (not freed by another tool's owner)
            for code in self.live.values():
                mon.set_local_events(local, code, 0)
        self.live = {}
        mon.register_callback(local, mon.events.CALL, None)

    def release(self) -> None:
        """Frees the held ids (the extension unloaded): no events set, nothing kept."""
        if self.tool is not None and not self.active:
            mon = sys.monitoring  # type: ignore[attr-defined]
            self.close_local()
            if mon.get_tool(self.tool) == "jaxviz":
                mon.set_events(self.tool, 0)
                mon.register_callback(self.tool, mon.events.CALL, None)
                mon.free_tool_id(self.tool)
            if self.local is not None and mon.get_tool(self.local) == "jaxviz":
                mon.free_tool_id(self.local)
            self.tool, self.local, self.stale, self.on = None, None, True, False
            self.revive.clear()


_MONITOR = _Monitor()
# code objects _Monitor.revive holds (each traced cell sets and unsets their local events:
# ~0.6 us each); then every place fires again once
_REVIVE_MAX = 2048


def _idle_call_event(code: Any, offset: int, callable_: Any, arg0: Any) -> Any:
    """The held tool's CALL event between traced cells (and in IPython's machinery around
    a traced cell's statements): every place off at its first call; one a traced cell
    must see again is kept in _MONITOR.revive."""
    try:
        if code.co_name != "<module>" and _seen_again(code, callable_):
            _MONITOR.keep(code)
    except Exception:  # never into the user's code
        pass
    return _DISABLE


def _seen_again(code: Any, fn: Any) -> bool:
    """Whether a traced cell must see the place in `code` that called `fn`: the user's
    code's places, and JAX's or a library's calling a jit or the user's code."""
    if _whose(code, None) >= _USER:
        return True
    kind = type(fn)
    if kind is _JIT_TYPE:
        return True
    if kind in _NEVER_JIT:
        return False
    if kind is _PARTIAL or kind is _METHOD:
        inner = fn.func if kind is _PARTIAL else fn.__func__
        if type(inner) is _JIT_TYPE:
            return True
    return _calls_users_code(fn)


def _calls_users_code(fn: Any, top: str | None = None) -> bool:
    """Whether `fn` is (or wraps) the user's code: a place of JAX's or a library's that
    calls it may call a jit of the user's another time."""
    if type(fn) is _FUNCTION and "__wrapped__" not in fn.__dict__:
        code = fn.__code__  # a plain function (most calls): its own code, no wrappers
    else:
        code = _compat.user_code(fn)  # behind partials, methods, functools.wraps
    if code is None and callable(fn):  # a callable object (a Module)
        code = getattr(type(fn).__call__, "__code__", None)
    return (
        code is not None
        and not code.co_filename.endswith(".pyx")  # Cython's
        and _whose(code, top) >= _USER
    )


def release_monitoring() -> None:
    """Frees the sys.monitoring tool id jaxviz holds between recordings (Python >= 3.12)
    and forgets the signatures they saw (_KNOWN), and restores jax.jit's factory if a
    recording without CALL events wrapped it."""
    if _compat.has_sys_monitoring():
        _MONITOR.release()
    _KNOWN.clear()
    _compat.forget_jits()


# filename -> whose, for files other than the cell's: the first CALL event at each place of
# each code object asks (thousands per eager transformation), and a file's answer never
# changes; bounded, as JAX's own caches by filename are
_FILE_WHOSE: dict[str, int] = {}
_FILE_WHOSE_MAX = 65536
# (id(code), offset) -> (the code, id(callable)): a place whose CALL event may stay off
# after it called that callable (Recorder._passed_in said no); bounded as _FILE_WHOSE
_SAFE_OFF: dict[tuple[int, int], tuple[Any, int]] = {}


def _first_arg(arg0: Any) -> tuple:
    """What a CALL event tells of a jitted call's signature: its first argument's type,
    shape and weak type (a loop's carried state is weakly typed at its first call only)."""
    return (type(arg0), getattr(arg0, "shape", None), getattr(arg0, "weak_type", None))


def _whose(code: Any, top: str | None) -> int:
    filename = code.co_filename
    if filename == top:
        return _TOP if code.co_name == "<module>" else _USER  # the cell's own statements
    if filename == "<string>" and _generated(code):
        return _LIBRARY
    whose = _FILE_WHOSE.get(filename)
    if whose is None:
        if places.is_user_file(filename, top):
            whose = _USER
        else:
            whose = _LIBRARY if _compat.is_user_filename(filename) else _JAX
        if len(_FILE_WHOSE) >= _FILE_WHOSE_MAX:
            _FILE_WHOSE.clear()
        _FILE_WHOSE[filename] = whose
    return whose


def _generated(code: Any) -> bool:
    """Code Python's standard library made with exec (filename "<string>", as the user's
    own exec'd code): a dataclass's __init__ / __eq__, a namedtuple's __new__. Not the
    user's: its places are off after their first call, unless they call the user's code
    (a __post_init__), as a library's are. Without this each traced cell watched the ~20
    such places JAX's and jaxviz's records call, again and again."""
    return code.co_qualname.startswith("__create_fn__.") or (
        code.co_name == "<lambda>" and code.co_names == ("_tuple_new",)
    )


def _line_of(code: Any, offset: int) -> int:
    for start, end, line in code.co_lines():
        if start <= offset < end and line is not None:
            return line
    return code.co_firstlineno


# a library's function -> the jax.jit of it made for records whose jitted object was not
# seen (Python 3.11: jnp's jits an eager cell calls): made once, not per record and cell
# (~0.2 ms each, with its signature). Libraries' functions live as long as their modules;
# bounded all the same (a library may make functions per call)
_REJITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_REJITS_MAX = 512


def _rejit(e: _JitEntry) -> Any:
    """A new jax.jit of the bare function, for a record whose jitted object was not seen
    (the user's own: made anew, not kept, as a trace holds its function weakly)."""
    if e.own:
        return jax.jit(e.fun)
    try:
        known = _REJITS.get(e.fun)
    except TypeError:  # not hashable or weakly referable
        return jax.jit(e.fun)
    if known is None:
        if len(_REJITS) >= _REJITS_MAX:
            _REJITS.clear()
        known = _REJITS[e.fun] = jax.jit(e.fun)
    return known


def _static_args(call: _compat.JitCall, jitted: Any) -> str:
    """A signature's static arguments as text (its jaxpr, JAX's cache entry, is theirs:
    read once per entry)."""
    if jitted is not None:
        return _compat.static_args(jitted, call.args, call.kwargs)
    return _compat.static_args_of_call(call.fun, call.jaxpr, call.args, call.kwargs)


def _jit_staged(e: _JitEntry) -> Staged:
    n_flat = len(_compat.open_jaxpr(e.jaxpr).invars)
    names = e.arg_names if len(e.arg_names) == n_flat else [f"arg{i}" for i in range(n_flat)]
    code = e.root_code
    return Staged(
        e.name,
        e.jaxpr,
        kind="jit",
        # no jitted object seen (Python 3.11; a jitted __call__): `fun` is a new jax.jit of the
        # bare function, which would trace the user's Python again, static arguments unknown
        fun=e.jitted if e.jitted is not None else _rejit(e),
        rejitted=e.jitted is None,
        args_spec=e.args_spec,
        kwargs_spec=e.kwargs_spec,
        arg_names=names,
        donated=e.donated,
        calls=sum(e.sites.values()) or 1,
        calls_uncounted=e.uncounted,
        call_sites=[(f, l, n) for (f, l), n in e.sites.items()],
        library_sites=list(e.library_sites),
        static=e.static,
        loc=e.first_loc,
        root_code=code,
        order=e.order,
        user_code=code is not None and _compat.is_user_filename(code.co_filename),
    )

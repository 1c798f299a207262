"""Events: how the capture sees a block's calls, mechanism only.

JAX's Python dispatch paths call the recorder's handlers (`_compat.patched_dispatch`: each
jitted call that takes JAX's Python path, each eager primitive applied at top level, and
whether JAX's C++ fast path may cache a call), and so does each outermost trace
(`_compat.watching_top_frames`). A call JAX's C++ fast path serves runs no Python: on
Python >= 3.12 a `sys.monitoring` CALL event comes before it (jaxviz's tool id, `MONITOR`,
held from one recording to the next); on Python 3.11, the call counter
(`_compat.counting_jit_calls`). `Hooks` puts these on for a recording, takes them off, and
steps aside for a block (aside.py). What the handlers then do with each call, and for how
long, is the watch policy's (policy.py).

Also here: whose a code object is (`whose_code`: the cell's module code, the user's, a
library's or JAX's), what a CALL event tells of a call's signature (`first_arg`), and the
held tool's callback between traced cells (`idle_call_event`).
"""

from __future__ import annotations

import functools
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz.capture import places
from jaxviz.capture.policy import NEVER_JIT

# whose a code object is (whose_code), in the order the handlers compare
TOP, USER, LIBRARY, JAX = 3, 2, 1, 0  # the cell's module code; the user's; a library's; JAX's
JIT_TYPE = _compat.JIT_FUNCTION_TYPE
PARTIAL = functools.partial
METHOD = types.MethodType
FUNCTION = types.FunctionType
DISABLE = getattr(getattr(sys, "monitoring", None), "DISABLE", None)


class Hooks:
    """A recording's handlers, put on JAX's dispatch paths and on the calls its C++ fast
    path serves (the held tool's CALL events on Python >= 3.12, the call counter on 3.11),
    taken off when it ends, and stepped aside from for a block (`pause`, `resume`: IPython's
    %timeit, aside.py). Mechanism only: it sets the recorder's registers that say which are
    on (`_tool`, `_counting`, `_kept_on`, `_local_open`), which the handlers read per event,
    and reads `_stale` (a handler turned off a place the next recording must see) and
    `_refused` (the functions refused the fast path, given it back here)."""

    def __init__(self, rec: Any) -> None:
        self._rec = rec
        self._ctx: Any = None  # the dispatch hooks, while on
        self._compiles_ctx: Any = None  # the compile watch (observers with on_compiled)
        self._frames_ctx: Any = None  # the trace-frame watch, while on
        self._counter: Any = None  # Python 3.11: the call counter, while on
        self.calls_on = False  # watch_calls() turned the CALL events on (and not off again)
        self._resume_calls = False  # their state when `pause` stepped aside

    def install(self) -> None:
        """The recording starts: its CALL events (Python >= 3.12; from `watch_calls()` on
        when the recorder defers them) or, without them, the call counter (or, where it
        cannot run, every jit's C++ entries emptied: their first call in the cell must come
        through Python, where its jaxpr is seen); then the dispatch hooks."""
        rec = self._rec
        if rec._monitoring:
            mon = sys.monitoring  # type: ignore[attr-defined]  # Python >= 3.12
            rec._tool = MONITOR.take()
            # the magic's: its events stay set after the cell, its places off
            rec._kept_on = (
                rec._tool is not None and rec.calls_deferred and MONITOR.keep_on(rec._tool)
            )
            if rec._tool is not None and not rec._kept_on:
                mon.register_callback(rec._tool, mon.events.CALL, rec._on_call_event)
                if not rec.calls_deferred:
                    mon.set_events(rec._tool, mon.events.CALL)
                    # (trace_cell after traced cells: the places they kept are off)
                    self.open_local()
        if rec._tool is None:
            # Python < 3.12: no CALL events show the calls JAX's fast path serves. The call
            # counter tells each call (_on_counted_call), and empties each function's
            # entries at its first call, as a CALL event does; without it, every jitted
            # function's first call must come through Python, where its jaxpr is seen
            self.count_calls(True)
            if not rec._counting:
                _compat.clear_cpp_dispatch_caches()
        self._dispatch_on()

    def _dispatch_on(self) -> None:
        rec = self._rec
        self._ctx = _compat.patched_dispatch(rec._on_jit, rec._on_eager, rec._keep_fast)
        self._ctx.__enter__()
        self._frames_ctx = _compat.watching_top_frames(rec._on_top_frame)
        self._frames_ctx.__enter__()
        self._compiles_ctx = (
            _compat.watching_compiles(rec._on_compiled, rec._on_reused if rec._obs_reused else None)
            if rec._obs_compiled
            else None
        )
        if self._compiles_ctx is not None:
            self._compiles_ctx.__enter__()

    def _dispatch_off(self, *exc: Any) -> None:
        self.count_calls(False)
        if self._compiles_ctx is not None:
            self._compiles_ctx.__exit__(*exc)
        self._frames_ctx.__exit__(*exc)
        self._ctx.__exit__(*exc)
        self._ctx = None

    def remove(self, *exc: Any) -> None:
        """The recording ends: its CALL events off (or, kept on between cells, back to the
        idle callback) and the tool given back; the counter and the dispatch hooks off; the
        entries made while it watched that say "never fast" dropped (`give_fast_back`)."""
        rec = self._rec
        try:
            if rec._tool is not None:
                mon = sys.monitoring  # type: ignore[attr-defined]
                if rec._kept_on:
                    self.watch_calls(False)
                else:
                    self.close_local()
                    if self.calls_on or not rec.calls_deferred:  # (set_events walks
                        mon.set_events(rec._tool, 0)  # every running frame: ~30 us)
                    mon.register_callback(rec._tool, mon.events.CALL, None)
                MONITOR.give_back(rec._tool, stale=rec._stale)
        finally:
            self._dispatch_off(*exc)
            self.give_fast_back()

    def give_fast_back(self) -> None:
        """Drops the C++ entries made while jaxviz watched that say "never fast" (the
        recorder's `_refused`; only theirs: the entries the cell's other calls made, JAX's
        own for its eager ops among them, serve the user's next plain cell; clearing them
        all cost that cell ~11 ms on an eager grad/vmap cell, Python 3.11)."""
        refused = self._rec._refused
        if None in refused:
            _compat.clear_cpp_dispatch_caches()
        else:
            for jitted in refused.values():
                _compat.clear_fun_cache(jitted)

    def pause(self) -> bool:
        """Steps aside (Recorder.suspended): the hooks and CALL events off, the functions
        refused JAX's fast path given it back; False when not recording (nothing to do)."""
        rec = self._rec
        if self._ctx is None:
            return False
        if rec._tool is not None:
            if rec.calls_deferred:
                self._resume_calls = self.calls_on
                self.watch_calls(False)
            else:
                self.close_local()
                sys.monitoring.set_events(rec._tool, 0)  # type: ignore[attr-defined]
        self._dispatch_off(None, None, None)
        self.give_fast_back()  # the block's calls are fast
        rec._refused.clear()
        return True

    def resume(self) -> None:
        """Puts the hooks and the CALL events back as `pause` found them."""
        rec = self._rec
        if rec._tool is None:  # Python < 3.12: the block's fast entries would hide later calls
            _compat.clear_cpp_dispatch_caches()
            self.count_calls(True)
        self._dispatch_on()
        if rec._tool is not None:
            if rec.calls_deferred:
                self.watch_calls(self._resume_calls)
            else:
                mon = sys.monitoring  # type: ignore[attr-defined]
                mon.set_events(rec._tool, mon.events.CALL)
                self.open_local()

    def count_calls(self, on: bool) -> None:
        """Python < 3.12: the call counter on (every jitted call is told to
        _on_counted_call) or off again."""
        rec = self._rec
        if on and self._counter is None and not rec._monitoring:
            self._counter = _compat.counting_jit_calls(rec._on_counted_call)
            rec._counting = self._counter.__enter__()
        elif not on and self._counter is not None:
            counter, self._counter = self._counter, None
            rec._counting = False
            counter.__exit__(None, None, None)

    def watch_calls(self, on: bool = True) -> None:
        """Recorder.watch_calls: CALL events on, or off again, for a recorder that defers
        them."""
        rec = self._rec
        if rec._tool is not None and rec.calls_deferred and self.calls_on != on:
            self.calls_on = on
            mon = sys.monitoring  # type: ignore[attr-defined]
            if rec._kept_on:  # set already: the callbacks change, the revived places fire
                mon.register_callback(
                    rec._tool, mon.events.CALL, rec._on_call_event if on else idle_call_event
                )
                if on:
                    self.open_local()
                else:
                    self.close_local()
                return
            mon.set_events(rec._tool, mon.events.CALL if on else 0)

    def open_local(self) -> None:
        rec = self._rec
        if rec._tool == MONITOR.tool and not rec._local_open and MONITOR.revive:
            rec._local_open = MONITOR.open_local(rec._on_local_event)

    def close_local(self) -> None:
        rec = self._rec
        if rec._local_open:
            rec._local_open = False
            MONITOR.close_local()


class Monitor:
    """jaxviz's sys.monitoring tool id (Python >= 3.12), held from one recording to the
    next, and whether the places the last recordings turned off (DISABLE) must be turned on
    again first.

    Held by %%jaxtrace (`keep_on`), the tool's CALL events stay set between cells, with a
    callback that turns each place off at its first call (`idle_call_event`): a place
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
        `idle_call_event`), with a second id for the places to revive; False (the events
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
            mon.register_callback(tool, call, idle_call_event)
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


MONITOR = Monitor()
# code objects Monitor.revive holds (each traced cell sets and unsets their local events:
# ~0.6 us each); then every place fires again once
_REVIVE_MAX = 2048


def idle_call_event(code: Any, offset: int, callable_: Any, arg0: Any) -> Any:
    """The held tool's CALL event between traced cells (and in IPython's machinery around
    a traced cell's statements): every place off at its first call; one a traced cell
    must see again is kept in MONITOR.revive."""
    try:
        if code.co_name != "<module>" and _seen_again(code, callable_):
            MONITOR.keep(code)
    except Exception:  # never into the user's code
        pass
    return DISABLE


def _seen_again(code: Any, fn: Any) -> bool:
    """Whether a traced cell must see the place in `code` that called `fn`: the user's
    code's places, and JAX's or a library's calling a jit or the user's code."""
    if whose_code(code, None) >= USER:
        return True
    kind = type(fn)
    if kind is JIT_TYPE:
        return True
    if kind in NEVER_JIT:
        return False
    if kind is PARTIAL or kind is METHOD:
        inner = fn.func if kind is PARTIAL else fn.__func__
        if type(inner) is JIT_TYPE:
            return True
    return calls_users_code(fn)


def calls_users_code(fn: Any, top: str | None = None) -> bool:
    """Whether `fn` is (or wraps) the user's code: a place of JAX's or a library's that
    calls it may call a jit of the user's another time."""
    if type(fn) is FUNCTION and "__wrapped__" not in fn.__dict__:
        code = fn.__code__  # a plain function (most calls): its own code, no wrappers
    else:
        code = _compat.user_code(fn)  # behind partials, methods, functools.wraps
    if code is None and callable(fn):  # a callable object (a Module)
        code = getattr(type(fn).__call__, "__code__", None)
    return (
        code is not None
        and not code.co_filename.endswith(".pyx")  # Cython's
        and whose_code(code, top) >= USER
    )


# filename -> whose, for files other than the cell's: the first CALL event at each place of
# each code object asks (thousands per eager transformation), and a file's answer never
# changes; bounded, as JAX's own caches by filename are
_FILE_WHOSE: dict[str, int] = {}
FILE_WHOSE_MAX = 65536
# (id(code), offset) -> (the code, id(callable)): a place whose CALL event may stay off
# after it called that callable (Recorder._passed_in said no); bounded as _FILE_WHOSE
SAFE_OFF: dict[tuple[int, int], tuple[Any, int]] = {}


def first_arg(arg0: Any) -> tuple:
    """What a CALL event tells of a jitted call's signature: its first argument's type,
    shape and weak type (a loop's carried state is weakly typed at its first call only)."""
    return (type(arg0), getattr(arg0, "shape", None), getattr(arg0, "weak_type", None))


def whose_code(code: Any, top: str | None) -> int:
    filename = code.co_filename
    if filename == top:
        return TOP if code.co_name == "<module>" else USER  # the cell's own statements
    if (filename == "<string>" and _generated(code)) or filename == "<timeit-src>":
        return LIBRARY  # (timeit's loop, made with exec: a library's place calling the user's)
    whose = _FILE_WHOSE.get(filename)
    if whose is None:
        if places.is_user_file(filename, top):
            whose = USER
        else:
            whose = LIBRARY if _compat.is_user_filename(filename) else JAX
        if len(_FILE_WHOSE) >= FILE_WHOSE_MAX:
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


def line_of(code: Any, offset: int) -> int:
    for start, end, line in code.co_lines():
        if start <= offset < end and line is not None:
            return line
    return code.co_firstlineno

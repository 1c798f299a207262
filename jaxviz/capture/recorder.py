"""Capture: every JAX computation a block of code triggers at top level.

Two hooks on JAX's Python dispatch paths (jaxviz._compat.patched_dispatch) see
  * each jitted call that goes through Python, with its jaxpr (JAX's cached one: no retrace),
  * each eager primitive application (jax.grad(f)(x) outside jit, random ops, x + 1).
Calls served by jaxlib's C++ fast path never reach Python. So the capture empties a jitted
function's C++ dispatch entries before its first call in the cell (the executables stay
cached: that call is one Python-path call, no recompile), and counts the fast-path calls
that follow: with sys.monitoring CALL events on Python >= 3.12 (~1 us a call), with the
call counter on Python 3.11 (`_compat/calls.py`, ~0.4 us a call).

The `Recorder` is made of parts with one job each:

    policy.py    the watch policy: what is watched, until when, per Python, what a count says
    events.py    the mechanism: the hooks put on and off (`Hooks`), sys.monitoring's tool
    state.py     what the handlers share per event, declared once (`CaptureState`)
    calls.py     the handlers of CALL events and counted calls (the fast path's calls)
    pypath.py    the handlers of a call on JAX's Python path
    ops.py       the handler of eager ops
    ledger.py    signatures and counts (`Ledger`), and the signatures known across cells
    runs.py      eager runs' bookkeeping (`EagerRuns`)
    handover.py  the records handed to later stages (`Staged`), and the live chart's marks

Nothing here keeps user arrays: calls are recorded as avals and ShapeDtypeStructs.
`Recorder.take()` hands over one `Staged` record per distinct function and signature (and
per eager statement); `jaxviz.api` builds their graphs and checks them.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from jaxviz import _compat
from jaxviz.capture.calls import CallHandlers
from jaxviz.capture.events import JIT_TYPE, MONITOR
from jaxviz.capture.handover import partial_staged, staged_records
from jaxviz.capture.ledger import KNOWN, known_dead
from jaxviz.capture.ops import EagerHandlers
from jaxviz.capture.pypath import PythonPathHandlers
from jaxviz.capture.staged import Staged


class Recorder(CallHandlers, PythonPathHandlers, EagerHandlers):
    """Collects top-level JAX activity while `with Recorder(...)` is active.

    top_filename: the file whose module-level frames are the block's statements (the cell),
    used to group eager ops by statement.
    observers: objects told about the calls (the pipeline passes a
    jaxviz.diagnostics.observer.CellObserver, for the diagnostics); each may define
    enter(recorder), on_jit(call, frame, run) -> run(), on_eager(prim, args, params, out,
    frame), on_call(jitted, arg0, frame, slot) (Python >= 3.12: before each top-level call
    of a jitted function, whether it then takes the C++ fast path or Python's; it must not
    raise; True: it needs no more of this function's calls, which the recorder may then not
    tell it), on_key_op(prim, args, params, out, frame, slot) with `key_prims` (Python >= 3.12:
    the eager ops of those primitives in a summarised statement's runs, which on_eager does
    not see), watches(jitted) (whether its on_call records something at each call of
    `jitted`: it then calls the recorder's `now_watched(jitted)` when that turns True) and
    exit(). A slot (_key_slot) names a key consumption's place in a counted
    run, or is None.
    namespace: the cell's globals (its jitted functions' entries are emptied at __enter__).
    calls_deferred: CALL events from `watch_calls()` on, not from __enter__ (the magic's).
    """

    def __init__(
        self,
        top_filename: str | None = None,
        observers: list | tuple = (),
        namespace: dict | None = None,
        calls_deferred: bool = False,
    ):
        super().__init__(top_filename, observers, namespace, calls_deferred)
        # the local events' callback (Monitor.open_local): their places are not the
        # global events' to see
        self._on_local_event = functools.partial(self._on_call_event, local=True)

    # --- install / remove -----------------------------------------------------------------

    def __enter__(self) -> Recorder:
        self.hooks.install()
        if self._tool is not None:
            self._empty_cell_jits()
        for obs in self.observers:
            if hasattr(obs, "enter"):
                obs.enter(self)
        return self

    def _empty_cell_jits(self) -> None:
        """Python >= 3.12: a CALL event empties each function's entries at its first call;
        those called where no event fires (by map() or C code) are the cell's own: emptied
        now, but for those an earlier recording knows (Ledger.known_call decides at their
        first CALL event; handed to C code, one is emptied then: _handed)."""
        for v in list((self._namespace or {}).values()):
            if type(v) is JIT_TYPE:
                dkey = _compat.dispatch_key(v)
                knowns = KNOWN.get(dkey)
                if knowns is not None and not known_dead(knowns, v):
                    continue
                self._cleared[dkey] = v
                _compat.clear_fun_cache(v)

    def watch_calls(self, on: bool = True) -> None:
        """CALL events on (or off again) when the Recorder was made with `calls_deferred`
        (the magic: on while IPython runs the cell's statements, not through IPython's
        machinery before and after them, whose code would be instrumented for the events
        and back each cell: code that runs without events loses its places' DISABLEs).
        They stay on between the cell's statements, which IPython runs one by one: turning
        them off and on again at each has the code that runs next instrumented again
        (~1-2 ms on an eager grad/vmap cell of 14 statements)."""
        self.hooks.watch_calls(on)

    def suspended(self) -> Any:
        """A context in which jaxviz steps aside (IPython's %timeit inside a traced cell):
        JAX's dispatch and the CALL events are as without jaxviz, and the functions refused
        JAX's fast path so far get it back; nothing the block runs is recorded
        (jaxviz.capture.aside)."""
        from jaxviz.capture.aside import Aside

        return Aside(self.hooks)

    def mark_calls(
        self, on_first_call: Callable[[], None], on_first_eager: Callable[[], None]
    ) -> None:
        """The live memory chart's (jaxviz.memory.timeline): from now on each jitted call
        is marked in `calls`; `on_first_call()` runs in the cell's thread before its first
        jitted call runs, `on_first_eager()` when its first eager op's run begins."""
        self.calls = _FirstTouch(self, on_first_call)
        self._runs.on_first = on_first_eager

    def stop_marking(self) -> None:
        """The marks let go (they hold the jitted functions); no more are made."""
        self.calls = None
        self._runs.on_first = None

    def __exit__(self, *exc) -> None:
        try:
            with self.own_work():
                for obs in reversed(self.observers):
                    if hasattr(obs, "exit"):
                        obs.exit()
        finally:
            self._exit(*exc)

    def _on_compiled(self, name: str, executable: Any) -> None:
        """XLA compiled a program the watched code's call will run next (the call's first
        signature, an eager op's first shape): its observers are told, with the cell's line,
        before it runs. jaxviz's own compiles (a NaN check's: own_work, or its thread) are
        not theirs."""
        told, line = self._program_observers(self._obs_compiled)
        for obs in told:
            obs.on_compiled(name, executable, line)

    def _on_reused(self, name: str, executable: Any) -> None:
        """A call on JAX's Python path ran a program JAX had compiled before (a jnp
        function's first call in the cell, of a signature compiled earlier): the observers
        that read compiled programs (`on_reused`) are told, with the cell's line."""
        told, line = self._program_observers(self._obs_reused)
        for obs in told:
            obs.on_reused(name, executable, line)

    def _program_observers(self, observers: list) -> tuple[list, int]:
        """(`observers`, the cell's line) for a program the cell's thread compiled or
        reused; ([], 0) for jaxviz's own work or another thread's."""
        if not observers or self._own or threading.get_ident() != self._thread:
            return [], 0
        top = _compat.module_frame(sys._getframe(2), self.top_filename)  # (the caller's caller)
        return observers, top.f_lineno if top is not None else 0

    @contextlib.contextmanager
    def own_work(self) -> Iterator[None]:
        """jaxviz's own JAX calls (a NaN check's reduction on the device) in its block: the
        hooks let them through unrecorded, as they do JAX's work inside a watched call."""
        busy, self._busy = self._busy, True
        own, self._own = self._own, True
        try:
            yield
        finally:
            self._busy, self._own = busy, own

    def _exit(self, *exc) -> None:
        counting = self._tool is not None or self._counting  # (CALL events or the counter)
        try:
            self.hooks.remove(*exc)
        finally:
            if counting:
                try:
                    self._ledger.remember(self._refused, self._obs_known)
                except Exception as e:  # jaxviz's own failure must never become the user's
                    self.internal_errors.append(e)
            self._refused.clear()
            self._cleared.clear()
            self._canon.clear()
            self._unplace_all()  # (the places' counts back in the ledger's, for settle)
            self._tool = None
            self._ledger.settle()
            self._jax_sites.clear()
            self._sites.clear()
            self._plain_sites.clear()
            self._passing.clear()
            self._pending = None

    # --- results --------------------------------------------------------------------------

    def partial_staged(self, error: BaseException) -> Staged | None:
        """What the last trace staged before `error` stopped it (else None)."""
        opened, self._open_frame = self._open_frame, None
        if opened is None:
            return None
        return partial_staged(opened, error, self.top_filename)

    def take(self) -> list[Staged]:
        """Hands over (and forgets) one Staged record per distinct jitted (function,
        signature) and per eager statement.

        The user's own jitted functions come first, then library jits (jax.random.*, jnp
        functions) and eager statements, each in first-call order.
        """
        items = staged_records(self.entries, self._runs.runs, self.internal_errors)
        self.entries.clear()
        self._runs.clear()
        self._cur = self._fast = None
        return items


class _FirstTouch(list):
    """`Recorder.calls` until the cell's first jitted call: its first append calls
    `on_first`, then the recorder gets a plain list with the same items back (later appends
    cost nothing more)."""

    def __init__(self, owner: Recorder, on_first: Callable[[], None]):
        super().__init__()
        self._owner = owner
        self._on_first: Callable[[], None] | None = on_first

    def append(self, item: Any) -> None:
        on_first, self._on_first = self._on_first, None
        if on_first is not None:
            on_first()
        super().append(item)
        if self._owner.calls is self:
            self._owner.calls = list(self)


def release_monitoring() -> None:
    """Frees the sys.monitoring tool id jaxviz holds between recordings (Python >= 3.12)
    and forgets the signatures they saw (ledger.KNOWN), and restores jax.jit's factory if a
    recording without CALL events wrapped it."""
    if _compat.has_sys_monitoring():
        MONITOR.release()
    KNOWN.clear()
    _compat.forget_jits()

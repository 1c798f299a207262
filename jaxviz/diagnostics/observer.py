"""The capture's observer for diagnostics: what a cell's calls reveal while they run.

The Recorder (jaxviz.capture.recorder) calls it on the calls that go through JAX's Python path:
  * keys: which PRNG keys each call consumes (jaxviz.diagnostics.keys.ledger.KeyLedger).
    Calls of jitted functions that consume a key argument are kept off the C++ fast path
    (Python >= 3.12), so every such call is seen; other calls keep the fast path. Except
    jax.random's own jits (`_uniform`, `_normal`, ...), which consume their first argument
    and nothing else: once the Python path showed that, their calls keep the fast path, and
    each call's consumption is recorded from the sys.monitoring CALL event (`on_call`),
    which sees the jitted function and its first argument before the call (fast path or not).
  * nan: outputs that are NaN or Inf (jaxviz.diagnostics.nans.watch.NanWatch), localised when they
    are computed (an eager op's check waits for its values, not holding Python while the
    device works), kept as lines only: no user array outlives the cell; also a call that
    jax_debug_nans stopped with FloatingPointError, localised the same way. With
    options.check_every_call, every call is kept off the fast path (until a NaN is found),
    so every call's outputs are checked.
  * out-of-bounds: eager indexing ops (gather, scatter, dynamic_slice, ...) whose concrete
    index is outside the array (jaxviz.diagnostics.bounds.BoundsWatch).
  * recompile: for each (function, signature), its first call in the cell (FirstCall):
    whether JAX traced it then or served it from its cache, how long tracing and compiling
    took, where it was called (to the instruction), and the tracing context (mesh, config).
  * the cell's namespace (its module globals), for the leaked-tracer scan, and the tracers it
    held before the cell ran (an earlier cell's leaks are reported there, not again).
The pipeline (jaxviz.api) makes one per cell, hands it to the Recorder, and passes it to
jaxviz.diagnostics.check.diagnose_cell when the cell has run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz.capture.places import user_site
from jaxviz.config import options
from jaxviz.diagnostics.bounds import INDEXING, BoundsWatch
from jaxviz.diagnostics.keys.flow import consumed_inputs
from jaxviz.diagnostics.keys.ledger import CONSUMING, PARTS, SCALAR, KeyLedger
from jaxviz.diagnostics.keys.uses import maybe_key
from jaxviz.diagnostics.leaks import present_tracers
from jaxviz.diagnostics.nans.watch import NanWatch
from jaxviz.mesh.eager import EagerPrograms


@dataclasses.dataclass
class FirstCall:
    """The first call in the cell of one jitted function and signature."""

    seconds: float  # tracing (when traced) plus lowering, compiling and running it
    site: tuple[str, int] | None  # (filename, line) of the user's call
    at: tuple | None  # (filename, line, instruction offset): the call expression itself
    traced: bool  # JAX traced it in this cell (False: its tracing cache served the jaxpr)
    context: tuple  # the tracing context it ran in (jaxviz._compat.trace_context())
    # its outputs were checked for NaN/Inf (False: it ran on JAX's fast path, its signature
    # known from an earlier cell: Recorder._known_call)
    checked: bool = True


def _call_at(frame: Any) -> tuple | None:
    """(filename, line, instruction offset) of the user's call expression at `frame`."""
    user = _compat.user_frame(frame)
    return (user.f_code.co_filename, user.f_lineno or 0, user.f_lasti) if user else None


class CellObserver:
    """Per-cell record of key consumption, non-finite outputs, first-call timings."""

    def __init__(self, top_filename: str | None, namespace: dict | None = None):
        self.top_filename = top_filename
        # the tracers the cell's namespace held before it ran: earlier cells' leaks, not its own
        self.present = present_tracers(namespace) if namespace is not None else {}
        self.keys = KeyLedger(top_filename)
        self.nan = NanWatch()
        self.bounds = BoundsWatch()
        self.first_call: dict[int, FirstCall] = {}  # jaxpr id -> its first call
        self.namespace: dict | None = None
        self._veto = False
        # id(jitted) -> (jitted, consumed inputs, name, jax.random's own): the jits whose key
        # consumption the CALL event records (their calls keep the fast path: _keeps_fastpath)
        self._fast: dict[int, tuple[Any, list, str, bool]] = {}
        # the consumption a CALL event of another jit than jax.random's holds until the next
        # event shows the call ran on the fast path: (jitted, key, consumed inputs, name,
        # KeyLedger.place, slot). Its Python path, if it takes it, says what it consumes
        self._held: tuple | None = None
        # the latest top-level CALL event of a jitted function: (jitted, id(arg0), whether
        # it recorded arg0's consumption), for the Python-path call that may follow it
        self._last: tuple | None = None
        self._every = False
        self._recorder: Any = None
        # (filename, line, what) of the blocks the cell ran with jaxviz stepped aside: each
        # %timeit (capture/aside.py), whose calls were neither recorded nor checked
        self.aside: list[tuple[str, int, str]] = []
        self.defer_finish = False  # the NaN watch's finish left to `finish()` (after the reply)
        # the programs JAX compiled for the cell's work on several devices, with collectives
        # (jaxviz.mesh.eager: its eager ops'; read by the analysis)
        self.programs = EagerPrograms(top_filename)

    # --- Recorder hooks ------------------------------------------------------------------

    def enter(self, recorder: Any) -> None:
        self._recorder = recorder
        self._every = options.check_every_call

    def on_aside(self, filename: str, line: int, what: str) -> None:
        """A block of the cell runs with jaxviz stepped aside (IPython's %timeit)."""
        self.aside.append((filename, line, what))

    def on_compiled(self, name: str, executable: Any, line: int) -> None:
        self.programs.on_compiled(name, executable, line)

    def on_reused(self, name: str, executable: Any, line: int) -> None:
        self.programs.on_reused(name, executable, line)

    def exit(self) -> None:
        self._settle_held()
        self._recorder = None
        self._fast.clear()
        self._last = None
        if not self.defer_finish:
            self.nan.finish()

    def finish(self) -> None:
        """The NaN checks still pending, run (waiting for their values), their findings
        confirmed: at `exit`, unless `defer_finish` left them to the analysis after the
        cell's reply (no later cell has run by then). Again: nothing more."""
        self.nan.finish()

    @property
    def needs_every_call(self) -> bool:
        """The jitted call just seen must come through Python next time too: it consumes a
        key the ledger must see, or --nans checks every call until a NaN is found (the
        Recorder then keeps it off JAX's fast path)."""
        return self._veto or (self._every and not self.nan.findings)

    def on_jit(self, call: Any, frame: Any, run: Callable[[], Any]) -> Any:
        __tracebackhide__ = True  # a hook: never in the user's tracebacks
        jaxpr = call.jaxpr
        key = id(_compat.open_jaxpr(jaxpr))
        consumed = consumed_inputs(jaxpr)  # (remembered per jaxpr)
        last, self._last = self._last, None
        event = (  # the CALL event of this very call (Python >= 3.12)
            last
            if last is not None
            and call.args_flat
            and last[1] == id(call.args_flat[0])
            and _compat.jit_wrapped_fun(last[0]) is call.fun
            else None
        )
        held = self._held
        if held is not None and (event is None or not event[2] or held[0] is not event[0]):
            self._settle_held()  # another call's, which ran on the fast path: in order
            held = None
        keeps = bool(consumed) and self._keeps_fastpath(event, call, consumed)
        self._veto = bool(consumed) and not keeps
        if self.namespace is None:
            self._find_namespace(frame)
        site = None
        if held is not None:  # this call's CALL event held input 0's consumption
            self._held = None
            if keeps:  # what its signature consumes: recorded as held
                self._settle(held)
                consumed = [c for c in consumed if c[0] != 0]
            elif not consumed and event is not None:  # a signature that consumes no key:
                self._drop_fast(event[0])  # its calls all come through Python
        elif event is not None and event[2]:  # the CALL event recorded input 0's consumption
            consumed = [c for c in consumed if c[0] != 0]
        if consumed:
            site, stack = self.keys.where(frame)
            self.keys.consume_args(call.args_flat, consumed, site, call.name, stack)
        first = key not in self.first_call
        traced_s: float | None = getattr(self._recorder, "trace_seconds", 0.0)
        context = _compat.trace_context() if first else ()
        if self.nan.pending and any(call.donated):  # a donated input is read before it goes
            self.nan.before_donation()
        t0 = time.perf_counter()
        try:
            result = run()
        except FloatingPointError:  # jax_debug_nans / jax_debug_infs stopped the call
            self.nan.on_error(jaxpr, call.args_flat, frame, call.name)
            raise
        if first:
            seconds = time.perf_counter() - t0 + (traced_s or 0.0)
            if site is None:
                here = user_site(frame, self.top_filename)  # the user's line, not a library's
                site = here[:2] if here is not None else None
            self.first_call[key] = FirstCall(
                seconds, site, _call_at(frame), traced_s is not None, context
            )
        # The outputs of each function's first call (all calls with check_every_call), once
        # computed (NanWatch.on_call: the call itself never waits): checking every call
        # would slow every step of a GPU training loop on Python 3.11, where every call
        # comes through here. Later NaNs the cell keeps are
        # found when it ends (jaxviz.diagnostics.nans.later.later_nans).
        if first or self._every:
            self.nan.on_call(jaxpr, call.args_flat, _compat.pjit_out_flat(result), frame, call.name)
        return result

    def first_call_needed(self, jaxpr: Any) -> bool:
        """Whether a function of this jaxpr must come through the Python path at its first
        call in each cell (the Recorder then never leaves it on JAX's fast path): it
        consumes a key, which the ledger must see each time."""
        return bool(consumed_inputs(jaxpr))  # (remembered per jaxpr)

    def on_known(self, jaxpr: Any, frame: Any) -> None:
        """A jitted function's first call in the cell, left on JAX's fast path: an earlier
        cell saw its one signature (Recorder._known_call). JAX's caches serve it: no
        retrace; its outputs go unchecked (`later_nans` looks at what the cell kept)."""
        key = id(_compat.open_jaxpr(jaxpr))
        if key in self.first_call:
            return
        if self.namespace is None:
            self._find_namespace(frame)
        here = user_site(frame, self.top_filename)
        self.first_call[key] = FirstCall(
            0.0,
            here[:2] if here else None,
            _call_at(frame),
            False,
            _compat.trace_context(),
            checked=False,
        )

    def _keeps_fastpath(self, event: tuple | None, call: Any, consumed: list) -> bool:
        """Whether this call's later calls may take the fast path, their key consumption
        recorded by `on_call`: a jit that consumes exactly its first positional argument (a
        key), as every signature of it seen in the cell does. jax.random's samplers are
        such jits, and so is a sampler's `step(key, state)` (blackjax's NUTS: every call
        took JAX's Python path, 1.4x its plain loop; `step(key, x)` of a few ops, 22x).

        JAX's fast path serves only signatures the cell saw (each jit's C++ entries are
        emptied at its first call in the cell, Recorder._on_call_event), and a signature's
        consumption is its jaxpr's: the same at each of its calls. A signature that
        consumes otherwise takes the jit off the fast path, its entries emptied: a call the
        event cannot account for never runs unseen."""
        if event is None:
            return False
        jitted = event[0]
        known = self._fast.get(id(jitted))
        ok = (
            all(c[0] == 0 for c in consumed)
            and bool(call.args)
            and call.args[0] is call.args_flat[0]
            and (known is None or known[1] == consumed)
        )
        if ok:
            own = known[3] if known is not None else _compat.is_jax_random_fun(call.fun)
            self._fast[id(jitted)] = (jitted, consumed, call.name, own)
            if known is None and self._recorder is not None:  # (watched from now on)
                self._recorder.now_watched(jitted)
        elif known is not None:  # a signature that differs: every call through Python again
            self._drop_fast(jitted)
        return ok

    def _drop_fast(self, jitted: Any) -> None:
        """`jitted`'s key consumption is no longer the CALL event's to record: its entries
        in JAX's C++ cache are emptied, so that each of its calls comes through Python."""
        if self._fast.pop(id(jitted), None) is not None:
            _compat.clear_fun_cache(jitted)

    def _settle(self, held: tuple) -> None:
        _jitted, key, consumed, name, placed, slot = held
        for _i, kind, data, _what in consumed:
            self.keys.consume_placed(slot, placed, key, kind, data, name)

    def _settle_held(self) -> None:
        """Records the consumption a CALL event held: its call ran on the fast path."""
        held, self._held = self._held, None
        if held is not None:
            self._settle(held)

    def watches(self, jitted: Any) -> bool:
        """Whether `on_call` records the key consumption of each call of `jitted`."""
        return id(jitted) in self._fast

    def on_call(self, jitted: Any, arg0: Any, frame: Any, slot: tuple | None = None) -> None:
        """The CALL event of a top-level call of a jitted function (Python >= 3.12), before
        it runs: records the key consumption of the jits `_keeps_fastpath` let through
        (slot: its place in a counted run, Recorder._key_slot). It runs before each such
        call (a loop's jitted step): what it has to do is asked first, cheaply."""
        nan = self.nan
        if nan.compiling or nan._pending:  # (NanWatch.pending's deque: a property costs a call)
            self._nan_before_call(jitted)
        if self._held is not None:
            self._settle_held()
        if not self._fast:  # (no jit's key consumption is recorded here: the usual case)
            self._last = (jitted, id(arg0), False)
            return
        fast = self._fast.get(id(jitted))
        recorded = False
        if fast is not None and fast[0] is jitted and maybe_key(arg0):
            if fast[3]:  # jax.random's own: each of its signatures consumes its key
                for _i, kind, data, _what in fast[1]:  # (input 0's: _keeps_fastpath)
                    self.keys.consume_at(slot, arg0, kind, data, fast[2], frame)
            else:  # another's: held until the call is known to have run on the fast path
                # (a signature its Python path shows first may consume otherwise)
                self._held = (jitted, arg0, fast[1], fast[2], self.keys.place(slot, frame), slot)
            recorded = True
        self._last = (jitted, id(arg0), recorded)

    def _nan_before_call(self, jitted: Any) -> None:
        """Before a call on the fast path (not on_jit): a donating call's inputs read by the
        checks pending first, else the reductions compiled since run, in order."""
        if self.nan.pending and _compat.donates(jitted):
            with self._recorder.own_work():
                self.nan.before_donation()
        elif self.nan.compiling:
            with self._recorder.own_work():
                self.nan.settle()

    def on_eager(self, prim: Any, args: tuple, params: dict, out: Any, frame: Any) -> None:
        if self._held is not None:
            self._settle_held()
        name = prim.name
        if (
            name.startswith("random_")
            or name == SCALAR
            or (name in PARTS and args and maybe_key(args[0]))
        ):
            self.keys.on_eager(name, args, params, out, frame)
        if self.namespace is None:
            self._find_namespace(frame)
        if prim.name in INDEXING:
            self.bounds.on_eager(prim.name, args, params, frame)
        self.nan.on_eager(prim, args, params, out, frame)

    key_prims = CONSUMING | {SCALAR}  # the eager ops on_key_op follows (the Recorder asks)

    def on_key_op(
        self, prim: Any, args: tuple, params: dict, out: Any, frame: Any, slot: tuple | None
    ) -> None:
        """The key ledger's part of `on_eager` for the eager ops of a summarised statement
        (a loop's body after its first runs): its consumptions. A key a loop's 40th run
        consumed and the cell uses again after the loop is a reuse. Its wraps need no
        following (a wrapped key is its data, KeyLedger._root), and the parts those runs
        take of key arrays are not followed: a part taken again after the loop from a key
        array such a run consumed a part of is a new key to the ledger (following the parts
        cost a third of jaxviz's time on an eager PRNG loop, the wraps another fifth)."""
        if self._held is not None:
            self._settle_held()
        if prim.name in self.key_prims:  # (and a fold-in's data made from a host value)
            self.keys.on_eager(prim.name, args, params, out, frame, slot)

    def _find_namespace(self, frame: Any) -> None:
        top = _compat.module_frame(frame, self.top_filename)
        if top is not None:
            self.namespace = top.f_globals

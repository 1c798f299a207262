"""NaN and Inf flags of arrays on an accelerator, reduced where the arrays are.

Reading an output on a TPU or GPU (np.asarray) waits for the computation and copies all of it
to the host: a Python loop under the NaN watch would no longer run ahead of the device. A
flag instead is one small reduction per array, dispatched as JAX dispatches (asynchronously),
read when computed: 4 bytes come back.

Each (shape, dtype, sharding) needs one compile of the reduction (~0.1-0.3 s on a TPU v5e; a
jit over a whole call's outputs compiled for ~3 s for a transformer's 181 parameters). The
watch asks with `wait=False`: arrays of shapes not compiled yet go to jaxviz's own thread,
which compiles their reductions and dispatches them, while the user's loop goes on (its
first traced cell ran 20 long kernels 2.6x slower on a TPU, each new shape's compile on
the loop's thread). That thread holds the arrays until it has dispatched their reductions,
as JAX holds a call's inputs until it ran, and no longer; one that a later call donated
meanwhile is deleted: its flag is lost (`flags_lost`), and the check says its call went unchecked.
On the CPU (a call's outputs not computed yet when it returns, diagnostics/nans/watch.py),
that thread only compiles: the watch's thread runs the reductions (`settle_flags`), in order
with the user's calls, holding the arrays until then; a donating call gives up those still
compiling.
jax 0.10.2 and 0.12: `jit(f).lower(ShapeDtypeStruct(..., sharding=...)).compile()`, and the
Compiled object's call.

`when_read` hands a call's flags to a second thread of jaxviz's, which waits for them (4 bytes
each, computed after the call) and tells the watch what they say: the watch holds a call's
arrays until then, so that a NaN found later can still be localised on them, and lets go of
them there when they are finite, about when the device itself is done with them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import jax
import numpy as np


def _jaxviz_nonfinite(x: Any) -> Any:
    return jax.numpy.where(jax.numpy.isnan(x).any(), 2, jax.numpy.isinf(x).any() * 1)


# The reduction's name in JAX's compile events, and its XLA module's (jax 0.10.2 and 0.12:
# jit's module is "jit_" and the function's name): the profile (jaxviz.profile) counts its
# device and compile time as jaxviz's own, apart from the user's.
NONFINITE_NAME = _jaxviz_nonfinite.__name__  # "_jaxviz_nonfinite"
NONFINITE_MODULE = "jit_" + NONFINITE_NAME  # "jit__jaxviz_nonfinite"
_NONFINITE = jax.jit(_jaxviz_nonfinite)
# (shape, dtype, weak type, sharding) -> the reduction compiled for it
_EXECUTABLES: dict[tuple, Any] = {}
_EXECUTABLES_MAX = 1024
_LOCK = threading.Lock()
_POOL: ThreadPoolExecutor | None = None
_READER: ThreadPoolExecutor | None = None  # reads flags for `when_read`, in call order
_GONE = object()  # the flag of an array deleted (donated) before its reduction ran


def _key(x: Any) -> tuple:
    return (x.shape, x.dtype, x.weak_type, x.sharding)


def _executable(x: Any) -> Any:
    """The reduction compiled for `x`'s shape, dtype and sharding (compiled now if new)."""
    k = _key(x)
    c = _EXECUTABLES.get(k)
    if c is None:
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding, weak_type=x.weak_type)
        c = _NONFINITE.lower(spec).compile()
        with _LOCK:
            if len(_EXECUTABLES) >= _EXECUTABLES_MAX:
                _EXECUTABLES.clear()
            _EXECUTABLES[k] = c
    return c


def _reduce(xs: list) -> list:
    """In jaxviz's thread: each array's flag, its reduction compiled first if new."""
    out = []
    while xs:
        x = xs.pop(0)  # (held no longer than its reduction's dispatch)
        try:
            c = _executable(x)  # (a new shape's compile: the user's loop goes on meanwhile)
            out.append(_GONE if x.is_deleted() else c(x))
        except Exception:  # deleted (donated) meanwhile, or it could not compile
            out.append(_GONE)
        del x
    return out


def _compile(xs: list) -> list:
    """In jaxviz's thread: each array's reduction, compiled if new (None: it could not
    compile); the watch's own thread runs them (`_Later.settle`)."""
    out = []
    for x in xs:
        try:
            out.append(_executable(x))
        except Exception:
            out.append(None)
    return out


class _Later:
    """The flags of a call's arrays whose reductions jaxviz's thread compiles and runs, or
    (`here`: arrays on the host, a CPU call's outputs not computed yet) compiles only: the
    watch's own thread, which made it, runs them (`settle`), in order with the user's
    calls. Run from jaxviz's thread, a reduction raced the user's next call, which could
    donate the array meanwhile: on jax 0.10.2 each such run logged "Buffer has been deleted
    or donated" to the process's stderr, which a kernel shows in the cell (24 lines for a
    24-leaf Adam step's first call on the CPU). `here` holds the arrays until then (until
    the watch's next look, a donating call, which gives up those still compiling, or the
    cell's end)."""

    __slots__ = ("_done", "_flags", "_fut", "_owner", "_xs")

    def __init__(self, fut: Future, xs: list | None = None) -> None:
        self._fut = fut
        self._xs = xs  # `here`: the arrays, until settled
        self._flags: list | None = None
        self._done = threading.Event()
        self._owner = threading.get_ident()

    @property
    def settled(self) -> bool:
        return self._xs is None or self._flags is not None

    def settle(self, give_up: bool = False, wait: bool = False) -> None:
        """`here`, in the watch's thread: the reductions run, if compiled (`wait`: waits for
        the compile); `give_up`: those still compiling are lost. An array deleted
        meanwhile is lost (`_GONE`)."""
        xs = self._xs
        if xs is None or self._flags is not None:
            return
        if not self._fut.done():
            if give_up:
                self._finish([_GONE] * len(xs))
                return
            if not wait:
                return
        try:
            compiled = self._fut.result()
        except Exception:  # jaxviz's thread failed: nothing checked
            compiled = [None] * len(xs)
        out = []
        for x, c in zip(xs, compiled):
            try:
                out.append(_GONE if c is None or x.is_deleted() else c(x))
            except Exception:  # deleted (donated) meanwhile
                out.append(_GONE)
        self._finish(out)

    def _finish(self, flags: list) -> None:
        self._xs = []
        self._flags = flags
        self._done.set()

    def flags(self) -> list:
        """The arrays' device flags (_GONE for one that went first), once dispatched."""
        if self._xs is None:  # run by jaxviz's thread
            try:
                return self._fut.result()
            except Exception:  # jaxviz's thread failed: nothing checked
                return [_GONE]
        if self._flags is None:
            if threading.get_ident() == self._owner:
                self.settle(wait=True)
            else:
                self._done.wait()
        return self._flags or []

    def is_ready(self) -> bool:
        if self._xs is None:
            if not self._fut.done():
                return False
            return all(f is _GONE or f.is_ready() for f in self.flags())
        if self._flags is None and threading.get_ident() == self._owner:
            self.settle()
        if self._flags is None:
            return False
        return all(f is _GONE or f.is_ready() for f in self._flags)


def settle_flags(flags: list, give_up: bool = False) -> bool:
    """Runs the reductions jaxviz's thread has compiled for `flags` made `here`
    (`give_up`: those still compiling are lost); True when none waits any more. The watch's
    thread only."""
    done = True
    for f in flags:
        if type(f) is _Later:
            f.settle(give_up=give_up)
            done = done and f.settled
    return done


def nonfinite_flags(xs: Any, wait: bool = True, here: bool = False) -> list:
    """Per float array of `xs`, a device scalar: 2 if it holds a NaN, 1 an Inf, else 0.
    `wait` False: the arrays of shapes not compiled yet are reduced by jaxviz's thread (with
    `here`, only compiled there: `settle_flags` runs them), and one `_Later` stands for
    their flags (`read_flags` and an `is_ready` call take it)."""
    global _POOL
    out: list = []
    later = []
    for x in xs:
        c = _EXECUTABLES.get(_key(x))
        if c is not None:
            out.append(c(x))
        elif wait:
            out.append(_executable(x)(x))
        else:
            later.append(x)
    if later:
        with _LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(1, thread_name_prefix="jaxviz-flags")
        if here:
            out.append(_Later(_POOL.submit(_compile, list(later)), later))
        else:
            out.append(_Later(_POOL.submit(_reduce, later)))
    return out


def _expanded(flags: list) -> list:
    out: list = []
    for f in flags:
        if type(f) is _Later:
            out.extend(f.flags())
        else:
            out.append(f)
    return out


def read_flags(flags: list) -> int:
    """The worst of `nonfinite_flags`' flags, read in one transfer (0: none; a lost flag,
    `flags_lost`, counts as none)."""
    vals = [f for f in _expanded(flags) if f is not _GONE]
    if not vals:
        return 0
    return int(max(np.asarray(f) for f in jax.device_get(vals)))


def flags_lost(flags: list) -> bool:
    """Whether an array of these flags was deleted (donated) before its reduction ran."""
    return any(f is _GONE for f in _expanded(flags))


def _read_then(flags: list, then: Callable[[int, bool], Any]) -> None:
    try:
        worst, lost = read_flags(flags), flags_lost(flags)
    except Exception:  # nothing read: the watch's own check reads them (and lets go)
        return
    then(worst, lost)


def when_read(flags: list, then: Callable[[int, bool], Any]) -> None:
    """Calls `then(worst, lost)` (read_flags', flags_lost's) in jaxviz's reader thread once
    `flags` are computed: the waiting is that thread's, never the caller's."""
    global _READER
    if _READER is None:
        with _LOCK:
            if _READER is None:
                _READER = ThreadPoolExecutor(1, thread_name_prefix="jaxviz-flags-read")
    _READER.submit(_read_then, flags, then)

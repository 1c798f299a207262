"""Python < 3.12: every call of a jitted function, JAX's C++ fast path's too.

Python 3.12's `sys.monitoring` raises a CALL event before each call the watched code makes;
Python 3.11 has no such event for a call of a C object (`sys.setprofile` reports C functions
only, and a PjitFunction is not one). A jitted call served by JAX's C++ fast path runs no
Python at all, so the recorder saw only the calls that took JAX's Python path, ~10 ms each
for a 181-leaf train step on a TPU host: watching a loop's first calls there cost the cell
up to 2x its plain time, and its later calls went uncounted ("2+ calls").

`counting_jit_calls(on_call)` gives the PjitFunction type a Python `__call__` that tells
`on_call(jitted, args)` of each call and then makes it as before: JAX's fast path still
serves it (~0.4 us more a call, measured on jax 0.10.2, against ~3 us for the smallest
jitted call). CPython 3.11 calls an object through its type's vectorcall pointer while the
type says it has one (Py_TPFLAGS_HAVE_VECTORCALL), whatever `__call__` says, so the flag is
lowered for the block and raised again after; Python 3.12 drops it itself when `__call__` is
set, but has CALL events and never comes here.

The flag is written through ctypes at its place in CPython's PyTypeObject, only after the
value read there is the type's own `__flags__`: on any other layout nothing is changed and
the block counts nothing (it yields False). Both the method and the flag are restored when
the block exits, also on errors. jax 0.10.2 (Python 3.11): jaxlib._jax.PjitFunction, a
nanobind heap type whose `__call__` is the slot wrapper of its tp_call (PyVectorcall_Call).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Callable, Iterator
from typing import Any

from jaxviz._compat.frames import JIT_FUNCTION_TYPE

_HAVE_VECTORCALL = 1 << 11  # CPython's Py_TPFLAGS_HAVE_VECTORCALL
# PyTypeObject's tp_flags: after PyObject_VAR_HEAD (3 words) and 18 pointer-sized fields,
# tp_name ... tp_as_buffer (CPython 3.8 to 3.11, 64-bit and 32-bit alike)
_FLAGS_OFFSET = 21 * ctypes.sizeof(ctypes.c_void_p)


def _flags_of(cls: type) -> Any:
    """The type's tp_flags as a ctypes field, or None when it is not where CPython 3.11
    keeps it (another interpreter, another layout)."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return None
    try:
        flags = ctypes.c_ulong.from_address(id(cls) + _FLAGS_OFFSET)
    except (ValueError, TypeError):
        return None
    return flags if flags.value == cls.__flags__ else None


@contextlib.contextmanager
def counting_jit_calls(on_call: Callable[[Any, tuple], None]) -> Iterator[bool]:
    """While the block runs, `on_call(jitted, args)` is told of each call of a jitted
    function, from any thread, before JAX dispatches it; it must be quick and never raise.
    Yields whether it counts (False: Python >= 3.12, or this interpreter's layout is not
    the one known, or another counter is on). Not reentrant."""
    cls = JIT_FUNCTION_TYPE
    own = cls.__dict__.get("__call__")
    flags = _flags_of(cls)
    if flags is None or own is None or not flags.value & _HAVE_VECTORCALL:
        yield False
        return
    call_through = own  # the slot wrapper: tp_call, which takes the instance's vectorcall

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # (capture.cell unlinks it from the user's tracebacks)
        on_call(self, args)
        return call_through(self, *args, **kwargs)

    cls.__call__ = __call__  # type: ignore[method-assign]  # (CPython: PyType_Modified)
    flags.value &= ~_HAVE_VECTORCALL
    try:
        yield True
    finally:
        flags.value |= _HAVE_VECTORCALL
        cls.__call__ = own  # type: ignore[method-assign]  # its C slot again


def can_count_jit_calls() -> bool:
    """Whether `counting_jit_calls` counts on this interpreter (CPython 3.11: yes; 3.12+
    has CALL events instead)."""
    cls = JIT_FUNCTION_TYPE
    flags = _flags_of(cls)
    return flags is not None and "__call__" in cls.__dict__ and bool(flags.value & _HAVE_VECTORCALL)

"""Hooks on JAX's dispatch paths, for capture: the Python path of jitted calls and eager
primitive applications (`patched_dispatch`), the outermost traces JAX opens
(`watching_top_frames`), the C++ fast path and its caches, the static arguments of a call.

Each hook is installed by a context manager and restored when its block exits, also on
errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import re
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jax._src import core as _core
from jax._src import pjit as _pjit
from jax._src.interpreters import partial_eval as _pe

from jaxviz._compat.frames import (
    JIT_FUNCTION_TYPE,
    is_user_filename,
    jit_wrapped_fun,
    parameters,
    unwrap,
)
from jaxviz._compat.jaxpr import open_jaxpr

# --- capture hooks -------------------------------------------------------------------------


def _top_level_check() -> Callable[[], bool]:
    """`is_top_level`: core.trace_state_clean, read as it reads: its two thread-local
    states, the current trace (the eval trace: none open; jax 0.12 also None, never set)
    and the axis environment. It runs at each watched call and eager op: JAX's own takes
    ~0.14 us (its TracingContext's properties), this ~0.06 us. Where JAX's functions read
    otherwise than jax 0.10.2's and 0.12's, JAX's own. jax 0.10.2 and 0.12:
    `TracingContext.is_top_level` (trace is eval_trace and axis_env is top_axis_env); 0.12's
    `trace_state_clean` also takes an empty trace (`is_empty`)."""
    clean = _core.trace_state_clean
    try:
        trace, axis = _core.trace_state_strong_ref, _core.axis_env_state
        eval_trace, top = _core.eval_trace, _core.top_axis_env
        reads = _core.TracingContext.is_top_level.__code__.co_names
        clean_reads = clean.__code__.co_names
    except AttributeError:
        return clean
    if reads != ("trace", "eval_trace", "axis_env", "top_axis_env"):
        return clean
    if clean_reads == ("trace_ctx", "is_empty", "is_top_level"):

        def top_or_empty() -> bool:
            t = trace.value
            return t is None or (t is eval_trace and axis.value is top)

        return top_or_empty
    if clean_reads == ("trace_ctx", "is_top_level"):

        def top_level() -> bool:
            return trace.value is eval_trace and axis.value is top

        return top_level
    return clean


# True when no JAX transformation is tracing: a bind here executes eagerly.
is_top_level: Callable[[], bool] = _top_level_check()


def clear_cpp_dispatch_caches() -> None:
    """Empties the C++ dispatch entries of every jitted function but JAX's per-primitive
    ones (not the tracing/compilation caches).

    The next call of each then goes once through Python (`cache_miss`), where jaxviz sees
    its jaxpr, and is served from the cached executable: no retrace, no recompile. The
    per-primitive jits that run each eager op keep theirs: jaxviz sees eager ops at their
    bind, and each one emptied cost its first op in the cell ~0.15 ms (Python 3.11: ~8 ms
    on an eager grad/vmap cell). Only the functions that can hold entries are touched: those
    whose Python path ran since they were last emptied (`_JitBook`); each one touched costs
    ~0.3 us, ~0.12 ms for JAX's ~350 jits after a garbage collection, at the start of every
    cell on Python 3.11. When it cannot tell them, both global caches are emptied.
    jax 0.10.2 and 0.12: two global `PjitFunctionCache`s in jax._src.pjit,
    `PjitFunction._clear_cache`, and `dispatch.xla_primitive_callable`'s functions marked
    `_apply_primitive`.
    """
    book = _jit_book()
    if book is not None:
        book.clear()
        return
    for name in ("_cpp_pjit_cache_fun_only", "_cpp_pjit_cache_explicit_attributes"):
        cache = getattr(_pjit, name, None)
        if cache is not None:
            cache.clear()


# JAX's own Python path of a jitted call, as it was when jaxviz was imported
_PRISTINE_RUN = _pjit._run_python_pjit


class _JitBook:
    """The jitted functions alive but JAX's per-primitive ones, by the Python function each
    wraps (several jits of one function share its entries), and which of them may hold C++
    dispatch entries.

    A jit's entries are made only by a call that went through its Python path, JAX's
    `_run_python_pjit`, which jaxviz wraps from the first recording on (`tracked_run`,
    ~0.3 us on a path that costs ~100 us; JAX's fast path is untouched): each call there
    notes its function in `filled`. `clear` empties those and forgets them. The functions
    alive when first asked are found by the garbage collector, once (~10 ms for 100k
    objects), and may all hold entries; each one `jax.jit` makes after is added, holding
    none until its Python path runs (jax 0.10.2 and 0.12: jax._src.pjit._cpp_pjit, wrapped
    until forget_jits(); a jit's creation costs ~20 us, the wrapper ~1 us more).
    """

    def __init__(self, orig_cpp_pjit: Callable) -> None:
        self.orig_cpp_pjit = orig_cpp_pjit
        self.by_fun: dict[int, list[weakref.ref]] = {}
        # ids of the functions whose Python path ran since they were last emptied; None:
        # not tracked (JAX's Python path was not JAX's own when the book opened)
        self.filled: set[int] | None = None
        self.tracked_run: Callable | None = None

    def add(self, jitted: Any, fun: Any) -> None:
        key = id(fun)
        ref = weakref.ref(jitted, functools.partial(self._gone, key))
        self.by_fun.setdefault(key, []).append(ref)
        # (one made after the book opened holds no entries: its first call's Python path
        # notes it in `filled`)

    def _gone(self, key: int, ref: weakref.ref) -> None:
        refs = self.by_fun.get(key)
        if refs is not None:
            try:
                refs.remove(ref)
            except ValueError:
                pass
            if not refs:
                del self.by_fun[key]

    def tracking(self) -> bool:
        """Whether every Python-path call goes through `tracked_run` still (under the
        watch's own hook, `patched_dispatch`, which calls what it replaced)."""
        run = _pjit._run_python_pjit
        tracked = self.tracked_run
        return tracked is not None and (
            run is tracked or getattr(run, "_jaxviz_calls", None) is tracked
        )

    def clear(self) -> None:
        """Empties the entries of every function that may hold some (all of them while
        the Python path is not tracked)."""
        filled = self.filled
        if filled is None or not self.tracking():
            keys: Any = list(self.by_fun)
        else:
            keys = list(filled)
        if filled is not None:
            filled.clear()
        self._empty(keys)

    def clear_fun(self, fun: Any) -> None:
        """Empties the entries of every known jit of `fun`. (A call's own Python path
        notes its function only after jaxviz saw the call: a `clear` then misses it.)"""
        self._empty((id(fun),))

    def _empty(self, keys: Iterable[int]) -> None:
        clear = getattr(JIT_FUNCTION_TYPE, "_clear_cache", None) or clear_fun_cache
        by_fun = self.by_fun
        for key in keys:
            for ref in list(by_fun.get(key, ())):
                f = ref()
                if f is not None:
                    clear(f)


_BOOK: _JitBook | None = None


def _per_primitive(f: Any) -> bool:
    return bool(getattr(jit_wrapped_fun(f), "_apply_primitive", False))


def is_per_primitive(jitted: Any) -> bool:
    """Whether a jitted function is one of JAX's per-primitive ones, which run eager ops
    (jax 0.10.2 and 0.12: `dispatch.xla_primitive_callable`'s, marked `_apply_primitive`)."""
    return _per_primitive(jitted)


def _jit_book() -> _JitBook | None:
    global _BOOK
    if _BOOK is not None:
        return _BOOK
    orig = getattr(_pjit, "_cpp_pjit", None)
    if orig is None:
        return None
    book = _JitBook(orig)
    try:
        for o in gc.get_objects():
            if type(o) is JIT_FUNCTION_TYPE and not _per_primitive(o):
                book.add(o, jit_wrapped_fun(o))
    except TypeError:  # not weakly referenceable: this jaxlib's functions are unknown
        return None

    def cpp_pjit(fun, jit_info):
        f = orig(fun, jit_info)
        if not getattr(fun, "_apply_primitive", False):
            try:
                book.add(f, fun)
            except TypeError:
                pass
        return f

    if _pjit._run_python_pjit is _PRISTINE_RUN:
        filled: set[int] = set(book.by_fun)  # those alive now: any may hold entries
        note = filled.add

        def tracked_run(p, args_flat, fun, args, kwargs):  # jax 0.10.2 and 0.12
            __tracebackhide__ = True
            note(id(fun))
            return _PRISTINE_RUN(p, args_flat, fun, args, kwargs)

        book.filled, book.tracked_run = filled, tracked_run
        _pjit._run_python_pjit = tracked_run
    _pjit._cpp_pjit = cpp_pjit
    _BOOK = book
    return book


def forget_jits() -> None:
    """Restores jax.jit's factory and JAX's Python path, and drops the functions the book
    (`_jit_book`) knew."""
    global _BOOK
    book, _BOOK = _BOOK, None
    if book is None:
        return
    _pjit._cpp_pjit = book.orig_cpp_pjit
    if book.tracked_run is not None and _pjit._run_python_pjit is book.tracked_run:
        _pjit._run_python_pjit = _PRISTINE_RUN


def dispatch_key(jitted: Any) -> tuple:
    """What a jitted object's C++ dispatch entries are shared by: `jax.jit(f)` made anew
    (in a loop, `jax.jit(step)(x)`) is a new object whose calls the entries of `f` serve.
    jax 0.10.2 and 0.12: PjitFunction._fun and _jit_info (static and donated arguments)."""
    fun = jit_wrapped_fun(jitted)
    info = getattr(jitted, "_jit_info", None)
    if fun is None or info is None:
        return (id(jitted),)
    try:
        return (
            id(fun),
            info.static_argnums,
            info.static_argnames,
            info.donate_argnums,
            info.donate_argnames,
        )
    except AttributeError:
        return (id(jitted),)


def donates(jitted: Any) -> bool:
    """Whether a jitted object donates any argument (`donate_argnums`/`donate_argnames`).
    jax 0.10.2 and 0.12: PjitFunction._jit_info."""
    key = dispatch_key(jitted)
    return len(key) > 1 and bool(key[3] or key[4])


def clear_jits_of(fun: Any) -> None:
    """Empties the C++ dispatch entries of every jit of the Python function `fun` (the
    one a Python-path call names when its jitted object is not known: a jitted method
    reached through its instance); all of them when the jits are not known."""
    book = _jit_book()
    if book is None:
        clear_cpp_dispatch_caches()
    else:
        book.clear_fun(fun)


def clear_fun_cache(jitted: Any) -> None:
    """Empties one jitted function's C++ dispatch entries (all its signatures), keeping
    its traced jaxprs and executables: its next call goes once through Python.
    jax 0.10.2 and 0.12: PjitFunction._clear_cache (~0.03 us when empty)."""
    clear = getattr(jitted, "_clear_cache", None)
    if clear is not None:
        clear()


def cache_entries(jitted: Any) -> int:
    """How many signatures a jitted object's C++ dispatch cache holds (-1: not known).
    jax 0.10.2 and 0.12: PjitFunction._cache_size()."""
    size = getattr(jitted, "_cache_size", None)
    try:
        return int(size()) if size is not None else -1
    except Exception:  # jaxlib's internals moved
        return -1


@dataclasses.dataclass
class JitCall:
    """What the Python dispatch path knows about one top-level call of a jitted function."""

    fun: Callable  # the user's Python function (not the jit wrapper)
    jaxpr: Any  # JAX's closed jaxpr of the call
    name: str  # the jit's name param
    args_flat: list  # the flat arguments (the hook's caller must not keep them)
    args: tuple  # the call's positional args (pytrees, static values included)
    kwargs: dict
    donated: tuple[bool, ...]
    arg_names: tuple[str, ...]
    # set by the hook's caller (the Recorder) when it recorded the call: the jitted object
    # (None: not known), for its fast-path decision; left False for calls it let through
    seen: bool = False
    jitted: Any = None


def _arg_names(p: Any, jaxpr: Any, n: int) -> tuple[str, ...]:
    names = getattr(p, "arg_names", None)  # jax 0.10 and 0.12: PjitParams
    if names is None:
        dbg = getattr(open_jaxpr(jaxpr), "debug_info", None)
        names = getattr(dbg, "arg_names", None)
    names = tuple(names or ())
    return names if len(names) == n else tuple(f"arg{i}" for i in range(n))


@contextlib.contextmanager
def patched_dispatch(
    on_jit: Callable[[JitCall, Callable[[], Any]], Any],
    on_eager: Callable[[Any, tuple, dict, Callable[[], Any]], Any],
    keep_fastpath: Callable[[JitCall], bool],
) -> Iterator[None]:
    """Hooks JAX's Python dispatch paths while the block runs, and restores them after.

    on_jit(call, run) replaces each jitted call that goes through Python at top level;
    on_eager(primitive, args, params, run) each eager primitive application at top level.
    Both must return run(), the original result.

    keep_fastpath(call) decides, right after a call went through Python, whether JAX's C++
    fast path may cache it (its next calls then skip Python). `call` is the JitCall on_jit
    saw (a call under a trace, or JAX's own evaluation of a staged jit, always may). A call
    refused leaves a "never fast" entry in its function's C++ cache: the caller must clear it
    when done (`clear_cpp_dispatch_caches`, or `clear_fun_cache` of the jitted object).
    jax 0.10.2 and 0.12: `_cpp_pjit`'s cache_miss calls `_get_fastpath_data` right after
    `_run_python_pjit`.
    """
    orig_run = _pjit._run_python_pjit
    orig_fast = _pjit._get_fastpath_data
    orig_eval = _core.EvalTrace.process_primitive
    last: list[JitCall | None] = [None]  # the Python-path call that ran last

    def run_python_pjit(p, args_flat, fun, args, kwargs):  # jax 0.10.2 and 0.12: same signature
        __tracebackhide__ = True

        def run():  # hidden from IPython's and pytest's tracebacks, as the hooks are
            __tracebackhide__ = True
            return orig_run(p, args_flat, fun, args, kwargs)

        if not _core.trace_state_clean():
            last[0] = None
            return run()
        jaxpr = p.params["jaxpr"]
        call = JitCall(
            fun=fun,
            jaxpr=jaxpr,
            name=str(p.params.get("name", "")),
            args_flat=args_flat,
            args=args,
            kwargs=kwargs,
            donated=tuple(p.params.get("donated_invars", ())),
            arg_names=_arg_names(p, jaxpr, len(args_flat)),
        )
        last[0] = None
        out = on_jit(call, run)
        # after the calls nested in it: its fast-path decision comes next (a failed call
        # has none; `_pjit_call_impl`'s cache misses come with last[0] None: JAX's own)
        call.args_flat, call.args, call.kwargs = [], (), {}
        last[0] = call
        return out

    run_python_pjit._jaxviz_calls = orig_run  # type: ignore[attr-defined]  # (_JitBook.tracking)

    def get_fastpath_data(*a, **k):
        call, last[0] = last[0], None
        if call is None or keep_fastpath(call):
            return orig_fast(*a, **k)
        return None

    _pjit._run_python_pjit = run_python_pjit
    _pjit._get_fastpath_data = get_fastpath_data
    _core.EvalTrace.process_primitive = _eager_hook(orig_eval, on_eager)  # type: ignore[method-assign]
    try:
        yield
    finally:
        _pjit._run_python_pjit = orig_run
        _pjit._get_fastpath_data = orig_fast
        _core.EvalTrace.process_primitive = orig_eval  # type: ignore[method-assign]


def _eager_hook(orig_eval: Callable, on_eager: Callable) -> Callable:
    partial = functools.partial  # run() calls JAX's own directly: no frame of ours between

    def process_primitive(self, primitive, args, params, /):
        __tracebackhide__ = True
        return on_eager(primitive, args, params, partial(orig_eval, self, primitive, args, params))

    return process_primitive


def is_committed(x: Any) -> bool:
    """Whether an array's placement was chosen by the user (device_put, a sharded output)."""
    return bool(getattr(x, "committed", True))  # jax 0.10.2 and 0.12: Array.committed


_OBJECT_REPR = re.compile(
    r"<bound method ([\w.<>]+) of <[^<>]*>>|<(?:function|built-in function) ([\w.<>]+)[^<>]*>"
)


def _short(value: Any) -> str:
    """A static argument as text, at most 40 characters: functions by name, not by their
    address (`<function step at 0x7f..>` -> `step`)."""
    try:
        text = repr(value)
    except Exception:  # a repr that fails: its type
        text = f"<{type(value).__name__}>"
    text = _OBJECT_REPR.sub(lambda m: (m[1] or m[2]).rsplit(".<locals>.", 1)[-1], text)
    return text if len(text) <= 40 else text[:39] + "…"


def static_args(jitted: Any, args: tuple, kwargs: dict) -> str:
    """The static arguments of a jitted call as text, "n=3, act='gelu'" ("" if none).

    jax 0.10.2 and 0.12: PjitFunction._jit_info.static_argnums / static_argnames.
    """
    info = getattr(jitted, "_jit_info", None)
    if info is None:
        return ""
    nums, names = tuple(info.static_argnums or ()), tuple(info.static_argnames or ())
    params = [p.name for p in parameters(jit_wrapped_fun(jitted))]
    parts = [
        f"{params[i] if i < len(params) else f'arg{i}'}={_short(args[i])}"
        for i in nums
        if i < len(args)
    ]
    parts += [f"{k}={_short(kwargs[k])}" for k in names if k in kwargs]
    return ", ".join(parts)


def static_args_of_call(fun: Any, jaxpr: Any, args: tuple, kwargs: dict) -> str:
    """static_args without the jit wrapper: the arguments the jaxpr has no input for.

    The jaxpr's debug_info.arg_names (jax 0.10.2 and 0.12) names its inputs by the
    function's parameter names; a parameter with no input there was static.
    """
    names = getattr(getattr(open_jaxpr(jaxpr), "debug_info", None), "arg_names", None) or ()
    dynamic = {n.split("[")[0].split(".")[0] for n in names if n}
    params = [p.name for p in parameters(fun)]
    parts = [
        f"{params[i]}={_short(a)}"
        for i, a in enumerate(args)
        if i < len(params) and params[i] not in dynamic and not hasattr(a, "shape")
    ]
    parts += [
        f"{k}={_short(v)}"
        for k, v in kwargs.items()
        if k not in dynamic and not hasattr(v, "shape")
    ]
    return ", ".join(parts) if dynamic else ""


# --- watching traces -----------------------------------------------------------------------


@contextlib.contextmanager
def watching_top_frames(on_frame: Callable[[Any, str, tuple, bool], None]) -> Iterator[None]:
    """Calls on_frame(frame, function name, arg names, user) for each outermost trace JAX
    opens; `user`: the name is the user's function's (not a JAX wrapper's, "f_wrapped").

    A trace that fails drops its frame; jaxviz keeps the latest outermost one so that a
    cell whose jitted function failed to trace still shows what was staged up to the
    failure. jax 0.10.2 and 0.12: DynamicJaxprTrace(debug_info, ...) makes `self.frame`.
    Some transformations open a trace while JAX has taken the current one away
    (`core.take_current_trace`: jax.grad's linearize inside jax.jit), so the trace state
    looks clean; such a trace is nested when the Python frame that opened a reported one
    is still on the stack, and is not reported.
    """
    cls = _pe.DynamicJaxprTrace
    orig_init = cls.__init__
    openers: dict[int, Any] = {}  # id(Python frame that opened a reported trace) -> its code

    def init(self, *a, **k):
        orig_init(self, *a, **k)
        if not _core.trace_state_clean():
            return
        opener = sys._getframe(1)
        live = {}
        f = opener.f_back
        while f is not None:
            if openers.get(id(f)) is f.f_code:
                live[id(f)] = f.f_code
            f = f.f_back
        openers.clear()
        openers.update(live)  # only openers still running stay
        if live:
            return  # nested in a trace already reported
        openers[id(opener)] = opener.f_code
        dbg = getattr(self.frame, "debug_info", None)
        src = str(getattr(dbg, "func_src_info", "") or "")
        file = src.rsplit(" at ", 1)[-1].rsplit(":", 1)[0] if " at " in src else ""
        name = str(getattr(dbg, "func_name", "") or "f")
        arg_names = tuple(getattr(dbg, "arg_names", None) or ())
        user = not file or is_user_filename(file)
        if not user:
            try:
                diff = _differentiated(opener, arg_names)
            except Exception:  # JAX's internals moved: keep JAX's names
                diff = None
            if diff is not None:
                (name, arg_names), user = diff, True
        on_frame(self.frame, name, arg_names, user)

    cls.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls.__init__ = orig_init  # type: ignore[method-assign]


def _differentiated(opener: Any, arg_names: tuple) -> tuple[str, tuple] | None:
    """The user's function name and its parameter names for a trace JAX opened on the
    jax.grad-family wrapper `f_wrapped(*dyn_args_)` (arg names "dyn_args_[0]"); None if not
    that. jax 0.10.2 and 0.12: ad.linearize(traceable, ...) opens the trace, `traceable` is
    api_util.argnums_partial2's f_wrapped, closing over `f` and `dyn_argnums`.
    """
    fw = opener.f_locals.get("traceable") if opener.f_code.co_name == "linearize" else None
    code = getattr(fw, "__code__", None)
    if fw is None or code is None or code.co_name != "f_wrapped":
        return None
    cells = dict(zip(code.co_freevars, fw.__closure__ or ()))
    try:
        fn, nums = cells["f"].cell_contents, tuple(cells["dyn_argnums"].cell_contents)
    except (KeyError, ValueError, TypeError):
        return None
    inner = unwrap(fn)
    params = [p.name for p in parameters(inner)]

    def rename(a: str) -> str:
        m = re.match(r"dyn_args_\[(\d+)\](.*)$", a)
        if not m or int(m.group(1)) >= len(nums) or nums[int(m.group(1))] >= len(params):
            return a
        return params[nums[int(m.group(1))]] + m.group(2)

    name = str(getattr(inner, "__name__", "") or "f").rsplit(".<locals>.", 1)[-1]
    return name, tuple(rename(a) for a in arg_names)


def frame_eqns(frame: Any) -> list:
    """Equations staged so far in a JaxprStackFrame (jax 0.10.2 and 0.12: get_eqns())."""
    try:
        return [e for e in frame.get_eqns() if hasattr(e, "primitive")]
    except Exception:  # a frame JAX already tore down
        return []


def frame_invars(frame: Any) -> list:
    return list(getattr(frame, "invars", ()))


def has_sys_monitoring() -> bool:
    return hasattr(sys, "monitoring")  # Python >= 3.12


# --- diagnostics (jaxviz.diagnostics.check) ------------------------------------------------


def pjit_out_flat(result: Any) -> list:
    """The flat outputs from `_run_python_pjit`'s result tuple.

    jax 0.10.2 and 0.12: (outs, out_flat, out_tree, args_flat, jaxpr, ...).
    """
    try:
        return list(result[1])
    except (TypeError, IndexError):
        return []

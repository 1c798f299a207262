"""The one door to JAX internals.

Every use of `jax._src`, every version branch and every parameter name that changed between
JAX releases lives here, with the version in the comment of each branch. The rest of jaxviz
receives plain data (strings, ints, tuples) or JAX's own public objects from this module.

Supported: jax 0.10.2 (Python 3.11) to 0.12.x (Python 3.12). shared/JAX_NOTES.md records
what differs between them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import jax._src.lib
from jax._src import core as _core
from jax._src import pjit as _pjit
from jax._src import source_info_util as _siu

# jaxviz's own frames are never the user's code, and JAX's traceback filtering hides them
# from the user's tracebacks as it hides its own (jax 0.10.2 and 0.12).
from jax._src import traceback_util as _traceback_util
from jax._src.interpreters import partial_eval as _pe

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # jaxviz/
_siu.register_exclusion(PACKAGE_DIR)
_traceback_util.register_exclusion(PACKAGE_DIR)

from jaxviz._compat.xla import parse_hlo_aliases as parse_hlo_aliases  # noqa: E402
from jaxviz._compat.xla import parse_main_args as parse_main_args  # noqa: E402

JIT_FUNCTION_TYPE = type(jax.jit(lambda: None))  # jaxlib's PjitFunction


# --- jaxpr structure ------------------------------------------------------------------------


def open_jaxpr(j: Any) -> Any:
    """The open Jaxpr of a ClosedJaxpr (0.10) or of a Jaxpr that carries consts (0.12)."""
    return getattr(j, "jaxpr", j)


def jaxpr_consts(j: Any) -> list:
    """Constants bound to `open_jaxpr(j).constvars`: ClosedJaxpr.consts (0.10), Jaxpr.consts
    (0.12)."""
    return list(getattr(j, "consts", None) or ())


from jax.extend.core import ClosedJaxpr as _ClosedJaxpr  # noqa: E402
from jax.extend.core import DropVar as _DropVar  # noqa: E402
from jax.extend.core import Jaxpr as _Jaxpr  # noqa: E402
from jax.extend.core import Literal as _Literal  # noqa: E402

_JAXPR_TYPES = (_Jaxpr, _ClosedJaxpr)
# The classes themselves, for `v.__class__ is LITERAL_TYPE` in the hot loop of a jaxpr walk
# (jax 0.10.2 and 0.12: neither has subclasses; Literals are unhashable).
LITERAL_TYPE, DROPVAR_TYPE = _Literal, _DropVar


def is_jaxpr(x: Any) -> bool:
    return isinstance(x, _JAXPR_TYPES)


def is_literal(v: Any) -> bool:
    return type(v) is _Literal or isinstance(v, _Literal)


def is_dropvar(v: Any) -> bool:
    return type(v) is _DropVar


def holds_jaxpr(val: Any) -> bool:
    if isinstance(val, _JAXPR_TYPES):
        return True
    return type(val) in (tuple, list) and any(isinstance(v, _JAXPR_TYPES) for v in val)


class SubJaxpr(NamedTuple):
    role: str  # "jit", "scan", "branch 0", "cond", "body", "remat", ...
    jaxpr: Any  # JAX's object (ClosedJaxpr on 0.10, Jaxpr on 0.12, open Jaxpr for remat)
    in_map: list[int]  # body input i is fed by eqn input in_map[i] (-1: none)
    out_map: list[int]  # body output i becomes eqn output out_map[i] (-1: none)
    times: int  # executions per eqn execution


def _n_in(j: Any) -> int:
    return len(open_jaxpr(j).invars)


def _n_out(j: Any) -> int:
    return len(open_jaxpr(j).outvars)


def _one_to_one(role: str, j: Any, n_in: int, n_out: int, times: int = 1) -> SubJaxpr:
    ins = [i if i < n_in else -1 for i in range(_n_in(j))]
    outs = [i if i < n_out else -1 for i in range(_n_out(j))]
    return SubJaxpr(role, j, ins, outs, times)


_CALL_ROLES = {
    "jit": "jit",
    "pjit": "jit",
    "closed_call": "call",
    "core_call": "call",
    "call": "call",
    "eval_jaxpr": "call",
    "remat2": "remat",
    "checkpoint": "remat",
    "remat": "remat",
    "custom_jvp_call": "custom_jvp",
    "custom_vjp_call": "custom_vjp",
    "custom_vjp_call_jaxpr": "custom_vjp",
    "shard_map": "shard_map",
    "xla_pmap": "pmap",
    "named_call": "call",
    "custom_lin": "custom_vjp",
}
CALL_PRIMITIVES = frozenset(_CALL_ROLES)  # call-like primitives: one body each
CALL_ROLES = frozenset(_CALL_ROLES.values())  # their SubJaxpr roles: "jit", "call", "remat", ...
_BODY_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
_FLAT_PRIMITIVES: set[str] = set()  # primitives seen without sub-jaxprs


def sub_jaxprs(eqn: Any) -> list[SubJaxpr]:
    """The sub-jaxprs of one equation with how their inputs and outputs map to the eqn's."""
    name, params = eqn.primitive.name, eqn.params
    if name in _FLAT_PRIMITIVES:
        return []
    if not any(holds_jaxpr(v) for v in params.values()):
        if name not in _CALL_ROLES and name not in ("scan", "cond", "while"):
            _FLAT_PRIMITIVES.add(name)  # a primitive's params carry jaxprs always or never
        return []
    n_in, n_out = len(eqn.invars), len(eqn.outvars)
    if name == "scan":
        return [_one_to_one("scan", params["jaxpr"], n_in, n_out, int(params.get("length", 1)))]
    if name == "cond":
        # branch 0 is the false branch of lax.cond; eqn input 0 is the index
        return [
            SubJaxpr(f"branch {i}", b, [k + 1 for k in range(_n_in(b))], list(range(_n_out(b))), 1)
            for i, b in enumerate(params["branches"])
        ]
    if name == "while":
        nc, nb = params["cond_nconsts"], params["body_nconsts"]
        carry = list(range(nc + nb, n_in))
        return [
            SubJaxpr("cond", params["cond_jaxpr"], list(range(nc)) + carry, [-1], 1),
            SubJaxpr(
                "body",
                params["body_jaxpr"],
                list(range(nc, nc + nb)) + carry,
                list(range(n_out)),
                1,
            ),
        ]
    role = _CALL_ROLES.get(name)
    if role is not None:
        for key in _BODY_PARAMS:
            if key in params and is_jaxpr(params[key]):
                return [_one_to_one(role, params[key], n_in, n_out)]
    # Any other primitive that carries jaxprs (custom_transpose, pallas_call, ...): show them.
    out = []
    for key, val in sorted(params.items()):
        vals = val if isinstance(val, (tuple, list)) else (val,)
        for k, v in enumerate(vals):
            if is_jaxpr(v):
                role = key if len(vals) == 1 else f"{key} {k}"
                out.append(
                    _one_to_one(
                        role, v, n_in if _n_in(v) == n_in else 0, n_out if _n_out(v) == n_out else 0
                    )
                )
    return out


def scan_counts(eqn: Any) -> tuple[int, int]:
    """(num_consts, num_carry) of a scan eqn."""
    p = eqn.params
    if "ft_in" in p:  # jax >= 0.11
        consts, carry, _ = (len(t) for t in p["ft_in"].elts)
        return consts, carry
    return p["num_consts"], p["num_carry"]  # jax 0.10


# --- avals ---------------------------------------------------------------------------------


def aval_of(x: Any) -> Any:
    return jax.typeof(x)


def _memo_by_identity(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Caches fn(aval) by the aval object's identity (avals repeat across a jaxpr's vars)."""
    cache: dict[int, tuple[Any, Any]] = {}

    def memo(aval: Any) -> Any:
        hit = cache.get(id(aval))
        if hit is not None and hit[0] is aval:
            return hit[1]
        value = fn(aval)
        if len(cache) > 100_000:
            cache.clear()
        cache[id(aval)] = (aval, value)  # holding aval keeps its id from being reused
        return value

    memo.__doc__ = fn.__doc__
    return memo


@_memo_by_identity
def short_type(aval: Any) -> str:
    """`f32[8,128]`; weak types as `~f32[]`; explicit shardings as JAX prints them."""
    try:
        s = aval.str_short(short_dtypes=True)
    except (AttributeError, TypeError):
        return str(aval)
    if getattr(aval, "weak_type", False) and not s.startswith("~"):
        s = "~" + s
    return s


@_memo_by_identity
def aval_nbytes(aval: Any) -> int:
    """Bytes of an array of this aval (shape x itemsize)."""
    import numpy as np

    shape = getattr(aval, "shape", ())
    dtype = getattr(aval, "dtype", None)
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        itemsize = getattr(dtype, "itemsize", 4) or 4
    n = 1
    for d in shape:
        n *= int(d) if isinstance(d, int) else 1
    return n * itemsize


# --- source locations ----------------------------------------------------------------------


class Loc(NamedTuple):
    """Where a node came from in the user's code (a tuple: cheap, and untracked by the GC)."""

    file: str  # "<cell 3>" or "/home/me/train.py"
    line: int  # 1-based line within the cell or file
    col: int = 0  # 0-based column, 0 when unknown
    fn: str = ""  # enclosing user function, "mlp"; "" at cell top level


class UserFrame(NamedTuple):
    file: str
    line: int
    col: int
    fn: str
    lasti: int  # bytecode offset: tells two calls on one line apart
    code_id: int  # id of the code object: tells functions apart


# (id(code), lasti) -> UserFrame; id(code) -> is it the user's. Keyed by id: hashing a code
# object hashes its bytecode and constants every time. The code objects are kept in _CODES,
# so an id in these tables is never reused by another code object.
_FRAMES: dict[tuple[int, int], UserFrame] = {}
_USER_CODE: dict[int, bool] = {}
_CODES: dict[int, Any] = {}


def _frame(code: Any, lasti: int) -> UserFrame:
    key = (id(code), lasti)
    f = _FRAMES.get(key)
    if f is None:
        line, col, _, _ = jax._src.lib.xla_client.Traceback.code_addr2location(code, lasti)
        _CODES[id(code)] = code
        f = _FRAMES[key] = UserFrame(
            code.co_filename, line, max(col, 0), code.co_qualname, lasti, id(code)
        )
    return f


def traceback_of(eqn_or_source_info: Any) -> Any:
    """The equation's jaxlib Traceback, or None. Tracebacks hash and compare by their frames
    (code objects by identity, and bytecode offsets), so equal ones have the same user frames:
    the equations of one source line, and of every layer a loop made, share one."""
    si = getattr(eqn_or_source_info, "source_info", eqn_or_source_info)
    return getattr(si, "traceback", None)


_LOOPS: dict[int, tuple[tuple[int, int], ...]] = {}


def loop_ranges(code_id: int) -> tuple[tuple[int, int], ...]:
    """The (start, end) bytecode offsets of each loop in a code object seen in a traceback
    (a backward jump and its target; Python 3.11 and 3.12: JUMP_BACKWARD*)."""
    hit = _LOOPS.get(code_id)
    if hit is None:
        import dis

        code = _CODES.get(code_id)
        spans = []
        if code is not None:
            for ins in dis.get_instructions(code):
                if ins.opname.startswith("JUMP_BACKWARD") and isinstance(ins.argval, int):
                    spans.append((ins.argval, ins.offset))
        hit = _LOOPS[code_id] = tuple(spans)
    return hit


def user_frames(eqn_or_traceback: Any) -> list[UserFrame]:
    """The user frames of an equation (or its SourceInfo or Traceback), outermost first.

    Tracebacks stop at the trace boundary, so the first frame is the traced function or
    the first user function it called. jax 0.10.2 and 0.12: Traceback.raw_frames() and
    source_info_util.is_user_filename (which honours register_exclusion).
    """
    tb = (
        eqn_or_traceback
        if hasattr(eqn_or_traceback, "raw_frames")
        else traceback_of(eqn_or_traceback)
    )
    if tb is None:
        return []
    codes, lastis = tb.raw_frames()
    # Tracebacks are mostly JAX's own frames: look every frame up at C speed, one pass.
    flags = list(map(_USER_CODE.get, map(id, codes)))
    if None in flags:
        for i, code in enumerate(codes):
            if flags[i] is None:
                _CODES[id(code)] = code
                flags[i] = _USER_CODE[id(code)] = bool(_siu.is_user_filename(code.co_filename))
    if True not in flags:
        return []
    out = [_frame(c, l) for c, l, u in zip(codes, lastis, flags) if u]
    out.reverse()
    return out


def current_user_frame() -> UserFrame | None:
    """The user frame JAX attributes the primitive being bound now to, if it set one.

    Eager evaluation of a staged jaxpr (jax.grad outside jit linearizes first, then
    evaluates) runs each equation under its own traceback (source_info_util.user_context,
    jax 0.10.2 and 0.12): the line that wrote the op, not the line that called grad.
    """
    # The context's own traceback only: current() would capture the whole Python stack
    # (tens of us) when no staged evaluation set one. jax 0.10.2 and 0.12: _source_info_context.
    ctx = getattr(getattr(_siu, "_source_info_context", None), "context", None)
    tb = (
        getattr(ctx, "traceback", None)
        if ctx is not None
        else getattr(_siu.current(), "traceback", None)
    )
    if not tb:
        return None
    frames = user_frames(_siu.SourceInfo(tb, _siu.current_name_stack()))
    return frames[-1] if frames else None


def new_traceback() -> Any:
    """A new jaxlib Traceback object of the current stack (None when JAX records none).

    Two calls give two objects even on the same line: staged under `staging_with`, each
    tags the equations it makes (jax 0.10.2 and 0.12: xla_client.Traceback.get_traceback).
    """
    return jax._src.lib.xla_client.Traceback.get_traceback()


def staging_with(tb: Any) -> Any:
    """A context in which every equation staged gets `tb` as its source_info.traceback,
    the very object (jax 0.10.2 and 0.12: source_info_util.user_context; the name stack
    is kept, which user_context would otherwise reset)."""
    return _siu.user_context(tb, name_stack=_siu.current_name_stack())


def name_stack(eqn: Any) -> str:
    si = getattr(eqn, "source_info", None)
    ns = getattr(si, "name_stack", None)
    return _name_stack_str(ns) if ns is not None else ""


@_memo_by_identity
def _name_stack_str(ns: Any) -> str:
    return str(ns)  # NameStack objects are shared by the eqns of one scope


# --- capture hooks --------------------------------------------------------------------------

# True when no JAX transformation is tracing: a bind here executes eagerly.
# jax 0.10.2 and 0.12: core.trace_state_clean (bound directly: it runs per jitted call).
is_top_level: Callable[[], bool] = _core.trace_state_clean


def clear_cpp_dispatch_caches() -> None:
    """Empties the C++ jit dispatch caches only (not the tracing/compilation caches).

    The next call of each jitted function then goes once through Python (`cache_miss`),
    where jaxviz sees its jaxpr, and is served from the cached executable: no retrace, no
    recompile. jax 0.10.2 and 0.12: two global `PjitFunctionCache`s in jax._src.pjit.
    """
    for name in ("_cpp_pjit_cache_fun_only", "_cpp_pjit_cache_explicit_attributes"):
        cache = getattr(_pjit, name, None)
        if cache is not None:
            cache.clear()


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
    keep_fastpath: bool,
) -> Iterator[None]:
    """Hooks JAX's Python dispatch paths while the block runs, and restores them after.

    on_jit(call, run) replaces each jitted call that goes through Python at top level;
    on_eager(primitive, args, params, run) each eager primitive application at top level.
    Both must return run(), the original result. keep_fastpath=False keeps the C++ fast
    path from caching, so every jitted call goes through Python (for Python < 3.12, where
    sys.monitoring cannot count fast-path calls).
    """
    orig_run = _pjit._run_python_pjit
    orig_fast = _pjit._get_fastpath_data
    orig_eval = _core.EvalTrace.process_primitive

    def run_python_pjit(p, args_flat, fun, args, kwargs):  # jax 0.10.2 and 0.12: same signature
        __tracebackhide__ = True
        run = lambda: orig_run(p, args_flat, fun, args, kwargs)
        if not _core.trace_state_clean():
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
        return on_jit(call, run)

    def get_fastpath_data(*a, **k):
        return None

    def process_primitive(self, primitive, args, params, /):
        __tracebackhide__ = True
        return on_eager(primitive, args, params, lambda: orig_eval(self, primitive, args, params))

    _pjit._run_python_pjit = run_python_pjit
    if not keep_fastpath:
        _pjit._get_fastpath_data = get_fastpath_data
    _core.EvalTrace.process_primitive = process_primitive  # type: ignore[method-assign]
    try:
        yield
    finally:
        _pjit._run_python_pjit = orig_run
        _pjit._get_fastpath_data = orig_fast
        _core.EvalTrace.process_primitive = orig_eval  # type: ignore[method-assign]
        if not keep_fastpath:
            # Entries made while the fast path was off say "never fast": drop them.
            clear_cpp_dispatch_caches()


def has_effects(jaxpr: Any) -> bool:
    """Whether a jaxpr has effects (ordered callbacks, IO): running it again repeats them."""
    return bool(getattr(open_jaxpr(jaxpr), "effects", None)) if jaxpr is not None else False


def is_committed(x: Any) -> bool:
    """Whether an array's placement was chosen by the user (device_put, a sharded output)."""
    return bool(getattr(x, "committed", True))  # jax 0.10.2 and 0.12: Array.committed


def static_args(jitted: Any, args: tuple, kwargs: dict) -> str:
    """The static arguments of a jitted call as text, "n=3, act='gelu'" ("" if none).

    jax 0.10.2 and 0.12: PjitFunction._jit_info.static_argnums / static_argnames.
    """
    info = getattr(jitted, "_jit_info", None)
    if info is None:
        return ""
    nums, names = tuple(info.static_argnums or ()), tuple(info.static_argnames or ())
    try:
        params = [p.name for p in inspect.signature(jit_wrapped_fun(jitted)).parameters.values()]
    except (TypeError, ValueError):
        params = []
    parts = [
        f"{params[i] if i < len(params) else f'arg{i}'}={args[i]!r:.40}"
        for i in nums
        if i < len(args)
    ]
    parts += [f"{k}={kwargs[k]!r:.40}" for k in names if k in kwargs]
    return ", ".join(parts)


def static_args_of_call(fun: Any, jaxpr: Any, args: tuple, kwargs: dict) -> str:
    """static_args without the jit wrapper: the arguments the jaxpr has no input for.

    The jaxpr's debug_info.arg_names (jax 0.10.2 and 0.12) names its inputs by the
    function's parameter names; a parameter with no input there was static.
    """
    names = getattr(getattr(open_jaxpr(jaxpr), "debug_info", None), "arg_names", None) or ()
    dynamic = {n.split("[")[0].split(".")[0] for n in names if n}
    try:
        params = [p.name for p in inspect.signature(fun).parameters.values()]
    except (TypeError, ValueError):
        params = []
    parts = [
        f"{params[i]}={a!r:.40}"
        for i, a in enumerate(args)
        if i < len(params) and params[i] not in dynamic and not hasattr(a, "shape")
    ]
    parts += [
        f"{k}={v!r:.40}" for k, v in kwargs.items() if k not in dynamic and not hasattr(v, "shape")
    ]
    return ", ".join(parts) if dynamic else ""


def jit_wrapped_fun(f: Any) -> Any:
    """The Python function behind a PjitFunction (jax 0.10.2 and 0.12: `_fun`)."""
    return getattr(f, "_fun", None) or getattr(f, "__wrapped__", None)


def is_user_filename(filename: str) -> bool:
    return _siu.is_user_filename(filename)


# --- the user's functions and frames ------------------------------------------------------------


def unwrap(fn: Any, *, partial: bool = True) -> Any:
    """The Python function a jitted callable wraps (itself when it is no jit), and with
    `partial`, the function inside a functools.partial of it. The one unwrap: names,
    parameters, code objects and identities of the user's functions all start here."""
    inner = jit_wrapped_fun(fn) or fn
    return getattr(inner, "func", inner) if partial else inner


def user_code(fn: Any) -> Any:
    """The code object of the user's function behind wrappers (jax.jit, jax.grad,
    functools.partial / wraps): the first one in a user file, else `fn`'s own (or None)."""
    f = jit_wrapped_fun(fn) or fn
    for _ in range(10):
        if f is None:
            break
        code = getattr(f, "__code__", None)
        if code is not None and is_user_filename(code.co_filename):
            return code
        f = getattr(f, "__wrapped__", None) or getattr(f, "func", None)
    inner = unwrap(fn)
    return getattr(inner, "__code__", None) or getattr(fn, "__code__", None)


def fun_name(fn: Any) -> str:
    """The user's name for a function: "train_step" (qualname without `<locals>`)."""
    inner = unwrap(fn)
    name = getattr(inner, "__qualname__", None) or getattr(inner, "__name__", None)
    return (name or type(fn).__name__).rsplit(".<locals>.", 1)[-1]


def param_names(fn: Any) -> list[str]:
    """The positional parameter names of the function a jitted callable wraps."""
    try:
        sig = inspect.signature(unwrap(fn, partial=False))
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def user_frame(frame: Any) -> Any:
    """The innermost user frame at or above `frame` (JAX's own frames and jaxviz's are not
    the user's), or None: the one frame walker."""
    while frame is not None and not is_user_filename(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def module_frame(frame: Any, filename: str | None) -> Any:
    """The module-level frame of `filename` (a cell's `<module>`) at or above `frame`, or None."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename == filename and code.co_name == "<module>":
            return frame
        frame = frame.f_back
    return None


def site_of(frame: Any) -> tuple[str, int, str] | None:
    """(filename, line, function) of the innermost user frame at or above `frame`."""
    frame = user_frame(frame)
    if frame is None:
        return None
    return frame.f_code.co_filename, frame.f_lineno or 0, frame.f_code.co_name


def call_site(frame: Any) -> tuple[str, int] | None:
    """(filename, line) of the innermost user frame at or above `frame`."""
    site = site_of(frame)
    return site[:2] if site is not None else None


def error_frames(exc: BaseException) -> list[tuple[str, int, str]]:
    """[(filename, line, function)] of an exception's traceback, user frames only."""
    return [
        (f.filename, f.lineno or 0, f.name)
        for f in traceback.extract_tb(exc.__traceback__)
        if is_user_filename(f.filename)
    ]


def forget_traceback(exc: BaseException) -> BaseException:
    """Drops an exception's frames (and the arrays their locals hold), keeping its message."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return exc


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
    try:
        params = [p.name for p in inspect.signature(inner).parameters.values()]
    except (TypeError, ValueError):
        params = []

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


# --- compile / run (jaxviz.memory.compile, jaxviz.memory.run) ---


def kept_arg_indices(lowered: Any) -> frozenset[int] | None:
    """Flat indices of the arguments a lowered jit kept (jit drops unused ones unless
    keep_unused=True); the lowered module's %argN is the N-th kept one. None: unknown.
    """
    try:  # jax 0.10.2 and 0.12: MeshComputation.compile_args
        kept = lowered._lowering.compile_args["kept_var_idx"]
    except (AttributeError, KeyError, TypeError):
        return None
    return frozenset(int(i) for i in kept)


def jit_options(fun: Any) -> dict[str, Any] | None:
    """The `jax.jit` keyword options of a jitted function (None when not a PjitFunction).

    Used to re-jit the same Python function with other `donate_argnums`.
    jax 0.10.2 and 0.12: PjitFunction._jit_info is a PjitInfo with these field names.
    """
    info = getattr(fun, "_jit_info", None)
    if info is None:
        return None
    opts: dict[str, Any] = {
        "static_argnums": tuple(info.static_argnums),
        "static_argnames": tuple(info.static_argnames),
        "donate_argnums": tuple(info.donate_argnums),
        "donate_argnames": tuple(info.donate_argnames),
        "keep_unused": bool(info.keep_unused),
    }
    if info.device is not None:
        opts["device"] = info.device
    if info.backend is not None:
        opts["backend"] = info.backend

    def _specified(leaves: tuple) -> bool:  # UnspecifiedValue is private (jax 0.10.2, 0.12)
        return all(type(x).__name__ != "UnspecifiedValue" for x in leaves)

    if info.user_specified_in_shardings and _specified(info.in_shardings_leaves):
        opts["in_shardings"] = jax.tree_util.tree_unflatten(
            info.in_shardings_treedef, info.in_shardings_leaves
        )
    if _specified(info.out_shardings_leaves) and info.out_shardings_leaves:
        opts["out_shardings"] = jax.tree_util.tree_unflatten(
            info.out_shardings_treedef, info.out_shardings_leaves
        )
    return opts


def rejit(fun: Any, donate_argnums: tuple[int, ...]) -> Any:
    """The same Python function jitted with the same options but other `donate_argnums`
    (positional indices; `donate_argnames` cleared). Returns `fun` when it is not a jit.
    """
    opts = jit_options(fun)
    inner = getattr(fun, "__wrapped__", None)
    if opts is None or inner is None:
        return fun
    opts["donate_argnums"] = tuple(donate_argnums)
    opts["donate_argnames"] = ()
    return jax.jit(inner, **opts)


def key_impl(dtype: Any) -> Any | None:
    """The PRNG implementation of a typed key dtype (`key<fry>`), for `jax.random.key(0,
    impl=...)`; None for other dtypes. jax 0.10.2 and 0.12: KeyTy._impl is a PRNGImpl.
    """
    if not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return None
    return getattr(dtype, "_impl", None)


def literal_text(lit: Any) -> str:
    """A literal's value, short: "1.0", "True", "f32[3]{...}"."""
    val = lit.val
    for kind in (bool, int, float, complex):  # TypedInt / TypedFloat print their dtype
        if isinstance(val, kind):
            return str(kind(val))  # type: ignore[arg-type]
    shape = getattr(val, "shape", None)
    if shape == ():
        try:
            return str(val.item())
        except (AttributeError, ValueError, TypeError):
            pass
    return " ".join(str(val).split())[:24]


# --- diagnostics (jaxviz.diagnostics.check) ---


def pjit_out_flat(result: Any) -> list:
    """The flat outputs from `_run_python_pjit`'s result tuple.

    jax 0.10.2 and 0.12: (outs, out_flat, out_tree, args_flat, jaxpr, ...).
    """
    try:
        return list(result[1])
    except (TypeError, IndexError):
        return []


@contextlib.contextmanager
def vetoed_fastpath(veto: Callable[[], bool]) -> Iterator[None]:
    """While active, a jitted call whose Python path ends with `veto()` true gets no C++
    fast-path entry, so its next calls come back through Python (where jaxviz sees their
    arguments). On exit the C++ dispatch caches are emptied, dropping the "never fast"
    entries. jax 0.10.2 and 0.12: `_cpp_pjit.cache_miss` calls `_get_fastpath_data`
    right after `_run_python_pjit`.
    """
    orig = _pjit._get_fastpath_data

    def get_fastpath_data(*a, **k):
        if veto():
            return None
        return orig(*a, **k)

    _pjit._get_fastpath_data = get_fastpath_data
    try:
        yield
    finally:
        _pjit._get_fastpath_data = orig
        clear_cpp_dispatch_caches()


def eval_context():
    """Binds evaluate eagerly inside this block, even from within JAX's own eager dispatch
    (where the current trace is unset). jax 0.10.2 and 0.12: core.eval_context."""
    return _core.eval_context()


def bind_eqn(eqn: Any, invals: list) -> list:
    """Applies one equation to concrete values, as `jax.core.eval_jaxpr` does; a list of
    outputs. jax 0.10.2 and 0.12: Primitive.get_bind_params turns jaxpr params into the
    form `bind` takes (custom_jvp_call, custom_vjp_call, closed_call).
    """
    bp = eqn.primitive.get_bind_params(eqn.params)
    if isinstance(bp, tuple):  # jax 0.10.2: (subfuns, params)
        subfuns, params = bp
    else:  # jax 0.12: params only
        subfuns, params = (), bp
    out = eqn.primitive.bind(*subfuns, *invals, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def literal_value(v: Any) -> Any:
    return v.val


def is_key_dtype(dtype: Any) -> bool:
    """A typed PRNG key dtype (`key<fry>`); jax 0.10.2 and 0.12."""
    try:
        return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    except TypeError:
        return False


def is_tracer(x: Any) -> bool:
    return isinstance(x, _core.Tracer)


class TracerOrigin(NamedTuple):
    fn: str  # the function being traced when the tracer was made, "forward"
    file: str  # where that function is defined
    line: int  # its first line (the decorator's, if any)
    created: tuple  # (file, line) of the user line that made the tracer, or ()


def tracer_origin(x: Any) -> TracerOrigin | None:
    """Where a (leaked) tracer came from, as JAX's UnexpectedTracerError tells it.
    jax 0.10.2 and 0.12: DynamicJaxprTracer._debug_info (func_src_info "forward at F:L")
    and ._line_info (the SourceInfo of the line that made it)."""
    import re

    dbg = getattr(x, "_debug_info", None)
    m = re.match(r"(\S+) at (.+):(\d+)$", str(getattr(dbg, "func_src_info", "") or ""))
    if m is None:
        return None
    created: tuple = ()
    try:
        frames = user_frames(getattr(x, "_line_info", None))
        if frames:
            created = (frames[-1].file, frames[-1].line)
    except Exception:  # a SourceInfo JAX shaped otherwise
        pass
    return TracerOrigin(m.group(1), m.group(2), int(m.group(3)), created)


# --- added by i10-recompile: what jit's tracing cache is keyed on ---

from jax._src import config as _config  # noqa: E402


def trace_context() -> tuple:
    """The tracing context jit's cache is keyed on (config values and context managers:
    the mesh, default device, matmul precision, x64, ...), as JAX's own values. Cheap (a
    cached tuple). jax 0.10.2 and 0.12: config.trace_context()."""
    try:
        return tuple(_config.trace_context())
    except Exception:  # JAX moved it: no context, no context reasons
        return ()


# The context entries JAX names after its internals, in the user's terms.
_CONTEXT_LABELS = {
    "abstract_mesh_context_manager": "the mesh set by `jax.set_mesh`",
    "mesh_context_manager": "the mesh of `with mesh:`",
    "compute_on_context_manager": "the `compute_on` context",
    "xla_metadata_context_manager": "the `set_xla_metadata` context",
    "user_context": "the user context",
    "axis_env_state": "the named axes in scope",
}


def _context_value(name: str, v: Any) -> str:
    if "mesh" in name:
        meshes = v if isinstance(v, tuple) else (v,)
        shown = []
        for m in meshes:
            names = getattr(m, "axis_names", None)
            sizes = getattr(m, "axis_sizes", None)
            if m is None or not names:
                continue
            shown.append(
                "mesh(" + ", ".join(f"{n!r}: {s}" for n, s in zip(names, sizes or ())) + ")"
            )
        return ", ".join(shown) or "none"
    return repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."


def context_changes(before: tuple, after: tuple) -> list[tuple[str, str, str]]:
    """What differs between two `trace_context()`s: [(what, before, after)] in the user's
    terms ("the mesh set by `jax.set_mesh`", "none", "mesh('d': 8)"; a config option as
    "`jax_default_matmul_precision`"). jax 0.10.2 and 0.12: config.trace_context_names()
    names the entries; AbstractMesh has axis_names / axis_sizes (0.10.2: None when no
    mesh is set, 0.12: an empty AbstractMesh)."""
    if not before or not after or len(before) != len(after):
        return []
    try:
        names = tuple(_config.trace_context_names())
    except Exception:
        return []
    if len(names) != len(before):
        return []
    out = []
    for name, a, b in zip(names, before, after):
        try:
            if a == b:
                continue
        except Exception:  # a value without a usable ==
            if a is b:
                continue
        va, vb = _context_value(name, a), _context_value(name, b)
        if va == vb:
            continue
        out.append((_CONTEXT_LABELS.get(name, f"the config option `{name}`"), va, vb))
    return out


def traced_into(frame: Any, jaxpr: Any) -> bool:
    """Whether the trace frame JAX opened (watching_top_frames) is the one that made
    `jaxpr`: the function it traced is the same. jax 0.10.2 and 0.12: the frame's and the
    jaxpr's debug_info (different objects) share func_src_info ("f at FILE:LINE")."""
    fa = getattr(getattr(frame, "debug_info", None), "func_src_info", None)
    fb = getattr(getattr(open_jaxpr(jaxpr), "debug_info", None), "func_src_info", None)
    return fa is not None and fa == fb

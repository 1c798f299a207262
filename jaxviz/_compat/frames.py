"""Where things happened in the user's code: the source locations of equations (jaxlib
Tracebacks, cut down to the user's frames), and the user's functions and Python frames
behind JAX's wrappers (the one unwrap, the one frame walker).

The user's code is every file `source_info_util.is_user_filename` accepts: JAX's own files
are not, nor jaxviz's (the package registers its directory as excluded).
"""

from __future__ import annotations

import inspect
import os
import traceback
import types
import weakref
from typing import Any, NamedTuple

import jax
import jax._src.lib
from jax._src import source_info_util as _siu

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


def _is_user_code(code: Any) -> bool:
    """Whether JAX counts `code` as the user's, remembered by id (in _USER_CODE)."""
    _CODES[id(code)] = code
    user = _USER_CODE[id(code)] = bool(_siu.is_user_filename(code.co_filename))
    return user


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


def call_span(code_id: int, lasti: int) -> tuple[int, int, int, int] | None:
    """(line, end line, column, end column) of the instruction at `lasti` in a code object
    seen in a traceback: for a frame inside a call, the whole call expression, as `ast`
    numbers it (columns in UTF-8 bytes). Python 3.11 and 3.12: `co_positions`, one entry
    per 2-byte code unit. None when unknown."""
    code = _CODES.get(code_id)
    if code is None or lasti < 0:
        return None
    positions = _POSITIONS.get(code_id)
    if positions is None:
        positions = _POSITIONS[code_id] = list(code.co_positions())
    i = lasti // 2
    if i >= len(positions):
        return None
    span = positions[i]
    return None if None in span else span


_POSITIONS: dict[int, list] = {}


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
        flags = [_is_user_code(code) if u is None else u for code, u in zip(codes, flags)]
    if True not in flags:
        return []
    out = [_frame(c, l) for c, l, u in zip(codes, lastis, flags) if u]
    out.reverse()
    return out


def in_custom_jvp_rule(eqn: Any) -> bool:
    """Whether an equation was staged while a custom_jvp's JVP rule ran (its traceback
    passes custom_derivatives' `_flatten_jvp`, which calls the rule: jax 0.10.2 and 0.12)."""
    tb = traceback_of(eqn)
    if tb is None:
        return False
    codes, _lastis = tb.raw_frames()
    return any(
        c.co_name == "_flatten_jvp" and c.co_filename.endswith("custom_derivatives.py")
        for c in codes
    )


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
    codes, lastis = tb.raw_frames()  # innermost first: the first user frame is the one
    for code, lasti in zip(codes, lastis):
        user = _USER_CODE.get(id(code))
        if user is None:
            user = _is_user_code(code)
        if user:
            return _frame(code, lasti)
    return None


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


def current_name_stack() -> str:
    """The name stack eager ops are bound under now, "vmap(f)" inside an eager jax.vmap
    (jax 0.10.2 and 0.12: source_info_util.current_name_stack)."""
    return str(_siu.current_name_stack())


# --- the user's functions and frames -------------------------------------------------------


JIT_FUNCTION_TYPE = type(jax.jit(lambda: None))  # jaxlib's PjitFunction


def jit_wrapped_fun(f: Any) -> Any:
    """The Python function behind a PjitFunction (jax 0.10.2 and 0.12: `_fun`)."""
    return getattr(f, "_fun", None) or getattr(f, "__wrapped__", None)


def is_jax_random_fun(f: Any) -> bool:
    """A function of jax.random's own (`_uniform`, `_normal`, ...): each consumes its key
    argument in every signature. jax 0.10.2: module jax._src.random; 0.12: jax._src.random.core.
    """
    module = getattr(f, "__module__", None)
    return isinstance(module, str) and (
        module == "jax._src.random" or module.startswith("jax._src.random.")
    )


# JAX's modules whose code runs only inside a primitive's evaluation (its impl: the jit
# that evaluates an eager op, a jit's own call, the PRNG's bit generators), never as the
# user's call: a place there that calls a jit calls it on JAX's behalf. jax 0.10.2 and 0.12.
_IMPL_FILES = tuple(
    os.path.join(os.path.dirname(jax._src.__file__), *p.split("/"))
    for p in (
        "dispatch.py",
        "pjit.py",
        "random/prng.py",
        "random/threefry2x32.py",
        "random/philox2x32.py",
        "random/philox4x32.py",
        "random/rbg.py",
    )
)


def is_impl_code(code: Any) -> bool:
    """Whether `code` is in one of JAX's primitive implementations (_IMPL_FILES)."""
    return code.co_filename.endswith(_IMPL_FILES)


def is_user_filename(filename: str) -> bool:
    return _siu.is_user_filename(filename)


# JAX's and jaxlib's package folders (jax 0.10.2 and 0.12: jaxlib is a package of its own)
_JAX_DIRS = tuple(
    os.path.dirname(path) + os.sep
    for path in (getattr(m, "__file__", None) for m in (jax, getattr(jax._src.lib, "jaxlib", None)))
    if path
)


def is_jax_filename(filename: str) -> bool:
    """A file of JAX's own (jax/, jaxlib/): its transformations' machinery."""
    return filename.startswith(_JAX_DIRS)


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


_PARAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CODE_PARAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # code -> parameters


def parameters(fn: Any) -> list[inspect.Parameter]:
    """`fn`'s parameters ([] when it has no signature), remembered per function while it
    lives: a jitted function's calls through Python ask again (~0.1 ms each). A plain
    function's names and kinds are its code's (remembered by code object: a lambda made
    anew at each run of a cell has the same), without their defaults and annotations."""
    try:
        return _PARAMS[fn]
    except (KeyError, TypeError):
        pass
    plain = (
        type(fn) is types.FunctionType
        and "__wrapped__" not in fn.__dict__
        and "__signature__" not in fn.__dict__
    )
    if plain:
        code = fn.__code__
        found = _CODE_PARAMS.get(code)
        if found is None:
            found = _CODE_PARAMS[code] = _code_parameters(code)
    else:
        try:
            found = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            found = []
    try:
        _PARAMS[fn] = found
    except TypeError:  # not weakly referenceable
        pass
    return found


def _code_parameters(code: types.CodeType) -> list[inspect.Parameter]:
    """A plain function's parameters, names and kinds, read off its code object as
    inspect.signature does, without it (~30 us: a lambda made anew at each run of a cell
    is a new code object each time)."""
    P = inspect.Parameter
    names, flags = code.co_varnames, code.co_flags
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    out = [
        P(n, P.POSITIONAL_ONLY if i < code.co_posonlyargcount else P.POSITIONAL_OR_KEYWORD)
        for i, n in enumerate(names[:n_pos])
    ]
    at = n_pos + n_kw
    if flags & inspect.CO_VARARGS:
        out.append(P(names[at], P.VAR_POSITIONAL))
        at += 1
    out.extend(P(n, P.KEYWORD_ONLY) for n in names[n_pos : n_pos + n_kw])
    if flags & inspect.CO_VARKEYWORDS:
        out.append(P(names[at], P.VAR_KEYWORD))
    return out


def param_names(fn: Any) -> list[str]:
    """The positional parameter names of the function a jitted callable wraps."""
    return [
        p.name
        for p in parameters(unwrap(fn, partial=False))
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def user_frame(frame: Any) -> Any:
    """The innermost user frame at or above `frame` (JAX's own frames and jaxviz's are not
    the user's), or None: the one frame walker."""
    get = _USER_CODE.get  # by code object: an eager op's stack is ~15 frames deep
    while frame is not None:
        code = frame.f_code
        user = get(id(code))
        if user is None:
            user = _is_user_code(code)
        if user:
            return frame
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


# id(code) -> (the code, {offset: line}): lines remembered by code object and offset, as
# f_lineno decodes the line table each time (~4 us in a 200-line cell) and an eager loop
# asks for the same few thousands of times
_LINES: dict[int, tuple[Any, dict[int, int]]] = {}


def code_lines(code: Any) -> dict[int, int]:
    """The {offset: line} of `code` known so far (frame_line fills it in)."""
    known = _LINES.get(id(code))
    if known is None or known[0] is not code:
        if len(_LINES) >= 65536:
            _LINES.clear()
        known = _LINES[id(code)] = (code, {})
    return known[1]


def frame_line(frame: Any) -> int:
    """frame.f_lineno, remembered by its code and offset (code_lines)."""
    lines = code_lines(frame.f_code)
    line = lines.get(frame.f_lasti)
    if line is None:
        line = lines[frame.f_lasti] = frame.f_lineno or 0
    return line


def site_of(frame: Any) -> tuple[str, int, str] | None:
    """(filename, line, function) of the innermost user frame at or above `frame`."""
    frame = user_frame(frame)
    if frame is None:
        return None
    return frame.f_code.co_filename, frame_line(frame), frame.f_code.co_name


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


def raised_while_tracing(exc: BaseException) -> bool:
    """Whether JAX was tracing a function when `exc` was raised: its tracer's frame
    (partial_eval's trace_to_jaxpr...) in the traceback. IPython keeps JAX's frames (hidden);
    a plain Python traceback JAX filtered has none: False. jax 0.10.2 and 0.12."""
    tb, n = exc.__traceback__, 0
    while tb is not None and n < 1000:
        code = tb.tb_frame.f_code
        name = code.co_filename.replace("\\", "/")
        if code.co_name.startswith("trace_to_") and name.endswith("/interpreters/partial_eval.py"):
            return True
        tb, n = tb.tb_next, n + 1
    return False


def forget_traceback(exc: BaseException) -> BaseException:
    """Drops an exception's frames (and the arrays their locals hold), keeping its message."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return exc

"""recompile: one function traced again in a cell (not served by JAX's cache), with what
changed (the tracing context, the arguments' structure, static values, avals: why.py); or
a function made anew at each call and traced each time. The function is the object jit
wrapped, or, when a wrapper from another module (equinox's filter_jit) is jitted and the
user's function is passed to it as a static argument, that user's function.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import types
from collections.abc import Callable, Set
from typing import Any

import jax

from jaxviz import _compat
from jaxviz.capture.places import is_user_file
from jaxviz.diagnostics.recompile.why import remade_reason, retrace_reason, user_partial_code


@dataclasses.dataclass
class Retrace:
    """One recompile: `trace` was traced in the cell after `previous`, a trace of the same
    function; or (`remade`) the function was a new object at each call, all made at one
    place in the code."""

    trace: Any  # the later Trace
    previous: Any  # the Trace before it
    reason: str
    signatures: int = 2  # how many traces of this function the cell made in all
    remade: tuple = ()  # a new function object at each call: the first trace of each
    name: str = ""  # the user's name for the function ("" : the trace's name)
    # remade: how many calls each new object served; each more than one (a factory's
    # function, made per config and then called many times: jit's cache served the rest)
    calls: tuple = ()
    uncounted: bool = False  # more calls ran than `calls` counts (unwatched: "16+ calls")

    @property
    def reused(self) -> bool:
        """Each function object made anew served more than one call (no cache miss at each
        call: one trace per object, as a sweep over configs makes)."""
        return bool(self.calls) and min(self.calls) > 1


def _user_code(t: Any) -> Any:
    code = getattr(_compat.unwrap(t.fun), "__code__", None) if t.fun is not None else None
    if code is None or not _compat.is_user_filename(code.co_filename):
        return None
    return code


_LEAF_TYPES = (jax.ShapeDtypeStruct, str, bytes, int, float, complex, bool, type(None), type)


def _static_functions(t: Any, budget: int = 256) -> list:
    """The user's functions among a trace's arguments (static ones: jit cannot trace a
    function): the leaves of the arguments, and inside a leaf that is a plain object (a
    wrapper of the static part, as equinox's filter_jit makes), its attributes' leaves, a
    few levels deep. A pytree node's own fields (a Module's activation) are not looked in:
    jit traces its leaves."""
    found: list = []
    seen: set[int] = set()
    todo: list[tuple[Any, int]] = [(v, 0) for v in (*t.args_spec, *(t.kwargs_spec or {}).values())]
    while todo and budget > 0:
        v, depth = todo.pop(0)
        if isinstance(v, _LEAF_TYPES) or id(v) in seen:
            continue
        budget -= 1
        seen.add(id(v))
        if _is_user_function(v):
            found.append(_compat.unwrap(v, partial=False))
            continue
        if depth >= 4 or isinstance(v, (types.ModuleType, types.FunctionType, types.MethodType)):
            continue
        leaves = jax.tree_util.tree_leaves(v)
        if len(leaves) != 1 or leaves[0] is not v:  # a pytree: its leaves
            todo.extend((x, depth + 1) for x in leaves)
            continue
        try:
            attrs = list(vars(v).values())
        except TypeError:  # no __dict__: a treedef, a C object
            continue
        todo.extend((x, depth + 1) for x in attrs)
    return found


def _fid(fn: Any) -> tuple:
    """A function's identity (a bound method is a new object at each attribute access)."""
    if isinstance(fn, types.MethodType):
        return (id(fn.__func__), id(fn.__self__))
    return (id(fn),)


def _subject(t: Any) -> tuple[Any, tuple]:
    """The function a trace traced, to the user, and its identity. jit's cache is per
    function object (the one jax.jit wrapped: a functools.partial is an object of its own);
    but when the jitted function is a wrapper from another module (a library's, a helper
    module's) and a user's function from elsewhere is passed to it as a static argument
    (equinox's filter_jit jits one shared function so), that function is what is traced:
    each one is a different function, though one jitted object traces them all."""
    obj = _compat.unwrap(t.fun, partial=False)
    code = _user_code(t)
    if code is not None and not _binds_user_function(obj):
        here = code.co_filename
        try:
            static = _static_functions(t)
        except Exception:  # an argument object that cannot be looked into
            static = []
        others = [f for f in static if getattr(_compat.user_code(f), "co_filename", here) != here]
        if others:
            return others[0], (id(obj), *(x for f in others for x in _fid(f)))
    return obj, (id(obj),)


def _is_user_function(v: Any) -> bool:
    fn = _compat.unwrap(v, partial=False)
    if not isinstance(fn, (types.FunctionType, types.MethodType, functools.partial)):
        return False
    code = _compat.user_code(fn)
    return code is not None and is_user_file(code.co_filename)


def _binds_user_function(obj: Any) -> bool:
    """Whether a jitted function holds a user's function of its own (in its closure, a
    partial's arguments, `__wrapped__`): a wrapper made for that one function, which it
    calls; not a shared wrapper that is handed the function to call."""
    held: list = [getattr(obj, "__wrapped__", None)]
    if isinstance(obj, functools.partial):
        held += [obj.func, *obj.args, *obj.keywords.values()]
        obj = obj.func
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    return any(v is not None and v is not obj and _is_user_function(v) for v in held)


def retraces(
    traces: list,
    first_call: Callable[[Any], Any] | None = None,
    kept: Callable[[], Set[int]] = frozenset,
) -> list[Retrace]:
    """The cell's recompiles: a function traced again with another signature or in another
    tracing context, and a function made anew at each call (`jax.jit(lambda ...)` in a
    loop) and traced each time.

    first_call(trace): the observer's FirstCall of the trace's first call in the cell, or
    None when unknown (then taken as traced in the cell, in an unknown context). A trace
    JAX's cache served (an earlier cell traced it) is no recompile. kept: ids of the objects
    the user keeps (the namespace's values and the items of its containers), asked for only
    when needed: functions kept side by side are distinct functions, each traced once, even
    when they share code.
    """
    first = first_call or (lambda t: None)

    def traced(t: Any) -> bool:
        fc = first(t)
        return fc is None or bool(fc.traced)

    def context(t: Any) -> tuple:
        fc = first(t)
        return fc.context if fc is not None else ()

    # jit's cache is per function object, so a retrace is a trace of a function traced
    # before: the object jax.jit wrapped, or the user's function a wrapper was given
    by_fun: dict[tuple, list] = {}
    subject: dict[tuple, Any] = {}
    for t in traces:
        if t.kind == "jit" and (_user_code(t) or user_partial_code(t)) is not None:
            fn, key = _subject(t)
            by_fun.setdefault(key, []).append(t)
            subject.setdefault(key, fn)
    names = {
        k: _compat.fun_name(fn) if len(k) > 1 else by_fun[k][0].name for k, fn in subject.items()
    }
    out = []
    for k, ts in by_fun.items():
        for prev, t in itertools.pairwise(ts):
            if traced(t):
                reason = retrace_reason(prev, t, context(prev), context(t))
                out.append(Retrace(t, prev, reason, len(ts), name=names[k]))
    out.extend(_remade(by_fun, subject, names, first, traced, kept))
    return out


def _remade(
    by_fun: dict[tuple, list],
    subject: dict[tuple, Any],
    names: dict[tuple, str],
    first: Callable[[Any], Any],
    traced: Callable[[Any], bool],
    kept: Callable[[], Set[int]],
) -> list[Retrace]:
    """One function made anew at each call: objects with one code and one name, first called
    by the same call expression, none kept by the user but (maybe) the last. Functions that
    share code but not their name are different functions (a library names the function
    it jits for each user function after it, as equinox's filter_jit does).

    by_fun: the cell's jit traces by function (`retraces`), subject: each one's function,
    names: its name; first, traced, kept: as in `retraces`.
    """
    out = []
    made_at: dict[tuple, list] = {}
    for k, ts in by_fun.items():
        t = ts[0]
        fc = first(t)
        at = (
            fc.at
            if fc is not None and fc.at
            else (tuple(t.call_sites[0][:2]) if t.call_sites else None)
        )
        code = (
            getattr(_compat.unwrap(subject[k]), "__code__", None)
            if len(k) > 1
            else (_user_code(t) or user_partial_code(t))
        )
        if at is not None and code is not None:
            made_at.setdefault((code, at, names[k]), []).append(k)
    ids: Set[int] | None = None
    for group in made_at.values():
        if len(group) < 2:
            continue
        ids = kept() if ids is None else ids
        keys = [k for k in group[:-1] if not _kept(by_fun[k][0], ids)] + group[-1:]
        firsts = [by_fun[k][0] for k in keys]
        if len(keys) < 2 or not any(traced(t) for t in firsts[1:]):
            continue
        out.append(
            Retrace(
                firsts[-1],
                firsts[0],
                remade_reason(subject[keys[-1]]),
                len(keys),
                tuple(t for t in firsts if t is firsts[0] or traced(t)),
                name=names[keys[-1]],
                calls=tuple(sum(t.calls for t in by_fun[k]) for k in keys),
                uncounted=any(
                    getattr(t, "calls_uncounted", False) for k in keys for t in by_fun[k]
                ),
            )
        )
    return out


def _kept(t: Any, kept: Set[int]) -> bool:
    return id(t.fun) in kept or id(_compat.unwrap(t.fun, partial=False)) in kept

"""The hand-over: what a recording saw, as the records later stages read.

`staged_records` turns the ledger's entries (one per jitted function and signature) and the
eager runs (re-staged per statement and signature: eager.py) into `Staged` records, the
user's own functions first; `partial_staged` makes one of a trace that failed, from what it
staged before the failure; `call_mark` reads one of `Recorder.calls`, the live memory
chart's marks. Nothing here keeps user arrays: avals and ShapeDtypeStructs only.
"""

from __future__ import annotations

import weakref
from typing import Any

import jax

from jaxviz import _compat
from jaxviz.capture.eager import EagerRun, eager_staged, run_key
from jaxviz.capture.events import line_of
from jaxviz.capture.ledger import JitEntry
from jaxviz.capture.lines import shown_line
from jaxviz.capture.staged import Staged, partial_jaxpr


def staged_records(
    entries: dict[int, JitEntry], runs: list[EagerRun], errors: list[Exception]
) -> list[Staged]:
    """One Staged record per distinct jitted (function, signature) and per eager statement
    and signature: the user's own jitted functions first, then library jits (jax.random.*,
    jnp functions) and eager statements, each in first-call order. A statement jaxviz cannot
    re-stage is left out, its error kept in `errors`."""
    items: list[Staged] = [jit_staged(entry) for entry in entries.values()]
    groups: dict[tuple, list[EagerRun]] = {}
    for run in runs:
        if run.ops:
            groups.setdefault(run_key(run), []).append(run)
    for group in groups.values():
        try:
            staged = eager_staged(group)
        except Exception as e:  # one statement jaxviz cannot re-stage must not hide the others
            errors.append(e)
            continue
        if staged is not None:
            items.append(staged)
    # the user's own functions first, then library calls and eager statements; each
    # group in first-call order
    items.sort(key=lambda s: (not (s.kind == "jit" and s.user_code), s.order))
    return items


def partial_staged(opened: tuple, error: BaseException, top_filename: str | None) -> Staged | None:
    """What the trace `opened` (the outermost trace frame last seen open: its frame, name,
    argument names and whether it is the user's) staged before `error` stopped it."""
    frame, name, arg_names, user = opened
    jaxpr = partial_jaxpr(frame)
    if jaxpr is None:
        return None
    frames = _compat.error_frames(error)
    if not user:  # a JAX wrapper's trace that _compat could not see through
        name = _user_names(frames, name, top_filename)
    names = list(arg_names) if len(arg_names) == len(jaxpr.invars) else []
    top = [(f, line, 1) for f, line, fn in frames if f == top_filename][:1]
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
    return t, name, where.co_filename, shown_line(where.co_filename, line_of(where, at))


# a library's function -> the jax.jit of it made for records whose jitted object was not
# seen (Python 3.11: jnp's jits an eager cell calls): made once, not per record and cell
# (~0.2 ms each, with its signature). Libraries' functions live as long as their modules;
# bounded all the same (a library may make functions per call)
_REJITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_REJITS_MAX = 512


def _rejit(e: JitEntry) -> Any:
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


def jit_staged(e: JitEntry) -> Staged:
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
        donation_quiet=e.donation_quiet,
        calls=sum(e.sites.values()) or 1,
        calls_uncounted=e.uncounted,
        call_sites=[(f, l, n) for (f, l), n in e.sites.items()],
        library_sites=list(e.library_sites),
        static=e.static,
        call_mesh=e.call_mesh,
        loc=e.first_loc,
        root_code=code,
        order=e.order,
        user_code=code is not None and _compat.is_user_filename(code.co_filename),
    )

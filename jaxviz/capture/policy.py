"""The watch policy: which calls the capture watches, until when, on which Python, and what a
count then says. Written once, as the table `WATCH_POLICY`: docs/architecture.md shows it
(rendered by `markdown()`; tests/test_watch_policy.py checks that the two agree), and the
handlers (calls.py, ops.py) apply its limits, the constants below, without deciding anything
else. A new speed-up adds a row here and its limit, not a branch in a handler.

How a call is seen is the mechanism's (events.py): on Python >= 3.12 a `sys.monitoring` CALL
event comes before each call the watched code makes, fast path or not; Python 3.11 has no
such event, and the call counter (`_compat/calls.py`) gives jit's type a Python `__call__`
for the cell instead (`COUNTS_EVERY_CALL`). Where the counter cannot run, the "3.11
fallback" rows stand: a call is seen only when it takes JAX's Python path.

A count is exact unless a row says "at least": the trace then writes "16+ calls" ("2+" on
the 3.11 fallback, "4+" while the live memory chart marks the calls there), and
`Staged.calls_uncounted` is set.

    >>> from jaxviz.capture import policy
    >>> print(policy.markdown().splitlines()[0])
    | what | Python | watched | until | then | a count says |
"""

from __future__ import annotations

import dataclasses
import types

from jaxviz import _compat
from jaxviz.config import options

MONITORING = _compat.has_sys_monitoring()  # Python >= 3.12: CALL events (events.py)
# Python 3.11 with the call counter (_compat.counting_jit_calls): every call of a jitted
# function at the user's places is counted and marked, fast path or not (~0.4 us a call);
# each function and signature takes JAX's Python path once, where its jaxpr is seen
COUNTS_EVERY_CALL = not MONITORING and _compat.can_count_jit_calls()

# A busy place's calls watched (3.12+: a call site's of one jit and signature; JAX's own
# place's; a place calling no jit) before its CALL event goes off
CALLS_WATCHED = 16
# 3.11 fallback: a call site's calls of one jit and signature watched, each through JAX's
# Python path (~100 us against ~5 us on its fast path, so fewer), before the fast path
# serves them unseen; more while the live memory chart marks the calls on its time axis;
# a library's jit at one user line: its first call
FALLBACK_CALLS_WATCHED = 2
FALLBACK_CHARTED_CALLS_WATCHED = 4
LIBRARY_CALLS_WATCHED = 1
# the limits of this Python (3.11 with the counter: JIT_CALLS_WATCHED bounds a jit's
# refusals of the fast path, as on 3.12)
JIT_CALLS_WATCHED = CALLS_WATCHED if MONITORING else FALLBACK_CALLS_WATCHED
CHARTED_CALLS_WATCHED = CALLS_WATCHED if MONITORING else FALLBACK_CHARTED_CALLS_WATCHED
EAGER_RUNS_RECORDED = 16  # a loop's statement recorded this many times alike is then counted
MAX_EAGER_OPS_PER_GROUP = 2000  # longer eager runs are counted, not drawn
MAX_CALL_MARKS = 50_000  # marks `Recorder.calls` keeps for the live chart; later calls counted

# callables a call site of the user's that calls one will not call a jit with: its CALL
# events are turned off for the cell
NEVER_JIT = frozenset(
    {
        types.BuiltinFunctionType,  # print, len, builtin methods (x.block_until_ready)
        types.MethodWrapperType,
        types.MethodDescriptorType,
        types.WrapperDescriptorType,
        type,  # range(...), list(...), float(...)
    }
)


def may_stop_watching() -> bool:
    """Whether a busy place's calls may go unwatched (its CALL event off, a jit's refusals
    of the fast path ended); not while a diagnostic must see every call (--nans)."""
    return not options.check_every_call


def fallback_watched(own: bool, charted: bool) -> int:
    """3.11 fallback: the calls of one function and signature a call site watches through
    JAX's Python path before they keep its fast path."""
    if not own:
        return LIBRARY_CALLS_WATCHED
    return FALLBACK_CHARTED_CALLS_WATCHED if charted else FALLBACK_CALLS_WATCHED


@dataclasses.dataclass(frozen=True)
class Rule:
    """One row of the watch policy."""

    what: str  # "a call site of the user's calling one jit, one signature"
    python: str  # "3.12+", "3.11", "3.11 fallback" or "all"
    watched: str  # how its calls are seen: "each call's CALL event"
    until: str  # "16 calls (JIT_CALLS_WATCHED)", or "always"
    then: str  # what happens after: "its CALL event off; the fast path serves the calls"
    count: str  # what a count then says: "exact", "at least: 16+ calls"


def _n(limit: int, name: str, unit: str = "calls") -> str:
    return f"{limit:,} {unit} (`{name}`)"


_BUSY = _n(CALLS_WATCHED, "CALLS_WATCHED")
WATCH_POLICY: tuple[Rule, ...] = (
    Rule(
        "a jitted function's first call in the cell, each signature",
        "all",
        "through JAX's Python path, its jaxpr read from JAX's caches (its C++ entries "
        "emptied at its first CALL event or counted call; on the 3.11 fallback, all at the "
        "cell's start)",
        "once",
        "JAX's fast path serves its later calls",
        "exact",
    ),
    Rule(
        "a known function: the user's own jit an earlier traced cell saw with a few "
        "signatures, each told by its first argument, whose C++ entries hold those alone; "
        "or a library's jit whose results are integers or booleans",
        "3.12+, 3.11",
        "its calls keep the fast path from the first (its jaxpr is the one remembered, "
        "`Known`); not under --nans, nor when a diagnostic must see its first call (a key "
        "it consumes)",
        "always",
        "a call of another signature misses, and takes the Python path",
        "exact",
    ),
    Rule(
        "a call site of the user's calling one jit, one signature (its first argument)",
        "3.12+",
        "each call's CALL event",
        _BUSY,
        "the place's CALL event off (in the cell's functions: until the next traced cell)",
        f"at least: {CALLS_WATCHED}+ calls",
    ),
    Rule(
        "the same, while the live memory chart marks each call, a diagnostic follows the "
        "key each call consumes (jax.random's samplers), or --nans checks every call",
        "3.12+",
        "each call's CALL event",
        "always",
        "-",
        "exact",
    ),
    Rule(
        "a library's place calling a jit (a jax.random sampler's)",
        "3.12+",
        "each call's CALL event, counted at the user's line that called the library",
        "always",
        "-",
        "exact",
    ),
    Rule(
        "JAX's own place calling a jit (an array operator's jnp function)",
        "3.12+",
        "each call's CALL event, whichever user lines its calls serve",
        _BUSY,
        "the place's CALL event off (not while the live chart marks calls)",
        "the functions counted there: at least",
    ),
    Rule(
        "one place calling one jit with several signatures that share a first argument "
        "(an init's `normal(key, shape)` per layer, a loop over buckets)",
        "3.12+, 3.11",
        "the first signature there keeps the fast path; the jit's others take the Python "
        "path, so that each is counted at its line",
        "`JIT_CALLS_WATCHED` refused calls of the jit (3.11: 2)",
        "every call keeps the fast path",
        "at that place: at least",
    ),
    Rule(
        "a jit's call at the user's places",
        "3.11",
        "the call counter's `__call__` (`COUNTS_EVERY_CALL`), fast path or not",
        "always",
        "-",
        "exact",
    ),
    Rule(
        "a library's or JAX's place calling a jit, at each user line",
        "3.11",
        "through JAX's Python path",
        _n(LIBRARY_CALLS_WATCHED, "LIBRARY_CALLS_WATCHED", "call"),
        "the fast path serves the calls, unseen",
        "at least",
    ),
    Rule(
        "a call site's calls of one jit, one signature, when the call counter cannot run",
        "3.11 fallback",
        "each call through JAX's Python path",
        f"{_n(FALLBACK_CALLS_WATCHED, 'FALLBACK_CALLS_WATCHED')}, "
        f"{_n(FALLBACK_CHARTED_CALLS_WATCHED, 'FALLBACK_CHARTED_CALLS_WATCHED')} while the "
        "live chart marks calls",
        "the fast path serves the calls, unseen",
        f"at least: {FALLBACK_CALLS_WATCHED}+ calls ({FALLBACK_CHARTED_CALLS_WATCHED}+)",
    ),
    Rule(
        "a place in the user's functions calling no jit (a helper a loop calls)",
        "3.12+",
        "each call's CALL event",
        _BUSY,
        "the place's CALL event off until the next traced cell",
        "-",
    ),
    Rule(
        "JAX's or a library's place calling the user's code (jax.grad's call of your "
        "function), or a place of the user's calling what it was handed",
        "3.12+",
        "each call's CALL event",
        f"{_BUSY}; under %%jaxtrace, its first",
        "the place's CALL event off; it fires again in the next traced cell",
        "-",
    ),
    Rule(
        "any other place: a library's or JAX's calling neither a jit nor the user's code, "
        "or calling a builtin",
        "3.12+",
        "its first CALL event",
        "once",
        "the place's CALL event off for good",
        "-",
    ),
    Rule(
        "a statement of the cell that makes eager ops (a loop's body)",
        "all",
        "op by op, a run per execution, each run re-staged",
        _n(EAGER_RUNS_RECORDED, "EAGER_RUNS_RECORDED", "runs alike"),
        "its later executions counted on its last runs",
        "exact: `this line ran 2,000 times`",
    ),
    Rule(
        "a counted statement whose jit takes the Python path with a new signature (a "
        "ragged last batch), uncounted by the call counter",
        "3.11",
        "op by op again, never counted again in the cell",
        "always",
        "-",
        "its jitted calls: at least",
    ),
    Rule(
        "a statement's eager ops, in one run",
        "all",
        "each op drawn",
        _n(MAX_EAGER_OPS_PER_GROUP, "MAX_EAGER_OPS_PER_GROUP", "ops"),
        "counted, not drawn",
        "exact",
    ),
    Rule(
        "jitted calls marked on the live memory chart's time axis",
        "all",
        "a mark per call",
        _n(MAX_CALL_MARKS, "MAX_CALL_MARKS", "marks"),
        "counted, not marked (`calls_dropped`)",
        "exact",
    ),
    Rule(
        "every place, between traced cells (once %%jaxtrace has run)",
        "3.12+",
        "its first CALL event",
        "once",
        "off; the places a traced cell must see again fire in it (local events)",
        "-",
    ),
)


def markdown() -> str:
    """The policy as the markdown table docs/architecture.md shows."""
    fields = [f.name for f in dataclasses.fields(Rule)]
    rows = ["| what | Python | watched | until | then | a count says |", "|---" * 6 + "|"]
    for rule in WATCH_POLICY:
        rows.append("| " + " | ".join(getattr(rule, f) for f in fields) + " |")
    return "\n".join(rows)

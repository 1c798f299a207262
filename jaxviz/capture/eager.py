"""Eager statements, as the capture records them: each execution of a top-level statement is
a run of eager ops (`EagerRun`), re-staged afterwards as one jaxpr per statement and signature
(`eager_staged`). The recorder decides what to record (ops.py, runs.py), and the watch policy
(policy.py) when a Python loop's statement is only counted.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import linecache
import weakref
from typing import Any

import jax

from jaxviz import _compat
from jaxviz._compat import Loc
from jaxviz.capture.lines import shown_line
from jaxviz.capture.policy import EAGER_RUNS_RECORDED, MAX_EAGER_OPS_PER_GROUP
from jaxviz.capture.staged import Staged


@dataclasses.dataclass
class EagerOp:
    prim: Any
    params: dict
    ins: list[tuple]  # ("ref", op, port) | ("arg", aval) | ("lit", value)
    out_avals: list[Any]
    loc: Loc | None  # innermost user frame


@dataclasses.dataclass
class EagerRun:
    """The eager ops one execution of one top-level statement made."""

    filename: str
    line: int
    frame_id: int
    lasti: int
    ops: list[EagerOp] = dataclasses.field(default_factory=list)
    # id(output) -> (a weak reference to it, op, port): the ops' outputs, by identity
    refs: dict[int, tuple[weakref.ref, int, int]] = dataclasses.field(default_factory=dict)
    truncated: int = 0
    order: int = 0
    counted: int = 0  # later runs of the statement counted on this one, not recorded
    jit_calls: list[tuple] = dataclasses.field(default_factory=list)  # (entry key, site) of
    # the jitted calls made right after it (Python < 3.12: counted again with `counted`)
    key: tuple | None = None  # run_key's answer, once the run has ended (asked lazily)


def tagged_ops(eqns: list, ops: list, tags: list) -> tuple[int | None, ...] | None:
    """Each re-staged equation's op (its index): the op whose bind staged it, told by the
    Traceback object it was staged under (an eager `jit` op, such as jnp.sin's, is inlined
    into several equations). None when the replay had no tags to go by."""
    op_of = {id(tb): k for k, tb in enumerate(tags) if tb is not None}
    if not op_of or len(tags) != len(ops):
        return None
    out: list[int | None] = []
    last = None
    for e in eqns:
        k = op_of.get(id(_compat.traceback_of(e)))
        if k is not None:
            last = k
        out.append(last)
    return tuple(out)


# A statement's re-staged jaxpr and each equation's op, by its runs' signature (run_key) and
# what its ops are (primitive, params, inputs, Python numbers by value, output types): a
# cell run again re-stages its statements from here. The signature finds the entry, the
# ops confirm it by comparison (hashing them cost ~0.5 ms a cell on an eager grad/vmap
# cell, a third of what it captured). Only ops whose params are plain hashable values (or
# jaxprs without constants) are remembered: no user array is kept.
_RESTAGED: collections.OrderedDict[tuple, list[tuple[list, Any, tuple[int | None, ...]]]] = (
    collections.OrderedDict()
)
RESTAGED_KEPT = 256  # signatures
RESTAGED_PER_SIGNATURE = 8  # ops of one signature, params told apart (`x ** 2`, `x ** 3`)


_PLAIN = frozenset({int, float, bool, str, type(None)})


def _ops_of(ops: list[EagerOp]) -> list:
    """What the re-staged jaxpr of `ops` depends on, to compare with `==`."""
    return [
        (
            op.prim,
            op.params,
            [("lit", type(i[1]), repr(i[1])) if i[0] == "lit" else i for i in op.ins],
            op.out_avals,
        )
        for op in ops
    ]


def _rememberable(ops: list[EagerOp]) -> bool:
    """Whether a re-staged jaxpr of `ops` may be kept: params of plain hashable values or
    jaxprs without constants (no user array)."""
    for op in ops:
        for v in op.params.values():
            if type(v) in _PLAIN:  # most params: no jaxpr to look into
                continue
            if _compat.holds_jaxpr(v) and any(
                _compat.jaxpr_consts(j) for j in (v if isinstance(v, (tuple, list)) else (v,))
            ):
                return False
    try:
        hash(tuple(tuple(op.params.items()) for op in ops))
    except TypeError:  # an array or a list among the params
        return False
    return True


def _restaged(run: EagerRun, what: list) -> tuple[Any, tuple[int | None, ...]] | None:
    """The remembered re-staged jaxpr of `run`'s ops and each equation's op, or None."""
    sig = run_key(run)[2]
    for hit in _RESTAGED.get(sig, ()):
        try:
            same = hit[0] == what
        except Exception:  # params that do not compare (an array's ==)
            return None
        if same:
            _RESTAGED.move_to_end(sig)
            return hit[1], hit[2]
    return None


def _remember(run: EagerRun, what: list, jaxpr: Any, op_index: tuple[int | None, ...]) -> None:
    sig = run_key(run)[2]
    kept = _RESTAGED.setdefault(sig, [])
    kept.insert(0, (what, jaxpr, op_index))
    del kept[RESTAGED_PER_SIGNATURE:]
    _RESTAGED.move_to_end(sig)
    if len(_RESTAGED) > RESTAGED_KEPT:
        _RESTAGED.popitem(last=False)


def match_locs(eqns: list, ops: list) -> list:
    """Each re-staged equation's location: its op's, matched in order by primitive name
    (re-staging may add or fold an equation, so counts can differ)."""
    locs, k = [], 0
    for e in eqns:
        name = e.primitive.name
        if k + 1 < len(ops) and name != ops[k].prim.name and name == ops[k + 1].prim.name:
            k += 1  # ops[k] was inlined into the eqns before
        if k < len(ops):
            locs.append(ops[k].loc)
            if name == ops[k].prim.name:
                k += 1
        else:
            locs.append(ops[-1].loc if ops else None)
    return locs


def run_key(run: EagerRun) -> tuple:
    """A statement's run by what it staged: each op's primitive, its inputs (earlier ops'
    outputs, arrays by type, Python numbers by type: `lr / (1 - b1 ** t)` is one statement
    whatever `t`; its graph shows the first run's value) and its output types. Kept on
    the run (`key`): ask only once it has ended."""
    if run.key is not None:
        return run.key
    sig = tuple(
        (
            op.prim.name,
            tuple(
                i
                if i[0] == "ref"
                else ("arg", aval_str(i[1]))
                if i[0] == "arg"
                else ("lit", type(i[1]))
                for i in op.ins
            ),
            tuple(aval_str(a) for a in op.out_avals),
        )
        for op in run.ops
    )
    run.key = (run.filename, run.line, sig)
    return run.key


@functools.lru_cache(maxsize=4096)
def aval_text(aval: Any) -> str:
    return str(aval)


def aval_str(aval: Any) -> str:
    """str(aval), cached by the aval's value: a loop's statements repeat a few avals
    thousands of times (str of an aval ~13 us; 2,000 iterations of a PRNG loop spent 0.29 s
    there)."""
    try:
        return aval_text(aval)
    except TypeError:  # an unhashable aval
        return str(aval)


def eager_staged(runs: list[EagerRun]) -> Staged | None:
    """Re-stages one statement's eager ops as a jaxpr (binding each primitive again)."""
    run = runs[0]
    restaged = _restage(run)
    if restaged is None:
        return None
    jaxpr, locs, spec = restaged
    loc = Loc(run.filename, run.line)
    text = linecache.getline(run.filename, run.line).strip()
    shown = shown_line(run.filename, run.line)  # as the editor numbers it
    name = f"line {shown}: {text[:60]}" if text else f"line {shown}"
    calls = len(runs) + sum(r.counted for r in runs)
    return Staged(
        name,
        jaxpr,
        kind="eager",
        fun=None,  # nothing the user jitted: an eager statement is not compiled or run again
        args_spec=tuple(spec),
        arg_names=[],  # the arrays it read have no names of their own: `in`, not `in in0`
        calls=calls,
        call_sites=[(run.filename, run.line, calls)],
        loc=loc,
        eqn_locs=[l or loc for l in locs] if locs else None,
        notes=_notes(runs),
        order=run.order,
    )


def _restage(run: EagerRun) -> tuple[Any, list | None, list] | None:
    """The run's ops staged again as a jaxpr (or the one an alike run staged: `_restaged`),
    each equation's location, and the specs of the arrays it read; None: a primitive that
    cannot be re-staged from its params."""
    arg_avals = [i[1] for op in run.ops for i in op.ins if i[0] == "arg"]
    consumed = {(i[1], i[2]) for op in run.ops for i in op.ins if i[0] == "ref"}

    tags: list[Any] = []  # one new Traceback per op: the equations it stages carry it

    def replay(*arg_vals):
        it = iter(arg_vals)
        env: list[list[Any]] = []
        tags.clear()
        for op in run.ops:
            vals = [
                next(it) if i[0] == "arg" else i[1] if i[0] == "lit" else env[i[1]][i[2]]
                for i in op.ins
            ]
            tb = _compat.new_traceback()
            tags.append(tb)
            if tb is not None:
                with _compat.staging_with(tb):
                    out = op.prim.bind(*vals, **op.params)
            else:
                out = op.prim.bind(*vals, **op.params)
            env.append(list(out) if op.prim.multiple_results else [out])
        return [
            v for k, outs in enumerate(env) for p, v in enumerate(outs) if (k, p) not in consumed
        ]

    spec = [
        jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=getattr(a, "weak_type", False))
        for a in arg_avals
    ]
    what = _ops_of(run.ops)
    hit = _restaged(run, what)
    if hit is not None:
        jaxpr, cached = hit
        locs: list | None = [run.ops[k].loc if k is not None else None for k in cached]
    else:
        try:
            jaxpr = jax.make_jaxpr(replay)(*spec)
        except Exception:  # a primitive that cannot be re-staged from its params: skip it
            return None
        eqns = _compat.open_jaxpr(jaxpr).eqns
        op_index = tagged_ops(eqns, run.ops, tags)
        if op_index is None:
            locs = match_locs(eqns, run.ops)
        else:
            locs = [run.ops[k].loc if k is not None else None for k in op_index]
            if not _compat.jaxpr_consts(jaxpr) and _rememberable(run.ops):
                _remember(run, what, jaxpr, op_index)
    return jaxpr, locs, spec


def _notes(runs: list[EagerRun]) -> list[str]:
    """What the record of a statement's runs leaves out: ops not drawn, runs counted."""
    run = runs[0]
    notes = []
    if run.truncated:
        notes.append(
            f"{run.truncated} more eager ops at this line were counted, not drawn "
            f"(jaxviz draws the first {MAX_EAGER_OPS_PER_GROUP})"
        )
    counted = sum(r.counted for r in runs)
    if counted:
        notes.append(
            f"this line ran {len(runs) + counted:,} times; after {EAGER_RUNS_RECORDED} runs "
            f"alike, jaxviz counted the other {counted:,} instead of recording them op by op "
            f"(their shapes were not compared)"
        )
    return notes

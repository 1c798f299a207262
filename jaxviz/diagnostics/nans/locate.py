"""nan: localisation, the equation that made the first non-finite value.

`locate` runs a jaxpr again op by op on the inputs of the call that returned a NaN or Inf
(graph/walk.py's walk in the shape of eval_jaxpr, each array dropped after its last use)
and returns the first equation that made a NaN from NaN-free inputs (else the first that
made an Inf from finite ones). Gradients through `jnp.where`, `sqrt` or `log` at 0 are found
the same way: JAX gives the derivative equations the source line of the forward op.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from jaxviz import _compat
from jaxviz.diagnostics.nans.values import chosen, worst_of
from jaxviz.diagnostics.report import chain_line
from jaxviz.graph import walk

NOT_MADE = ("not made",)
"""`locate`'s answer when every equation ran again and none made a non-finite value from
finite inputs: it came from the program's own constants (`jnp.where(mask, x, -jnp.inf)`),
on purpose."""


def locate(jaxpr: Any, args: list) -> tuple[tuple, str, tuple | None] | tuple | None:
    """(eqn chain, "NaN"/"Inf", the chain of the Inf before the NaN or None) of the first
    equation that made a NaN, else the first that made an Inf; NOT_MADE; or None when it
    cannot tell (a primitive that cannot run again, or effects: re-running a jaxpr with
    callbacks would call them again)."""
    if _compat.has_effects(jaxpr):
        return None
    first: dict[str, tuple] = {}
    completed = False
    try:
        with _compat.eval_context():
            _run(jaxpr, _compat.jaxpr_consts(jaxpr), args, (), first)
        completed = True
    except Exception:  # a primitive that cannot be re-applied eagerly: use what was found
        pass
    if "NaN" in first:
        return first["NaN"], "NaN", first.get("Inf")
    if "Inf" in first:
        return first["Inf"], "Inf", None
    return NOT_MADE if completed else None


def inf_from(found: tuple | None) -> tuple[str, int, str] | None:
    if not found or not found[2]:
        return None
    line = chain_line(found[2])
    return (line[0], line[1], found[2][-1].primitive.name) if line else None


# the call-like bodies re-run op by op: all but those that run per shard (shard_map, pmap)
_RERUN_ROLES = _compat.CALL_ROLES - {"shard_map", "pmap"}


class _Scope(NamedTuple):
    """What nan's rules know while one jaxpr runs again."""

    walker: walk.Walker  # this run's walker (one per `locate`)
    first: dict[str, tuple]  # "NaN" / "Inf" -> the chain of the first eqn that made one
    chain: tuple  # the equations from the root jaxpr down to this jaxpr's caller


def _run(jaxpr: Any, consts: list, args: list, chain: tuple, first: dict) -> list:
    """Runs a jaxpr again equation by equation, noting in `first` the first equation that
    made a NaN (and an Inf) from inputs without; returns its outputs."""
    walker = walk.Walker(_RULES, _evaluate)
    return walker.walk(jaxpr, _Scope(walker, first, chain), args, consts)


def _evaluate(scope: _Scope, eqn: Any, invals: list) -> list:
    """The default rule: applies the equation and notes it if it is the first to make a
    NaN from NaN-free inputs (or an Inf from finite ones)."""
    outvals = _compat.bind_eqn(eqn, invals)
    first = scope.first
    if "NaN" not in first:
        w_out = worst_of(outvals)
        if w_out:
            w_in = max(worst_of(invals), chosen(eqn.params))
            if w_out == 2 and w_in < 2:
                first["NaN"] = scope.chain + (eqn,)
            elif w_out >= 1 and w_in == 0 and "Inf" not in first:
                first["Inf"] = scope.chain + (eqn,)
    return outvals


def _call(scope: _Scope, eqn: Any, invals: list) -> list:
    """jit, closed_call, remat, custom_jvp/vjp: the body runs again op by op, until a NaN
    is found (then the equation is applied whole)."""
    subs = _compat.sub_jaxprs(eqn) if "NaN" not in scope.first else ()
    if not subs or not all(s.role in _RERUN_ROLES for s in subs):
        return _evaluate(scope, eqn, invals)
    inner = scope._replace(chain=scope.chain + (eqn,))
    return scope.walker.enter(subs[0], inner, invals, [None] * len(eqn.outvars))


def _cond(scope: _Scope, eqn: Any, invals: list) -> list:
    """cond: applied whole; the branch it took runs again op by op, to find the op."""
    if "NaN" in scope.first:
        return _evaluate(scope, eqn, invals)
    outvals = _compat.bind_eqn(eqn, invals)
    try:
        s = _compat.sub_jaxprs(eqn)[int(np.asarray(invals[0]))]
        scope.walker.enter(
            s, scope._replace(chain=scope.chain + (eqn,)), invals, [None] * len(eqn.outvars)
        )
    except Exception:
        pass
    return outvals


_RULES = walk.rules(call=_call, cond=_cond)

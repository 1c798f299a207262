"""key-reuse: is a key that a Python loop consumes again a *fixed key*?

A fixed key is one key given to the same computation at every iteration on purpose, so that
every call draws the same noise (common random numbers): a fixed evaluation key,
`eval_losses.append(eval_loss(params, eval_key, x_val))`, or the same keys split from it
each time, `sample_keys = random.split(eval_key, 8); mc_predict(params, sample_keys, x)`.
The same code is a bug when the draws drive the loop's own state, as in
`params = train_step(params, key, batch)` (the same dropout mask at every step), or when
the calls are the same call (`[sample(key) for _ in range(8)]`: eight equal samples).

The runtime ledger (keys/ledger.py's KeyLedger) says which call the loop ran again (`S0`),
and at which calls the cell consumed keys, with the keys each one made (eager split,
fold_in). This module reads the loop's source and decides, conservatively (anything it
cannot follow is not a fixed key):

  * the family: S0 and every call that consumed a key S0 made (at any remove), or that
    consumed a key while reading a value S0's iteration drew from it (its arguments);
  * fed back: a value one execution of a family call made reaches an argument of a family
    call in a later iteration (through assignments, containers a method call changed, a
    statement call's arguments, closures). Then the draws drive the loop: not fixed.
  * the same call: a family call that draws (not a derivation such as split) must read,
    in its arguments, a name its loop rebinds: otherwise every call is the same call.
  * a derivation (S0 a split or fold_in) is a fixed key only when some family call draws.

The source is read by keys/fixed_source.py, the dataflow followed by keys/fixed_flow.py;
a fixed key's finding is an info (`fixed_key_info`), the loop's other reuses warnings
(keys/findings.py).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from jaxviz import _compat
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.keys.fixed_flow import LoopFlow
from jaxviz.diagnostics.keys.fixed_source import index_of
from jaxviz.diagnostics.keys.ledger import site_key
from jaxviz.diagnostics.keys.uses import reuse_info
from jaxviz.diagnostics.report import quoted

DERIVE = frozenset({"random_split", "random_fold_in"})


def fixed_key(at: Any, derives: bool, sites: Sequence[tuple[tuple, frozenset, bool]]) -> str | None:
    """Whether the key that the call at `at` consumes again in its loop is a fixed key: the
    called function as the source writes it (`eval_loss`, `random.split`), or None.

    at: the loop's frame (_compat.UserFrame), its lasti on the call (S0).
    derives: S0 derives keys (an eager split or fold_in) rather than drawing.
    sites: every stack at which the cell consumed keys: (user frames outermost first, the
      consuming ops or functions, whether the keys consumed there came from S0's).
    """
    index = index_of(at.file)
    if index is None:
        return None
    s0 = index.call_at(at)
    if s0 is None:
        return None
    unit = index.unit_of(s0)
    consumers: dict[ast.Call, list[bool]] = {}  # call -> [derives only, S0's keys]
    for stack, whats, from_s0 in sites:
        node = None
        for f in reversed(stack):
            if f.file == at.file:
                n = index.call_at(f)
                if n is not None and index.unit_of(n) is unit:
                    node = n
                    break
        if node is None:
            if from_s0:  # a key S0 made, consumed where this source does not show
                return None
            continue
        c = consumers.setdefault(node, [True, False])
        c[0] = c[0] and whats <= DERIVE
        c[1] = c[1] or from_s0
    consumers[s0] = [derives, True]
    sim = LoopFlow(index, s0, consumers)
    sim.run(unit)
    if sim.fed_back or sim.same_call or sim.gave_up or (derives and not sim.draws):
        return None
    return ast.unparse(s0.func)


# --- the findings: a fixed key is an info -------------------------------------------------


def loop_fixed_key(ledger: Any, r: Any, place: Any) -> str | None:
    """The key a Python loop consumes again (the ledger's reuse `r`, at `place`) is a fixed
    key (`fixed_key`): its draws only reach results the loop collects, from calls that
    differ. The called function as the source writes it, or None."""
    if place.frame is None:
        return None
    family = ledger.family(site_key(r.stack))
    sites = [(x.stack, frozenset(x.whats), k in family) for k, x in ledger.sites.items()]
    try:
        return fixed_key(place.frame, r.what in DERIVE, sites)
    except Exception:  # jaxviz's own failure: the finding stays a warning
        return None


def key_name(obs: Any, key: tuple) -> str:
    """The cell's name for a key the ledger followed (`eval_key`), or ""."""
    obj = obs.keys.key_object(key)
    ns = obs.namespace or {}
    if obj is None:
        return ""
    return next(
        (
            n
            for n, v in list(ns.items())
            if (v is obj or _compat.key_base(v) is obj) and not n.startswith("_")
        ),
        "",
    )


def key_names(obs: Any) -> dict:
    """{key: its name in the cell} of the keys the ledger saw reused, read while the observer
    still holds the cell's namespace (as the cell ends: its analysis may run later)."""
    return {k: key_name(obs, k) for k in {r.key for r in obs.keys.reuses}}


def fixed_key_info(
    place: Any, n: int, what: str, call: str, key: str, related: tuple
) -> Diagnostic:
    src = f"`{key}`" if key else "one PRNG key"
    if what in DERIVE:
        fact = (
            f"{call} derives the same keys from {src} at each of the {n} iterations of this "
            f"loop; they reach only calls whose other arguments change and whose results are "
            f"collected"
        )
    else:
        fact = (
            f"every call of {call} draws the same random numbers from {src} ({n} calls in "
            f"this loop); its other arguments change and its results are collected"
        )
    msg = (
        f"{quoted(place.where)}{fact}, never fed back into a later call: a fixed key, as for "
        f"evaluation (common random numbers)."
    )
    return reuse_info(
        msg,
        place.where,
        "fixed-key",
        related=related,
    )

"""key-reuse findings: the messages of what KeyFlow (static) and the KeyLedger (runtime)
found, at the line to change, with the fixed-key exception (jaxviz.diagnostics.fixedkeys).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from jaxviz import _compat
from jaxviz.capture.places import is_user_file
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.fixedkeys import DERIVE, fixed_key
from jaxviz.diagnostics.keys import FULL, KeyFlow, reuse_place, site_key
from jaxviz.diagnostics.meant_keys import (
    fixed_closure,
    jit_same_inputs,
    jvp_rule_pair,
    same_inputs,
)
from jaxviz.diagnostics.nan import chain_line
from jaxviz.diagnostics.report import finding, place_label, quoted
from jaxviz.diagnostics.rules import RULES
from jaxviz.graph.files import shown_line
from jaxviz.graph.trace import Trace


def _frames(chain: tuple) -> list:
    """The user frames of the innermost equation of a chain that has any, outermost first."""
    for eqn in reversed(chain):
        frames = _compat.user_frames(eqn)
        if frames:
            return frames
    return []


class _EqnIds(Mapping):
    """A trace's node ids by id(eqn) (`Graph.eqn_ids`), the graph built at the first read:
    only a finding needs it."""

    def __init__(self, t: Trace) -> None:
        self._t = t
        self._ids: dict[int, str] | None = None

    def _get(self) -> dict[int, str]:
        ids = self._ids
        if ids is None:
            ids = self._ids = self._t.graph.eqn_ids()
        return ids

    def __getitem__(self, k: int) -> str:
        return self._get()[k]

    def __iter__(self) -> Iterator[int]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def _own_nodes(uses: list, index: Mapping[int, str]) -> tuple[str, ...]:
    """One graph node per use: the innermost equation of its chain that no other use's chain
    holds (a sampler inside a jitted helper is one shared equation; the helper's call in each
    iteration is its own)."""
    out: list[str] = []
    for u in uses:
        others = {id(e) for v in uses if v is not u for e in v.chain}
        own = [e for e in reversed(u.chain) if id(e) in index]
        pick = next((e for e in own if id(e) not in others), own[0] if own else None)
        if pick is not None and index[id(pick)] not in out:
            out.append(index[id(pick)])
    return tuple(out)


def _by(what: str, place: Any) -> str:
    """ " (by a sampler in `dropout`, line 4)" """
    s = place.sampler if place is not None else None
    if s is None:
        return f" (by {_op(what)})"
    line = f"line {shown_line(s[0], s[1])}" if s[0] == place.where[0] else place_label(s[0], s[1])
    return f" (by {_op(what)} in `{s[2]}`, {line})"


def static_key_reuse(t: Trace) -> list[Diagnostic]:
    flow = KeyFlow().run(t.jaxpr)
    index = _EqnIds(t)
    out = []
    loops: dict[tuple, tuple[Any, list]] = {}  # (key, line) -> (place, the uses there)

    def nodes(chain):
        return tuple(index[id(e)] for e in reversed(chain) if id(e) in index)[:1]

    for r in flow.reuses:
        place = (
            reuse_place(_frames(r.first.chain), _frames(r.second.chain))
            if r.why != "loop"
            else None
        )
        if place is not None and place.loop:
            group = loops.setdefault((r.second.vid, place.where), (place, [r.first]))[1]
            group.extend(u for u in (r.first, r.second) if all(u is not g for g in group))
            continue
        meant = _meant_static(r, place, t) if r.why not in ("loop", "split-fold") else None
        if meant is not None:
            out.append(dataclasses.replace(meant, node_ids=nodes(r.second.chain)))
            continue
        if place is not None and place.library and r.why != "split-fold":
            at = place.where
            if not is_user_file(at[0]) and t.call_sites:  # (a library's jit: the user's call)
                at = t.call_sites[0][:2]
            out.append(
                _library_reuse(
                    place._replace(where=at),
                    r.first.what,
                    r.second.what,
                    _frames(r.first.chain),
                    _frames(r.second.chain),
                    nodes(r.second.chain),
                )
            )
            continue
        where = place.where if place is not None else chain_line(r.second.chain)
        if where is None and t.call_sites:
            where = t.call_sites[0][:2]
        first = place.first if place is not None else chain_line(r.first.chain)
        if r.why == "loop":
            msg = (
                f"{quoted(where)}the same PRNG key is consumed by {_op(r.second.what)} in every "
                f"iteration of a loop in {t.name}: each iteration draws the same numbers."
            )
            hint = RULES["key-reuse"].hint_for("loop")
        elif r.why == "split-fold":
            msg = (
                f"{quoted(where)}a PRNG key is both split and folded in (or sampled from) in "
                f"{t.name}: split(k)[i] equals fold_in(k, i), so streams collide."
            )
            hint = RULES["key-reuse"].hint_for("split-fold")
        else:
            msg = (
                f"{quoted(where)}this PRNG key was already consumed by {_op(r.first.what)}"
                + (f" on line {shown_line(first[0], first[1])}" if first else "")
                + f" in {t.name}: both draw "
                f"the same random bits."
            )
            hint = RULES["key-reuse"].hint
        rel: tuple[tuple, ...] = (
            ((first[0], first[1], "first consumed here"),) if first and r.why != "loop" else ()
        )
        if place is not None and place.sampler is not None:
            rel += ((place.sampler[0], place.sampler[1], "consumed here"),)
        out.append(
            finding(
                "key-reuse",
                msg,
                where,
                hint=hint,
                node_ids=_own_nodes([r.first, r.second], index)[1:] or nodes(r.second.chain),
                related=rel,
                trace=t.name,
            )
        )
    for place, uses in loops.values():
        msg = (
            f"{quoted(place.where)}the same PRNG key is consumed {len(uses)} times in this loop, "
            f"once per iteration{_by(uses[-1].what, place)} in {t.name}: every iteration "
            f"draws the same random bits."
        )
        s = place.sampler
        out.append(
            finding(
                "key-reuse",
                msg,
                place.where,
                hint=RULES["key-reuse"].hint_for("python-loop"),
                node_ids=_own_nodes(uses, index),
                related=((s[0], s[1], "consumed here"),) if s else (),
                trace=t.name,
            )
        )
    if t.calls > 1:
        for u in flow.uses:
            if u.vid[0] == "const" and len(u.vid) == 2 and u.kind == FULL:
                where = chain_line(u.chain)
                rel = tuple((f, l, "called here") for f, l, _n in t.call_sites[:3])
                name = fixed_closure(t, u.vid[1])
                if name is not None:  # a fixed key: its results collected, as evaluation
                    out.append(_fixed_closure_info(t, name, where, rel, nodes(u.chain)))
                    break
                msg = (
                    f"{quoted(where)}{t.name} closes over a PRNG key and consumes it; it was "
                    f"called {t.calls} times, each drawing the same numbers."
                )
                out.append(
                    finding(
                        "key-reuse",
                        msg,
                        where,
                        hint=RULES["key-reuse"].hint_for("closed-over"),
                        node_ids=nodes(u.chain),
                        related=rel,
                        trace=t.name,
                    )
                )
                break
    return out


def _library_reuse(
    place: Any, first_what: str, what: str, first: list, second: list, node_ids: tuple = ()
) -> Diagnostic:
    """A key consumed twice inside one call of an installed library (`ReusePlace.library`):
    an info at the user's call, with the library's two lines. The user's code consumed
    nothing twice, unless the line hands one key to two arguments (the hint)."""
    a, b = first[-1], second[-1]
    msg = (
        f"{quoted(place.where)}inside this call, {place.library} consumed one PRNG key "
        f"twice ({_op(first_what)} at {place_label(a.file, a.line)}, then {_op(what)} at "
        f"{place_label(b.file, b.line)}): both draw the same random bits. That is "
        f"{place.library}'s own use of the key, not this line's, unless this line passes "
        f"one key for two arguments."
    )
    return finding(
        "key-reuse",
        msg,
        place.where,
        severity="info",
        hint=RULES["key-reuse"].hint_for("library"),
        node_ids=node_ids,
        related=((a.file, a.line, "first consumed here"), (b.file, b.line, "consumed here")),
    )


def _op(prim: str) -> str:
    return {
        "random_bits": "a sampler",
        "random_split": "random.split",
        "random_fold_in": "random.fold_in",
    }.get(prim, prim.lstrip("_"))


def runtime_key_reuse(obs: Any, traces: list | None = None) -> list[Diagnostic]:
    out = []
    loops: dict[tuple, list] = {}  # (key, line) -> [place, reuses there, what, the first reuse]
    for r in obs.keys.reuses:
        place = reuse_place(r.first_stack, r.stack, obs.top_filename) if r.stack else None
        if place is not None and place.loop:
            g = loops.setdefault((r.key, place.where), [place, 0, r.what, r])
            g[1] += 1
            continue
        site = place.where if place is not None else r.site
        if place is not None and place.library and r.why != "split-fold":
            out.append(_library_reuse(place, r.first_what, r.what, r.first_stack, r.stack))
            continue
        first_at = place.first if place is not None else r.first
        first = f" on line {shown_line(first_at[0], first_at[1])}" if first_at else ""
        meant = _meant_runtime(r, site, first_at, traces or [])
        if meant is not None:
            out.append(meant)
            continue
        if r.why == "split-fold":
            msg = (
                f"{quoted(site)}this PRNG key was already used by {_op(r.first_what)}{first}; "
                f"split(k)[i] equals fold_in(k, i), so the streams collide."
            )
            hint = RULES["key-reuse"].hint_for("split-fold")
        else:
            msg = (
                f"{quoted(site)}this PRNG key was already consumed by {_op(r.first_what)}"
                f"{first}: {_op(r.what)} draws the same random bits again."
            )
            hint = RULES["key-reuse"].hint
        rel: tuple[tuple, ...] = (
            ((first_at[0], first_at[1], "first consumed here"),) if first_at else ()
        )
        if place is not None and place.sampler is not None:
            rel += ((place.sampler[0], place.sampler[1], "consumed here"),)
        out.append(finding("key-reuse", msg, site, hint=hint, related=rel))
    for place, n, what, r in loops.values():
        s = place.sampler
        related = ((s[0], s[1], "consumed here"),) if s else ()
        fixed = _fixed_key(obs.keys, r, place)
        if fixed is not None:
            name = _key_name(obs, r.key)
            out.append(_fixed_key_info(place, n + 1, what, fixed, name, related))
            continue
        msg = (
            f"{quoted(place.where)}the same PRNG key is consumed {n + 1} times in this loop, "
            f"once per iteration{_by(what, place)}: every iteration draws the same random bits."
        )
        out.append(
            finding(
                "key-reuse",
                msg,
                place.where,
                hint=RULES["key-reuse"].hint_for("python-loop"),
                related=related,
            )
        )
    return out


def _fixed_key(ledger: Any, r: Any, place: Any) -> str | None:
    """The key a Python loop consumes again is a fixed key (jaxviz.diagnostics.fixedkeys):
    its draws only reach results the loop collects, from calls that differ. The called
    function as the source writes it, or None."""
    if place.frame is None:
        return None
    family = ledger.family(site_key(r.stack))
    sites = [(x.stack, frozenset(x.whats), k in family) for k, x in ledger.sites.items()]
    try:
        return fixed_key(place.frame, r.what in DERIVE, sites)
    except Exception:  # jaxviz's own failure: the finding stays a warning
        return None


def _key_name(obs: Any, key: tuple) -> str:
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


def _fixed_key_info(
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
    return finding(
        "key-reuse",
        msg,
        place.where,
        severity="info",
        hint=RULES["key-reuse"].hint_for("fixed-key"),
        related=related,
    )


# --- keys reused on purpose (jaxviz.diagnostics.meant_keys): info, with the reason ---------------


def _meant_static(r: Any, place: Any, t: Trace) -> Diagnostic | None:
    """A reuse within one staged function that is meant: a custom_jvp's primal and its JVP
    rule on one key; one key handed to two functions that build the same inputs."""
    where = place.where if place is not None else chain_line(r.second.chain)
    if where is None or not is_user_file(where[0]):
        where = t.call_sites[0][:2] if t.call_sites else where
    if jvp_rule_pair(r.first.chain, r.second.chain):
        msg = (
            f"{quoted(where)}a custom_jvp's primal and its JVP rule sample the same PRNG key "
            f"in {t.name}: both draw the same numbers, as a rule that must see the primal's "
            f"noise is written (jaxopt's perturbations); by design, not a reuse to fix."
        )
        return finding(
            "key-reuse", msg, where, severity="info", hint=RULES["key-reuse"].hint_for("jvp-pair")
        )
    first, second = _frames(r.first.chain), _frames(r.second.chain)
    both = same_inputs(tuple(first), tuple(second))
    if both is None or where is None:
        return None
    first_at = place.first if place is not None else None
    return _same_inputs_info(where, first_at, both, second[-1])


def _meant_runtime(r: Any, site: Any, first_at: Any, traces: list) -> Diagnostic | None:
    """A reuse across the cell's calls that is meant: one key handed to two different
    functions that build the same inputs (eagerly, or two jitted functions)."""
    if r.why == "split-fold" or site is None:
        return None
    both = same_inputs(r.first_stack, r.stack)
    if both is not None:
        return _same_inputs_info(site, first_at, both, r.stack[-1])
    jits = jit_same_inputs(r.first_what, r.what, traces)
    if jits is not None:
        return _same_inputs_info(site, first_at, jits[:2], jits[2])
    return None


def _same_inputs_info(where: Any, first_at: Any, both: tuple, sampler: Any) -> Diagnostic:
    a, b = both
    on = f" on line {shown_line(first_at[0], first_at[1])}" if first_at else ""
    at = place_label(sampler.file, sampler.line)
    msg = (
        f"{quoted(where)}`{a}`{on} and `{b}` here draw from the same PRNG key through the same "
        f"code ({at}): both get the same numbers, as building one set of inputs for two "
        f"consumers means to (a benchmark's test problem); if they should differ, split it."
    )
    rel = ((first_at[0], first_at[1], "first consumed here"),) if first_at else ()
    return finding(
        "key-reuse",
        msg,
        where,
        severity="info",
        hint=RULES["key-reuse"].hint_for("same-inputs"),
        related=rel + ((sampler.file, sampler.line, "consumed here"),),
    )


def _fixed_closure_info(t: Trace, name: str, where: Any, rel: tuple, nodes: tuple) -> Diagnostic:
    src = f"the PRNG key `{name}`" if name else "a PRNG key"
    more = "+" if t.calls_uncounted else ""
    msg = (
        f"{quoted(where)}{t.name} closes over {src} and draws the same numbers at each of its "
        f"{t.calls}{more} calls; each call's result is collected, never fed back into a later "
        f"call: a fixed key, as for evaluation (common random numbers)."
    )
    return finding(
        "key-reuse",
        msg,
        where,
        severity="info",
        hint=RULES["key-reuse"].hint_for("fixed-key"),
        node_ids=nodes,
        related=rel,
    )

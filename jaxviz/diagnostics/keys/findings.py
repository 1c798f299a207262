"""key-reuse findings: the messages of what KeyFlow (static, keys/flow.py) and the
KeyLedger (runtime, keys/ledger.py) found, at the line to change (keys/place.py); the
reuses that are meant (keys/meant.py) and the fixed keys (keys/fixed.py) are infos, with
their own messages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from jaxviz.capture.places import is_user_file
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.keys.fixed import fixed_key_info, loop_fixed_key
from jaxviz.diagnostics.keys.flow import KeyFlow
from jaxviz.diagnostics.keys.meant import (
    fixed_closure,
    fixed_closure_info,
    meant_runtime,
    meant_static,
)
from jaxviz.diagnostics.keys.place import chain_frames, reuse_place
from jaxviz.diagnostics.keys.uses import FULL, reuse_info
from jaxviz.diagnostics.report import chain_line, finding, place_label, quoted
from jaxviz.diagnostics.rules import RULES
from jaxviz.graph.files import shown_line
from jaxviz.graph.trace import Trace


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
    """key-reuse within one staged function: each reuse KeyFlow found at the line to change,
    a Python loop's reuses of one key as one finding, a closed-over key consumed at each of
    several calls."""
    flow = KeyFlow().run(t.jaxpr)
    index = _EqnIds(t)
    out = []
    loops: dict[tuple, tuple[Any, list]] = {}  # (key, line) -> (place, the uses there)
    for r in flow.reuses:
        place = (
            reuse_place(chain_frames(r.first.chain), chain_frames(r.second.chain))
            if r.why != "loop"
            else None
        )
        if place is not None and place.loop:
            group = loops.setdefault((r.second.vid, place.where), (place, [r.first]))[1]
            group.extend(u for u in (r.first, r.second) if all(u is not g for g in group))
            continue
        out.append(_static_reuse(t, r, place, index))
    for place, uses in loops.values():
        out.append(_loop_reuse(t, place, uses, index))
    if t.calls > 1:
        out.extend(_closed_over(t, flow, index))
    return out


def _first_node(chain: tuple, index: Mapping[int, str]) -> tuple[str, ...]:
    """The node of the innermost equation of `chain` that the graph shows, or ()."""
    return tuple(index[id(e)] for e in reversed(chain) if id(e) in index)[:1]


def _static_reuse(t: Trace, r: Any, place: Any, index: Mapping[int, str]) -> Diagnostic:
    """One reuse within `t` (KeyFlow's Reuse `r`, at `place`): meant (an info), inside a
    library's call, or a warning at the line to change."""
    meant = meant_static(r, place, t) if r.why not in ("loop", "split-fold") else None
    if meant is not None:
        return dataclasses.replace(meant, node_ids=_first_node(r.second.chain, index))
    if place is not None and place.library and r.why != "split-fold":
        at = place.where
        if not is_user_file(at[0]) and t.call_sites:  # (a library's jit: the user's call)
            at = t.call_sites[0][:2]
        return _library_reuse(
            place._replace(where=at),
            r.first.what,
            r.second.what,
            chain_frames(r.first.chain),
            chain_frames(r.second.chain),
            _first_node(r.second.chain, index),
        )
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
    return finding(
        "key-reuse",
        msg,
        where,
        hint=hint,
        node_ids=_own_nodes([r.first, r.second], index)[1:] or _first_node(r.second.chain, index),
        related=rel,
        trace=t.name,
    )


def _loop_reuse(t: Trace, place: Any, uses: list, index: Mapping[int, str]) -> Diagnostic:
    """One key consumed at each iteration of a Python loop that ran `t` (its `uses`)."""
    msg = (
        f"{quoted(place.where)}the same PRNG key is consumed {len(uses)} times in this loop, "
        f"once per iteration{_by(uses[-1].what, place)} in {t.name}: every iteration "
        f"draws the same random bits."
    )
    s = place.sampler
    return finding(
        "key-reuse",
        msg,
        place.where,
        hint=RULES["key-reuse"].hint_for("python-loop"),
        node_ids=_own_nodes(uses, index),
        related=((s[0], s[1], "consumed here"),) if s else (),
        trace=t.name,
    )


def _closed_over(t: Trace, flow: KeyFlow, index: Mapping[int, str]) -> list[Diagnostic]:
    """A key `t` closes over and consumes, called more than once: the same numbers at each
    call (an info when the calls' results are collected: a fixed key); the first such key."""
    for u in flow.uses:
        if u.vid[0] == "const" and len(u.vid) == 2 and u.kind == FULL:
            where = chain_line(u.chain)
            rel = tuple((f, l, "called here") for f, l, _n in t.call_sites[:3])
            name = fixed_closure(t, u.vid[1])
            if name is not None:  # a fixed key: its results collected, as evaluation
                return [fixed_closure_info(t, name, where, rel, _first_node(u.chain, index))]
            msg = (
                f"{quoted(where)}{t.name} closes over a PRNG key and consumes it; it was "
                f"called {t.calls} times, each drawing the same numbers."
            )
            return [
                finding(
                    "key-reuse",
                    msg,
                    where,
                    hint=RULES["key-reuse"].hint_for("closed-over"),
                    node_ids=_first_node(u.chain, index),
                    related=rel,
                    trace=t.name,
                )
            ]
    return []


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
    return reuse_info(
        msg,
        place.where,
        "library",
        node_ids=node_ids,
        related=((a.file, a.line, "first consumed here"), (b.file, b.line, "consumed here")),
    )


def _op(prim: str) -> str:
    return {
        "random_bits": "a sampler",
        "random_split": "random.split",
        "random_fold_in": "random.fold_in",
    }.get(prim, prim.lstrip("_"))


def runtime_key_reuse(
    obs: Any, traces: list | None = None, names: dict | None = None
) -> list[Diagnostic]:
    """key-reuse across the cell's calls (the observer's KeyLedger): each reuse at the line
    to change, a Python loop's reuses of one key as one finding (an info for a fixed key;
    names: each reused key's name in the cell, read as it ended by `key_names`)."""
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
        meant = meant_runtime(r, site, first_at, traces or [])
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
        fixed = loop_fixed_key(obs.keys, r, place)
        if fixed is not None:
            name = (names or {}).get(r.key, "")
            out.append(fixed_key_info(place, n + 1, what, fixed, name, related))
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

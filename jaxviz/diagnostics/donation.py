"""donation-unusable: a donated input whose buffer the function cannot reuse.

JAX's own matching, replayed on avals: each donated input takes the first unclaimed output
with its shape and dtype; an input with none (or one the function never reads) cannot be
aliased. This also covers the silent dtype-changing case. (use-after-donate, an array used
after a call donated it, is read from the exception: errors.py.)

A call made with JAX's own warning about unusable donations ignored by its message is a
documented choice, not a slip: equinox's `filter_jit(donate="all")` donates every array and
silences that warning. Plain JAX prints nothing there, so jaxviz does not warn either: one
info names the choice and the arguments it cannot reuse.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from jaxviz import _compat
from jaxviz.capture.places import library_label
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.report import finding, library_related, quoted
from jaxviz.diagnostics.rules import RULES
from jaxviz.graph.trace import Trace


@dataclasses.dataclass
class Unusable:
    index: int  # flat input index
    name: str  # "params['w']"
    type: str  # "f32[1000]"
    why: str


def donated_flat(fun: Any, args_spec: tuple, kwargs_spec: dict) -> list[bool]:
    """Donation mask over flat inputs, from a jitted function's donate_argnums/argnames."""
    opts = _compat.jit_options(fun)
    if not opts or not (opts["donate_argnums"] or opts["donate_argnames"]):
        return []
    static = set(opts["static_argnums"])
    mask: list[bool] = []
    for i, a in enumerate(args_spec):
        if i in static:
            continue
        n = len(jax.tree_util.tree_leaves(a))
        mask += [i in opts["donate_argnums"]] * n
    for k, v in kwargs_spec.items():
        if k in opts["static_argnames"]:
            continue
        mask += [k in opts["donate_argnames"]] * len(jax.tree_util.tree_leaves(v))
    return mask


def unusable_donations(jaxpr: Any, donated: list[bool], names: list[str]) -> list[Unusable]:
    j = _compat.open_jaxpr(jaxpr)
    if not any(donated) or len(donated) != len(j.invars):
        return []
    used: set = set()
    for e in j.eqns:
        used.update(v for v in e.invars if not _compat.is_literal(v))
    used.update(v for v in j.outvars if not _compat.is_literal(v))
    pool = [(tuple(v.aval.shape), str(v.aval.dtype)) for v in j.outvars if hasattr(v.aval, "shape")]
    taken: dict[tuple, list[str]] = {}  # (shape, dtype) -> the donated inputs that took them
    out = []
    for i, (v, d) in enumerate(zip(j.invars, donated)):
        if not d:
            continue
        name = names[i] if i < len(names) else f"arg{i}"
        typ = _compat.short_type(v.aval)
        if v not in used:
            out.append(
                Unusable(
                    i,
                    name,
                    typ,
                    f"the function never reads `{name}`, so jit drops "
                    f"it and the donation does nothing",
                )
            )
            continue
        want = (tuple(v.aval.shape), str(v.aval.dtype))
        if want in pool:
            pool.remove(want)
            taken.setdefault(want, []).append(name)
            continue
        same_shape = [dt for sh, dt in pool if sh == want[0]]
        if want in taken:  # outputs of its type exist, and earlier donations took them all
            takers = taken[want]
            n = len(takers)
            who = ", ".join(f"`{t}`" for t in takers[:-1]) + (" and " if n > 1 else "")
            who += f"`{takers[-1]}`"
            what = f"the only {typ} output" if n == 1 else f"all {n} {typ} outputs"
            why = (
                f"{who} already {'takes' if n == 1 else 'take'} {what} (each output can "
                f"reuse one donated buffer)"
            )
        elif same_shape:
            why = (
                f"the only output with its shape has dtype {same_shape[0]}, not {want[1]}: XLA "
                f"cannot reuse the buffer and does not say so"
            )
        else:
            outs = ", ".join(_compat.short_type(o.aval) for o in j.outvars) or "none"
            why = f"no output has its shape and dtype (outputs: {outs})"
        out.append(Unusable(i, name, typ, why))
    return out


def donation_findings(t: Trace) -> list[Diagnostic]:
    """Each donated input of `t` it cannot reuse, at its first call (else its def line)."""
    donated = list(t.donated) or (
        donated_flat(t.fun, t.args_spec, t.kwargs_spec)
        if t.kind == "trace" and t.fun is not None
        else []
    )
    if not any(donated):
        return []
    bad = unusable_donations(t.jaxpr, donated, t.arg_names)
    if not bad:
        return []
    where = t.call_sites[0][:2] if t.call_sites else _def_line(t)
    index = t.graph.body.inputs if t.graph is not None else []
    via = library_related(t)
    if t.donation_quiet:
        return [_chosen(t, bad, where, index, via)]
    out = []
    for u in bad:
        msg = (
            f"{quoted(where)}`{u.name}` ({u.type}) is donated to {t.name} but cannot be "
            f"reused: {u.why}."
        )
        nid = (f"{t.graph.root}:{index[u.index]}",) if u.index < len(index) else ()
        out.append(
            finding(
                "donation-unusable",
                msg,
                where,
                hint=RULES["donation-unusable"].hint,
                node_ids=nid,
                related=via,
                trace=t.name,
            )
        )
    return out


def _chosen(t: Trace, bad: list[Unusable], where: Any, index: list, via: tuple) -> Diagnostic:
    """One info for a call that silenced JAX's warning on purpose, naming who did."""
    who = library_label(t.library_sites[0][0]) if t.library_sites else "the caller"
    args = ", ".join(f"`{u.name}` ({u.type})" for u in bad[:4])
    more = f" and {len(bad) - 4} more" if len(bad) > 4 else ""
    msg = (
        f"{quoted(where)}{who} donates every array to {t.name} and silences JAX's warning "
        f'about donations it cannot reuse ("Some donated buffers were not usable"), its '
        f"documented choice: {args}{more} cannot be reused ({bad[0].why}), which costs "
        f"nothing but the donation's saving."
    )
    root = t.graph.root if t.graph is not None else 0
    return finding(
        "donation-unusable",
        msg,
        where,
        severity="info",
        hint=RULES["donation-unusable"].hint_for("chosen"),
        node_ids=tuple(f"{root}:{index[u.index]}" for u in bad if u.index < len(index)),
        related=via,
        trace=t.name,
    )


def _def_line(t: Trace) -> tuple[str, int] | None:
    code = getattr(_compat.unwrap(t.fun), "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code is not None else None

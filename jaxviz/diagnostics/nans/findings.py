"""nan findings: the messages of what NanWatch (watch.py) found, naming the op (or the
derivative) that made the first non-finite value, and the NaNs a cell kept from calls
jaxviz did not check (later.py).
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
from collections.abc import Sequence
from typing import Any

from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.link import link_nan
from jaxviz.diagnostics.nans.causes import DECOMPOSITIONS, DOMAINS, UNSAFE, domain_of
from jaxviz.diagnostics.nans.later import later_nans
from jaxviz.diagnostics.report import code_of, finding, place_label, quoted
from jaxviz.diagnostics.rules import RULES

# Forward ops whose derivative is infinite at a point where they are finite (sqrt at 0,
# log at 0, ...): what a non-finite gradient on their line is blamed on.
UNSAFE_DERIVATIVES = (
    "sqrt",
    "rsqrt",
    "log",
    "log1p",
    "pow",
    "div",
    "atan2",
    "asin",
    "acos",
    "atanh",
    "acosh",
    "cbrt",
    "integer_pow",
)


# Ops whose derivative divides by (a function of) the input: non-finite at 0 or at +-1.
_DIVIDING_DERIVATIVES = ("sqrt", "rsqrt", "log", "log1p", "asin", "acos", "atanh", "acosh", "cbrt")


def _unsafe_rank(n: Any) -> int:
    """Lower is likelier the op whose derivative went non-finite; -1: its derivative is safe."""
    if n.op == "integer_pow":  # x ** 2 has the finite derivative 2x; x ** -1 has not
        return len(UNSAFE_DERIVATIVES) if any(p.startswith("y=-") for p in n.params) else -1
    return UNSAFE_DERIVATIVES.index(n.op) if n.op in UNSAFE_DERIVATIVES else -1


def _forward_culprit(
    cell: Any, where: tuple, named: str = ""
) -> tuple[str, tuple[str, ...]] | None:
    """The forward op on `where`'s line whose derivative is unsafe, and its graph nodes:
    `named` (the op localisation found upstream of the bad value) when it is given."""
    if named:
        found = _forward_culprit(cell, where) if cell is not None else None
        nodes = found[1] if found is not None and found[0] == named else ()
        return named, nodes
    if cell is None:
        return None
    for t in cell.traces:
        hits = [
            (b.id, n)
            for b in t.graph.bodies
            for n in b.nodes
            if n.kind == "eqn"
            and _unsafe_rank(n) >= 0
            and n.loc is not None
            and (n.loc.file, n.loc.line) == where
            and not n.ns.startswith("transpose")
        ]
        if hits:
            op = min(hits, key=lambda h: _unsafe_rank(h[1]))[1].op
            return op, tuple(f"{b}:{n.id}" for b, n in hits if n.op == op)
    return None


def statement_of(filename: str, line: int) -> str:
    """The source of the statement that holds `line` (all its lines: `jnp.where(c,` on one,
    `jnp.log(x),` on the next), or the line alone."""
    lines = linecache.getlines(filename)
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return code_of(filename, line)
    best: ast.stmt | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        inside = node.lineno <= line <= (node.end_lineno or 0)
        if inside and (best is None or node.lineno >= best.lineno):
            best = node
    if best is None:
        return code_of(filename, line)
    return "".join(lines[best.lineno - 1 : best.end_lineno or best.lineno])


def _derivative_division(f: Any, cell: Any, where: tuple) -> bool:
    """A `div` the user did not write, on a line with sqrt/log/...: that op's derivative.
    (jax 0.10.2 gives the equations of an eager jax.grad no jvp/transpose name stack.)"""
    if f.grad or f.op != "div" or cell is None or "/" in code_of(*where):
        return False
    return any(
        n.kind == "eqn"
        and n.op in _DIVIDING_DERIVATIVES
        and n.loc is not None
        and (n.loc.file, n.loc.line) == where
        for t in cell.traces
        for b in t.graph.bodies
        for n in b.nodes
    )


def later_lines(obs: Any, cell: Any, ns: dict | None) -> list:
    """The names the cell bound that hold a NaN a later, unchecked call made (later.py),
    read from the namespace as the cell ends; none when the watch found one itself."""
    if ns is None or any(f.confirmed for f in obs.nan.findings):
        return []
    unchecked = {k for k, fc in obs.first_call.items() if not fc.checked} | obs.nan.unchecked
    return later_nans(
        cell.source or "",
        ns,
        cell.traces,
        cell.filename,
        obs.nan.returned_bad,
        unchecked=unchecked,
    )


def nan_findings(
    obs: Any, cell: Any = None, later: Sequence = (), homes: dict | None = None
) -> list[Diagnostic]:
    """The nan findings of a cell: each confirmed NanWatch finding at the line that made the
    value (at its op in the graph: link.py, the trace noted in `homes`); when there is none,
    the names the cell bound that hold a NaN a later, unchecked call made (`later`:
    `later_lines`, read as the cell ended)."""
    traces = cell.traces if cell is not None else []
    # (one finding a line: a value that reached the user first, one JAX dropped after it)
    found = sorted((f for f in obs.nan.findings if f.confirmed), key=lambda f: f.discarded)
    out = [
        link_nan(_watched(f, obs, cell), traces, f.op, f.where, {} if homes is None else homes)
        for f in found
    ]
    if not out and cell is not None:
        out.extend(_later(ln, cell) for ln in later)
    return out


def _watched(f: Any, obs: Any, cell: Any) -> Diagnostic:
    """One NanWatch finding (`f`): a gradient's non-finite derivative, or the first op that
    made the value, with the hint that fits."""
    where = (f.filename, f.line)
    grad_of = f.grad or _derivative_division(f, cell, where)
    culprit = _forward_culprit(cell, where, f.derivative_of) if grad_of else None
    domain = ""
    kind = "NaN" if f.kind == "NaN" or f.became_nan else "Inf"
    inside = f" (in {f.where})" if f.where not in ("eager", "", f.op) else ""
    if culprit is not None:
        op, nodes = culprit
        made = f.inf_from[2] if f.inf_from is not None else f.op  # (the Inf a NaN came from)
        msg = _gradient_message(op, where, kind, inside, made)
    else:
        nodes = ()
        domain = domain_of(f.op) if f.kind == "NaN" and not f.grad else ""
        msg = _made_message(f, where, domain, inside)
    if f is obs.nan.debug_stop:
        msg += " jax_debug_nans stopped the call with FloatingPointError."
    elif f.discarded:
        msg += (
            f" No output depends on it: JAX dropped the {kind} where it was made, unused (a "
            "primal value jax.grad discards, as inside a custom_jvp whose rule gives the "
            "derivative), and nothing the cell keeps or prints holds it."
        )
    rel = (
        ((f.call_site[0], f.call_site[1], "called here"),)
        if f.call_site and tuple(f.call_site) != where
        else ()
    )
    # NaN is never meant; an Inf may be (log(0) as a log-probability): a warning
    # a gradient's NaN: masking (the rule's hint); a value that became infinite from
    # finite ones, or a NaN one of whose inputs had: where it overflowed
    # a forward op's NaN on a value outside its domain: keep its input inside
    overflow = culprit is None and not f.grad and (f.kind == "Inf" or f.inf_from is not None)
    in_domain = culprit is None and not overflow and bool(domain)
    decomposition = culprit is not None and culprit[0] in DECOMPOSITIONS
    variant = (
        "overflow"
        if overflow
        else "domain"
        if in_domain
        else "decomposition"
        if decomposition
        else ""
    )
    d = finding(
        "nan",
        msg,
        where,
        severity="info" if f.discarded else "error" if kind == "NaN" else "warning",
        hint=RULES["nan"].hint_for(variant),
        related=rel,
    )
    return dataclasses.replace(d, node_ids=nodes) if nodes else d


def _gradient_message(op: str, where: tuple, kind: str, inside: str, made: str = "") -> str:
    """A non-finite gradient, blamed on the forward op `op` whose derivative is unsafe
    (made: the op of the derivative that made the first non-finite value, `div`)."""
    why = UNSAFE.get(op, "where it is evaluated")
    code = code_of(*where)
    masked = (
        ", and masking its output (jnp.where) does not mask its gradient"
        if "where" in statement_of(*where)
        else ""
    )
    names = DOMAINS[op][0] if op in DOMAINS else (op,)
    here = "here" if any(n in code for n in names) else "(run by this line's call)"
    by = f"; `{made}` in the derivative of `{op}` made it" if made and made != op else ""
    return (
        f"{quoted(where)}{kind} in the gradient: the derivative of `{op}` {here} is not "
        f"finite {why}{masked}{by}{inside}."
    )


def _made_message(f: Any, where: tuple, domain: str, inside: str) -> str:
    """The first op that made a NaN from inputs without (of a value outside its domain),
    or an Inf from finite inputs; a NaN made from an Inf names where the Inf came from."""
    grad = " in the derivative of" if f.grad else " from"
    made = "a NaN from inputs without NaN" if f.kind == "NaN" else "an Inf from finite inputs"
    of = f" of {domain}" if domain else ""  # sqrt of a negative value
    msg = (
        f"{quoted(where)}{f.kind}{grad} `{f.op}`{of} here{inside}: the first operation "
        f"that produced {made}"
    )
    if f.kind == "NaN" and f.inf_from is not None:  # 0 * log(0), inf - inf
        file, line, op = f.inf_from
        at = "on this line" if (file, line) == where else f"at {place_label(file, line)}"
        msg += (
            f"; one of its inputs was already infinite: `{op}` {at} made an Inf "
            f"from finite values (log(0), x / 0, exp overflow)"
        )
    elif f.became_nan:
        msg += ", which later operations turned into NaN"
    return msg + "."


def _later(ln: Any, cell: Any) -> Diagnostic:
    """A name the cell bound that holds a NaN a later call made, unchecked (later.py)."""
    where = (cell.filename, ln.line)
    if ln.first_checked:
        msg = (
            f"{quoted(where)}`{ln.name}` holds {ln.kind} after the cell: a call of "
            f"`{ln.fn}` after its first returned it. jaxviz checks the outputs of the "
            f"first call of each function; the "
            + (f"{ln.calls - 1}{'+' if ln.more else ''} " if ln.calls > 1 else "")
            + "later ones ran on JAX's fast path, unchecked."
        )
    else:
        msg = (
            f"{quoted(where)}`{ln.name}` holds {ln.kind} after the cell: a call of "
            f"`{ln.fn}` returned it. Its calls here ran on JAX's fast path, unchecked "
            f"(an earlier cell traced `{ln.fn}` with these argument types; jaxviz "
            f"checks the outputs of each function's first call when it traces it)."
        )
    return finding(
        "nan",
        msg,
        where,
        severity="error",
        hint=RULES["nan"].hint_for("later"),
        trace=ln.fn,
    )

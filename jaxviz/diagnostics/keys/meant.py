"""Keys reused on purpose: what makes a key consumed twice an info fact, with the reason.

A key consumed twice is a bug when the two draws are meant to be independent. Three shapes
of real code reuse a key because they want the same numbers, and say so in their structure:

  * a custom_jvp's primal and its JVP rule sample the same key (jaxopt's perturbations: the
    rule must see the primal's noise), `jvp_rule_pair`;
  * one key handed to two different functions that draw through the same sampling code, to
    build the same inputs for both (`a = solve_a(key); b = solve_b(key)`, both calling
    `make_problem(key)`: a benchmark of two solvers on one problem), `same_inputs`;
  * a fixed key a jitted function closes over (`test_rng = random.key(1)`), called at lines
    that collect its results rather than feed them back (`scores.append(evaluate(params,
    x))`): every evaluation sees the same noise, so scores compare, `fixed_closure`.

Two draws through one function from one key (`x1 = sample(key); x2 = sample(key)`), two
samplers on one key, and a loop that feeds a step's result back into it stay warnings.
The infos' messages are here too (`meant_static`, `meant_runtime`, `fixed_closure_info`).
"""

from __future__ import annotations

import ast
import linecache
from typing import Any

from jaxviz import _compat
from jaxviz.capture.places import is_user_file
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.keys.flow import KeyFlow
from jaxviz.diagnostics.keys.place import chain_frames
from jaxviz.diagnostics.keys.uses import FULL, reuse_info
from jaxviz.diagnostics.report import chain_line, place_label, quoted
from jaxviz.graph.files import shown_line
from jaxviz.graph.trace import Trace


def jvp_rule_pair(first_chain: tuple, second_chain: tuple) -> bool:
    """Both consumptions were staged while one custom JVP rule ran, one of them inside the
    rule's call of the primal (a `custom_jvp_call`): the primal and its rule, as designed."""
    if not first_chain or not second_chain:
        return False
    if not (
        _compat.in_custom_jvp_rule(first_chain[0]) and _compat.in_custom_jvp_rule(second_chain[0])
    ):
        return False
    return any(e.primitive.name == "custom_jvp_call" for e in first_chain + second_chain)


def same_inputs(first: tuple, second: tuple) -> tuple[str, str] | None:
    """(the first consumer's name, the second's) when one key reached the same sampling code
    (the innermost frames agree) through two different functions the user's code called;
    None otherwise. first, second: the consumptions' frames (`_compat.UserFrame`), outermost
    first."""
    if not first or not second or _at(first[-1]) != _at(second[-1]):
        return None
    k = 0
    while k < len(first) and k < len(second) and _at(first[k]) == _at(second[k]):
        k += 1
    if k >= len(first) or k >= len(second) or k + 1 >= min(len(first), len(second)):
        return None  # one code ran twice (a loop), or the sampler is the line itself
    a, b = first[k + 1].fn, second[k + 1].fn
    if a == b:
        return None  # one function called twice with one key: two equal "samples"
    return _short(a), _short(b)


def jit_same_inputs(first_fn: str, fn: str, traces: list) -> tuple[str, str, Any] | None:
    """Two different jitted functions of the user's consumed one key argument at run time:
    (their names, the sampling frame) when both consume it through the same code (each
    one's first consumption of a key input at one line: `make_problem(key)` in both)."""
    if first_fn == fn:
        return None
    sites = []
    for name in (first_fn, fn):
        t = next((t for t in traces if t.name == name and t.jaxpr is not None), None)
        frame = _input_sampler(t) if t is not None else None
        if frame is None:
            return None
        sites.append(frame)
    if _at(sites[0]) != _at(sites[1]):
        return None
    return _short(first_fn), _short(fn), sites[1]


def _input_sampler(t: Any) -> Any:
    """The innermost user frame of a jitted function's first full consumption of a key
    argument, or None."""
    for u in KeyFlow().run(t.jaxpr).uses:
        if u.vid[0] == "in" and len(u.vid) == 2 and u.kind == FULL:
            for eqn in reversed(u.chain):
                frames = _compat.user_frames(eqn)
                if frames:
                    return frames[-1]
            return None
    return None


def fixed_closure(t: Any, const_index: int) -> str | None:
    """A jitted function closes over a key and was called again: the key's name (or "")
    when every call's line collects the result (appends it, or binds a name the call does
    not read) and passes the call arguments that can change; None otherwise."""
    if not t.call_sites:
        return None
    for file, line, _n in t.call_sites:
        if not _collected(linecache.getline(file, line)):
            return None
    return _closed_name(t, const_index)


def _collected(code: str) -> bool:
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return False
    if len(tree.body) != 1:
        return False
    stmt = tree.body[0]
    value = getattr(stmt, "value", None)
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]
    if value is None or not any(c.args or c.keywords for c in calls):
        return False  # no arguments: every call is the same call
    reads = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    if isinstance(stmt, ast.Assign):
        bound = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        return not bound & reads  # `params = step(params)` feeds it back
    return isinstance(stmt, ast.Expr)  # `scores.append(evaluate(params, x))`


def _closed_name(t: Any, i: int) -> str:
    """The name the function's globals or closure give the closed-over key, or ""."""
    consts = _compat.jaxpr_consts(t.jaxpr) if t.jaxpr is not None else []
    key = consts[i] if 0 <= i < len(consts) else None
    fn = _compat.unwrap(t.fun) if t.fun is not None else None
    if key is None or fn is None:
        return ""
    names = dict(getattr(fn, "__globals__", {}) or {})
    code = getattr(fn, "__code__", None)
    for name, cell in zip(getattr(code, "co_freevars", ()), getattr(fn, "__closure__", None) or ()):
        try:
            names[name] = cell.cell_contents
        except ValueError:
            continue
    return next(
        (n for n, v in names.items() if (v is key or _compat.key_base(v) is key) and n[0] != "_"),
        "",
    )


def _at(f: Any) -> tuple:
    return (f.file, f.line)


def _short(fn: str) -> str:
    return fn.rsplit(".<locals>.", 1)[-1].rsplit(".", 1)[-1]


# --- the findings: keys reused on purpose are infos, with the reason ----------------------


def meant_static(r: Any, place: Any, t: Trace) -> Diagnostic | None:
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
        return reuse_info(msg, where, "jvp-pair")
    first, second = chain_frames(r.first.chain), chain_frames(r.second.chain)
    both = same_inputs(tuple(first), tuple(second))
    if both is None or where is None:
        return None
    first_at = place.first if place is not None else None
    return _same_inputs_info(where, first_at, both, second[-1])


def meant_runtime(r: Any, site: Any, first_at: Any, traces: list) -> Diagnostic | None:
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
    return reuse_info(
        msg,
        where,
        "same-inputs",
        related=rel + ((sampler.file, sampler.line, "consumed here"),),
    )


def fixed_closure_info(t: Trace, name: str, where: Any, rel: tuple, nodes: tuple) -> Diagnostic:
    src = f"the PRNG key `{name}`" if name else "a PRNG key"
    more = "+" if t.calls_uncounted else ""
    msg = (
        f"{quoted(where)}{t.name} closes over {src} and draws the same numbers at each of its "
        f"{t.calls}{more} calls; each call's result is collected, never fed back into a later "
        f"call: a fixed key, as for evaluation (common random numbers)."
    )
    return reuse_info(
        msg,
        where,
        "fixed-key",
        node_ids=nodes,
        related=rel,
    )

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
"""

from __future__ import annotations

import ast
import linecache
from typing import Any

from jaxviz import _compat
from jaxviz.diagnostics.keys import FULL, KeyFlow


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

"""nan: NaNs a later call made: a name the cell bound that holds a NaN, assigned from a
jitted function whose later calls ran unchecked (JAX's C++ fast path, on Python >= 3.12
every call after the first; see jaxviz.diagnostics.nans.watch). Read when the cell ends, on
the device where the values are (one transfer of flags per name on an accelerator)."""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Set
from typing import Any

from jaxviz import _compat
from jaxviz.diagnostics.nans.values import ARRAY, MAX_CHECK_BYTES, is_inexact, nonfinite

# --- names the cell bound ---------------------------------------------------------------------


def bound_names(source: str) -> dict[str, int]:
    """Top-level names a cell binds (assignments, loop targets, at any block depth outside
    functions and classes), each with the last line in the source that binds it."""
    return dict(_bound_names(source))


@functools.lru_cache(maxsize=64)  # a cell run again parses alike (~0.3 ms a cell)
def _statements(source: str) -> tuple[ast.stmt, ...]:
    """The cell's statements at any block depth, in order, outside functions and classes
    (their bodies are not the cell's); () when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    out: list[ast.stmt] = []

    def block(stmts: list) -> None:
        for st in stmts:
            out.append(st)
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                block(getattr(st, field, None) or [])
            for h in getattr(st, "handlers", None) or []:
                block(h.body)

    block(tree.body)
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _bound_names(source: str) -> tuple[tuple[str, int], ...]:
    out: dict[str, int] = {}

    def target(t: ast.AST, line: int) -> None:
        if isinstance(t, ast.Name):
            out[t.id] = line
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                target(e, line)
        elif isinstance(t, ast.Starred):
            target(t.value, line)

    for st in _statements(source):
        if isinstance(st, ast.Assign):
            for t in st.targets:
                target(t, st.lineno)
        elif isinstance(st, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            target(st.target, st.lineno)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            for item in st.items:
                if item.optional_vars is not None:
                    target(item.optional_vars, st.lineno)
    return tuple(out.items())


@functools.lru_cache(maxsize=64)
def _line_inputs(source: str) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """Each assignment's line (as bound_names walks them) and the names its value reads but
    the statement does not bind: `p2, l = step(params, batch)` reads params and batch;
    `params, l = step(params, batch)` only batch (params is also what it made)."""
    out: dict[int, tuple[str, ...]] = {}
    for st in _statements(source):
        if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and st.value:
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            bound = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            read = [
                n.id
                for n in ast.walk(st.value)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            ]
            out[st.lineno] = tuple(dict.fromkeys(n for n in read if n not in bound))
    return tuple(out.items())


@dataclasses.dataclass
class LaterNan:
    name: str  # the variable, "params"
    line: int  # the line that last assigned it
    kind: str  # "NaN" | "Inf"
    fn: str  # the captured function called there, "step"
    calls: int  # how often the cell called it
    more: bool = False  # more calls than counted (Python < 3.12: JAX's fast path, unseen)
    first_checked: bool = True  # False: none of its calls in the cell was checked


def later_nans(
    source: str,
    namespace: dict,
    traces: list,
    filename: str,
    checked_bad: Set[str] = frozenset(),
    max_leaves: int = 1000,
    unchecked: Set[int] = frozenset(),
) -> list[LaterNan]:
    """Names the cell bound that hold a NaN or Inf made by a call jaxviz did not check: the
    assigning line calls a captured function the cell called more than once, or whose
    calls all went unchecked (`unchecked`: ids of their open jaxprs), whose checked calls
    (named in `checked_bad` otherwise) returned only finite values."""
    called: dict[int, Any] = {}
    for t in traces:
        if t.name in checked_bad:  # e.g. the user fed it a NaN on purpose
            continue
        later = (
            getattr(t, "calls", 1) > 1
            or getattr(t, "calls_uncounted", 0)
            or (t.jaxpr is not None and id(_compat.open_jaxpr(t.jaxpr)) in unchecked)
        )
        for f, line, _n in getattr(t, "call_sites", ()):
            if f == filename and later:
                called.setdefault(line, t)
    if not called:
        return []
    import jax

    out = []
    budget = MAX_CHECK_BYTES

    def worst_in(value: Any) -> int:
        nonlocal budget
        worst = 0
        # (a name bound to one array, the usual case, is its own leaf)
        tree = (value,) if type(value) is ARRAY else jax.tree_util.tree_leaves(value)
        leaves: list[Any] = [x for x in tree[:max_leaves] if isinstance(x, jax.Array)]
        # on an accelerator: reduced there, every leaf's flag read in one transfer
        device = [x for x in leaves if not _compat.on_host(x) and is_inexact(x)]
        device = [x for x in device if isinstance(x, jax.Array) and not x.is_deleted()]
        if device:
            worst = _compat.read_flags(_compat.nonfinite_flags(device))
            leaves = [x for x in leaves if _compat.on_host(x)]
        for x in leaves:
            # (not jax.Array's nbytes property: np.prod of its shape)
            nbytes = _compat.aval_nbytes(_compat.aval_of(x))
            if nbytes > budget:
                continue
            budget -= nbytes
            worst = max(worst, nonfinite(x))
            if worst == 2:
                break
        return worst

    inputs = dict(_line_inputs(source))
    for name, line in bound_names(source).items():
        t = called.get(line)
        if t is None or name not in namespace:
            continue
        # a NaN the line's own inputs hold came in with them (data with a NaN), as the
        # first call's check would have said (its inputs were not NaN-free)
        worst = worst_in(namespace[name])
        if worst == 2 and any(
            n in namespace and worst_in(namespace[n]) == 2 for n in inputs.get(line, ())
        ):
            continue
        if worst == 2:  # an Inf kept on purpose (distances, -inf log-probs) is no sign
            first = t.jaxpr is None or id(_compat.open_jaxpr(t.jaxpr)) not in unchecked
            more = getattr(t, "calls_uncounted", False)
            out.append(LaterNan(name, line, "NaN", t.name, t.calls, more, first))
    return out

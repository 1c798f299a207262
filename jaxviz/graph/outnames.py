"""Names for a traced function's outputs, as its inputs have names.

An output is named from the function's return structure (JAX's result paths, `result[1]['w']`)
and, where the call's line assigns the result, from the caller's names for it:
`loss, grads = step(params, x)` names the outputs `loss` and `grads['w']`.

    >>> output_names(("result[0]", "result[1]['w']"), ["loss", "grads"])
    ['loss', "grads['w']"]
"""

from __future__ import annotations

import ast
import linecache
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

_RESULT = re.compile(r"^result(?:\[(\d+)\])?(.*)$")


def output_names(paths: Sequence[str], targets: Sequence[str] | None) -> list[str]:
    """One name per flat output: the caller's target with the rest of the result path, else the
    result path itself (`result[0]`); "" when neither is known.

    Args:
      paths: JAX's result paths, "result", "result[0]", "result[1]['w']".
      targets: what the call's line assigns the result to: ["loss", "grads"] for
        `loss, grads = f(...)`, ["out"] for `out = f(...)`; None when unknown.
    """
    out = []
    for p in paths:
        m = _RESULT.match(p)
        if not m:
            out.append("")
            continue
        idx, rest = m.group(1), m.group(2)
        if targets and len(targets) == 1:
            out.append(targets[0] + (f"[{idx}]" if idx is not None else "") + rest)
        elif targets and idx is not None and int(idx) < len(targets):
            out.append(targets[int(idx)] + rest)
        else:
            out.append(p)
    return out


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


class _Assigns(NamedTuple):
    """One file's assignments of calls, read once per version of its text."""

    lines: list[str]  # linecache's list: a new list when the file's text changes
    calls: list[tuple[int, int, str, ast.expr]]  # (first line, last line, callee, target)
    aliases: dict[str, set[str]]  # fn -> names bound to a wrapper of it (`j = jax.jit(fn)`)


_ASSIGNS: dict[str, _Assigns] = {}


def _assigns(filename: str) -> _Assigns | None:
    lines = linecache.getlines(filename)
    got = _ASSIGNS.get(filename)
    if got is not None and got.lines is lines:
        return got
    tree = _parse("".join(lines)) if lines else None
    if tree is None:
        return None
    calls: list[tuple[int, int, str, ast.expr]] = []
    aliases: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for a in node.value.args:  # `j = jax.jit(fn)`, `g = partial(fn, 1)`
                if isinstance(a, ast.Name):
                    aliases.setdefault(a.id, set()).update(
                        t.id for t in node.targets if isinstance(t, ast.Name)
                    )
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            target = node.targets[-1] if isinstance(node, ast.Assign) else node.target
            end = node.end_lineno or node.lineno
            calls.append((node.lineno, end, _callee(node.value), target))
    if len(_ASSIGNS) > 256:
        _ASSIGNS.clear()
    got = _ASSIGNS[filename] = _Assigns(lines, calls, aliases)
    return got


def _callee(node: ast.expr) -> str:
    """The called name of `f(...)`, `mod.f(...)`, `jax.jit(f)(...)` -> "f"."""
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Call):  # jax.jit(f)(x)
            return _callee(f.args[0]) if f.args else ""
        if isinstance(f, ast.Attribute):
            return f.attr
        if isinstance(f, ast.Name):
            return f.id
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def assign_targets(filename: str, line: int, fn: str) -> list[str] | None:
    """The names the statement at `filename:line` assigns a call of `fn` (or of a name bound to
    `jax.jit(fn)`) to: `loss, grads = step(...)` -> ["loss", "grads"]; None when that line is
    no such assignment (or its source is unknown). The source comes from linecache (cells are
    there too).
    """
    index = _assigns(filename) if fn else None
    if index is None:
        return None
    fn = fn.rsplit(".", 1)[-1]
    names = {fn} | index.aliases.get(fn, set())
    for first, last, callee, target in index.calls:
        if not (first <= line <= last) or callee not in names:
            continue  # (`t = jaxviz.trace(f, x)` does not name f's outputs)
        elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        if any(isinstance(e, ast.Starred) for e in elts):
            return None
        return [ast.unparse(e) for e in elts]
    return None


def graph_names(trace: Any) -> list[str]:
    """The names the graph gives a trace's flat outputs (`params['w']` for `params, loss =
    step(...)`), "" where it has none of the caller's (only JAX's `result[0]`)."""
    try:
        body = trace.graph.body
        names = [body.nodes[i].op or "" for i in body.outputs]
    except Exception:  # a trace without a graph: the outputs keep their paths
        return []
    return [n if not n.startswith("result") else "" for n in names]

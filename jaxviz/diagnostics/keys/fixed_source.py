"""key-reuse, fixed keys: the loop's source as the fixed-key check reads it: one file's
syntax tree, its calls by their span (a frame's call, found by its lasti), the loop that
runs a call again and the names each loop rebinds.
"""

from __future__ import annotations

import ast
import functools
import linecache
from collections.abc import Iterable
from typing import Any

from jaxviz import _compat

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)


class Index:
    """One file's syntax tree: calls by their span, each node's parent."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.parent: dict[ast.AST, ast.AST] = {}
        self.calls: dict[tuple, ast.Call] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
            if isinstance(node, ast.Call) and node.end_lineno is not None:
                span = (node.lineno, node.end_lineno, node.col_offset, node.end_col_offset)
                self.calls[span] = node
        self._rebound: dict[ast.AST, frozenset[str]] = {}

    def call_at(self, frame: Any) -> ast.Call | None:
        span = _compat.call_span(frame.code_id, frame.lasti)
        return self.calls.get(span) if span is not None else None

    def unit_of(self, node: ast.AST) -> ast.AST:
        """The function (or module) whose body holds `node`."""
        p = self.parent.get(node)
        while p is not None and not isinstance(p, _SCOPES):
            p = self.parent.get(p)
        return p if p is not None else self.tree

    def loop_of(self, node: ast.AST) -> ast.AST | None:
        """The innermost loop (or comprehension) of `node`'s function that runs it again."""
        child, p = node, self.parent.get(node)
        while p is not None and not isinstance(p, _SCOPES):
            if (
                isinstance(p, _LOOPS)
                and child is not getattr(p, "iter", None)
                and child not in getattr(p, "orelse", ())
            ):
                return p
            if isinstance(p, COMPS) and child is not p.generators[0].iter:
                return p
            child, p = p, self.parent.get(p)
        return None

    def rebound(self, loop: ast.AST) -> frozenset[str]:
        """The names a loop binds or changes in each iteration: its targets, assignments,
        and the containers its method calls or stores change (not modules: `random.normal`)."""
        hit = self._rebound.get(loop)
        if hit is None:
            bound = bound_names(self.unit_of(loop))
            names: set[str] = set()
            for n in _walk_scope(loop):
                if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                    names.add(n.id)
                elif isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(
                    n.ctx, (ast.Store, ast.Del)
                ):
                    b = base_name(n)
                    if b:
                        names.add(b)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                    b = base_name(n.func.value)
                    if b and b in bound:
                        names.add(b)
            hit = self._rebound[loop] = frozenset(names)
        return hit


def _walk_scope(node: ast.AST) -> Iterable[ast.AST]:
    """The nodes of `node`, not descending into nested functions and classes."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo.append(c)


def bound_names(unit: ast.AST) -> frozenset[str]:
    """The names a function (or module) binds itself: its parameters and assignment
    targets, not its imports (`random.split(k)` changes no `random`)."""
    names = {
        n.id
        for n in _walk_scope(unit)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    args = getattr(unit, "args", None)
    if args is not None:
        names.update(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
        names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    return frozenset(names)


def index_of(filename: str) -> Index | None:
    lines = linecache.getlines(filename)
    if not lines:
        return None
    return _parsed("".join(lines))


@functools.lru_cache(maxsize=16)
def _parsed(source: str) -> Index | None:
    try:
        return Index(ast.parse(source))
    except (SyntaxError, ValueError):
        return None


def base_name(node: ast.AST) -> str | None:
    """`a` of `a`, `a.b`, `a[i].c`."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None

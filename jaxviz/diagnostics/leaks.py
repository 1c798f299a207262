"""leaked-tracer: a tracer that escaped its transformation into state that outlives it.

Detection is one cheap scan after the cell: the cell's globals, the containers and objects
they hold (one level down; callable objects too), and the closure cells of the functions
they hold, looking for `jax.core.Tracer` instances. Only when one is found is the storing
line localised, from the source: the statement inside a function that writes to where the
tracer was found (`global g; g = ...`, `cache.append(...)`, `self.attr = ...`,
`nonlocal v; v = ...`). The function searched first is the one JAX was tracing when the
tracer was made (`_compat.tracer_origin`, or the "function being traced" of JAX's
UnexpectedTracerError), whose source may be an earlier cell's, read from linecache.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import types
import weakref
from collections.abc import Iterator, Mapping, Set
from typing import Any

import numpy as np

from jaxviz import _compat
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.errors import created_at, traced_function
from jaxviz.diagnostics.report import code_of, finding, quoted
from jaxviz.diagnostics.rules import RULES
from jaxviz.graph.trace import CellTrace, Trace

MAX_ITEMS = 2000  # items looked at in one container
_SKIP_NAMES = {"In", "Out", "exit", "quit", "get_ipython"}
_reported: dict[int, Any] = {}  # id(tracer) -> weakref, reported in an earlier cell


@dataclasses.dataclass
class Leak:
    where: str  # "global `g`", "`cache` (list)", "`model.state`"
    kind: str  # "global" | "container" | "attr" | "closure"
    name: str  # the global / container / closure variable name
    attr: str = ""  # for kind "attr": the attribute
    tracer_type: str = ""  # "JitTracer"
    aval: str = ""  # "f32[3]"
    origin: Any = None  # jaxviz._compat.TracerOrigin: the traced function that made it


# values that hold no tracer: skipped by their exact type
_ATOMS = frozenset(
    {int, float, complex, bool, str, bytes, type(None), np.ndarray, _compat.ARRAY_TYPE}
)

_NOT_OBJECTS = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    type,
    functools.partial,
    _compat.JIT_FUNCTION_TYPE,
)


def _items(c: Any) -> Iterator[Any]:
    it: Any
    if isinstance(c, dict):
        it = c.values()
    elif isinstance(c, (list, tuple, set, frozenset)):
        it = c
    else:
        return
    for i, v in enumerate(it):
        if i >= MAX_ITEMS:
            return
        yield v


def _is_new_tracer(x: Any, before: Mapping[int, Any] | None = None) -> bool:
    """A tracer not reported yet, and not there before the cell began (`before`)."""
    if not _compat.is_tracer(x):
        return False
    for seen in (_reported, before):
        r = seen.get(id(x)) if seen else None
        if r is not None and r() is x:
            return False
    return True


def _leak(x: Any, **kw) -> Leak:
    aval = getattr(x, "aval", None)
    return Leak(
        tracer_type=type(x).__name__,
        aval=_compat.short_type(aval) if aval else "",
        origin=_compat.tracer_origin(x),
        **kw,
    )


def _tracers(ns: dict) -> Iterator[tuple[Any, dict]]:
    """Every tracer the namespace holds, one level into containers, objects and closures,
    with where it was found (Leak's fields)."""
    is_tracer = _compat.is_tracer

    def at(where: str, kind: str, name: str, attr: str = "") -> dict:
        return {"where": where, "kind": kind, "name": name, "attr": attr}

    for name, v in list(ns.items()):
        if type(v) in _ATOMS:  # most of a namespace: numbers, strings, arrays (~1 us each)
            continue
        if name.startswith("_") or name in _SKIP_NAMES or isinstance(v, (types.ModuleType, type)):
            continue
        if is_tracer(v):
            yield v, at(f"global `{name}`", "global", name)
            continue
        if isinstance(v, (dict, list, tuple, set, frozenset)):
            held = f"`{name}` ({type(v).__name__})"
            yield from ((x, at(held, "container", name)) for x in _items(v) if is_tracer(x))
            continue
        fn = _compat.unwrap(v, partial=False) if isinstance(v, _compat.JIT_FUNCTION_TYPE) else v
        if isinstance(fn, types.FunctionType):
            for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
                try:
                    c = cell.cell_contents
                except ValueError:
                    continue
                if is_tracer(c):
                    yield c, at(f"`{var}` (closed over by {fn.__name__})", "closure", var)
                elif isinstance(c, (dict, list, tuple, set)):
                    held = f"`{var}` ({type(c).__name__} closed over by {fn.__name__})"
                    yield from ((x, at(held, "container", var)) for x in _items(c) if is_tracer(x))
            continue
        d = getattr(v, "__dict__", None)
        # objects of user classes, callable ones too (a model with __call__ that stores
        # `self.h = h`); never functions, methods, classes, modules or builtins
        if isinstance(d, dict) and not isinstance(v, _NOT_OBJECTS):
            for attr, x in list(d.items())[:MAX_ITEMS]:
                if is_tracer(x):
                    yield x, at(f"`{name}.{attr}`", "attr", name, attr)
                elif isinstance(x, (dict, list, tuple, set)):
                    held = f"`{name}.{attr}` ({type(x).__name__})"
                    yield from ((y, at(held, "container", attr)) for y in _items(x) if is_tracer(y))


def present_tracers(ns: dict) -> dict[int, Any]:
    """The tracers the namespace holds now (id -> weak reference): taken before a cell runs,
    so that the cell reports only the tracers it leaked, not those of earlier cells."""
    out: dict[int, Any] = {}
    for x, _where in _tracers(ns):
        try:
            out[id(x)] = weakref.ref(x)
        except TypeError:
            pass
    return out


def scan_namespace(
    ns: dict, before: Mapping[int, Any] | None = None, used: Set[str] = frozenset()
) -> list[Leak]:
    """Tracers held by the namespace, one level into containers, objects and closures: one
    Leak per place (a list a loop appended a tracer to per layer is one leak), for the
    tracers neither reported before nor there before the cell began (`before`), unless the
    cell used them (`used`: the names its failing line reads).

    Every tracer seen is then reported: a later cell reports a leak again only when it uses
    the leaked value (JAX raises UnexpectedTracerError there).
    """
    out: list[Leak] = []
    places: set[str] = set()
    seen: list[Any] = []
    for x, where in _tracers(ns):
        seen.append(x)
        if where["where"] in places or not _is_new_tracer(
            x, None if where["name"] in used else before
        ):
            continue
        places.add(where["where"])
        out.append(_leak(x, **where))
    for x in seen:
        try:
            _reported[id(x)] = weakref.ref(x)
        except TypeError:
            pass
    return out


_MUTATORS = {
    "append",
    "extend",
    "insert",
    "add",
    "update",
    "setdefault",
    "__setitem__",
    "appendleft",
}


def _stores(fn: ast.AST, leak: Leak) -> list[int]:
    """Lines of one function that store into where the leak was found."""
    lines: list[int] = []
    declared = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
    for node in ast.walk(fn):
        line: int = getattr(node, "lineno", 0)
        if not line:
            continue
        if leak.kind in ("global", "closure") and isinstance(
            node, (ast.Assign, ast.AugAssign, ast.AnnAssign)
        ):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and n.id == leak.name and leak.name in declared:
                        lines.append(line)
        if leak.kind == "container":
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATORS
                and _names(node.func.value, leak.name)
            ):
                lines.append(line)
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Subscript) and _names(t.value, leak.name):
                        lines.append(line)
        if leak.kind == "attr":
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if (
                            isinstance(n, ast.Attribute)
                            and n.attr == leak.attr
                            and isinstance(n.ctx, ast.Store)
                        ):
                            lines.append(line)
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "setattr"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == leak.attr
            ):
                lines.append(line)
    return lines


def _functions(tree: ast.AST) -> list[Any]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    ]


def store_lines(source: str, leak: Leak, prefer: Set[str] = frozenset()) -> list[int]:
    """Lines inside functions of `source` that store into where the leak was found."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    fns = _functions(tree)
    # the traced functions first, __init__ last (it sets attributes before any trace)
    fns.sort(
        key=lambda f: (getattr(f, "name", "") not in prefer, getattr(f, "name", "") == "__init__")
    )
    for fn in fns:
        lines = _stores(fn, leak)
        if lines:
            return sorted(set(lines))
    return []


def _file_tree(filename: str) -> ast.AST | None:
    import linecache

    source = "".join(linecache.getlines(filename))
    try:
        return ast.parse(source) if source else None
    except SyntaxError:
        return None


def _function_at(tree: ast.AST, name: str, line: int) -> ast.AST | None:
    """The function `name` whose first line (decorators included) or def line is `line`."""
    short = name.rsplit(".", 1)[-1]
    for fn in _functions(tree):
        first = min([fn.lineno] + [d.lineno for d in getattr(fn, "decorator_list", [])])
        if line in (fn.lineno, first) and getattr(fn, "name", "<lambda>") == short:
            return fn
    return None


def origin_store_lines(
    leaks: list[Leak], fn_name: str, filename: str, line: int, *, whole_file: bool = False
) -> tuple[str, list[int]] | None:
    """(file, lines) storing any of `leaks` in the traced function `fn_name` defined at
    `filename:line` (JAX's "the function being traced when the value leaked"); with
    whole_file, in any function of that file (a helper it called). The file may be an
    earlier cell: its source comes from linecache, where IPython and jaxviz register cells."""
    tree = _file_tree(filename)
    if tree is None:
        return None
    fn = _function_at(tree, fn_name, line)
    fns = ([fn] if fn is not None else []) + (_functions(tree) if whole_file else [])
    for lk in leaks:
        for f in fns:
            lines = _stores(f, lk)
            if lines:
                return filename, sorted(set(lines))
    return None


def leaks_read_by(code: str) -> list[Leak]:
    """The places a line reads that a leaked tracer could have been stored in: each name
    as a global or container, each attribute (`print(saved + 1)`: global `saved`)."""
    import re

    try:
        nodes = list(ast.walk(ast.parse(code.strip())))
    except SyntaxError:
        nodes = []
    names = [n.id for n in nodes if isinstance(n, ast.Name)] or re.findall(r"[A-Za-z_]\w*", code)
    attrs = [n.attr for n in nodes if isinstance(n, ast.Attribute)]
    out: list[Leak] = []
    for a in attrs:
        out.append(Leak(where=f"`.{a}`", kind="attr", name=a, attr=a))
    for n in dict.fromkeys(names):  # a global or nonlocal name, or a container
        out.append(Leak(where=f"global `{n}`", kind="global", name=n))
        out.append(Leak(where=f"`{n}`", kind="container", name=n))
    return out


def any_store_line(filename: str, fn_name: str, line: int) -> int | None:
    """The first statement in a traced function that stores outside it (a mutator call,
    an attribute or subscript store, a `global`/`nonlocal` name)."""
    tree = _file_tree(filename)
    fn = _function_at(tree, fn_name, line) if tree is not None else None
    if fn is None:
        return None
    declared = {
        n
        for node in ast.walk(fn)
        if isinstance(node, (ast.Global, ast.Nonlocal))
        for n in node.names
    }
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
        ):
            return node.lineno
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, (ast.Attribute, ast.Subscript)) or (
                    isinstance(t, ast.Name) and t.id in declared
                ):
                    return node.lineno
    return None


def _names(node: ast.AST, name: str) -> bool:
    """`cache`, `self.cache`, `obj.cache`: the expression ends in `name`."""
    if isinstance(node, ast.Name):
        return node.id == name
    if isinstance(node, ast.Attribute):
        return node.attr == name
    return False


# --- the findings: at the store that let the tracer escape -----------------------------------


def trace_leaks(t: Trace) -> list[Diagnostic]:
    """jaxviz.trace: tracers left in the globals the function names, or its closure."""
    fn = _compat.unwrap(t.fun)
    if not isinstance(fn, types.FunctionType):
        return []
    names = set(fn.__code__.co_names)
    for c in fn.__code__.co_consts:
        if isinstance(c, types.CodeType):
            names.update(c.co_names)
    ns = {k: fn.__globals__[k] for k in names if k in fn.__globals__}
    ns["__fn__"] = fn
    for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            ns[var] = cell.cell_contents
        except ValueError:
            pass
    leaks = scan_namespace({k: v for k, v in ns.items() if k != "__fn__"})
    if not leaks:
        return []
    try:
        import inspect
        import textwrap

        src = textwrap.dedent(inspect.getsource(fn))
        first = fn.__code__.co_firstlineno
    except (OSError, TypeError):
        src, first = "", 0
    return leak_findings(leaks, src, fn.__code__.co_filename, first - 1, t.name, None)


def _leak_place(store: tuple | None, used_at: tuple | None, created: tuple | None) -> tuple:
    """(where, related) of a leak: at the store that let the tracer escape, with where it
    was used; else where it was used (or made), with where it was made."""
    if store is not None:
        return store, (((used_at[0], used_at[1], "used here"),) if used_at else ())
    where = used_at or created
    if created is None or where == created:
        return where, ()
    return where, ((created[0], created[1], "the tracer was created here"),)


def leak_findings(
    leaks, source, filename, offset, trace, used_at, prefer: Set[str] = frozenset()
) -> list[Diagnostic]:
    """One finding per leak, at the store that let its tracer escape: searched in the traced
    function that made it, then in `source` (`filename`, lines from `offset`), then in the
    rest of that function's file; used_at: where the cell used a leaked tracer."""
    out = []
    for lk in leaks:
        # the traced function that made the tracer (maybe in an earlier cell), then the
        # source at hand, then the rest of the traced function's file
        o = lk.origin
        found = origin_store_lines([lk], o.fn, o.file, o.line) if o is not None else None
        if found is None:
            lines = store_lines(source, lk, prefer)
            found = (filename, [n + offset for n in lines]) if lines else None
        if found is None and o is not None and o.file != filename:
            found = origin_store_lines([lk], o.fn, o.file, o.line, whole_file=True)
        created = tuple(o.created) if o is not None and o.created else None
        where, rel = _leak_place((found[0], found[1][0]) if found else None, used_at, created)
        msg = (
            f"{quoted(where)}a {lk.tracer_type} ({lk.aval}) escaped its transformation into "
            f"{lk.where}; it holds no value and using it later raises UnexpectedTracerError."
        )
        out.append(
            finding(
                "leaked-tracer",
                msg,
                where,
                hint=RULES["leaked-tracer"].hint,
                related=rel,
                trace=trace,
            )
        )
    return out


def unlocated_leak(cell: CellTrace, used_at) -> list[Diagnostic]:
    """A leaked tracer used in this cell but not in its namespace (reported earlier, or no
    namespace): the store in the traced function JAX names, into what the use line reads;
    else the use, with where the tracer was created."""
    text = str(cell.error)
    tf = traced_function(text)
    created = created_at(text)
    where = None
    if tf is not None:
        code = code_of(*used_at) if used_at else ""
        found = origin_store_lines(leaks_read_by(code), *tf) if code else None
        if found is None and code:
            found = origin_store_lines(leaks_read_by(code), *tf, whole_file=True)
        line = found[1][0] if found is not None else any_store_line(tf[1], tf[0], tf[2])
        where = (tf[1], line) if line else None
    where, rel = _leak_place(where, used_at, created)
    msg = (
        f"{quoted(where)}a tracer escaped "
        + (f"{tf[0]} " if tf else "its transformation ")
        + "and was used later, where JAX raised UnexpectedTracerError."
    )
    return [finding("leaked-tracer", msg, where, hint=RULES["leaked-tracer"].hint, related=rel)]

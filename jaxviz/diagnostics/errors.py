"""Rules read from an exception: the concretization family, non-jax-type, use-after-donate,
nan when jax_debug_nans stopped the program (FloatingPointError), and sharding (JAX's
sharding errors, read in diagnostics/sharding.py).

JAX's exceptions carry no structured fields: the type, the message text and the traceback
(whose last user frame is the offending line) are all there is. Messages are matched on
stable phrases, never on URLs (they differ between JAX versions).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import jax

from jaxviz import _compat
from jaxviz.capture.places import is_library
from jaxviz.diagnostics import sharding
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.nans.causes import domain_of
from jaxviz.diagnostics.rules import RULES
from jaxviz.graph.trace import CellTrace

_TRACED = re.compile(r"while tracing the function (\S+) at (.+?):(\d+) for (\w+)")
_ARGS = re.compile(r"depends on the values? of the arguments? (.+?)\.(?:\s|$)")
_PATH = re.compile(r"passed to (?:the function at path (\S+?)|(\S+) at position (\d+))\.?(?:\s|$)")
_TYPE = re.compile(r"of type <class '([^']+)'>")
_DEBUG_NANS = re.compile(r"invalid value \((nan|inf)\) encountered in (\S+)")


def classify(exc: BaseException) -> tuple[str, str] | None:
    """(rule, short fact) for an exception in the misuse family, else None."""
    msg = str(exc)
    errs = jax.errors
    if isinstance(exc, errs.TracerBoolConversionError):
        return (
            "tracer-bool",
            "Python control flow (`if`, `while`, `and`, `bool()`) needs a "
            "concrete truth value, but the value is traced",
        )
    if isinstance(exc, errs.TracerIntegerConversionError):
        return "tracer-integer", "a traced value was used as a Python integer (`range`, an index)"
    if isinstance(exc, errs.TracerArrayConversionError):
        return (
            "tracer-array",
            "a traced value was converted to a numpy array (`np.asarray`, `np.*`)",
        )
    if isinstance(exc, errs.NonConcreteBooleanIndexError):
        return (
            "concretization",
            "boolean-mask indexing needs a concrete mask (its result's "
            "shape depends on the values), but the mask is traced",
        )
    if isinstance(exc, errs.UnexpectedTracerError):
        return "leaked-tracer", "a tracer escaped its transformation and was used later"
    if isinstance(exc, errs.ConcretizationTypeError):
        what = (
            "`int()`/`float()`"
            if "int` function" in msg or "float` function" in msg
            else "`.item()`"
            if "item()" in msg
            else "a Python value"
        )
        return "concretization", f"{what} needs a concrete value, but the value is traced"
    if isinstance(exc, TypeError):
        if "Shapes must be 1D sequences of concrete values" in msg:
            return "concretization", "an array shape was computed from a traced value"
        if "Error interpreting argument to" in msg or "is not a valid JAX type" in msg:
            return "non-jax-type", _non_jax_fact(msg)
    if isinstance(exc, FloatingPointError) and "encountered in" in msg:
        m = _DEBUG_NANS.search(msg)
        kind = "Inf" if m and m.group(1) == "inf" else "NaN"
        op = f"`{m.group(2)}`" if m else "an operation"
        domain = _stopped_domain(msg)  # an eager op's own NaN: sqrt of a negative value
        of = f" of {domain}" if domain else ""
        return (
            "nan",
            f"{kind} from {op}{of} here: jax_debug_nans stopped the program with "
            f"FloatingPointError ({msg.strip().splitlines()[0]})",
        )
    shard = sharding.classify(exc)
    if shard is not None:
        return "sharding", shard[1]
    if isinstance(exc, (RuntimeError, ValueError)) or type(exc).__name__ == "JaxRuntimeError":
        if "Array has been deleted" in msg or "has been deleted or donated" in msg:
            return "use-after-donate", "an array was used after it was donated to a jitted call"
        if "previously donated in the same call" in msg:
            return "use-after-donate", "an array was donated and passed again in the same call"
    return None


def _variant(rule: str, exc: BaseException, donated: Any, related: tuple) -> str:
    """The hint that fits: a NaN jax_debug_nans stopped outside its op's domain; a donated
    array read after a call whose result has a name of its own (`new = step(params)`,
    then `params`): the old value is wanted, so rebinding is no fix."""
    if rule == "nan":
        return "domain" if _stopped_domain(str(exc)) else ""
    if rule == "sharding":
        return (sharding.classify(exc) or ("", ""))[0]
    if rule == "use-after-donate" and donated is not None and donated.name and related:
        targets = _assigned_names(related[0][0], related[0][1])
        return "old-value" if targets and donated.name not in targets else ""
    return ""


def _assigned_names(filename: str, line: int) -> set[str]:
    """The names a line's assignment binds (`new, aux = step(params)`: {new, aux})."""
    import ast
    import linecache

    try:
        tree = ast.parse(linecache.getline(filename, line).strip())
    except SyntaxError:
        return set()
    stmt = tree.body[0] if tree.body else None
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return set()
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _stopped_domain(msg: str) -> str:
    """The values outside the domain of the op jax_debug_nans named, when it made a NaN
    ("a negative value" for sqrt); "" otherwise."""
    m = _DEBUG_NANS.search(msg)
    return domain_of(m.group(2)) if m and m.group(1) == "nan" else ""


def _non_jax_fact(msg: str) -> str:
    m_type = _TYPE.search(msg)
    typ = m_type.group(1) if m_type else "a non-array value"
    m = _PATH.search(msg)
    if m and m.group(1):
        return (
            f"argument `{m.group(1)}` is a {typ}, not a JAX type (array, scalar or pytree of them)"
        )
    if m and m.group(2):
        return f"argument {m.group(3)} of `{m.group(2)}` is a {typ}, not a JAX type"
    return f"a {typ} was passed where JAX needs an array"


def traced_context(msg: str) -> str:
    """ ", traced by jax.jit (argument x of f)" from JAX's message, or ""."""
    t = _TRACED.search(msg)
    a = _ARGS.search(msg)
    if not t:
        return ""
    fn = t.group(1)
    paths = _split_paths(a.group(1)) if a else []
    args_s = fold_paths(paths)
    word = "argument" if len(paths) == 1 else "arguments"
    return (
        f" (in {fn}, traced by {t.group(4)}"
        + (f"; it depends on {word} {args_s}" if args_s else "")
        + ")"
    )


def _split_paths(text: str) -> list[str]:
    """JAX's list of argument paths, "p['a'], p['b'], x, and y", as a list."""
    parts = re.split(r",\s+(?:and\s+)?|\s+and\s+", text.strip())
    return [p.strip() for p in parts if p.strip()]


_ROOT = re.compile(r"^[^\[.]+")
_STEP = re.compile(r"\[(?:'[^']*'|\"[^\"]*\"|[^\]]*)\]|\.[^\[.]+")
FOLD_AT = 4  # lists of more paths than this are folded by their common prefix


def _steps(path: str) -> list[str]:
    """The steps of a path: params['layers'][0] -> params, ['layers'], [0]."""
    m = _ROOT.match(path)
    if m is None:
        return [path]
    steps, rest = [m.group(0)], path[m.end() :]
    while rest:
        s = _STEP.match(rest)
        if s is None:  # a path jaxviz cannot read: one step
            return [path]
        steps.append(s.group(0))
        rest = rest[s.end() :]
    return steps


def fold_paths(paths: list[str], limit: int = FOLD_AT) -> str:
    """Argument paths as a short phrase: up to `limit` as they are, more grouped by their
    root argument, each group of several named by its common prefix and counted.

    >>> fold_paths(["x", "y"])
    'x and y'
    >>> fold_paths([f"params['layers'][{i}]['w']" for i in range(3)] + ["params['embed']",
    ...             "x", "y"])
    'params (4 arrays), x and y'
    >>> fold_paths([f"params['layers'][{i}]['w']" for i in range(44)])
    "params['layers'] (44 arrays)"
    """
    if len(paths) <= limit:
        parts = list(paths)
    else:
        groups: dict[str, list[list[str]]] = {}
        for p in paths:
            st = _steps(p)
            groups.setdefault(st[0], []).append(st)
        parts = []
        for members in groups.values():
            if len(members) == 1:
                parts.append("".join(members[0]))
                continue
            common: list[str] = []
            for step in zip(*members):
                if any(s != step[0] for s in step):
                    break
                common.append(step[0])
            parts.append(f"{''.join(common)} ({len(members)} arrays)")
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def traced_function(msg: str) -> tuple[str, str, int] | None:
    """(function, file, def line) of 'The function being traced when the value leaked was ...'."""
    m = re.search(r"leaked was (\S+) at (.+?):(\d+)", msg)
    return (m.group(1), m.group(2), int(m.group(3))) if m else None


def created_at(msg: str) -> tuple[str, int] | None:
    """(file, line) of 'The leaked intermediate value was created on line FILE:LINE:COL'."""
    m = re.search(r"was created on line (.+?):(\d+)(?::\d+)? \(", msg)
    return (m.group(1), int(m.group(2))) if m else None


def pick_frame(frames: list, prefer_file: str | None) -> tuple[str, int] | None:
    """The line the user must change: the innermost user frame not in an installed package,
    else the innermost frame in the cell."""
    for f, line, _fn in reversed(frames):
        if not is_library(f):
            return f, line
    for f, line, _fn in reversed(frames):
        if f == prefer_file:
            return f, line
    return (frames[-1][0], frames[-1][1]) if frames else None


@dataclasses.dataclass(frozen=True)
class DonatedUse:
    """Where a deleted (donated) array was passed on: the statement the user must change."""

    filename: str
    line: int
    name: str = ""  # the user's name for the array there, "old"; "" if none found
    type: str = ""  # "f32[4]"


MAX_LOCALS = 5000  # names looked at in one frame (a module's globals can be many)


def _user_tracebacks(exc: BaseException) -> list[Any]:
    """The traceback entries of the user's frames, outermost first. JAX's traceback
    filtering keeps the user's frames on the exception; the unfiltered ones, when kept,
    are on its __cause__ (JAX_TRACEBACK_FILTERING=remove_frames)."""
    out, seen = [], set()
    for e in (exc, exc.__cause__):
        tb = getattr(e, "__traceback__", None)
        while tb is not None:
            fr = tb.tb_frame
            if id(fr) not in seen and _compat.is_user_filename(fr.f_code.co_filename):
                seen.add(id(fr))
                out.append(tb)
            tb = tb.tb_next
        if out:
            break
    return out


def _values(frame: Any) -> list[tuple[str, Any]]:
    """(name, value) of a frame's locals, and one level into the lists, tuples and dicts
    they hold ("params['w']")."""
    out: list[tuple[str, Any]] = []
    try:
        items = list(frame.f_locals.items())[:MAX_LOCALS]
    except Exception:  # a frame whose locals cannot be read
        return out
    module = frame.f_code.co_name == "<module>"
    for k, v in items:
        # a cell's globals: not IPython's output history (`_`, `_3`, `Out`), not dunders
        if (
            not isinstance(k, str)
            or k.startswith("__")
            or (module and (k.startswith("_") or k in ("In", "Out")))
        ):
            continue
        out.append((k, v))
        if isinstance(v, dict):
            out.extend((f"{k}[{kk!r}]", vv) for kk, vv in list(v.items())[:100])
        elif isinstance(v, (list, tuple)):
            out.extend((f"{k}[{i}]", vv) for i, vv in enumerate(v[:100]))
    return out


def _is_deleted(x: Any) -> bool:
    if not isinstance(x, jax.Array) or _compat.is_tracer(x):
        return False
    try:
        return bool(x.is_deleted())
    except Exception:  # not a concrete array after all
        return False


def _params(code: Any) -> set[str]:
    """The parameter names of a code object (none for a module)."""
    import inspect

    if code.co_name == "<module>":
        return set()
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return set(code.co_varnames[:n])


def donated_use(exc: BaseException, prefer_file: str | None) -> DonatedUse | None:
    """The statement that passes on the deleted array the failing operation read, with the
    user's name for it there.

    The innermost user frame holding a deleted array names the array (`p` in the helper
    `loss`). The line to change is in the innermost frame that holds the same object other
    than through a parameter (it did not get it from its caller): the cell's
    `print(loss(old, x))`, as `old`; or, when a function donated and reused it, the line
    in that function. Without a deleted array in sight, the outermost statement of
    `prefer_file` (the cell, the script).
    """
    tbs = _user_tracebacks(exc)
    target = None
    typ = ""
    for tb in reversed(tbs):
        target = next((v for _n, v in _values(tb.tb_frame) if _is_deleted(v)), None)
        if target is not None:
            break
    if target is not None:
        try:
            typ = _compat.short_type(_compat.aval_of(target))
        except Exception:  # a deleted array's aval is out of reach on some versions
            typ = f"{getattr(target, 'dtype', '')}{list(getattr(target, 'shape', ()))}"
        holders: list[tuple[Any, list[str]]] = []
        for tb in tbs:
            names = [n for n, v in _values(tb.tb_frame) if v is target]
            if names:
                holders.append((tb, names))
        for tb, names in reversed(holders):
            params = _params(tb.tb_frame.f_code)
            if not any(n.split("[")[0] in params for n in names):
                return DonatedUse(tb.tb_frame.f_code.co_filename, tb.tb_lineno, names[0], typ)
        if holders:
            tb, names = holders[0]
            return DonatedUse(tb.tb_frame.f_code.co_filename, tb.tb_lineno, names[0], typ)
    top = [
        tb
        for tb in tbs
        if tb.tb_frame.f_code.co_filename == prefer_file
        and tb.tb_frame.f_code.co_name == "<module>"
    ]
    if top and prefer_file is not None:
        return DonatedUse(prefer_file, top[0].tb_lineno)
    return None


def error_diagnostic(
    exc: BaseException,
    frames: list,
    prefer_file: str | None,
    trace: str = "",
    related: tuple = (),
    donated: DonatedUse | None = None,
) -> Diagnostic | None:
    c = classify(exc)
    if c is None:
        return None
    rule, fact = c
    where = pick_frame(frames, prefer_file)
    if rule == "use-after-donate":
        use = donated if donated is not None else donated_use(exc, prefer_file)
        if use is not None:
            where = (use.filename, use.line)
            if use.name and "same call" not in fact:
                typ = f" ({use.type})" if use.type else ""
                fact = (
                    f"`{use.name}`{typ} was donated to a jitted call, which deleted its "
                    f"buffer, and is used again here"
                )
    if where is None:
        return None
    variant = _variant(rule, exc, donated, related)
    if rule == "sharding":
        if sharding.fed_back(exc, where[0], where[1]):  # `h = step(h)`: its own result
            variant = "fed-back"
            fact += (" (it is the step's own earlier result, fed back: laid out as its "
                     "out_shardings, or XLA, chose)")  # fmt: skip
        typed = sharding.operands(exc, where[0], where[1])
        fact += f"; here {typed}" if typed else ""
        made = sharding.default_explicit_mesh(exc, where[0]) if variant == "" else None
        if made is not None:  # (a mesh of JAX's default axes, in code written for Auto's)
            variant = "default-explicit"
            at = f"line {made[1]}" if made[0] == where[0] else f"{made[0]} line {made[1]}"
            fact += (f"; the mesh of {at} (`{made[2]}`) has explicit axes, "
                     "`jax.make_mesh`'s default when no axis_types are given")  # fmt: skip
    import linecache

    code = linecache.getline(where[0], where[1]).strip()
    ctx = traced_context(str(exc))
    message = f"`{code}`: {fact}{ctx}." if code else f"{fact}{ctx}."
    return Diagnostic(
        rule=rule,
        severity="warning" if rule == "nan" and fact.startswith("Inf") else RULES[rule].severity,
        message=message,
        filename=where[0],
        line=where[1],
        hint=RULES[rule].hint_for(variant),
        trace=trace,
        code=code,
        related=related,
    )


def donating_sites(cell: CellTrace, type_: str = "") -> tuple:
    """The calls that donate; when the deleted array's type is known, those that donate
    an argument of that type (all of them if none does)."""
    rel, matching = [], []
    for t in cell.traces:
        if any(t.donated):
            names = [n for n, d in zip(t.arg_names, t.donated) if d]
            b = t.graph.body
            types_ = {b.nodes[i].out[0].lstrip("~") for i, d in zip(b.inputs, t.donated) if d}
            for f, l, _n in t.call_sites[:2]:
                site = (f, l, f"{t.name} donates {', '.join(names)} here")
                rel.append(site)
                if type_ and type_.lstrip("~") in types_:
                    matching.append(site)
    return tuple(matching or rel)

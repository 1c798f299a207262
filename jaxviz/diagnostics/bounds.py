"""out-of-bounds: an index known when the program is staged, outside the array it indexes.

JAX does not raise on an out-of-bounds index (a documented sharp bit): `x[10]` on a length-5
array reads `x[4]` (dynamic_slice and gather clamp), `x.at[7].set(1.)` does nothing (scatter
drops the update), `jnp.take(x, 9)` returns NaN (gather fills). An index that is a constant
at trace time can be checked before anything runs:

  * Static (`out_of_bounds`): graph/walk.py's walk over a jaxpr whose values are the
    integer constants known at trace time (literals, small constant arrays, and what small
    integer ops make of them: jnp's negative-index arithmetic, broadcasts, concatenations),
    None for everything else. Each gather, scatter, dynamic_slice and dynamic_update_slice
    whose start indices are known is checked against its operand's static shape. Calls
    pass their known inputs on; loop bodies know only their consts; cond branches are
    walked with the operands.
  * Eager (`check`): the same check on a primitive run eagerly, whose indices are concrete.

A mode the user chose (`mode='drop'`, `mode='fill'`, `mode='clip'` on the line that
indexes, `chose_mode`) is on purpose: not reported. A gather in fill mode the user did not
choose (jnp.take's default) is reported: it returns the fill value (NaN) instead. An index
array is reported only when all its indices are outside: one padding index among in-range
ones (segment ids equal to num_segments, an edge list padded with the node count) is a
common way to drop or clamp on purpose.
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from jaxviz import _compat
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.report import chain_line, code_of, finding, quoted
from jaxviz.diagnostics.rules import RULES
from jaxviz.graph import walk
from jaxviz.graph.trace import CellTrace, Trace

MAX_KNOWN = 4096  # elements: larger constants are not followed (index arrays are small)
_INDEX_KINDS = "iub"  # numpy dtype kinds an index is made of: signed, unsigned, bool

INDEXING = frozenset(
    {
        "gather",
        "dynamic_slice",
        "dynamic_update_slice",
        "scatter",
        "scatter-add",
        "scatter-mul",
        "scatter-min",
        "scatter-max",
        "scatter_add",
        "scatter_mul",
        "scatter_min",
        "scatter_max",
    }
)


@dataclasses.dataclass(frozen=True)
class OutOfBounds:
    """One index outside its array, and what JAX does with it instead of raising."""

    op: str  # the primitive, "dynamic_slice"
    index: int  # the index as the user wrote it (negative ones counted from the end)
    axis: int  # the operand's axis it indexes
    size: int  # that axis's size
    width: int  # the slice's size along the axis (1 for an element)
    operand: str  # the indexed array's type, "f32[5]"
    effect: str  # "clamps" | "drops" | "fills"
    clamped: int  # where a clamped start lands

    def what(self) -> str:
        """ "index 10 is out of bounds for axis 0 of size 5 (f32[5])"."""
        if self.width > 1:
            start = f"a slice of {self.width} starting at {self.index}"
            return f"{start} does not fit axis {self.axis} of size {self.size} ({self.operand})"
        return (
            f"index {self.index} is out of bounds for axis {self.axis} of size {self.size} "
            f"({self.operand})"
        )

    def instead(self) -> str:
        """What JAX does instead of raising."""
        if self.effect == "drops":
            return f"`{self.op}` drops the update, so it changes nothing"
        if self.effect == "fills":
            return f"`{self.op}` returns the fill value (NaN for floats) instead"
        target = "the slice starting at" if self.width > 1 else "element"
        verb = "writes" if self.op.startswith(("scatter", "dynamic_update")) else "reads"
        return f"`{self.op}` clamps it, so this {verb} {target} {self.clamped}"


def unbatched(oob: OutOfBounds, name_stack: str, aval: Any) -> OutOfBounds:
    """The finding as the user's function sees it under `jax.vmap`: vmap's batching rules
    put each level's batch axis first on the operand (`window[-7]` of a length-6 window,
    vmapped over 2, indexes axis 1 of f32[2,6]), so the user's axis and shape drop them."""
    levels = name_stack.count("vmap(")
    shape = tuple(getattr(aval, "shape", ()) or ())
    if not levels or oob.axis < levels or len(shape) <= levels:
        return oob
    try:
        operand = _compat.short_type(aval.update(shape=shape[levels:]))
    except (AttributeError, TypeError):
        return oob
    return dataclasses.replace(oob, axis=oob.axis - levels, operand=operand)


# --- the check of one indexing primitive ------------------------------------------------------


def _mode(params: dict) -> str:
    m = params.get("mode")
    return str(getattr(m, "name", m) or "").upper()


def _first_bad(
    starts: np.ndarray, sizes: tuple[int, ...], widths: tuple[int, ...], dims: tuple[int, ...]
) -> tuple[int, int] | None:
    """(k, value) of the first start index outside its axis: starts[..., k] indexes operand
    axis dims[k], `widths[dims[k]]` wide. Of several index tuples, only when every one is
    outside: a padding index among in-range ones (segment ids equal to num_segments, an
    edge list padded with the node count) drops or clamps on purpose."""
    if starts.size == 0:
        return None
    flat = starts.reshape(-1, starts.shape[-1]) if starts.ndim else starts.reshape(1, 1)
    first: tuple[int, int] | None = None
    outside = np.zeros(flat.shape[0], dtype=bool)
    for k, d in enumerate(dims):
        if k >= flat.shape[1] or d >= len(sizes):
            break
        col = flat[:, k]
        bad = (col < 0) | (col + widths[d] > sizes[d])
        if bad.any() and first is None:
            first = k, int(col[int(np.argmax(bad))])
        outside |= bad
    return first if first is not None and outside.all() else None


def _finding(
    op: str, value: int, axis: int, size: int, width: int, operand: str, effect: str
) -> OutOfBounds:
    index = value - size if value < 0 else value  # jnp counts negative indices from the end
    clamped = min(max(value, 0), max(size - width, 0))
    return OutOfBounds(op, index, axis, size, width, operand, effect, clamped)


def check(name: str, params: dict, avals: list, values: list) -> OutOfBounds | None:
    """The out-of-bounds index of one indexing primitive, if one is known.

    avals: its inputs' avals; values: its inputs' known values (numpy arrays), None where
    unknown. A gather in fill mode the user chose, or any mode, is judged by the caller
    (`chose_mode`); here a fill-mode gather counts as "fills", a fill-or-drop scatter as
    "drops", every other mode as "clamps".
    """
    if name not in INDEXING or not avals:
        return None
    shape = tuple(getattr(avals[0], "shape", ()) or ())
    operand = _compat.short_type(avals[0])
    try:
        if name in ("dynamic_slice", "dynamic_update_slice"):
            first = 1 if name == "dynamic_slice" else 2
            widths = (
                tuple(params["slice_sizes"])
                if name == "dynamic_slice"
                else tuple(getattr(avals[1], "shape", ()))
            )
            for axis, v in enumerate(values[first : first + len(shape)]):
                if v is None or np.ndim(v) != 0:
                    continue
                s = int(v)
                if s < 0 or s + widths[axis] > shape[axis]:
                    return _finding(name, s, axis, shape[axis], widths[axis], operand, "clamps")
            return None
        idx = values[1] if len(values) > 1 else None
        if idx is None or not np.issubdtype(np.asarray(idx).dtype, np.integer):
            return None
        idx = np.asarray(idx)
        dn = params["dimension_numbers"]
        mode = _mode(params)
        if name == "gather":
            dims = tuple(dn.start_index_map)
            widths = tuple(params["slice_sizes"])
            effect = "fills" if mode.startswith("FILL") else "clamps"
        else:
            dims = tuple(dn.scatter_dims_to_operand_dims)
            upd = tuple(getattr(avals[2], "shape", ())) if len(avals) > 2 else ()
            skip = set(dn.inserted_window_dims) | set(getattr(dn, "operand_batching_dims", ()))
            window = iter(dn.update_window_dims)
            widths = tuple(1 if d in skip else upd[next(window)] for d in range(len(shape)))
            effect = "clamps" if mode == "CLIP" else "drops"
        bad = _first_bad(idx, shape, widths, dims)
        if bad is None:
            return None
        axis = dims[bad[0]]
        return _finding(name, bad[1], axis, shape[axis], widths[axis], operand, effect)
    except (KeyError, AttributeError, IndexError, StopIteration, TypeError, ValueError):
        return None  # a form of the primitive jaxviz does not know: no finding


# --- mode chosen on purpose ---------------------------------------------------------------


_PARSED: dict[str, tuple[int, list[tuple[int, int]]]] = {}  # file -> (len, mode= call spans)


def chose_mode(filename: str, line: int) -> bool:
    """Whether the statement at `line` passes `mode=` to a call (`x.at[7].set(1.,
    mode='drop')`): the out-of-bounds behaviour is then chosen on purpose."""
    lines = linecache.getlines(filename)
    if not lines:
        return False
    cached = _PARSED.get(filename)
    if cached is None or cached[0] != len(lines):
        spans = []
        try:
            tree = ast.parse("".join(lines))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and any(k.arg == "mode" for k in node.keywords):
                    spans.append((node.lineno, node.end_lineno or node.lineno))
        except (SyntaxError, ValueError):  # not Python as a whole: the line alone
            spans = [(i, i) for i, text in enumerate(lines, 1) if "mode=" in text]
        cached = _PARSED[filename] = (len(lines), spans)
    return any(a <= line <= b for a, b in cached[1])


# --- static: constants known at trace time ---------------------------------------------------


def _known(x: Any) -> np.ndarray | None:
    """A constant's value when it is a small integer or boolean array, else None."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        if isinstance(x, (bool, int, np.integer, np.bool_)):
            return np.asarray(x)
        return None
    try:
        if np.dtype(dt).kind not in _INDEX_KINDS:
            return None
    except TypeError:  # a key dtype
        return None
    size = int(np.prod(getattr(x, "shape", ()) or ()))
    if size > MAX_KNOWN or _compat.is_tracer(x):
        return None
    try:
        return np.asarray(x)
    except Exception:  # a deleted or otherwise unreadable array
        return None


def _broadcast(p: dict, x: np.ndarray) -> np.ndarray:
    shape = tuple(p["shape"])
    dims = list(p["broadcast_dimensions"])
    split = [1] * len(shape)
    for i, d in enumerate(dims):
        split[d] = x.shape[i]
    return np.broadcast_to(x.reshape(split), shape)


def _iota(p: dict) -> np.ndarray:
    shape, dim = tuple(p["shape"]), p["dimension"]
    ramp = np.arange(shape[dim], dtype=np.dtype(p["dtype"]))
    split = [1] * len(shape)
    split[dim] = shape[dim]
    return np.broadcast_to(ramp.reshape(split), shape)


def _slice(p: dict, x: np.ndarray) -> np.ndarray:
    strides = p.get("strides") or (1,) * x.ndim
    return x[
        tuple(slice(a, b, s) for a, b, s in zip(p["start_indices"], p["limit_indices"], strides))
    ]


def _div(p: dict, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not np.all(b):
        raise ZeroDivisionError
    return (np.abs(a) // np.abs(b)) * np.sign(a) * np.sign(b)  # lax.div rounds toward zero


def _rem(p: dict, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not np.all(b):
        raise ZeroDivisionError
    return np.fmod(a, b)  # lax.rem takes the dividend's sign


# primitive -> fn(params, *values): the small integer ops that index arithmetic is made of
_FOLD: dict[str, Callable[..., Any]] = {
    "add": lambda p, a, b: a + b,
    "sub": lambda p, a, b: a - b,
    "mul": lambda p, a, b: a * b,
    "neg": lambda p, a: -a,
    "abs": lambda p, a: np.abs(a),
    "sign": lambda p, a: np.sign(a),
    "max": lambda p, a, b: np.maximum(a, b),
    "min": lambda p, a, b: np.minimum(a, b),
    "div": _div,
    "rem": _rem,
    "lt": lambda p, a, b: a < b,
    "le": lambda p, a, b: a <= b,
    "gt": lambda p, a, b: a > b,
    "ge": lambda p, a, b: a >= b,
    "eq": lambda p, a, b: a == b,
    "ne": lambda p, a, b: a != b,
    "and": lambda p, a, b: a & b,
    "or": lambda p, a, b: a | b,
    "not": lambda p, a: np.invert(a),
    "select_n": lambda p, which, *cases: np.choose(np.asarray(which, dtype=np.int64), cases),
    "clamp": lambda p, lo, x, hi: np.clip(x, lo, hi),
    "convert_element_type": lambda p, a: a.astype(np.dtype(p["new_dtype"])),
    "broadcast_in_dim": lambda p, a, *dyn: _broadcast(p, a),
    "reshape": lambda p, a, *dyn: a.reshape(tuple(p["new_sizes"])),
    "squeeze": lambda p, a: np.squeeze(a, axis=tuple(p["dimensions"])),
    "expand_dims": lambda p, a: np.expand_dims(a, tuple(p["dimensions"])),
    "concatenate": lambda p, *xs: np.concatenate(xs, axis=p["dimension"]),
    "slice": _slice,
    "copy": lambda p, a: a,
    "copy_p": lambda p, a: a,
    "iota": lambda p: _iota(p),
}


class Found(NamedTuple):
    chain: tuple  # the equations from the root jaxpr down to the indexing one
    oob: OutOfBounds


class _Scope(NamedTuple):
    walker: walk.Walker
    found: list[Found]
    chain: tuple  # the equations from the root jaxpr down to this jaxpr's caller


def _evaluate(scope: _Scope, eqn: Any, invals: list) -> list:
    """The default rule: checks an indexing equation; folds a small integer op whose
    inputs are all known; anything else is unknown."""
    name = eqn.primitive.name
    n = len(eqn.outvars)
    if name in INDEXING:
        oob = check(name, eqn.params, [v.aval for v in eqn.invars], invals)
        if oob is not None:
            oob = unbatched(oob, _compat.name_stack(eqn), eqn.invars[0].aval)
            scope.found.append(Found(scope.chain + (eqn,), oob))
        return [None] * n
    fold = _FOLD.get(name)
    if fold is None or any(v is None for v in invals):
        return [None] * n
    ins = [np.asarray(v) for v in invals]
    if any(a.dtype.kind not in _INDEX_KINDS for a in ins):
        return [None] * n  # index arithmetic only: a float (a tolerance, inf) is not followed
    try:
        with np.errstate(all="ignore"):  # wraps as XLA's integers do; nothing to the user's stderr
            out = np.asarray(fold(eqn.params, *ins))
    except Exception:  # a form jaxviz does not fold (dynamic shapes, odd dtypes): unknown
        return [None] * n
    if out.dtype.kind not in _INDEX_KINDS:  # convert_element_type to a float
        return [None] * n
    return [out if out.size <= MAX_KNOWN else None]


def _call(scope: _Scope, eqn: Any, invals: list) -> list:
    """jit, closed_call, remat, custom_jvp/vjp, ...: the body sees the known inputs."""
    subs = _compat.sub_jaxprs(eqn)
    outs: list = [None] * len(eqn.outvars)
    if not subs:
        return _evaluate(scope, eqn, invals)
    inner = scope._replace(chain=scope.chain + (eqn,))
    return scope.walker.enter(subs[0], inner, invals, outs, _consts(subs[0].jaxpr))


def _cond(scope: _Scope, eqn: Any, invals: list) -> list:
    """cond: every branch may run; each is checked with the operands."""
    inner = scope._replace(chain=scope.chain + (eqn,))
    for s in _compat.sub_jaxprs(eqn):
        scope.walker.enter(s, inner, invals, [None] * len(eqn.outvars), _consts(s.jaxpr))
    return [None] * len(eqn.outvars)


def _loop(scope: _Scope, eqn: Any, invals: list) -> list:
    """scan, while: a body knows its consts only (carry and xs change every iteration)."""
    inner = scope._replace(chain=scope.chain + (eqn,))
    for s in _compat.sub_jaxprs(eqn):
        if eqn.primitive.name == "scan":
            nconsts = _compat.scan_counts(eqn)[0]
        else:
            nconsts = eqn.params["cond_nconsts" if s.role == "cond" else "body_nconsts"]
        ins = [
            invals[m] if k < nconsts and 0 <= m < len(invals) else None
            for k, m in enumerate(s.in_map)
        ]
        scope.walker.walk(s.jaxpr, inner, ins, _consts(s.jaxpr))
    return [None] * len(eqn.outvars)


def _consts(jaxpr: Any) -> list:
    return [_known(c) for c in _compat.jaxpr_consts(jaxpr)]


_RULES = walk.rules(call=_call, loop=_loop, cond=_cond)


def out_of_bounds(jaxpr: Any) -> list[Found]:
    """Every indexing equation of `jaxpr` (and its sub-jaxprs) whose index, known at trace
    time, is out of bounds; with the chain of equations that leads to it."""
    found: list[Found] = []
    walker = walk.Walker(_RULES, _evaluate, strict=False)
    j = _compat.open_jaxpr(jaxpr)
    walker.walk(jaxpr, _Scope(walker, found, ()), [None] * len(j.invars), _consts(jaxpr))
    return found


def known_values(args: tuple | list) -> list:
    """The known values of an eager primitive's inputs (small integer arrays)."""
    return [_known(a) for a in args]


class BoundsWatch:
    """Eager indexing ops whose concrete index is out of bounds: one finding per line."""

    def __init__(self) -> None:
        self.findings: list[tuple[tuple[str, int], OutOfBounds]] = []  # (file, line), what
        self._lines: set[tuple[str, int]] = set()

    def on_eager(self, name: str, args: tuple, params: dict, frame: Any) -> None:
        try:
            avals = [_compat.aval_of(a) for a in args[:3]]
        except Exception:  # an input JAX has no type for: nothing to check
            return
        oob = check(name, params, avals, known_values(args))
        if oob is None:
            return
        oob = unbatched(oob, _compat.current_name_stack(), avals[0])
        site = _compat.call_site(frame)
        if site is None or site in self._lines:
            return
        self._lines.add(site)
        self.findings.append((site, oob))


# --- the findings: at the line that indexes, unless it chose a mode ---------------------------


def _oob_message(where: tuple[str, int] | None, oob: OutOfBounds, name: str = "") -> str:
    inside = f" in {name}" if name else ""
    return f"{quoted(where)}{oob.what()}{inside}: JAX does not raise; {oob.instead()}."


def _oob_hint(oob: OutOfBounds, where: tuple[str, int]) -> str:
    """lax.dynamic_slice and dynamic_update_slice, called by the line, have no mode=: their
    own hint (`x[10]` is a dynamic_slice too, but `x.at[10].get(mode=...)` has one)."""
    own = oob.op.startswith("dynamic_") and oob.op in code_of(*where)
    return RULES["out-of-bounds"].hint_for("slice" if own else "")


def static_out_of_bounds(t: Trace) -> list[Diagnostic]:
    """Indices known at trace time outside their array, at the line that indexes, unless
    that line chose a mode (mode='drop', 'fill', 'clip')."""
    out, seen = [], set()
    for f in out_of_bounds(t.jaxpr):
        where = chain_line(f.chain)
        if where is None and t.call_sites:
            where = t.call_sites[0][:2]
        if where is None or where in seen or chose_mode(*where):
            continue
        seen.add(where)
        index = t.graph.eqn_ids()  # the graph: built for a finding only
        nodes = tuple(index[id(e)] for e in reversed(f.chain) if id(e) in index)[:1]
        name = t.name if t.kind in ("jit", "trace") else ""
        out.append(
            finding(
                "out-of-bounds",
                _oob_message(where, f.oob, name),
                where,
                hint=_oob_hint(f.oob, where),
                node_ids=nodes,
                trace=t.name,
            )
        )
    return out


def eager_out_of_bounds(obs: Any, cell: CellTrace) -> list[Diagnostic]:
    """Eager indexing ops whose concrete index was out of bounds, at the user's line."""
    out = []
    for where, oob in obs.bounds.findings:
        if chose_mode(*where):
            continue
        # the node of the eager statement's trace that ran it (names repeat: one
        # statement's ops split by a jitted call make two traces), which lists it too
        t, node = next(
            (
                (t, f"{b.id}:{n.id}")
                for t in cell.traces
                if t.kind == "eager"
                for b in t.graph.bodies
                for n in b.nodes
                if n.op == oob.op and n.loc is not None and (n.loc.file, n.loc.line) == where
            ),
            (None, ""),
        )
        d = finding(
            "out-of-bounds",
            _oob_message(where, oob),
            where,
            hint=_oob_hint(oob, where),
            node_ids=(node,) if node else (),
            trace=t.name if t is not None else "",
        )
        if t is not None:
            t.diagnostics.append(d)
        out.append(d)
    return out

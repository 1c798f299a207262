"""The collectives of eager work: ops a cell runs on sharded arrays outside `jax.jit`.

`jnp.sum(x)` of an array sharded over `x`, `x @ w` contracting a sharded dimension, an
eager `jax.shard_map(...)(x)` with a `psum`: JAX compiles one small program per op (a jnp
function's jit, a primitive's), and XLA's partitioner puts collectives in it as in any
jitted function's. They are read from the executables JAX's dispatch compiles while the
cell runs (`_compat.watching_compiles`): nothing is compiled or run again, and on one device
nothing is kept (a look at the program's shardings, ~1 us a compile).

`EagerPrograms` is the capture's observer: at a compile (or a Python-path call that reuses
a program compiled before, `on_reused`) of a program on several devices whose optimised HLO
holds a collective, it keeps the HLO's text, the mesh and the cell's line (no executable, no
array). `eager_collectives` reads them after the cell, each collective as a jitted
function's (jaxviz.mesh.collectives), at the user's line of the op it serves.
"""

from __future__ import annotations

import dataclasses
import linecache
import sys
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from jaxviz import _compat
from jaxviz.graph.nodeindex import NodeIndex
from jaxviz.mesh.collectives import Collective, Facts, collectives
from jaxviz.mesh.layout import Mesh, mesh_of, spec_text

_WORDS = tuple(_compat.COLLECTIVES)
# programs read before, by executable (a reused one costs a look-up): its kept parts, or
# None for one without collectives or on one device
_seen: weakref.WeakKeyDictionary[Any, tuple[str, Mesh, tuple[str, ...]] | None] = (
    weakref.WeakKeyDictionary()
)


@dataclasses.dataclass(frozen=True)
class EagerProgram:
    """A program JAX compiled (or reused) for eager work while the cell ran, with collectives."""

    name: str  # "_reduce_sum": the jitted function's name ("jit(_reduce_sum)" to JAX)
    line: int  # the cell's (the script's) top-level line that ran it
    hlo: str  # its optimised HLO text
    mesh: Mesh
    outs: tuple[str, ...]  # its outputs' shardings, "P()" ("" when unknown)
    reused: bool = False  # compiled before the call: its HLO's lines are its first call's
    on_stack: frozenset[tuple[str, int]] = frozenset()  # (file, line) of the call's frames


@dataclasses.dataclass(frozen=True)
class EagerCollectives:
    """The collectives of one eager program: `python -m jaxviz --text` lists them at their
    lines, the notebook's memory tab under the trace that ran them."""

    program: str  # "_reduce_sum"
    line: int  # the cell's line that ran it
    mesh: Mesh
    collectives: tuple[Collective, ...]
    trace: str = ""  # the name of the cell's trace that ran it ("" when none was seen)
    hlo: str = dataclasses.field(default="", repr=False, compare=False)  # (for --profile)

    @property
    def total_bytes(self) -> int:
        return sum(c.total_bytes for c in self.collectives)


class EagerPrograms:
    """The capture's observer of compiled programs (`on_compiled`, `on_reused`)."""

    def __init__(self, top_filename: str | None = None) -> None:
        self.top_filename = top_filename or ""
        self.programs: list[EagerProgram] = []
        self.lines: set[int] = set()  # the cell's lines where XLA compiled a program
        self._told: set[tuple[str, int]] = set()  # (its HLO, line): each program once a line

    def on_compiled(self, name: str, executable: Any, line: int) -> None:
        self._look(name, executable, line, reused=False)

    def on_reused(self, name: str, executable: Any, line: int) -> None:
        self._look(name, executable, line, reused=True)

    def _look(self, name: str, executable: Any, line: int, reused: bool) -> None:
        if not reused:
            self.lines.add(line)
        try:
            kept = _seen[executable]
        except KeyError:
            kept = _read(executable)
            try:
                _seen[executable] = kept
            except TypeError:  # not weakly referenced: read again next time
                pass
        except TypeError:
            kept = _read(executable)
        if kept is None or (kept[0], line) in self._told:
            return
        self._told.add((kept[0], line))
        hlo, mesh, outs = kept
        stack = _stack(sys._getframe(2)) if reused else frozenset()
        self.programs.append(
            EagerProgram(_bare(name), line, hlo, mesh, outs, reused=reused, on_stack=stack)
        )


def _read(executable: Any) -> tuple[str, Mesh, tuple[str, ...]] | None:
    """(HLO text, mesh, its outputs' shardings) of a program on several devices whose HLO
    holds a collective; None otherwise (one device: a look at its shardings, nothing more)."""
    ins, outs = _compat.program_shardings(executable)
    if _compat.on_devices(ins + outs) <= 1:
        return None
    mesh = mesh_of(ins + outs)
    if mesh is None:
        return None
    hlo = _compat.program_hlo(executable)
    if not any(w + "(" in hlo or w + "-start(" in hlo for w in _WORDS):
        return None
    specs = []
    for s in outs:
        axes = _compat.sharding_axes(s, len(getattr(s, "spec", ()) or ()))
        specs.append(spec_text(axes) if axes is not None else "")
    return hlo, mesh, tuple(specs)


def _stack(frame: Any) -> frozenset[tuple[str, int]]:
    out = set()
    while frame is not None:
        out.add((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return frozenset(out)


def _bare(name: str) -> str:
    """ "jit(_reduce_sum)" -> "_reduce_sum"."""
    return name[4:-1] if name.startswith("jit(") and name.endswith(")") else name


def eager_collectives(
    programs: Iterable[EagerProgram], skip: frozenset[str], filename: str = "",
    traces: Sequence[Any] = (),
) -> tuple[EagerCollectives, ...]:  # fmt: skip
    """Each program's collectives, at the user's line of the op each serves, largest first;
    `skip`: the names of the user's own jitted functions (their compiled memory reports list
    theirs); `filename`: the cell's, for the line of a program XLA kept no source for;
    `traces`: the cell's, the one that ran each program named (its graph: the op's nodes)."""
    out = []
    for p in programs:
        if p.name in skip:
            continue
        try:
            module = _compat.parse_hlo_module(p.hlo)
            k, cs = _read_with(module, p, traces)
        except Exception:  # an HLO form not read: the cell's other findings stand
            continue
        cs = tuple(_placed(c, p, filename) for c in cs)
        if k is None and p.reused and cs:  # compiled for another cell: its ops at this line
            k, cs = _at_line(cs, p, traces)
        if cs:
            name = traces[k].name if k is not None else ""
            out.append(EagerCollectives(p.name, p.line, p.mesh, cs, name, p.hlo))
    return tuple(sorted(out, key=lambda e: (-e.total_bytes, e.line)))


def _read_with(
    module: Any, p: EagerProgram, traces: Sequence[Any]
) -> tuple[int | None, tuple[Collective, ...]]:
    """(the trace, the collectives read against its graph): of the traces that may have run
    the program (the function of its name called at its line, the eager statement there),
    the first whose graph has the ops its collectives serve; none (jax 0.10.2's eager
    shard_map stages its body nowhere the capture sees): read without a graph."""
    for k in trace_indices(p.name, p.line, traces):
        cs = collectives(module, getattr(traces[k], "graph", None), _facts(p))
        if _serves(traces[k], cs):
            return k, cs
    return None, collectives(module, None, _facts(p))


def _facts(p: EagerProgram) -> Facts:
    """The program's mesh and its outputs' shardings (a reshard an output's layout asked
    for: an eager op's `out_sharding=`)."""
    one = len(p.outs) == 1
    return Facts(p.mesh, outputs=tuple(
        ("result" if one else f"result[{k}]", sh) for k, sh in enumerate(p.outs)
    ))  # fmt: skip


def _at_line(
    cs: tuple[Collective, ...], p: EagerProgram, traces: Sequence[Any]
) -> tuple[int | None, tuple[Collective, ...]]:
    """A reused program's collectives with the nodes of their ops at the line that ran them
    now (its HLO names the cell that compiled it: a notebook's earlier run), in the first
    trace that has them all."""
    for k in trace_indices(p.name, p.line, traces):
        nodes = NodeIndex(getattr(traces[k], "graph", None))
        found = [nodes.lookup(c.op, [(c.file, c.line)], c.op_name) for c in cs]
        if all(found):
            return k, tuple(
                dataclasses.replace(c, node_ids=tuple(f[:8])) for c, f in zip(cs, found)
            )
    return None, cs


def trace_indices(name: str, line: int, traces: Sequence[Any]) -> list[int]:
    """The traces of `traces` that may have run program `name` at the cell's `line`: the
    jitted functions of that name called there (a jnp function's), then the eager
    statements there (an eager shard_map's body, a primitive's op)."""

    def at(t: Any) -> bool:
        return any(len(s) > 1 and s[1] == line for s in getattr(t, "call_sites", ()) or ())

    named = [k for k, t in enumerate(traces) if getattr(t, "name", None) == name and at(t)]
    eager = [k for k, t in enumerate(traces) if getattr(t, "kind", "") == "eager" and at(t)]
    return named + eager


def trace_index(e: EagerCollectives, traces: Sequence[Any]) -> int | None:
    """The position in `traces` of the trace that ran `e`'s program (None: not among them)."""
    for k in trace_indices(e.program, e.line, traces):
        if traces[k].name == e.trace and _serves(traces[k], e.collectives):
            return k
    return None


def _serves(trace: Any, cs: Sequence[Collective]) -> bool:
    """Whether the trace's graph has the op each collective serves (its first node's)."""
    graph: Any = getattr(trace, "graph", None)
    for c in cs:
        try:
            b, n = (int(x) for x in c.node_ids[0].split(":"))
            if c.op and graph.bodies[b].nodes[n].op != c.op:
                return False
        except Exception:  # no node, no graph
            return False
    return True


def _placed(c: Collective, p: EagerProgram, filename: str) -> Collective:
    """The collective at the line that ran it: XLA's source where it kept one (a reused
    program's only where that line is on the call's stack, or a shard_map body's op, whose
    line is the body's wherever it is called), else the cell's line; a `jax.device_put` onto
    another sharding (JAX's `_identity_fn`) named as what asked for it."""
    if p.name == "_identity_fn":  # JAX's copy onto another sharding: what the line called
        return _asked_layout(c, p, filename)
    # a shard_map body's op is at its own line, wherever called: in this file (a notebook's
    # earlier run of the cell is another "<cell N>": the line of this one's statement)
    body = c.cause == "shard_map" and (c.file == filename or not c.file.startswith("<"))
    here = bool(c.file) and (not p.reused or body)
    if here or (c.file and (c.file, c.line) in p.on_stack):
        return c
    if not filename or not p.line:
        return c
    at = f" at line {c.line}" if c.line and c.line != p.line else ""
    reason = c.reason.replace(at, f" at line {p.line}") if at else c.reason
    return dataclasses.replace(c, file=filename, line=p.line, fn="", reason=reason)


# the session's eager statements whose programs held collectives, by (statement, signature):
# run again, JAX's C++ fast path serves a program of its own jits unseen (jax 0.12's eager
# shard_map body, a primitive's op), and the statement's are those it read before (HLO text
# only; the most recent MEMO kept)
_MEMO: dict[tuple[str, str], tuple[EagerProgram, ...]] = {}
MEMO = 256


# what a line calls that JAX runs as `_identity_fn` onto another sharding, and the cause
_LAYOUT_CALLS = (
    ("with_sharding_constraint(", "with_sharding_constraint", "constraint"),
    ("reshard(", "jax.reshard", "constraint"),
    ("device_put(", "jax.device_put", "output"),
)


def _asked_layout(c: Collective, p: EagerProgram, filename: str) -> Collective:
    """A reshard of JAX's `_identity_fn` (an eager `with_sharding_constraint`, `jax.reshard`
    or `jax.device_put` onto another sharding), named by what the cell's line calls."""
    text = linecache.getline(filename, p.line) if filename and p.line else ""
    what, cause = next(((w, k) for call, w, k in _LAYOUT_CALLS if call in text),
                       ("a copy onto another sharding", "output"))  # fmt: skip
    to = f" to {p.outs[0]}" if p.outs and p.outs[0] else ""
    return dataclasses.replace(
        c, file=filename or c.file, line=p.line, fn="", op=what.rsplit(".", 1)[-1],
        cause=cause, reason=f"{what}{to} at line {p.line}", cause_line=p.line,
    )  # fmt: skip


def of_cell(
    programs: Iterable[EagerProgram], traces: Iterable[Any], filename: str = "",
    seen: frozenset[int] | set[int] = frozenset(),
) -> tuple:  # fmt: skip
    """The cell's eager collectives: its programs', less the user's own jitted functions'
    (their compiled memory reports list those); an eager statement whose programs JAX served
    unseen (the cell run again, nothing compiled at its line: `seen`, the lines where XLA
    compiled a program; another mesh, other shapes compile anew) has those of its last run."""
    traces = list(traces)
    own = frozenset(t.name for t in traces if t.kind == "jit" and getattr(t, "user_code", None))
    programs = list(programs)
    found = eager_collectives(programs, own, filename, traces)
    had = {e.trace for e in found}
    again: list[EagerProgram] = []
    for t in traces:
        key = _statement(t)
        if key is None:
            continue
        if t.name in had:  # (its programs, for its next run)
            mine = [p for p in programs if p.line == _line(t)]
            _MEMO[key] = tuple(mine)
            while len(_MEMO) > MEMO:
                del _MEMO[next(iter(_MEMO))]
        elif key in _MEMO and _line(t) not in seen:  # (compiled there: what it compiled)
            line = _line(t)
            again += [dataclasses.replace(p, line=line, reused=True) for p in _MEMO[key]]
    if again:
        found = tuple(sorted(
            found + eager_collectives(again, own, filename, traces),
            key=lambda e: (-e.total_bytes, e.line),
        ))  # fmt: skip
    return found


def _line(t: Any) -> int:
    sites = getattr(t, "call_sites", ()) or ()
    return int(sites[0][1]) if sites and len(sites[0]) > 1 else 0


def _statement(t: Any) -> tuple[str, str] | None:
    """(the eager statement's text, its signature): the same statement run again on arrays
    of the same types and shardings; None for another trace."""
    if getattr(t, "kind", "") != "eager":
        return None
    try:
        return t.name.split(": ", 1)[-1], str(t.signature)
    except Exception:  # a trace without a graph
        return None

"""Where the compiled program's memory goes, without running it.

`memory_report(trace)` compiles the trace's jitted function (as `Trace.compile()` does),
reads the optimised, scheduled HLO and simulates every buffer's lifetime over XLA's
schedule: parameters and outputs are allocated for the whole run, every other buffer from the
instruction that writes it to its last reader (tuples, get-tuple-element, bitcasts and while
loops' state share their operands' buffers; fusions allocate their output only; a while,
conditional or call adds its body's own temporaries at its step; temporaries share an
operand's or an output's allocation as XLA's buffer assignment does; docs/memory.md). That
gives

- a timeline: live bytes at each step of the schedule, as XProf's memory viewer draws it;
- the buffers live at the peak, largest first, each with its category and where it came
  from: the argument path for arguments, the user's line (XLA's op metadata) for the rest,
  and the graph nodes of that line;
- per-argument donation savings, measured by compiling again with the argument donated (or
  not donated) and comparing XLA's figures (jaxviz.memory.whatif).

The totals reconcile with `compiled.memory_analysis()`: arguments + outputs + temporaries -
aliased, see `MemoryReport.reconciled`. The text twin is `str(report)`.

    >>> import jax, jax.numpy as jnp, jaxviz
    >>> r = jaxviz.trace(lambda x: (x @ x).sum(), jnp.ones((256, 256))).memory()
    >>> r.buffers[0].category
    'argument'
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from jaxviz import _compat
from jaxviz.capture.places import is_user_file, users_frame
from jaxviz.format import fmt_bytes
from jaxviz.graph.nodeindex import NodeIndex as NodeIndex
from jaxviz.memory.compile import CompileReport, Memory, compile_with_executable
from jaxviz.memory.provenance import Provenance
from jaxviz.memory.report import Buffer, MemoryReport, padding
from jaxviz.memory.simulate import RESULT_TABLE, TABLE, Buf, Rules, Simulation
from jaxviz.memory.whatif import donation_savings
from jaxviz.mesh import Facts, collectives
from jaxviz.mesh.devices import part_of, replicated, spec_axes_of_text
from jaxviz.mesh.layouts import layouts
from jaxviz.mesh.roundtrip import roundtrips

_Simulation = Simulation  # the name tests knew

# --- analysis ------------------------------------------------------------------------------


def memory_report(trace: Any, what_if: bool = True, only_cached: bool = False) -> MemoryReport:
    """Compiles `trace` and explains its memory (what_if: also measure donation savings;
    only_cached: from the executable JAX holds, else NotCompiled is raised)."""
    compiled_report, _lowered, compiled = compile_with_executable(trace, only_cached=only_cached)
    report = analyze(trace, compiled_report, compiled)
    if what_if:
        per_arg: dict[str, int] = {}
        for b in report.buffers:
            if b.category in ("argument", "donated argument"):
                name = b.where.split("[", 1)[0]
                per_arg[name] = per_arg.get(name, 0) + b.bytes
        platform, xla = compiled_report.platform, compiled_report.memory
        donations = donation_savings(
            trace,
            compiled_report,
            per_arg,
            lambda hlo: analyze_hlo(hlo, platform, xla).peak_bytes,
        )
        report = dataclasses.replace(report, donations=donations)
    return report


def analyze(trace: Any, cr: CompileReport, compiled: Any = None) -> MemoryReport:
    """The MemoryReport of an already compiled trace (no donation savings)."""
    t0 = time.perf_counter()
    hlo = cr.hlo
    if not hlo and compiled is not None:
        try:
            hlo = compiled.as_text() or ""
        except Exception:
            hlo = ""
    facts = None
    if cr.mesh is not None:
        args = [(d.path, d.type, d.sharding) for d in cr.donations]
        facts = Facts(cr.mesh, args, [(o.path, o.sharding) for o in cr.outputs])
    r = analyze_hlo(hlo, cr.platform, cr.memory, trace, facts)
    return dataclasses.replace(
        r,
        compile_seconds=cr.compile_seconds,
        analysis_seconds=time.perf_counter() - t0,
        donatable=_donatable(cr, list(r.buffers)),
    )


def analyze_hlo(
    hlo: str, platform: str, xla: Memory, trace: Any = None, facts: Facts | None = None
) -> MemoryReport:
    """The MemoryReport of an optimised HLO module's text (`compiled.as_text()`) on
    `platform` ("cpu", "tpu": its layouts' sizes and buffer rules, memory.simulate.Rules);
    trace: the Trace it came from (graph nodes, names), None for text alone; facts: a
    sharded program's mesh, arguments and outputs (its collectives are listed)."""
    t0 = time.perf_counter()
    notes: list[str] = []
    if not hlo:
        notes.append(f"XLA printed no optimised HLO on {platform}: no buffers to show")
        return _empty(trace, platform, xla, notes, time.perf_counter() - t0)
    module = _compat.parse_hlo_module(hlo)
    sim = Simulation(module, platform, Rules.runtime_holds_temps(platform, xla.temp_bytes))
    sim.run()
    nodes = NodeIndex(getattr(trace, "graph", None))
    prov = Provenance(module)
    buffers = sorted(  # equal sizes: arguments in the function's order, then by start
        (describe(sim, b, nodes, prov) for b in sim.at_peak()),
        key=lambda b: (-b.bytes, b.start, b.param < 0, b.param),
    )
    unnamed = [b for b in buffers if not b.named]
    if unnamed:
        lost = sum(b.bytes for b in unnamed)
        notes.append(
            f"XLA kept no source for {len(unnamed)} of the {len(buffers)} buffers at the peak "
            f"({lost:,} bytes): shown by their HLO instruction, not guessed"
        )
    if sim.no_schedule:
        notes.append("the module is not scheduled (is_scheduled=false): the order is XLA's text")
    notes += device_notes(sim, buffers, xla, platform)
    graph = getattr(trace, "graph", None)
    buffers = _spread(buffers, nodes)
    sharded = _on_mesh(module, graph, facts, nodes, buffers, notes) if facts is not None else None
    if sharded is not None:
        buffers = sharded.buffers
    return MemoryReport(
        name=getattr(trace, "name", "f"),
        platform=platform,
        num_devices=xla.num_devices,
        timeline=tuple(sim.timeline),
        ops=tuple(i.name for i in sim.instrs),
        peak_step=sim.peak,
        peak_bytes=sim.timeline[sim.peak] if sim.timeline else 0,
        buffers=tuple(buffers),
        argument_bytes=sim.category_bytes(("argument", "donated argument")),
        output_bytes=sim.category_bytes(("output",)),
        temp_bytes=sum(b.bytes for b in buffers if b.category in ("temporary", "activation")),
        xla=xla,
        notes=tuple(notes),
        analysis_seconds=time.perf_counter() - t0,
        n_eqns=graph.n_eqns if graph is not None else 0,
        signature=_signature(trace),
        mesh=facts.mesh if facts is not None else None,
        collectives=sharded.collectives if sharded is not None else (),
        replicated=sharded.replicated if sharded is not None else (),
        layouts=sharded.layouts if sharded is not None else (),
        roundtrips=sharded.roundtrips if sharded is not None else (),
    )


def device_notes(sim: Simulation, buffers: list[Buffer], xla: Memory, platform: str) -> list[str]:
    """What the device's layouts and buffer assignment add to the peak (tile padding,
    tuple tables), and which of XLA's figures the simulated peak follows when they differ."""
    out: list[str] = []
    total = sum(b.bytes for b in buffers) or 1
    tiled = [b for b in buffers if b.tile and b.elements]
    pad = sum(b.bytes - b.elements for b in tiled)
    if pad > 0.05 * total:
        by_type: dict[str, int] = {}
        for b in tiled:
            by_type[b.type] = by_type.get(b.type, 0) + b.bytes - b.elements
        worst = max((b for b in tiled if b.type == max(by_type, key=by_type.__getitem__)),
                    key=lambda b: b.bytes)  # fmt: skip
        out.append(
            f"padding: {fmt_bytes(pad)} of the {fmt_bytes(total)} live at the peak "
            f"({pad / total:.0%}) pad arrays to their layout's tiles on {platform}; most of it "
            f"{padding(worst, 1)} for {fmt_bytes(worst.elements)} of elements"
        )
    tables = [b for b in buffers if b.type == TABLE]
    rules = sim.rules
    if tables:
        held = sum(b.bytes for b in tables)
        out.append(
            f"{len(tables)} tuple values (async copies' and multi-output fusions' results, "
            f"loop state) have an index table of {rules.tuple_table} B, each in its own "
            f"{fmt_bytes(rules.table_slot)} slot of XLA's temporaries on {platform}: "
            f"{fmt_bytes(held)} of the peak"
        )
    peak = sim.timeline[sim.peak] if sim.timeline else 0
    if not sim.temps_held and sim.listed_peak > peak:
        out.append(
            f"XLA's buffer assignment also lists temporaries (tuple index tables, scalars): "
            f"{fmt_bytes(sim.listed_peak)} at its peak with them. On {platform}, where "
            "memory_analysis() counts no temporaries, the runtime allocates none of them "
            "(its allocator's counters around a run): the peak here leaves them out"
        )
    total_xla = xla.total_bytes
    if sim.temps_held and platform == "tpu" and xla.temp_bytes is not None and total_xla:
        temps = sum(b.bytes for b in sim.bufs if b.category in ("temporary", "constant"))
        if abs(peak / total_xla - 1) > 0.05:
            out.append(
                f"on tpu, XLA's memory_analysis() counts {fmt_bytes(xla.temp_bytes)} of "
                f"temporaries and its buffer assignment allocates others ({fmt_bytes(temps)} "
                "simulated here): the simulated peak follows the buffer assignment "
                "(bench/accel_memory_check.py compares it with XLA's dump)"
            )
    return out


def _donatable(cr: CompileReport, buffers: list[Buffer]) -> tuple[tuple[str, int], ...]:
    """(arg, bytes at the peak) of the arguments not donated that an output could reuse."""
    leaves = {d.path: d.arg for d in cr.donations if not d.donated and d.hint}
    out: dict[str, int] = {}
    for b in buffers:
        if b.category == "argument" and b.where in leaves:
            out[leaves[b.where]] = out.get(leaves[b.where], 0) + b.bytes
    return tuple(out.items())


def _spread(buffers: list[Buffer], nodes: NodeIndex) -> list[Buffer]:
    """Buffers that one line made in each of a loop's layers (the same primitive, line and type:
    XLA's metadata tells them apart only by their place in the schedule) each select their
    own layer's node: the k-th written selects the k-th of their nodes in the graph's order.
    A node writing several values of the type (`jnp.split(qkv, 3)`'s three) stands for as
    many buffers: the layer's first three, not the first three layers. Fewer buffers than
    nodes, as many per layer (one of the four muls gelu makes in each layer is kept for the
    backward pass): the k-th written selects the k-th layer's nodes, not layer 0's four."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for k, b in enumerate(buffers):
        if len(b.node_ids) > 1 and b.category not in ("argument", "donated argument", "output"):
            groups.setdefault((b.op, b.where, b.type), []).append(k)
    out = list(buffers)
    for ks in groups.values():
        if len(ks) < 2:
            continue
        typ = buffers[ks[0]].type
        ids = [
            i
            for i in dict.fromkeys(i for k in ks for i in buffers[k].node_ids)
            for _ in range(max(1, nodes.count_typed(i, typ)))
        ]
        shares = _per_layer(ids, len(ks), nodes) or [(i,) for i in ids]
        for n, k in enumerate(sorted(ks, key=lambda k: buffers[k].start)):
            if n < len(shares):
                out[k] = dataclasses.replace(buffers[k], node_ids=shares[n])
    return [
        b if len(b.node_ids) <= 8 else dataclasses.replace(b, node_ids=b.node_ids[:8]) for b in out
    ]


def _per_layer(ids: list[str], count: int, nodes: NodeIndex) -> list[tuple[str, ...]]:
    """`ids` cut into `count` runs of one layer each (one call path per run, a different one
    from run to run), or [] when they do not cut so."""
    if count >= len(ids) or len(ids) % count:
        return []
    m = len(ids) // count
    runs = [tuple(dict.fromkeys(ids[k * m : (k + 1) * m])) for k in range(count)]
    paths = [{nodes.path(i) for i in run} for run in runs]
    if any(len(p) != 1 for p in paths) or len({next(iter(p)) for p in paths}) != count:
        return []
    return runs


def _signature(trace: Any) -> str:
    try:
        return str(trace.signature)
    except Exception:  # a duck-typed trace without a graph
        return ""


def _empty(
    trace: Any, platform: str, xla: Memory, notes: list[str], seconds: float
) -> MemoryReport:
    return MemoryReport(
        name=getattr(trace, "name", "f"),
        platform=platform,
        num_devices=xla.num_devices,
        timeline=(),
        ops=(),
        peak_step=0,
        peak_bytes=0,
        buffers=(),
        argument_bytes=0,
        output_bytes=0,
        temp_bytes=0,
        xla=xla,
        notes=tuple(notes),
        analysis_seconds=seconds,
        signature=_signature(trace),
    )


def describe(sim: Simulation, b: Buf, nodes: NodeIndex, prov: Provenance | None = None) -> Buffer:
    """The Buffer record of a simulated buffer: its category and where it came from (for
    an instruction XLA kept no source for, where the HLO's data flow says it came from)."""
    ins = src = b.instr
    via = ""
    leaf = b.leaf
    pad: tuple[int, str, int] = (0, "", 0)
    if leaf is not None and leaf.tile:
        align = sim.rules.temp_align
        pad = (leaf.elements_bytes, leaf.tile, align if b.bytes > leaf.bytes else 0)
    if ins.opcode != "parameter" and prov is not None and not prov.has_source(ins):
        o = prov.origin(ins)
        if o is not None:
            src, via = o.ins, o.via
    cat = b.category
    if b.type == TABLE and cat == "output":  # (no line's value: XLA's table of the outputs)
        return Buffer(ins.name, b.bytes, b.type, cat, "", "", RESULT_TABLE,
                      "", 0, "", (), b.start, b.end, b.inside, "", *pad)  # fmt: skip
    forward = _compat.is_forward_of_grad(src.op_name)
    if cat == "temporary" and forward and _read_backward(sim, b):
        cat = "activation"
    tail = f" (via {via})" if via else ""
    if src.opcode == "parameter":
        path = src.op_name
        # (a TPU's async copy of an argument has a tuple table: no value of the graph)
        ids = nodes.inputs.get(path, ()) if b.type != TABLE else ()
        return Buffer(ins.name, b.bytes, b.type, cat, "", path, path + tail if path else "",
                      "", 0, "", ids, b.start, b.end, b.inside, via,
                      *pad, src.index if src is ins else -1)  # fmt: skip
    stack = sim.m.stack(src.frame)
    if stack:  # the user's innermost line (optax's update ran the add that the user's
        # `optimizer.update(model, grads)` asked for), else the op's own
        f = users_frame(stack)
        file, line, fn = f.file, f.line, f.fn
    elif src.source is not None:
        file, line, fn = src.source[0], src.source[1], ""
    else:
        file, line, fn = "", 0, ""
    prim = _compat.op_primitive(src.op_name) if src.op_name else ""
    writer = nodes.writers.get(b.out_index) if cat == "output" else None
    if writer is not None:  # (an update fused into a matmul names the matmul: say the update)
        prim, w_file, w_line, w_fn = writer
        if is_user_file(w_file) or not (file and is_user_file(file)):  # (else: the user's
            file, line, fn = w_file, w_line, w_fn  # line that called the library's)
    where = ""
    if file:
        where = f"{_short(file)}:{line}" + (f" ({fn})" if fn else "") + tail
    path = nodes.out_paths.get(b.out_index, "") if cat == "output" else ""
    if path:  # an output by its path too: a gradient's `result[0]`, its aux `result[1]`
        where = f"{where} -> {path}" if where else path
    ids = nodes.outputs.get(b.out_index, ()) if cat == "output" else ()
    if b.type != TABLE:  # (a tuple's index table is no value of the graph: it selects none)
        ids = ids or nodes.lookup(
            prim, [(f.file, f.line) for f in stack] or [(file, line)], src.op_name, b.type
        )
    return Buffer(ins.name, b.bytes, b.type, cat, prim, src.op_name, where, file, line, fn,
                  ids, b.start, b.end, b.inside, via, *pad)  # fmt: skip


def _read_backward(sim: Simulation, b: Buf) -> bool:
    """A forward buffer that a backward op reads (an activation kept for the gradient)."""
    if b.inside or b.end >= len(sim.instrs):
        return False
    reader = sim.instrs[b.end]
    return _compat.is_backward(reader.op_name)


def _short(file: str) -> str:
    from jaxviz.graph.files import file_label

    return file_label(file)


@dataclasses.dataclass(frozen=True)
class _Sharded:
    """What the mesh adds to a sharded program's report (jaxviz.mesh)."""

    buffers: list[Buffer]
    collectives: tuple
    replicated: tuple
    layouts: tuple
    roundtrips: tuple = ()


def _on_mesh(
    module: Any, graph: Any, facts: Facts, nodes: NodeIndex, buffers: list[Buffer], notes: list
) -> _Sharded | None:
    """The mesh's part of the report; None, with a note, when reading it failed (the rest
    of the report stands)."""
    try:
        cs = collectives(module, graph, facts, nodes)
        return _Sharded(
            on_devices(buffers, facts, graph),
            cs,
            replicated(facts.mesh, facts.args),
            tuple(layouts(module, graph, facts.mesh, nodes).items()),
            roundtrips(cs, graph),
        )
    except Exception as e:  # an HLO form not read: the buffers and figures stay
        notes.append(f"the mesh's collectives were not read: {type(e).__name__}: {e}")
        return None


def on_devices(buffers: list[Buffer], facts: Facts, graph: Any) -> list[Buffer]:
    """Each buffer as one device's part of its global array (`whole`, `part`): an argument's
    from its sharding, another's from the graph node it selects (its global aval)."""
    args = {p: (t, sh) for p, t, sh in facts.args}
    out = []
    for b in buffers:
        whole, axes = "", None
        if b.category in ("argument", "donated argument") and b.where in args:
            whole, sh = args[b.where]
            d = whole.count(",") + 1 if not whole.endswith("[]") else 0
            axes = spec_axes_of_text(sh, d)
        elif b.node_ids and graph is not None:
            whole = _node_type(graph, b.node_ids[0], b.type)
        part = part_of(facts.mesh, b.type, whole, axes) if whole else ""
        out.append(dataclasses.replace(b, whole=whole, part=part) if part else b)
    return out


def _node_type(graph: Any, ref: str, local: str) -> str:
    """The node's output type of the buffer's rank ("" when none)."""
    try:
        b, n = (int(x) for x in ref.split(":"))
        outs = graph.bodies[b].nodes[n].out
    except Exception:  # a node id of another graph
        return ""
    rank = local.count(",")
    same = [t for t in outs if t.count(",") == rank and t.split("[")[0] == local.split("[")[0]]
    return same[0] if len(same) == 1 else ""

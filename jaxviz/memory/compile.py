"""Compile a trace and say what XLA did with it: times, IR text, cost, memory, donation.

`compile_trace(trace)` lowers and compiles the trace's jitted function for its argument specs
and returns a `CompileReport`: plain data, with a text twin (`str(report)`) and an HTML view.
The donation table answers, for every argument leaf, whether it was donated, which output
reuses its buffer, and when a donation was wasted, why (JAX warns about some of these with
shapes only, and about the dtype-changing case not at all).

    >>> import jax, jax.numpy as jnp, jaxviz
    >>> f = jax.jit(lambda x: x * 2 + 1, donate_argnums=0)
    >>> report = jaxviz.trace(f, jnp.zeros((4, 4))).compile()
    >>> report.donations[0].aliased_to
    'out'
"""

from __future__ import annotations

import dataclasses
import html
import time
import types
import warnings
from typing import Any

import jax
import numpy as np

from jaxviz import _compat
from jaxviz.format import fmt_bytes
from jaxviz.graph.outnames import graph_names
from jaxviz.memory.donation import Donation as Donation
from jaxviz.memory.donation import Output as Output
from jaxviz.memory.donation import device_name as device_name
from jaxviz.memory.donation import donations as _donations
from jaxviz.memory.donation import sharding_str as sharding_str
from jaxviz.memory.donation import type_str as type_str
from jaxviz.mesh import Mesh, mesh_of

# --- data model ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Cost:
    """XLA's cost_analysis. None: the backend does not provide the figure (never 0)."""

    flops: float | None  # 2000034.0
    bytes_accessed: float | None  # 8000176.0
    transcendentals: float | None  # None on CPU for programs without any


@dataclasses.dataclass(frozen=True)
class Memory:
    """XLA's memory_analysis, in bytes. None: unavailable. Per device for sharded programs."""

    argument_bytes: int | None  # 4000116
    output_bytes: int | None  # 4000072
    alias_bytes: int | None  # 4000000: argument bytes reused by outputs (donation)
    temp_bytes: int | None  # 0
    peak_bytes: int | None  # 4000188 (jax >= 0.10 reports it; older: None)
    per_device: bool  # True: figures are for each of `num_devices` devices
    num_devices: int  # 8

    @property
    def total_bytes(self) -> int | None:
        """Arguments + outputs + temporaries - aliased (None when XLA gives no figures)."""
        if None in (self.argument_bytes, self.output_bytes, self.temp_bytes):
            return None
        return (
            int(self.argument_bytes or 0)
            + int(self.output_bytes or 0)
            + int(self.temp_bytes or 0)
            - int(self.alias_bytes or 0)
        )


@dataclasses.dataclass(frozen=True)
class CompileReport:
    """What compiling one trace produced (plain data: no executable, no arrays)."""

    name: str  # "step"
    platform: str  # "cpu" / "gpu" / "tpu"
    devices: tuple[str, ...]  # ("cpu:0",): devices the program runs on
    lower_seconds: float  # tracing + lowering to StableHLO
    compile_seconds: float  # XLA compilation
    stablehlo: str  # lowered.as_text()
    hlo: str  # compiled.as_text(): optimised HLO ("" when unavailable)
    cost: Cost
    memory: Memory
    donations: tuple[Donation, ...]  # one per argument leaf, in flattening order
    outputs: tuple[Output, ...]  # one per output leaf
    aliased_bytes: int  # per-device bytes of the aliased argument leaves, in their layouts
    warnings: tuple[str, ...] = ()  # what JAX warned while lowering / compiling (first lines)
    mesh: Mesh | None = None  # the device mesh of a sharded program (None: one device)

    def __str__(self) -> str:
        return render_text(self)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": render_text(self), "text/html": render_html(self)}


# --- compiling -------------------------------------------------------------------------------


class NotCompiled(Exception):
    """JAX holds no executable for this signature: its analysis would compile the user's
    program again (on a TPU a large step takes minutes), which only a request may do."""


def lower_and_compile(
    fun: Any, args_spec: tuple, kwargs_spec: dict, only_cached: bool = False, mesh: Any = None
) -> tuple[Any, Any, float, float, tuple[str, ...]]:
    """(lowered, compiled, lower_s, compile_s, warnings): JAX's warnings recorded, not raised.

    only_cached: raise NotCompiled rather than compile what JAX has not compiled already
    (the executable a call of the function made is returned, for nothing). mesh: the
    meshes set at the call (a trace's `call_mesh`): lowered under them, as the call was,
    not under whatever the script set after (None: the meshes set now)."""
    with warnings.catch_warnings(record=True) as caught, _compat.mesh_set(mesh):
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        lowered = fun.lower(*args_spec, **kwargs_spec)
        t1 = time.perf_counter()
        if only_cached and _compat.compiled_already(lowered) is False:
            raise NotCompiled(f"{getattr(fun, '__name__', 'the function')} is not compiled")
        compiled = lowered.compile()
        t2 = time.perf_counter()
    msgs = tuple(str(w.message).splitlines()[0] for w in caught)
    return lowered, compiled, t1 - t0, t2 - t1, msgs


def compile_trace(trace: Any) -> CompileReport:
    """Lowers and compiles `trace.fun` for `trace.args_spec` / `trace.kwargs_spec`."""
    return compile_with_executable(trace)[0]


def compile_with_executable(
    trace: Any, fun: Any = None, only_cached: bool = False
) -> tuple[CompileReport, Any, Any]:
    """compile_trace's report, with JAX's Lowered and Compiled objects (for running).

    fun: the jitted callable to compile instead of `trace.fun` (the same function
    re-jitted with other donations). only_cached: see lower_and_compile."""
    if fun is None:  # the user's function, or a stand-in when it is gone (Trace.compilable)
        trace = trace.compilable() if hasattr(trace, "compilable") else trace
        fun = trace.fun
    lowered, compiled, lower_s, compile_s, msgs = lower_and_compile(
        fun, trace.args_spec, trace.kwargs_spec, only_cached, getattr(trace, "call_mesh", None)
    )
    name = getattr(trace, "name", "f")
    report = build_report(
        name, fun, trace.args_spec, lowered, compiled, lower_s, compile_s, msgs, graph_names(trace)
    )
    return report, lowered, compiled


class _Dumped:
    """What XLA wrote of a module it failed to compile: its optimised HLO and, when it got
    that far, its buffer assignment, no executable. memory_analysis() gives the buffer
    assignment's figures in the device's main memory (parameters, outputs, temporaries and
    constants, as XLA sized them); the others an executable gives are unavailable."""

    def __init__(self, hlo: str, assignment: str = "") -> None:
        self._hlo = hlo
        self._assignment = _compat.read_assignment(assignment).get(0) if assignment else None

    def as_text(self) -> str:
        return self._hlo

    def memory_analysis(self) -> Any:
        a = self._assignment
        if a is None:
            return None
        return types.SimpleNamespace(
            argument_size_in_bytes=a.parameter,
            output_size_in_bytes=a.output,
            alias_size_in_bytes=0,  # an aliased output is its parameter's allocation
            temp_size_in_bytes=a.temp + a.constant,
            peak_memory_in_bytes=a.total,
        )


def failed_compile_report(trace: Any) -> CompileReport | None:
    """The CompileReport of a trace whose compile fails (a TPU runs out of memory at
    compile time, before any executable exists): its optimised HLO from XLA's dump of the
    failing compile (_compat.optimised_hlo_of_failed_compile), the error as a warning.
    None: it compiles, or XLA left nothing to read."""
    trace = trace.compilable() if hasattr(trace, "compilable") else trace
    fun = trace.fun
    t0 = time.perf_counter()
    with _compat.mesh_set(getattr(trace, "call_mesh", None)):
        lowered = fun.lower(*trace.args_spec, **trace.kwargs_spec)
        t1 = time.perf_counter()
        failed = _compat.optimised_hlo_of_failed_compile(lowered)
    if failed is None:
        return None
    error, hlo, assignment = failed
    name = getattr(trace, "name", "f")
    return build_report(
        name,
        fun,
        trace.args_spec,
        lowered,
        _Dumped(hlo, assignment),
        t1 - t0,
        time.perf_counter() - t1,
        (error.splitlines()[0],),
    )


def build_report(
    name: str,
    fun: Any,
    args_spec: tuple,
    lowered: Any,
    compiled: Any,
    lower_s: float,
    compile_s: float,
    msgs: tuple[str, ...] = (),
    names: list[str] | None = None,
) -> CompileReport:
    stablehlo = lowered.as_text()
    try:
        hlo = compiled.as_text() or ""
    except Exception:  # some backends cannot print the optimised module
        hlo = ""
    in_sh, out_sh = _flat_shardings(compiled)
    devices = _devices(in_sh + out_sh)
    outputs = _outputs(lowered, out_sh, names or [])
    memory = _memory(compiled, len(devices))
    donations, aliased_bytes = _donations(
        fun, args_spec, lowered, stablehlo, hlo, in_sh, outputs, len(devices)
    )
    platform = devices[0].split(":")[0] if devices else jax.default_backend()
    return CompileReport(
        name=name,
        platform=platform,
        devices=devices,
        lower_seconds=lower_s,
        compile_seconds=compile_s,
        stablehlo=stablehlo,
        hlo=hlo,
        cost=_cost(compiled),
        memory=memory,
        donations=donations,
        outputs=outputs,
        aliased_bytes=aliased_bytes,
        warnings=msgs,
        mesh=mesh_of(in_sh + out_sh),
    )


# --- figures ---------------------------------------------------------------------------------


def _cost(compiled: Any) -> Cost:
    try:
        ca = compiled.cost_analysis()
    except Exception:
        ca = None
    if isinstance(ca, (list, tuple)):  # older jaxlibs: one dict per module
        ca = ca[0] if ca else None
    if not isinstance(ca, dict):
        return Cost(None, None, None)

    def get(key: str) -> float | None:
        v = ca.get(key)
        return float(v) if v is not None and v >= 0 else None

    return Cost(get("flops"), get("bytes accessed"), get("transcendentals"))


def _memory(compiled: Any, num_devices: int) -> Memory:
    try:
        ma = compiled.memory_analysis()
    except Exception:
        ma = None
    if isinstance(ma, (list, tuple)):
        ma = ma[0] if ma else None

    def get(key: str) -> int | None:
        v = getattr(ma, key, None) if ma is not None else None
        return int(v) if isinstance(v, (int, np.integer)) and v >= 0 else None

    return Memory(
        get("argument_size_in_bytes"),
        get("output_size_in_bytes"),
        get("alias_size_in_bytes"),
        get("temp_size_in_bytes"),
        get("peak_memory_in_bytes"),
        per_device=num_devices > 1,
        num_devices=max(num_devices, 1),
    )


def _flat_shardings(compiled: Any) -> tuple[list, list]:
    try:
        ins = jax.tree_util.tree_leaves(compiled.input_shardings)
        outs = jax.tree_util.tree_leaves(compiled.output_shardings)
    except Exception:
        return [], []
    return ins, outs


def _devices(shardings: list) -> tuple[str, ...]:
    seen: dict[int, Any] = {}
    for s in shardings:
        for d in getattr(s, "device_set", ()):
            seen[d.id] = d
    return tuple(device_name(seen[k]) for k in sorted(seen))


def _outputs(lowered: Any, out_sh: list, names: list[str]) -> tuple[Output, ...]:
    flat = jax.tree_util.tree_flatten_with_path(lowered.out_info)[0]
    names = names if len(names) == len(flat) else [""] * len(flat)  # the graph's, else out[0]
    out = []
    for i, (path, leaf) in enumerate(flat):
        sh = sharding_str(out_sh[i] if i < len(out_sh) else getattr(leaf, "sharding", None))
        name = names[i] or "out" + jax.tree_util.keystr(path)
        out.append(Output(name, type_str(leaf.shape, leaf.dtype), sh))
    return tuple(out)


# --- donation ----------------------------------------------------------------------------------


# --- rendering ---------------------------------------------------------------------------------


def _fmt_num(x: float | None) -> str:
    return "unavailable" if x is None else f"{x:,.0f}"


def _donation_line(d: Donation, shardings: bool) -> str:
    if d.aliased_to is not None:
        via = "matched by XLA (jax.buffer_donor)" if d.matched_by == "xla" else "matched by JAX"
        state = f"donated -> {d.aliased_to}, {via}" if d.donated else f"aliased -> {d.aliased_to}"
    elif d.donated:
        state = "donated, NOT reused" + (" [silent]" if d.silent else "") + f": {d.reason}"
    else:
        state = "kept" + (f" ({d.hint})" if d.hint else "")
    sh = f" {d.sharding}" if d.sharding and shardings else ""
    return f"  {d.path}: {d.type}{sh} {fmt_bytes(d.nbytes)}  {state}"


def render_text(r: CompileReport) -> str:
    m, c = r.memory, r.cost
    per = f" (per device, {m.num_devices} devices)" if m.per_device else ""
    lines = [
        f"compiled {r.name} for {', '.join(r.devices) or r.platform}: "
        f"lowering {r.lower_seconds * 1e3:.1f} ms, compile {r.compile_seconds * 1e3:.1f} ms",
        f"cost: flops {_fmt_num(c.flops)}, bytes accessed {_fmt_num(c.bytes_accessed)}, "
        f"transcendentals {_fmt_num(c.transcendentals)}",
        f"memory{per}: arguments {fmt_bytes(m.argument_bytes)}, "
        f"outputs {fmt_bytes(m.output_bytes)}, aliased {fmt_bytes(m.alias_bytes)}, "
        f"temp {fmt_bytes(m.temp_bytes)}, peak {fmt_bytes(m.peak_bytes)}",
        "donation:",
    ]
    multi = len(r.devices) > 1  # shardings only say something on several devices
    lines += [_donation_line(d, multi) for d in r.donations] or ["  (no array arguments)"]
    if m.alias_bytes is not None and m.alias_bytes != r.aliased_bytes:
        lines.append(
            f"  note: XLA reports {fmt_bytes(m.alias_bytes)} aliased, the table accounts "
            f"for {fmt_bytes(r.aliased_bytes)}"
        )
    lines.append(
        "outputs: "
        + ", ".join(
            f"{o.path}: {o.type}" + (f" {o.sharding}" if o.sharding and multi else "")
            for o in r.outputs
        )
    )
    lines += [f"JAX warned: {w}" for w in r.warnings]
    return "\n".join(lines)


_CSS = (
    "<style>.jaxviz-compile table{border-collapse:collapse;font:12px monospace}"
    ".jaxviz-compile td,.jaxviz-compile th{padding:1px 8px;text-align:left;"
    "border-bottom:1px solid #ddd}"
    ".jaxviz-compile .bad{color:#b00}"
    ".jaxviz-compile pre{max-height:24em;overflow:auto;font-size:11px}"
    "</style>"
)


def render_html(r: CompileReport) -> str:
    """Self-contained HTML (escaped text only; IR in collapsible <details>)."""
    e = html.escape
    head = render_text(r).split("\n")[:3]
    rows = []
    for d in r.donations:
        if d.aliased_to is not None:
            state = f"reused by {d.aliased_to}" + (
                " (XLA matched)" if d.matched_by == "xla" else ""
            )
            cls = ""
        elif d.donated:
            state = "NOT reused" + (" (silent)" if d.silent else "") + ": " + d.reason
            cls = ' class="bad"'
        else:
            state = d.hint
            cls = ""
        rows.append(
            f"<tr{cls}><td>{e(d.path)}</td><td>{e(d.type)}</td><td>{e(d.sharding)}</td>"
            f"<td>{e(fmt_bytes(d.nbytes))}</td><td>{'yes' if d.donated else 'no'}</td>"
            f"<td>{e(state)}</td></tr>"
        )
    outs = "".join(
        f"<tr><td>{e(o.path)}</td><td>{e(o.type)}</td><td>{e(o.sharding)}</td></tr>"
        for o in r.outputs
    )
    warn = "".join(f"<div class='bad'>JAX warned: {e(w)}</div>" for w in r.warnings)
    return (
        f"{_CSS}<div class='jaxviz-compile'>"
        + "".join(f"<div>{e(h)}</div>" for h in head)
        + "<table><tr><th>argument</th><th>type</th><th>sharding</th><th>bytes</th>"
        "<th>donated</th><th>buffer</th></tr>"
        + "".join(rows)
        + "</table>"
        + "<table><tr><th>output</th><th>type</th><th>sharding</th></tr>"
        + outs
        + "</table>"
        + warn
        + f"<details><summary>StableHLO</summary><pre>{e(r.stablehlo)}</pre></details>"
        + "<details><summary>optimised HLO</summary>"
        + f"<pre>{e(r.hlo or 'unavailable')}</pre></details>"
        + "</div>"
    )

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
import inspect
import re
import time
import warnings
from typing import Any

import jax
import numpy as np

from jaxviz import _compat
from jaxviz.format import fmt_bytes
from jaxviz.graph.outnames import graph_names

# --- data model ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Donation:
    """One argument leaf: donated or not, and what became of its buffer."""

    path: str  # "params['w']": argument name plus pytree path
    arg: str  # "params": the argument's name in the signature
    type: str  # "f32[1000,1000]"
    nbytes: int  # 4000000: global bytes of the leaf
    sharding: str  # "P('d', None)" or "cpu:0"; "" when unknown
    donated: bool  # asked for by donate_argnums / donate_argnames
    aliased_to: str | None  # "out[0]": the output that reuses the buffer; None: none does
    matched_by: str  # "jax" (tf.aliasing_output), "xla" (jax.buffer_donor), "" (no alias)
    reason: str  # why a donated leaf was not aliased; "" otherwise
    silent: bool = False  # True: JAX gave no warning for this wasted donation
    hint: str = ""  # for leaves not donated: "donate to let out[0] reuse it"


@dataclasses.dataclass(frozen=True)
class Output:
    """One output leaf of the compiled program."""

    path: str  # "out[0]" / "out['loss']"
    type: str  # "f32[]"
    sharding: str  # "P()"; "" when unknown


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
    aliased_bytes: int  # per-device bytes of the aliased argument leaves
    warnings: tuple[str, ...] = ()  # what JAX warned while lowering / compiling (first lines)

    def __str__(self) -> str:
        return render_text(self)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": render_text(self), "text/html": render_html(self)}


# --- compiling -------------------------------------------------------------------------------


class NotCompiled(Exception):
    """JAX holds no executable for this signature: its analysis would compile the user's
    program again (on a TPU a large step takes minutes), which only a request may do."""


def lower_and_compile(
    fun: Any, args_spec: tuple, kwargs_spec: dict, only_cached: bool = False
) -> tuple[Any, Any, float, float, tuple[str, ...]]:
    """(lowered, compiled, lower_s, compile_s, warnings): JAX's warnings recorded, not raised.

    only_cached: raise NotCompiled rather than compile what JAX has not compiled already
    (the executable a call of the function made is returned, for nothing)."""
    with warnings.catch_warnings(record=True) as caught:
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
        fun, trace.args_spec, trace.kwargs_spec, only_cached
    )
    name = getattr(trace, "name", "f")
    report = build_report(
        name, fun, trace.args_spec, lowered, compiled, lower_s, compile_s, msgs, graph_names(trace)
    )
    return report, lowered, compiled


class _Dumped:
    """What XLA wrote of a module it failed to compile: its optimised HLO, no executable
    (the figures an executable gives are unavailable: None, never 0)."""

    def __init__(self, hlo: str) -> None:
        self._hlo = hlo

    def as_text(self) -> str:
        return self._hlo


def failed_compile_report(trace: Any) -> CompileReport | None:
    """The CompileReport of a trace whose compile fails (a TPU runs out of memory at
    compile time, before any executable exists): its optimised HLO from XLA's dump of the
    failing compile (_compat.optimised_hlo_of_failed_compile), the error as a warning.
    None: it compiles, or XLA left nothing to read."""
    trace = trace.compilable() if hasattr(trace, "compilable") else trace
    fun = trace.fun
    t0 = time.perf_counter()
    lowered = fun.lower(*trace.args_spec, **trace.kwargs_spec)
    t1 = time.perf_counter()
    failed = _compat.optimised_hlo_of_failed_compile(lowered)
    if failed is None:
        return None
    error, hlo = failed
    name = getattr(trace, "name", "f")
    return build_report(
        name,
        fun,
        trace.args_spec,
        lowered,
        _Dumped(hlo),
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


def device_name(d: Any) -> str:
    """`cpu:0`, `cuda:1`: platform and id."""
    return f"{d.platform}:{d.id}"


def sharding_str(s: Any) -> str:
    """Short text of a sharding: the PartitionSpec of a NamedSharding, else the device."""
    if s is None:
        return ""
    spec = getattr(s, "spec", None)
    if spec is not None:
        return str(spec)
    devs = getattr(s, "device_set", None)
    if devs is not None and len(devs) == 1:
        return device_name(next(iter(devs)))
    return type(s).__name__


_DTYPE_SHORT = {"bfloat16": "bf16", "bool": "bool"}


def type_str(shape: tuple, dtype: Any) -> str:
    """`f32[1000,1000]` from a shape and dtype (jaxviz's own spelling, stable across JAX)."""
    name = str(dtype)
    if name in _DTYPE_SHORT:
        short = _DTYPE_SHORT[name]
    else:
        m = re.fullmatch(r"(float|int|uint|complex)(\d+)", name)
        short = (
            {"float": "f", "int": "i", "uint": "u", "complex": "c"}[m.group(1)] + m.group(2)
            if m
            else name
        )
    return f"{short}[{','.join(str(d) for d in shape)}]"


def _nbytes(shape: tuple, dtype: Any) -> int:
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    return n * int(getattr(dtype, "itemsize", 0) or np.dtype(dtype).itemsize)


def _shard_bytes(shape: tuple, dtype: Any, sharding: Any) -> int:
    """Bytes one device holds of a leaf with this sharding (the global bytes when unknown)."""
    try:
        shape = tuple(sharding.shard_shape(tuple(shape)))
    except Exception:
        pass
    return _nbytes(shape, dtype)


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


def _arg_labels(fun: Any, args_spec: tuple, n_dyn_positional: int) -> tuple[list[str], list[int]]:
    """(names of the dynamic positional args, their positions in the call)."""
    opts = _compat.jit_options(fun) or {}
    n = len(args_spec)
    static = {i % n for i in opts.get("static_argnums", ()) if n and -n <= i < n}
    positions = [i for i in range(n) if i not in static][:n_dyn_positional]
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    pos = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), "args")
    names = [pos[i] if i < len(pos) else f"{var}[{i - len(pos)}]" for i in positions]
    return names, positions


def _donations(
    fun: Any,
    args_spec: tuple,
    lowered: Any,
    stablehlo: str,
    hlo: str,
    in_sh: list,
    outputs: tuple[Output, ...],
    num_devices: int,
) -> tuple[tuple[Donation, ...], int]:
    flat = jax.tree_util.tree_flatten_with_path(lowered.args_info)[0]
    n_dyn_pos = len(lowered.args_info[0]) if isinstance(lowered.args_info, tuple) else 0
    names, _ = _arg_labels(fun, args_spec, n_dyn_pos)
    kept = _compat.kept_arg_indices(lowered)
    main_args = _compat.parse_main_args(stablehlo)
    if kept is None:
        kept = frozenset(range(len(flat))) if len(main_args) == len(flat) else frozenset()
    module_index = {flat_i: j for j, flat_i in enumerate(sorted(kept))}
    xla_alias = _compat.parse_hlo_aliases(hlo) if hlo else None
    out_leaves = jax.tree_util.tree_leaves(lowered.out_info)

    rows: list[dict[str, Any]] = []
    taken: set[int] = set()
    for i, (path, info) in enumerate(flat):
        keys = list(path)
        if len(keys) >= 2 and getattr(keys[0], "idx", None) == 0:  # positional
            k = keys[1].idx
            arg = names[k] if k < len(names) else f"arg{k}"
        elif len(keys) >= 2:  # keyword
            arg = str(getattr(keys[1], "key", keys[1]))
        else:
            arg = f"arg{i}"
        shape, dtype = tuple(info.shape), info.dtype
        sh = in_sh[i] if i < len(in_sh) else None
        j = module_index.get(i)
        attrs = main_args[j] if j is not None and j < len(main_args) else {}
        out_idx, by = None, ""
        if xla_alias is not None and j is not None and j in xla_alias:
            out_idx = xla_alias[j]
            by = "jax" if attrs.get("aliasing_output") is not None else "xla"
        elif xla_alias is None and attrs.get("aliasing_output") is not None:
            out_idx, by = attrs["aliasing_output"], "jax"
        if out_idx is not None:
            taken.add(out_idx)
        rows.append(
            dict(
                path=arg + jax.tree_util.keystr(tuple(keys[2:])),
                arg=arg,
                shape=shape,
                dtype=dtype,
                sh=sh,
                donated=bool(info.donated),
                out_idx=out_idx,
                by=by,
                kept=j is not None,
                attrs=attrs,
            )
        )

    result, aliased_bytes = [], 0
    for r in rows:
        reason, silent, hint = "", False, ""
        per_dev = _shard_bytes(r["shape"], r["dtype"], r["sh"])
        if r["out_idx"] is not None:
            aliased_bytes += per_dev
        elif r["donated"]:
            reason, silent = _why_not(r, outputs, out_leaves, taken)
        else:
            cand = _matching_outputs(r, outputs, out_leaves, taken, same_dtype=True)
            if cand:
                hint = f"donate it to let {outputs[cand[0]].path} reuse its buffer"
        aliased = (
            outputs[r["out_idx"]].path
            if r["out_idx"] is not None and r["out_idx"] < len(outputs)
            else None
        )
        result.append(
            Donation(
                path=r["path"],
                arg=r["arg"],
                type=type_str(r["shape"], r["dtype"]),
                nbytes=_nbytes(r["shape"], r["dtype"]),
                sharding=sharding_str(r["sh"]),
                donated=r["donated"],
                aliased_to=aliased,
                matched_by=r["by"],
                reason=reason,
                silent=silent,
                hint=hint,
            )
        )
    return tuple(result), aliased_bytes


def _matching_outputs(r: dict, outputs, out_leaves, taken: set[int], same_dtype: bool) -> list[int]:
    return [
        k
        for k, o in enumerate(out_leaves)
        if k not in taken and tuple(o.shape) == r["shape"] and (o.dtype == r["dtype"]) == same_dtype
    ]


def _why_not(r: dict, outputs, out_leaves, taken: set[int]) -> tuple[str, bool]:
    """(reason, silent) for a donated leaf that no output reuses."""
    t = type_str(r["shape"], r["dtype"])
    if not r["kept"]:
        return (
            "the function never uses it: jit dropped it from the program, so no output "
            "can reuse its buffer (drop the argument or stop donating it)"
        ), True
    same = [
        k
        for k, o in enumerate(out_leaves)
        if tuple(o.shape) == r["shape"] and o.dtype == r["dtype"]
    ]
    if r["attrs"].get("buffer_donor"):
        other = [
            outputs[k]
            for k, o in enumerate(out_leaves)
            if k not in taken and tuple(o.shape) == r["shape"] and o.dtype != r["dtype"]
        ]
        what = f"; {other[0].path} is {other[0].type}: a dtype change" if other else ""
        return (
            f"JAX handed it to XLA as a buffer donor, but XLA found no output of the same "
            f"byte size ({_nbytes(r['shape'], r['dtype'])} B){what}. JAX does not warn about "
            f"this, and the input is not deleted: keep the output in {t.split('[')[0]} "
            f"(cast after the call) or stop donating"
        ), True
    if same:
        free = [k for k in same if k not in taken]
        if not free:
            return (
                f"every output of type {t} already reuses another donated argument "
                f"({', '.join(outputs[k].path for k in same)})"
            ), False
        return (
            f"{outputs[free[0]].path} has type {t} but a different sharding "
            f"({outputs[free[0]].sharding} vs {sharding_str(r['sh'])}): give the output the "
            f"input's sharding (out_shardings / jax.lax.with_sharding_constraint)"
        ), False
    dtype_only = [k for k, o in enumerate(out_leaves) if tuple(o.shape) == r["shape"]]
    if dtype_only:
        o = outputs[dtype_only[0]]
        return (
            f"no output of type {t}: {o.path} has the shape but is {o.type} "
            f"(JAX warned 'Some donated buffers were not usable')"
        ), False
    return (
        f"no output of shape ({','.join(map(str, r['shape']))}) and dtype "
        f"{t.split('[')[0]} (JAX warned 'Some donated buffers were not usable')"
    ), False


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

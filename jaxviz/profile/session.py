"""Profiling a cell or a function: JAX's profiler and compile events around the run, then
the ProfileReport (jaxviz.profile.report) from the op events and the compiled HLO.

`Profiling` is what `%%jaxtrace --profile` (and `python -m jaxviz FILE --profile`) start
before the cell's statements and stop after them: the cell's own calls are profiled, none
is run again. `profile_trace(trace, steps)` is `Trace.profile()`: one call to warm up, then
`steps` calls under the profiler. Without a profile asked for, none of this is imported.

    >>> import jax, jax.numpy as jnp, jaxviz
    >>> r = jaxviz.trace(jax.jit(lambda x: jnp.tanh(x @ x)), jnp.ones((64, 64))).profile(3)
    >>> r.steps
    3
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import jax

from jaxviz import _compat
from jaxviz._compat import profiler as _profiler
from jaxviz.capture.policy import JIT_CALLS_WATCHED
from jaxviz.graph.files import place
from jaxviz.memory.buffers import NodeIndex
from jaxviz.memory.compile import compile_with_executable
from jaxviz.memory.peaks import eligible
from jaxviz.profile.attribute import Attribution, Program, attribute, line_text, outermost_us
from jaxviz.profile.report import (
    CompileTime,
    KernelTime,
    LineTime,
    ModuleTime,
    ProfileReport,
    StepTime,
)
from jaxviz.profile.steps import timeline

# published dense bf16 peaks by device_kind (JAX reports none): achieved FLOP/s is set
# against them where the device is one of these
PEAK_FLOPS = {
    "TPU v2": 45e12, "TPU v3": 123e12, "TPU v4": 275e12, "TPU v4 lite": 138e12,
    "TPU v5 lite": 197e12, "TPU v5e": 197e12, "TPU v5p": 459e12, "TPU v5": 459e12,
    "TPU v6 lite": 918e12, "TPU v6e": 918e12,
}  # fmt: skip


class Profiling:
    """JAX's profiler and compile listener, on from `start()` to `stop()`; never raises
    into the user's cell (a failure is kept in `notes`)."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="jaxviz-profile-")
        self.compiles: list[tuple[str, str, float]] = []  # (function, phase, seconds)
        self.notes: list[str] = []
        self.device: _profiler.DeviceTrace | None = None
        self._undo = contextlib.ExitStack()
        self._on = False
        self.seconds = 0.0  # jaxviz's own: reading the trace
        self.start_seconds = 0.0  # JAX's profiler starting (before the cell's statements)
        self.stop_seconds = 0.0  # and stopping, its trace written (after them)

    def start(self) -> None:
        """Starts JAX's profiler now, or (JAX's backends not initialised yet: its
        `start_trace` would initialise them, and a script's `jax.config.update(
        "jax_num_cpu_devices", 8)` after `import jax` would then raise) as soon as the
        user's code initialises them, before the op that did runs."""
        try:
            self._undo.enter_context(_profiler.compile_events(lambda *x: self.compiles.append(x)))
            if _compat.backends_ready():
                self._start_trace()
            else:
                self._undo.enter_context(_compat.on_backends_ready(self._start_trace))
        except Exception as e:
            self.notes.append(f"JAX's profiler did not start ({type(e).__name__}: {e!s:.120})")

    def _start_trace(self) -> None:
        try:
            t0 = time.perf_counter()
            _profiler.start(self.dir)
            self.start_seconds = time.perf_counter() - t0
            self._on = True
        except Exception as e:  # a profile already running (the user's own), ...
            self.notes.append(f"JAX's profiler did not start ({type(e).__name__}: {e!s:.120})")

    def stop(self) -> None:
        try:
            if self._on:
                self._on = False
                _wait_for_device()  # the cell's last calls, dispatched but still running
                t0 = time.perf_counter()
                _profiler.stop()
                self.stop_seconds = time.perf_counter() - t0
                t0 = time.perf_counter()
                self.device = _profiler.read_trace(self.dir)
                self.seconds += time.perf_counter() - t0
                self.notes.extend(self.device.notes)
        except Exception as e:
            self.notes.append(f"JAX's profile could not be read ({type(e).__name__}: {e!s:.120})")
        finally:
            self._undo.close()
            shutil.rmtree(self.dir, ignore_errors=True)


def _wait_for_device() -> None:
    """Waits for every live array: the cell's last calls, dispatched but still running."""
    try:
        arrays = jax.live_arrays()
    except Exception:
        return
    for a in arrays:
        try:
            a.block_until_ready()
        except Exception:  # a deleted or donated array: nothing left to wait for
            pass


def programs_of(traces: Sequence[Any]) -> tuple[list[Program], list[str]]:
    """A Program per trace whose compiled HLO jaxviz can get from JAX's caches (the user's
    own jitted functions the cell called, jaxviz.memory.peaks.eligible; a Trace.profile()'s
    own function), with notes on those it could not."""
    out, notes = [], []
    for t in traces:
        try:
            cr, _lowered, compiled = compile_with_executable(t)
            text = cr.hlo or (compiled.as_text() or "")
        except Exception as e:
            notes.append(f"{t.name}: no compiled HLO ({type(e).__name__}: {e!s:.100})")
            continue
        if not text:
            continue
        graph = None
        try:
            graph = t.graph
        except Exception:  # a graph jaxviz cannot build: lines without their nodes
            pass
        out.append(Program(_compat.parse_hlo_module(text), t.name, NodeIndex(graph), cr.cost.flops))
    return out, notes


def cell_profile(ct: Any, p: Profiling, name: str = "") -> ProfileReport | None:
    """The ProfileReport of a profiled cell (None when the profiler gave nothing); the
    timeline leaves out the first calls jaxviz's capture watched."""
    if p.device is None:
        return _empty(name or ct.label or ct.filename, p) if p.notes else None
    t0 = time.perf_counter()
    programs, notes = programs_of([t for t in ct.traces if eligible(t)])
    programs += eager_programs(ct)
    where = {}
    for t in ct.traces:
        if t.call_sites and t.name not in where:
            f, line = t.call_sites[0][0], t.call_sites[0][1]
            where[t.name] = place(f, line)
    return build_report(
        name or ct.label or ct.filename,
        p.device,
        programs,
        p.compiles,
        where,
        p.notes + notes,
        p.seconds + time.perf_counter() - t0,
        eager_lines(ct.traces),
        p.start_seconds + p.stop_seconds,
        JIT_CALLS_WATCHED,
        any(len(site) > 2 and site[2] >= 3 for t in ct.traces for site in t.call_sites),
        jit_call_sites(ct.traces, programs),
        looped(ct.traces),
    )


def looped(traces: Sequence[Any]) -> frozenset[str]:
    """The functions a line called 3 times or more (a loop's step), its calls of every
    signature counted together: a step whose second call JAX traced again (its outputs'
    shardings written otherwise than its inputs', P('data', 'model', None) against
    P('data', 'model')) is one loop's, not a call and 2 calls; or more calls ran than
    were counted."""
    at: dict[tuple[str, str, int], int] = {}
    out = set()
    for t in traces:
        if t.calls_uncounted:
            out.add(t.name)
        for s in t.call_sites:
            if len(s) > 2:
                key = (t.name, s[0], s[1])
                at[key] = at.get(key, 0) + s[2]
    return frozenset(out | {name for (name, _f, _l), n in at.items() if n >= 3})


def eager_programs(ct: Any) -> list[Program]:
    """The programs JAX compiled for the cell's eager ops that hold collectives
    (jaxviz.mesh.eager, their HLO read at the compile): each collective's time is then its
    own row at its line, as a jitted function's, not folded into the line's compute."""
    out = []
    for e in getattr(ct, "eager_collectives", ()) or ():
        try:
            out.append(Program(_compat.parse_hlo_module(e.hlo), e.trace, eager=True))
        except Exception:  # an HLO form not read: its kernels go by their module's name
            continue
    return out


def eager_lines(traces: Sequence[Any]) -> dict[str, list[tuple[str, int]]]:
    """primitive -> the lines of the eager statements that ran it (their ops are modules of
    their own, "jit_sin", whose HLO jaxviz does not compile again)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for t in traces:
        if t.kind != "eager" or t.error is not None:
            continue
        try:
            bodies = t.graph.bodies
        except Exception:
            continue
        for b in bodies:
            for n in b.nodes:
                if n.kind == "eqn" and n.loc is not None:
                    out.setdefault(n.op, []).append((n.loc.file, n.loc.line))
    return out


def jit_call_sites(
    traces: Sequence[Any], programs: Sequence[Program]
) -> dict[str, list[tuple[str, int, int]]]:
    """module -> (file, line, calls) of the block's lines that called a jitted function
    jaxviz has no compiled HLO of (jax.numpy's `multiply` of an eager `x * 2`, a
    jax.random sampler's `_normal`): its ops go to those lines, not to "eager op
    (jit_multiply)"."""
    have = {p.name for p in programs if not p.eager}  # (an eager op's: another of its name)
    out: dict[str, list[tuple[str, int, int]]] = {}
    for t in traces:
        if t.kind != "jit" or not t.call_sites:
            continue
        module = _profiler.module_name(t.name)
        if module in have:
            continue
        for site in t.call_sites:
            n = site[2] if len(site) > 2 else 1
            out.setdefault(module, []).append((site[0], site[1], max(int(n), 1)))
    return out


def profile_trace(trace: Any, steps: int = 5, args: tuple = (), kwargs: dict | None = None):
    """`Trace.profile(steps)`: compiles the function, calls it once to warm up, then `steps`
    times under JAX's profiler (on the given arguments, else zeros of the traced shapes)."""
    if steps < 1:
        raise ValueError(f"Trace.profile needs at least one step, got steps={steps}.")
    t = trace.compilable() if hasattr(trace, "compilable") else trace
    fun = t.fun
    if args or kwargs:
        call_args, call_kwargs = args, dict(kwargs or {})
    else:
        call_args, call_kwargs = _zeros(t.args_spec), _zeros(t.kwargs_spec)
    jax.block_until_ready(fun(*call_args, **call_kwargs))  # compiled, and run once
    p = Profiling()
    p.start()
    try:
        out = None
        for _ in range(steps):
            out = fun(*call_args, **call_kwargs)
        jax.block_until_ready(out)
    finally:
        p.stop()
    if p.device is None:
        return _empty(t.name, p)
    t0 = time.perf_counter()
    programs, notes = programs_of([t])
    where = {t.name: place(*t.call_sites[0][:2])} if t.call_sites else {}
    return build_report(
        t.name, p.device, programs, p.compiles, where, p.notes + notes,
        p.seconds + time.perf_counter() - t0, profiler_seconds=p.start_seconds + p.stop_seconds,
    )  # fmt: skip


def _zeros(spec: Any) -> Any:
    def leaf(x: Any) -> Any:
        if isinstance(x, jax.ShapeDtypeStruct):
            return jax.numpy.zeros(x.shape, x.dtype)
        return x

    return jax.tree_util.tree_map(leaf, spec)


# --- the report ------------------------------------------------------------------------------


def build_report(
    name: str,
    device: _profiler.DeviceTrace,
    programs: Sequence[Program],
    compiles: Sequence[tuple[str, str, float]],
    where: dict[str, str],
    notes: Sequence[str] = (),
    seconds: float = 0.0,
    eager: dict[str, list[tuple[str, int]]] | None = None,
    profiler_seconds: float = 0.0,
    watched: int = 0,
    eager_loop: bool = True,
    call_sites: dict[str, list[tuple[str, int, int]]] | None = None,
    looped: frozenset[str] | None = None,
) -> ProfileReport:
    """eager_loop: a line of the block made its call 3 times or more (a loop: of eager
    ops, or of jax.numpy's jits), so an eager op's module may be the step. call_sites: the
    lines that called each jitted module jaxviz has no HLO of (`jit_call_sites`)."""
    t0 = time.perf_counter()
    device, own = own_work(device, compiles)
    a = attribute(device, programs, eager, call_sites)
    total = a.total_us or 0.0
    top_module, loop = _step(a, eager_loop, looped)
    unseen = _unseen(programs, a.runs, len(device.ops))
    steps = (a.runs.get(top_module, 0) or 1) if loop or a.module_trace.get(top_module) else 1
    platform, kind = _device()
    lines = _lines(a, total, steps)
    node_us: dict[str, dict[str, float]] = {}
    for k in a.kernels:
        for sh, frac in k.split:
            if sh.node and k.trace:
                per = node_us.setdefault(k.trace, {})
                for n in sh.node:
                    per[n] = per.get(n, 0.0) + k.us * frac / len(sh.node)
    lost = sum(x.us for x in lines if x.category and x.label.startswith("not in the compiled"))
    peak = PEAK_FLOPS.get(kind) if platform != "cpu" else None
    modules = []
    for m, us in sorted(a.module_us.items(), key=lambda kv: -kv[1]):
        done = a.module_flops.get(m)  # each call's FLOPs by the program it ran
        calls = a.runs.get(m, 0)
        fpc = done / calls if done and calls else None
        rate = done / (us * 1e-6) if done and us > 0 else None
        modules.append(ModuleTime(m, a.module_trace.get(m, ""), calls, us, fpc, rate, peak))
    return ProfileReport(
        name=name,
        platform=device.platform or platform,
        device=kind,
        total_us=total,
        steps=steps if a.runs else 0,
        lines=tuple(lines),
        kernels=tuple(_kernels(a, total)),
        modules=tuple(modules),
        compiles=tuple(_compiles(compiles, where)),
        timeline=None if unseen else timeline(device, top_module, watched, loop, a.run_us),
        attributed_share=(total - lost) / total if total > 0 else 1.0,
        events=len(device.ops),
        events_us=a.raw_us,
        profile_seconds=seconds + time.perf_counter() - t0,
        profiler_seconds=profiler_seconds,
        node_us=node_us,
        notes=tuple(list(notes) + a.notes + unseen + _devices_note(programs, a.runs)),
        nan_check_us=own.us,
        nan_check_calls=own.calls,
        nan_check_compile_s=own.compile_s,
        step=_step_figures(a, top_module, steps),
    )


def _step_figures(a: Attribution, module: str, steps: int) -> StepTime | None:
    """The step's device time against the rest, as the lines' per-step figures count them
    (None when the steps are not that module's calls: a block without a loop)."""
    if steps < 2 or a.runs.get(module, 0) != steps:
        return None
    us = a.module_us.get(module, 0.0)
    return StepTime(a.module_trace.get(module) or module, steps, us, (a.total_us or 0.0) - us)


def _step(a: Attribution, eager_loop: bool, looped: frozenset[str] | None) -> tuple[str, bool]:
    """(the step's module, whether it is a loop's): the user's jitted function with most
    device time among those run 3 times or more; an eager op's module so run only when a
    line of the block ran its call in a loop (jnp.ones at three lines is no loop); else,
    no loop, the user's jitted function with most device time (a script that calls it once:
    1 step, no verdict), or the module with most device time."""
    # every module the trace ran, its op events' time or 0: a TPU's trace can hold a tiny
    # program's runs without op events of it (300 calls of `x * 0.5 + 1`, 0.6 us each)
    every = {m: a.module_us.get(m, 0.0) for m in (*a.module_us, *a.runs)}
    mine = {m: us for m, us in every.items() if a.module_trace.get(m)}
    # a function of the user's is a loop's when a line called it 3 times or more (`looped`,
    # its traces' names; None: unknown, Trace.profile()'s steps): not 6 calls at 6 lines
    ran = {m: us for m, us in (every if eager_loop else mine).items()
           if a.runs.get(m, 0) >= 3
           and (looped is None or m not in mine or a.module_trace[m] in looped)}  # fmt: skip
    if ran:
        mine_looped = {m: us for m, us in ran.items() if m in mine}
        pool = mine_looped or ran
        return max(pool, key=lambda m: (pool[m], a.runs.get(m, 0))), True
    pool = mine or every
    return max(pool, key=lambda m: pool[m], default=""), False


def _devices_note(programs: Sequence[Program], runs: dict[str, int]) -> list[str]:
    """Where a profiled program ran on several devices (a mesh): its op events are each
    device's, and every figure adds them up (8 CPU devices: a 9.8 ms step read 139.6 ms of
    device time); said once, with the count."""
    many = sorted(
        {
            (p.module.devices, p.trace)
            for p in programs
            if p.module.devices > 1 and p.module.name in runs
        }
    )
    if not many:
        return []
    n = many[-1][0]
    names = ", ".join(f"`{t}`" for _, t in many[:3] if t) or "the block's programs"
    return [
        f"{names} ran on {n} devices: each figure here adds up all {n} devices' time (a "
        f"device's own share of a row is about 1/{n} of it), so a step's device time can "
        "exceed its wall time"
    ]


def _unseen(programs: Sequence[Program], runs: dict[str, int], events: int) -> list[str]:
    """A note per function the block ran whose compiled program has no run in the device's
    trace (a TPU's trace kept only the first part of a long block: a flax loop's 50 steps
    after 9 s of compiles were not in it); then no verdict is given, its step unknown."""
    gone = sorted({p.trace for p in programs if p.trace and p.module.name not in runs})
    return [
        f"`{name}` ran in the profiled block, but the device's trace holds no run of its "
        f"compiled program ({events} op events in all): its time is in none of the figures "
        "above, and no verdict on the loop is given. Profile a shorter block: the loop's "
        "cell alone (%%jaxtrace --profile), or Trace.profile(steps=N)"
        for name in gone
    ]


@dataclasses.dataclass(frozen=True)
class OwnWork:
    """jaxviz's own device work in a profile: its NaN check's reductions (jaxviz._compat's
    nonfinite_flags, run on the user's arrays), never the user's time."""

    us: float = 0.0  # device time, all calls
    calls: int = 0  # calls of the reduction's module on the device
    compile_s: float = 0.0  # compiling the reductions (tracing + lowering + XLA compile)


def _is_own(module: str) -> bool:
    own = _compat.NONFINITE_MODULE  # "jit__jaxviz_nonfinite", or "jit__jaxviz_nonfinite.1"
    return module == own or module.startswith(own + ".")


def own_work(
    device: _profiler.DeviceTrace, compiles: Sequence[tuple[str, str, float]]
) -> tuple[_profiler.DeviceTrace, OwnWork]:
    """The profile without jaxviz's own device work (its ops, its calls: neither a line's
    time nor a kernel, a module, the step or a run of the timeline), and that work."""
    ops = [e for e in device.ops if not _is_own(e.module)]
    runs = [r for r in device.runs if not _is_own(r.module)]
    mine = [e for e in device.ops if _is_own(e.module)]
    own = OwnWork(outermost_us(mine), len(device.runs) - len(runs), _own_compile_s(compiles))
    return dataclasses.replace(device, ops=ops, runs=runs), own


def _own_compile_s(compiles: Sequence[tuple[str, str, float]]) -> float:
    """The seconds jaxviz's NaN check spent compiling its reductions (in jaxviz's thread)."""
    return sum(s for fn, _, s in compiles if fn == _compat.NONFINITE_NAME)


def _device() -> tuple[str, str]:
    try:
        return _profiler.device_kind()
    except Exception:
        return "", ""


def _lines(a: Attribution, total: float, steps: int) -> list[LineTime]:
    acc: dict[tuple, dict] = {}
    for k in a.kernels:
        distinct = {s.key for s, _ in k.split}
        for s, frac in k.split:
            us = k.us * frac
            d = acc.setdefault(
                s.key,
                dict(
                    us=0.0, est=False, kernels={}, prims={}, fn=s.fn, trace="", nodes={}, b=0, n=0
                ),
            )
            d["us"] += us
            if s.bytes:  # a collective's bytes, each of its calls (on each device)
                d["b"] += s.bytes * k.calls
                d["n"] += k.calls
            d["est"] = d["est"] or len(distinct) > 1
            d["kernels"][k.op] = d["kernels"].get(k.op, 0.0) + us
            if s.prim:
                d["prims"][s.prim] = d["prims"].get(s.prim, 0.0) + us
            d["fn"] = d["fn"] or s.fn
            if s.node and k.trace:
                d["trace"] = d["trace"] or k.trace
                if k.trace == d["trace"]:  # most time first: a click inspects the heaviest
                    for n in s.node:
                        d["nodes"][n] = d["nodes"].get(n, 0.0) + us / len(s.node)
    out = []
    for key, d in acc.items():

        def by_time(x: dict) -> tuple[str, ...]:
            return tuple(sorted(x, key=lambda n: -x[n]))

        if key[0] == "line":
            _, file, line = key
            label = place(file, line) + (f" ({d['fn']})" if d["fn"] not in ("", "<module>") else "")
            text, cat = line_text(file, line), False
        elif key[0] == "coll":  # a collective's own row, at the line of the op it serves
            _, file, line, kind = key
            label = f"{kind} at {place(file, line)}"
            text, cat = line_text(file, line), False
        elif key[0] == "xla":  # a convert or copy XLA inserted, at the op it serves's line
            _, file, line, kind = key
            label = f"XLA's {kind} at {place(file, line)}"
            text, cat = line_text(file, line), False
        else:
            file, line, label, text, cat = "", 0, key[1], "", True
        out.append(
            LineTime(
                label, file, line, d["fn"], text, d["us"], d["us"] / steps,
                d["us"] / total if total > 0 else 0.0, d["est"], by_time(d["kernels"])[:8],
                by_time(d["prims"])[:8], d["trace"], by_time(d["nodes"])[:32], cat, d["b"], d["n"],
            )
        )  # fmt: skip
    out.sort(key=lambda x: -x.us)
    return out


def _kernels(a: Attribution, total: float) -> list[KernelTime]:
    out = []
    for k in a.kernels[:50]:
        lines: dict[str, float] = {}
        prims: dict[str, float] = {}
        for s, frac in k.split:
            label = (
                place(s.key[1], s.key[2])
                if s.key[0] == "line"
                else f"{s.key[3]} at {place(s.key[1], s.key[2])}"
                if s.key[0] == "coll"
                else f"XLA's {s.key[3]} at {place(s.key[1], s.key[2])}"
                if s.key[0] == "xla"
                else s.key[1]
            )
            lines[label] = lines.get(label, 0.0) + frac
            if s.prim:
                prims[s.prim] = prims.get(s.prim, 0.0) + frac
        out.append(
            KernelTime(
                k.op, k.module, k.kind, k.us, k.calls, k.us / total if total > 0 else 0.0,
                tuple(sorted(lines.items(), key=lambda kv: -kv[1])),
                tuple(sorted(prims, key=lambda n: -prims[n])), k.flops, k.bytes,
            )
        )  # fmt: skip
    return out


def _compiles(events: Sequence[tuple[str, str, float]], where: dict[str, str]) -> list:
    acc: dict[str, dict[str, float]] = {}
    for fn, phase, s in events:
        if fn == _compat.NONFINITE_NAME:  # jaxviz's own (OwnWork), not the block's
            continue
        d = acc.setdefault(fn, {"tracing": 0.0, "lowering": 0.0, "compile": 0.0})
        d[phase] = d.get(phase, 0.0) + s
    out = [  # (tracing alone is jaxviz's own re-staging of eager statements: not a compile)
        CompileTime(fn, d["tracing"], d["lowering"], d["compile"], where.get(fn, ""))
        for fn, d in acc.items()
        if d["lowering"] or d["compile"]
    ]
    out.sort(key=lambda c: -c.total_s)
    return out


def _empty(name: str, p: Profiling) -> ProfileReport:
    return ProfileReport(
        name, "", "", 0.0, 0, (), (), (), tuple(_compiles(p.compiles, {})), None, 1.0, 0,
        profile_seconds=p.seconds, notes=tuple(p.notes),
        nan_check_compile_s=_own_compile_s(p.compiles),
    )  # fmt: skip

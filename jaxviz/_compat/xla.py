"""Compiling and running a jit: XLA's text formats, read (the lowered StableHLO module's
`main` signature and the optimised HLO module's `input_output_alias` header), the arguments
a lowering kept, and a jitted function's options, to jit it again with other donations.

XLA offers no structured API for either text format on every supported jaxlib (0.10.2 to
0.12), so the text is parsed here, in the one door to JAX and XLA internals, and nowhere else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import jax

from jaxviz._compat.jaxpr import is_tracer, jaxpr_function

# --- text formats --------------------------------------------------------------------------


def parse_main_args(stablehlo: str) -> list[dict[str, Any]]:
    """Attributes of each `%argN` of the lowered module's `main`:
    `{"type": "tensor<10xf32>", "aliasing_output": 0 | None, "buffer_donor": bool,
    "sharding": str}`.
    """
    m = re.search(r"func\.func public @main\(", stablehlo)
    if m is None:
        return []
    i, depth, start, parts = m.end(), 0, m.end(), []
    quoted = False
    while i < len(stablehlo):
        c = stablehlo[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "({[<":
            depth += 1
        elif c in ")}]>" and not (c == ">" and stablehlo[i - 1] == "-"):
            if depth == 0 and c == ")":
                parts.append(stablehlo[start:i])
                break
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(stablehlo[start:i])
            start = i + 1
        i += 1
    args = []
    for p in parts:
        p = p.strip()
        if not p.startswith("%"):
            continue
        alias = re.search(r"tf\.aliasing_output\s*=\s*(\d+)", p)
        sh = re.search(r"(?:mhlo|sdy)\.sharding\s*=\s*(\"[^\"]*\"|#sdy\.sharding<[^>]*>)", p)
        ty = re.search(r":\s*(tensor<[^>]*>)", p)
        args.append(
            {
                "type": ty.group(1) if ty else "",
                "aliasing_output": int(alias.group(1)) if alias else None,
                "buffer_donor": bool(re.search(r"jax\.buffer_donor\s*=\s*true", p)),
                "sharding": sh.group(1) if sh else "",
            }
        )
    return args


def parse_hlo_aliases(hlo: str) -> dict[int, int] | None:
    """{parameter number: output index} from the optimised HLO's `input_output_alias`
    (what XLA really aliased). None when the module text has no header to read.
    """
    first = hlo.split("\n", 1)[0]
    if not first.startswith("HloModule"):
        return None
    m = re.search(r"input_output_alias=\{(.*?)\}\s*(?:,\s*[a-z_]+=|$)", first)
    if m is None:
        return {}
    out = {}
    for om, param in re.findall(r"\{([\d,\s]*)\}:\s*\((\d+),", m.group(1)):
        idx = om.strip().split(",")[0].strip()
        out[int(param)] = int(idx) if idx else 0
    return out


_ALLOC = re.compile(r"^allocation (\d+): size (\d+), (.*)$")


@dataclasses.dataclass
class Assignment:
    """Bytes of XLA's allocations in one memory space, by kind (tools/xla_dump.py says how
    a `*after_optimizations-buffer-assignment.txt` dump lists them)."""

    parameter: int = 0  # parameters (a donated one holds its output too)
    output: int = 0  # outputs not written into a parameter
    temp: int = 0  # temporaries (the heap simulator's packed allocations)
    constant: int = 0
    thread_local: int = 0
    count: int = 0  # allocations

    @property
    def total(self) -> int:
        """Parameters + outputs + temporaries + constants: what the program holds at its
        peak in this memory space (XLA's temporaries are allocated for the whole run)."""
        return self.parameter + self.output + self.temp + self.constant

    @property
    def report_total(self) -> int:
        """The memory-usage report's "Total bytes": every allocation, thread-local too."""
        return self.total + self.thread_local


def read_assignment(text: str) -> dict[int, Assignment]:
    """{memory space: Assignment} of a `*-buffer-assignment.txt` dump (`color N`; 0 is the
    device's main memory). The format is XLA's (the same in jaxlib 0.10.2 and 0.12)."""
    out: dict[int, Assignment] = {}
    for line in text.splitlines():
        m = _ALLOC.match(line)
        if m is None:
            continue
        size, rest = int(m.group(2)), m.group(3)
        color = re.search(r"\bcolor (\d+)", rest)
        a = out.setdefault(int(color.group(1)) if color else 0, Assignment())
        a.count += 1
        if re.search(r"\bparameter \d+", rest):
            a.parameter += size
        elif "constant" in rest:
            a.constant += size
        elif "thread-local" in rest:
            a.thread_local += size
        elif "maybe-live-out" in rest or "output shape" in rest:
            a.output += size
        else:
            a.temp += size
    return out


# --- compile / run (jaxviz.memory.compile, jaxviz.memory.run) ------------------------------


def kept_arg_indices(lowered: Any) -> frozenset[int] | None:
    """Flat indices of the arguments a lowered jit kept (jit drops unused ones unless
    keep_unused=True); the lowered module's %argN is the N-th kept one. None: unknown.
    """
    try:  # jax 0.10.2 and 0.12: MeshComputation.compile_args
        kept = lowered._lowering.compile_args["kept_var_idx"]
    except (AttributeError, KeyError, TypeError):
        return None
    return frozenset(int(i) for i in kept)


def compiled_already(lowered: Any) -> bool | None:
    """Whether JAX holds the executable of this lowering already (a call of the jitted
    function compiled it): `lowered.compile()` then returns it and compiles nothing. None:
    cannot tell. jax 0.10.2 and 0.12: jit's lowerings are cached (pjit._pjit_lower), so
    `fun.lower(*specs)` for a signature a call ran returns that call's MeshComputation,
    whose `_executable` its first compile set."""
    computation = getattr(lowered, "_lowering", None)
    if computation is None or not hasattr(computation, "_executable"):
        return None
    return computation._executable is not None


@contextlib.contextmanager
def watching_compiles(
    on_compiled: Callable[[str, Any], None], on_reused: Callable[[str, Any], None] | None = None
) -> Iterator[None]:
    """While the block runs, `on_compiled(name, executable)` after each XLA compile that JAX's
    dispatch asks for, before the program runs: jax 0.10.2 and 0.12's
    `_pjit_call_impl_python` calls `MeshComputation.compile()`, then runs what it returns.
    A lowering compiled before (its `_executable` set: a cached signature) is not told again,
    nor is an ahead-of-time `fun.lower(...).compile()` (stages.Lowered.compile calls it:
    nothing runs it yet, and the user may only be asking its memory_analysis()).
    `on_reused(name, executable)`: a call on that path whose lowering JAX compiled before
    (a jnp function's first call in the cell, of a signature an earlier cell compiled): JAX
    returns the executable it holds. Both must be quick and never raise (what they raise is
    dropped). Restored on exit."""
    from jax._src.interpreters import pxla

    orig = pxla.MeshComputation.compile

    def compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        fresh = getattr(self, "_executable", None) is None
        executable = orig(self, *args, **kwargs)
        tell = on_compiled if fresh else on_reused
        if tell is not None and sys._getframe(1).f_code.co_name == "_pjit_call_impl_python":
            with contextlib.suppress(Exception):
                tell(str(getattr(self, "_name", "")), executable)
        return executable

    pxla.MeshComputation.compile = compile  # type: ignore[method-assign]
    try:
        yield
    finally:
        pxla.MeshComputation.compile = orig  # type: ignore[method-assign]


def program_shardings(executable: Any) -> tuple[list, list]:
    """The input and the output shardings of an executable JAX's dispatch compiled ([] when
    it has none: another kind). jax 0.10.2 and 0.12: MeshExecutable._in_shardings and
    _out_shardings."""
    try:
        return list(executable._in_shardings), list(executable._out_shardings)
    except (AttributeError, TypeError):
        return [], []


def on_devices(shardings: list) -> int:
    """The most devices any of `shardings` lays its array on (1: a program on one device)."""
    return max((getattr(s, "num_devices", 1) for s in shardings), default=1)


def program_hlo(executable: Any) -> str:
    """The optimised HLO text of an executable JAX's dispatch compiled, as
    `jit(f).lower(...).compile().as_text()` prints it ("" when it cannot be printed)."""
    try:  # jax 0.10.2 and 0.12: stages.Compiled.as_text's two ways
        xe = executable.xla_extension_executable()
        if hasattr(xe, "get_hlo_text"):
            return str(xe.get_hlo_text())
        return "\n\n".join(m.to_string() for m in xe.hlo_modules())
    except Exception:  # another kind of executable, a backend that cannot print it
        return ""


def compiled_peak(executable: Any) -> tuple[int, int, str] | None:
    """(bytes, argument bytes, platform): what a compiled program must hold on each of its
    devices to run once, XLA's arguments + outputs + temporaries - aliased (memory_analysis'
    figures, as jaxviz.memory.compile.Memory.total_bytes), and of it the arguments, which the
    caller holds already. None: XLA gives none. jax 0.10.2 and 0.12:
    MeshExecutable.xla_extension_executable()'s get_compiled_memory_stats()."""
    try:
        xe = executable.xla_extension_executable()
        st = xe.get_compiled_memory_stats()
        platform = str(xe.local_devices()[0].platform)
        args = st.argument_size_in_bytes
        total = args + st.output_size_in_bytes + st.temp_size_in_bytes - st.alias_size_in_bytes
    except Exception:  # an executable of another kind, or a jaxlib without the stats
        return None
    return int(total), int(args), platform


def held_error(x: Any) -> str | None:
    """The error an array's buffers hold instead of its values (XLA's status from a dispatch
    or run that failed after the call returned: CPU defers "Out of memory allocating ..."
    to the result's first use), "" when it holds values, None when not known yet (not
    ready: its computation may still fail) or not a concrete array.

    Never waits and copies nothing: only an array that is already ready is asked, and
    there `block_until_ready()` waits for nothing; it returns at once, or raises the status
    the buffers hold (jax 0.10.2 and 0.12: jaxlib has no getter of that status; is_ready()
    is True for an array that holds an error)."""
    try:
        if x.is_deleted() or not x.is_ready():
            return None
    except Exception:  # not a concrete array
        return None
    try:
        x.block_until_ready()
    except Exception as e:  # the status the buffers hold
        if x.is_deleted():  # deleted (donated) meanwhile, by another thread
            return None
        return str(e) or type(e).__name__
    return ""


def optimised_hlo_of_failed_compile(lowered: Any) -> tuple[str, str, str] | None:
    """(XLA's error, the optimised HLO text, its buffer assignment's text or "") of a
    lowering whose compile fails (a TPU runs out of memory at compile time:
    RESOURCE_EXHAUSTED, no executable): compiled once more with `xla_dump_to`, which writes
    the module after optimisations (with its metadata) and the buffer assignment whose
    total was too large. None: it compiled, or XLA wrote no dump.
    jax 0.10.2 and 0.12: Lowered.compile(compiler_options=...); XLA's dump file names
    `module_NNNN.<name>.*after_optimizations.txt` and `...-buffer-assignment.txt`."""
    import glob
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="jaxviz-xla-") as d:
        try:
            lowered.compile(compiler_options={"xla_dump_to": d})
        except Exception as e:  # the failure being explained
            error = str(e)
        else:
            return None
        dumps = sorted(glob.glob(os.path.join(d, "*after_optimizations.txt")), key=os.path.getsize)
        if not dumps:
            return None
        with open(dumps[-1]) as f:
            hlo = f.read()
        assignment = dumps[-1][: -len(".txt")] + "-buffer-assignment.txt"
        text = ""
        if os.path.exists(assignment):
            with open(assignment) as f:
                text = f.read()
        return error, hlo, text


def jit_options(fun: Any) -> dict[str, Any] | None:
    """The `jax.jit` keyword options of a jitted function (None when not a PjitFunction).

    Used to re-jit the same Python function with other `donate_argnums`.
    jax 0.10.2 and 0.12: PjitFunction._jit_info is a PjitInfo with these field names.
    """
    info = getattr(fun, "_jit_info", None)
    if info is None:
        return None
    opts: dict[str, Any] = {
        "static_argnums": tuple(info.static_argnums),
        "static_argnames": tuple(info.static_argnames),
        "donate_argnums": tuple(info.donate_argnums),
        "donate_argnames": tuple(info.donate_argnames),
        "keep_unused": bool(info.keep_unused),
    }
    if info.device is not None:
        opts["device"] = info.device
    if info.backend is not None:
        opts["backend"] = info.backend

    def _specified(leaves: tuple) -> bool:  # UnspecifiedValue is private (jax 0.10.2, 0.12)
        return all(type(x).__name__ != "UnspecifiedValue" for x in leaves)

    if info.user_specified_in_shardings and _specified(info.in_shardings_leaves):
        opts["in_shardings"] = jax.tree_util.tree_unflatten(
            info.in_shardings_treedef, info.in_shardings_leaves
        )
    if _specified(info.out_shardings_leaves) and info.out_shardings_leaves:
        opts["out_shardings"] = jax.tree_util.tree_unflatten(
            info.out_shardings_treedef, info.out_shardings_leaves
        )
    return opts


def rejit(fun: Any, donate_argnums: tuple[int, ...]) -> Any:
    """The same Python function jitted with the same options but other `donate_argnums`
    (positional indices; `donate_argnames` cleared). Returns `fun` when it is not a jit.
    """
    opts = jit_options(fun)
    inner = getattr(fun, "__wrapped__", None)
    if opts is None or inner is None:
        return fun
    opts["donate_argnums"] = tuple(donate_argnums)
    opts["donate_argnames"] = ()
    return jax.jit(inner, **opts)


_SIGNATURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def signature_of(fun: Any) -> inspect.Signature | None:
    """The signature of the Python function under a jit (None when it has none),
    remembered per function while it lives: each of a cell's traces asks (~70 us each)."""
    try:
        return _SIGNATURES[fun]
    except (KeyError, TypeError):
        pass
    try:
        found = inspect.signature(fun)
    except (TypeError, ValueError):
        found = None
    try:
        _SIGNATURES[fun] = found
    except TypeError:  # not weakly referenceable
        pass
    return found


def jit_of_jaxpr(
    jaxpr: Any,
    args_spec: tuple,
    kwargs_spec: dict,
    options: dict | None,
    signature: inspect.Signature | None = None,
) -> tuple[Any, int]:
    """A jitted function that takes the arguments `args_spec`/`kwargs_spec` describe and runs
    `jaxpr` on their array leaves: the stand-in for a jitted function that is gone (the user
    redefined it), with its jit `options` (static and donated arguments, shardings) and
    its `signature` (parameter names, for argument labels and `donate_argnames`).

    Returns (the function, how many leaves it passes to the jaxpr) so the caller can
    check them against the jaxpr's inputs. Outputs come back as a flat list.
    """
    run = jaxpr_function(jaxpr)

    def replayed(*args: Any, **kwargs: Any) -> list:
        return run(*(x for x in jax.tree_util.tree_leaves((args, kwargs)) if is_tracer(x)))

    if signature is not None:
        replayed.__signature__ = signature  # type: ignore[attr-defined]

    def arrays(tree: Any) -> int:  # a dynamic argument's leaves: arrays and Python numbers
        return len(jax.tree_util.tree_leaves(tree))

    opts = dict(options or {})
    n = len(args_spec)
    static = {i % n for i in opts.get("static_argnums", ()) if n and -n <= i < n}
    static_names = set(opts.get("static_argnames", ()))
    n_arrays = sum(arrays(a) for i, a in enumerate(args_spec) if i not in static) + sum(
        arrays(v) for k, v in kwargs_spec.items() if k not in static_names
    )
    return jax.jit(replayed, **opts), n_arrays


# --- backends ------------------------------------------------------------------------------


def backends_ready() -> bool:
    """Whether JAX's backends are initialised, asked without initialising them (a config
    such as `jax_num_cpu_devices` must be set before they are). jax 0.10.2 and 0.12:
    `xla_bridge.backends_are_initialized()`."""
    from jax._src import xla_bridge

    try:
        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # a JAX without it: say no rather than initialise them
        return False


@contextlib.contextmanager
def on_backends_ready(callback: Callable[[], None]) -> Iterator[None]:
    """While the block runs, `callback()` once, right after someone else initialises JAX's
    backends (the cell's first op, its `jax.devices()`), before that call returns: what
    needs the backends (JAX's profiler: `start_trace` initialises them) then waits for the
    user's code, whose `jax.config.update("jax_num_cpu_devices", 8)` must come first.
    jax 0.10.2 and 0.12: every path that initialises them calls `xla_bridge.backends()`,
    looked up as the module's global at each call: wrapped for the block (or until it has
    fired), then restored. A failing callback is the caller's to note, never the user's."""
    from jax._src import xla_bridge

    original = xla_bridge.backends

    def backends() -> Any:
        out = original()
        if xla_bridge.backends is backends:  # (once: the callback may call it again)
            xla_bridge.backends = original
            try:
                callback()
            except Exception:
                pass
        return out

    xla_bridge.backends = backends
    try:
        yield
    finally:
        if xla_bridge.backends is backends:
            xla_bridge.backends = original

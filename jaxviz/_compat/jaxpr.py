"""Jaxprs and their equations: structure (the sub-jaxprs of an equation and how their inputs
and outputs map to its own), avals, scope names, literals, evaluating one equation, effects,
typed key dtypes, tracers.

A jaxpr here is JAX's object as JAX gives it: a ClosedJaxpr (jax 0.10) or a Jaxpr that
carries its consts (0.12); `open_jaxpr` and `jaxpr_consts` read either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np
from jax._src import core as _core
from jax._src.array import ArrayImpl as _ArrayImpl
from jax.extend.core import ClosedJaxpr as _ClosedJaxpr
from jax.extend.core import DropVar as _DropVar
from jax.extend.core import Jaxpr as _Jaxpr
from jax.extend.core import Literal as _Literal

from jaxviz._compat.frames import user_frames

# --- jaxpr structure -----------------------------------------------------------------------


def open_jaxpr(j: Any) -> Any:
    """The open Jaxpr of a ClosedJaxpr (0.10) or of a Jaxpr that carries consts (0.12)."""
    return getattr(j, "jaxpr", j)


def result_paths(j: Any) -> tuple[str, ...]:
    """Pytree paths of a traced function's flat outputs, ("result[0]", "result[1]['w']"); ()
    when the jaxpr does not say. jax 0.10.2 and 0.12: Jaxpr.debug_info.result_paths."""
    paths = getattr(getattr(open_jaxpr(j), "debug_info", None), "result_paths", None)
    if not isinstance(paths, (tuple, list)) or not all(isinstance(p, str) for p in paths):
        return ()
    return tuple(paths)


def jaxpr_consts(j: Any) -> list:
    """Constants bound to `open_jaxpr(j).constvars`: ClosedJaxpr.consts (0.10), Jaxpr.consts
    (0.12)."""
    return list(getattr(j, "consts", None) or ())


_JAXPR_TYPES = (_Jaxpr, _ClosedJaxpr)
# The classes themselves, for `v.__class__ is LITERAL_TYPE` in the hot loop of a jaxpr walk
# (jax 0.10.2 and 0.12: neither has subclasses; Literals are unhashable).
LITERAL_TYPE, DROPVAR_TYPE = _Literal, _DropVar


def is_jaxpr(x: Any) -> bool:
    return isinstance(x, _JAXPR_TYPES)


def is_literal(v: Any) -> bool:
    return type(v) is _Literal or isinstance(v, _Literal)


def is_dropvar(v: Any) -> bool:
    return type(v) is _DropVar


def holds_jaxpr(val: Any) -> bool:
    if isinstance(val, _JAXPR_TYPES):
        return True
    return type(val) in (tuple, list) and any(isinstance(v, _JAXPR_TYPES) for v in val)


class SubJaxpr(NamedTuple):
    role: str  # "jit", "scan", "branch 0", "cond", "body", "remat", ...
    jaxpr: Any  # JAX's object (ClosedJaxpr on 0.10, Jaxpr on 0.12, open Jaxpr for remat)
    in_map: list[int]  # body input i is fed by eqn input in_map[i] (-1: none)
    out_map: list[int]  # body output i becomes eqn output out_map[i] (-1: none)
    times: int  # executions per eqn execution


def _n_in(j: Any) -> int:
    return len(open_jaxpr(j).invars)


def _n_out(j: Any) -> int:
    return len(open_jaxpr(j).outvars)


def _one_to_one(role: str, j: Any, n_in: int, n_out: int, times: int = 1) -> SubJaxpr:
    ins = [i if i < n_in else -1 for i in range(_n_in(j))]
    outs = [i if i < n_out else -1 for i in range(_n_out(j))]
    return SubJaxpr(role, j, ins, outs, times)


_CALL_ROLES = {
    "jit": "jit",
    "pjit": "jit",
    "closed_call": "call",
    "core_call": "call",
    "call": "call",
    "eval_jaxpr": "call",
    "remat2": "remat",
    "checkpoint": "remat",
    "remat": "remat",
    "custom_jvp_call": "custom_jvp",
    "custom_vjp_call": "custom_vjp",
    "custom_vjp_call_jaxpr": "custom_vjp",
    "shard_map": "shard_map",
    "xla_pmap": "pmap",
    "named_call": "call",
    "custom_lin": "custom_vjp",
}
CALL_PRIMITIVES = frozenset(_CALL_ROLES)  # call-like primitives: one body each
CALL_ROLES = frozenset(_CALL_ROLES.values())  # their SubJaxpr roles: "jit", "call", "remat", ...
_BODY_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
_FLAT_PRIMITIVES: set[str] = set()  # primitives seen without sub-jaxprs


def sub_jaxprs(eqn: Any) -> list[SubJaxpr]:
    """The sub-jaxprs of one equation with how their inputs and outputs map to the eqn's."""
    name, params = eqn.primitive.name, eqn.params
    if name in _FLAT_PRIMITIVES:
        return []
    if not any(holds_jaxpr(v) for v in params.values()):
        if name not in _CALL_ROLES and name not in ("scan", "cond", "while"):
            _FLAT_PRIMITIVES.add(name)  # a primitive's params carry jaxprs always or never
        return []
    n_in, n_out = len(eqn.invars), len(eqn.outvars)
    if name == "scan":
        return [_one_to_one("scan", params["jaxpr"], n_in, n_out, int(params.get("length", 1)))]
    if name == "cond":
        # branch 0 is the false branch of lax.cond; eqn input 0 is the index
        return [
            SubJaxpr(f"branch {i}", b, [k + 1 for k in range(_n_in(b))], list(range(_n_out(b))), 1)
            for i, b in enumerate(params["branches"])
        ]
    if name == "while":
        nc, nb = params["cond_nconsts"], params["body_nconsts"]
        carry = list(range(nc + nb, n_in))
        return [
            SubJaxpr("cond", params["cond_jaxpr"], list(range(nc)) + carry, [-1], 1),
            SubJaxpr(
                "body",
                params["body_jaxpr"],
                list(range(nc, nc + nb)) + carry,
                list(range(n_out)),
                1,
            ),
        ]
    role = _CALL_ROLES.get(name)
    if role is not None:
        for key in _BODY_PARAMS:
            if key in params and is_jaxpr(params[key]):
                return [_one_to_one(role, params[key], n_in, n_out)]
    # Any other primitive that carries jaxprs (custom_transpose, pallas_call, ...): show them.
    out = []
    for key, val in sorted(params.items()):
        vals = val if isinstance(val, (tuple, list)) else (val,)
        for k, v in enumerate(vals):
            if is_jaxpr(v):
                role = key if len(vals) == 1 else f"{key} {k}"
                out.append(
                    _one_to_one(
                        role, v, n_in if _n_in(v) == n_in else 0, n_out if _n_out(v) == n_out else 0
                    )
                )
    return out


def scan_counts(eqn: Any) -> tuple[int, int]:
    """(num_consts, num_carry) of a scan eqn."""
    p = eqn.params
    if "ft_in" in p:  # jax >= 0.11: a flattree of (consts, carry, xs): an FTTuple, or an
        # FTPyTree (flax's nnx.scan over layers), which has no `elts`; `unpack` reads both
        consts, carry, _ = (len(t) for t in p["ft_in"].unpack())
        return consts, carry
    return p["num_consts"], p["num_carry"]  # jax 0.10


def exact_results(j: Any) -> bool:
    """Whether every result of `j` is of an exact type (integers, booleans), none of which can
    be NaN or Inf (a key's is not: its type is no numpy type)."""
    try:
        return all(np.dtype(v.aval.dtype).kind in "biu" for v in open_jaxpr(j).outvars)
    except (TypeError, AttributeError):
        return False


def has_effects(jaxpr: Any) -> bool:
    """Whether a jaxpr has effects (ordered callbacks, IO): running it again repeats them."""
    return bool(getattr(open_jaxpr(jaxpr), "effects", None)) if jaxpr is not None else False


# --- avals ---------------------------------------------------------------------------------


_KEY_AVALS: dict[tuple, Any] = {}  # (impl, base aval, base sharding) -> a key array's aval


# sharding -> (on one CPU device: read directly; every device a CPU: no device->host copy)
_WHERE: dict[Any, tuple[bool, bool]] = {}


def _where(x: Any) -> tuple[bool, bool]:
    sharding = x.sharding
    where = _WHERE.get(sharding)
    if where is None:
        devices = sharding.device_set
        cpu = all(d.platform == "cpu" for d in devices)
        where = (cpu and len(devices) == 1, cpu)
        if len(_WHERE) >= 1024:
            _WHERE.clear()
        _WHERE[sharding] = where
    return where


def on_host(x: Any) -> bool:
    """Whether `x`'s values are in host memory already (numpy, Python numbers, a jax.Array
    on CPU devices): reading them copies nothing from an accelerator and waits for no
    device."""
    return type(x) is not _ArrayImpl or _where(x)[1]


def host_parts(x: Any) -> list:
    """`x`'s values on the host, in parts that leave `x` as it was (one per shard, or one
    for a replicated array). np.asarray of a jax.Array that had to copy (a sharded one's
    whole value, any on an accelerator) keeps the copy on the array for as long as it lives
    and cannot be unset: a NaN check would add a host copy of every array it reads. A
    part read through a shard's own array object goes with that object; an array on one
    CPU device is read directly (np.asarray shares its buffer, keeping nothing).
    jax 0.10.2 and 0.12: ArrayImpl._npy_value, addressable_data, addressable_shards."""
    if type(x) is not _ArrayImpl:
        return [np.asarray(x)]
    if _where(x)[0]:
        return [np.asarray(x)]
    if x.is_fully_replicated:
        return [np.asarray(x.addressable_data(0))]
    return [np.asarray(s.data) for s in x.addressable_shards]


def aval_of(x: Any) -> Any:
    """jax.typeof(x). A typed key array's aval is built afresh on every read (through its
    sharding, ~10x an array's): it is cached by what determines it, its PRNG impl and the
    aval and sharding of its uint32 data (jax 0.10.2 and 0.12: PRNGKeyArray._base_array)."""
    kind = type(x)
    if kind is _ArrayImpl:  # (its typeof is its .aval, jax 0.10.2 and 0.12: 20x faster)
        return x.aval
    if kind.__name__ != "PRNGKeyArray":
        return jax.typeof(x)
    try:
        base = x._base_array
        k = (x._impl, base.aval, base.sharding)
        aval = _KEY_AVALS.get(k)
    except Exception:  # a deleted or unusual key array: JAX's own answer
        return jax.typeof(x)
    if aval is None:
        if len(_KEY_AVALS) > 4096:
            _KEY_AVALS.clear()
        aval = _KEY_AVALS[k] = jax.typeof(x)
    return aval


def _memo_by_identity(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Caches fn(aval) by the aval object's identity (avals repeat across a jaxpr's vars)."""
    cache: dict[int, tuple[Any, Any]] = {}

    def memo(aval: Any) -> Any:
        hit = cache.get(id(aval))
        if hit is not None and hit[0] is aval:
            return hit[1]
        value = fn(aval)
        if len(cache) > 100_000:
            cache.clear()
        cache[id(aval)] = (aval, value)  # holding aval keeps its id from being reused
        return value

    memo.__doc__ = fn.__doc__
    return memo


@_memo_by_identity
def short_type(aval: Any) -> str:
    """`f32[8,128]`; weak types as `~f32[]`; explicit shardings as JAX prints them."""
    try:
        s = aval.str_short(short_dtypes=True)
    except (AttributeError, TypeError):
        return str(aval)
    if getattr(aval, "weak_type", False) and not s.startswith("~"):
        s = "~" + s
    return s


@_memo_by_identity
def aval_nbytes(aval: Any) -> int:
    """Bytes of an array of this aval (shape x itemsize)."""
    shape = getattr(aval, "shape", ())
    dtype = getattr(aval, "dtype", None)
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        itemsize = getattr(dtype, "itemsize", 4) or 4
    n = 1
    for d in shape:
        n *= int(d) if isinstance(d, int) else 1
    return n * itemsize


# --- equations: scope names, literals, evaluation ------------------------------------------


def name_stack(eqn: Any) -> str:
    si = getattr(eqn, "source_info", None)
    ns = getattr(si, "name_stack", None)
    return _name_stack_str(ns) if ns is not None else ""


@_memo_by_identity
def _name_stack_str(ns: Any) -> str:
    return str(ns)  # NameStack objects are shared by the eqns of one scope


def literal_text(lit: Any) -> str:
    """A literal's value, short: "1.0", "True", "f32[3]{...}"."""
    val = lit.val
    for kind in (bool, int, float, complex):  # TypedInt / TypedFloat print their dtype
        if isinstance(val, kind):
            return str(kind(val))  # type: ignore[arg-type]
    shape = getattr(val, "shape", None)
    if shape == ():
        try:
            return str(val.item())
        except (AttributeError, ValueError, TypeError):
            pass
    return " ".join(str(val).split())[:24]


def literal_value(v: Any) -> Any:
    return v.val


def eval_context():
    """Binds evaluate eagerly inside this block, even from within JAX's own eager dispatch
    (where the current trace is unset). jax 0.10.2 and 0.12: core.eval_context."""
    return _core.eval_context()


def bind_eqn(eqn: Any, invals: list) -> list:
    """Applies one equation to concrete values, as `jax.core.eval_jaxpr` does; a list of
    outputs. jax 0.10.2 and 0.12: Primitive.get_bind_params turns jaxpr params into the
    form `bind` takes (custom_jvp_call, custom_vjp_call, closed_call).
    """
    bp = eqn.primitive.get_bind_params(eqn.params)
    if isinstance(bp, tuple):  # jax 0.10.2: (subfuns, params)
        subfuns, params = bp
    else:  # jax 0.12: params only
        subfuns, params = (), bp
    out = eqn.primitive.bind(*subfuns, *invals, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


# --- key dtypes ----------------------------------------------------------------------------


def key_impl(dtype: Any) -> Any | None:
    """The PRNG implementation of a typed key dtype (`key<fry>`), for `jax.random.key(0,
    impl=...)`; None for other dtypes. jax 0.10.2 and 0.12: KeyTy._impl is a PRNGImpl.
    """
    if not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return None
    return getattr(dtype, "_impl", None)


def is_key_dtype(dtype: Any) -> bool:
    """A typed PRNG key dtype (`key<fry>`); jax 0.10.2 and 0.12."""
    try:
        return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    except TypeError:
        return False


def is_key_array(x: Any) -> bool:
    """A typed PRNG key array (jax.random.key), told by its type alone (no dtype property:
    this runs at every jax.random call in an eager loop). jax 0.10.2 and 0.12: PRNGKeyArray."""
    return type(x).__name__ == "PRNGKeyArray"


def key_base(x: Any) -> Any:
    """The uint32 array under a typed key array (what `jax.random.key_data` returns), without
    dispatching an op; None for anything else. jax 0.10.2 and 0.12: PRNGKeyArray._base_array."""
    return getattr(x, "_base_array", None) if type(x).__name__ == "PRNGKeyArray" else None


# --- tracers -------------------------------------------------------------------------------


def is_tracer(x: Any) -> bool:
    return isinstance(x, _core.Tracer)


# jax 0.10.2 and 0.12: a concrete array's type (jax._src.array.ArrayImpl), never a tracer
ARRAY_TYPE: type = _ArrayImpl


class TracerOrigin(NamedTuple):
    fn: str  # the function being traced when the tracer was made, "forward"
    file: str  # where that function is defined
    line: int  # its first line (the decorator's, if any)
    created: tuple  # (file, line) of the user line that made the tracer, or ()


def tracer_origin(x: Any) -> TracerOrigin | None:
    """Where a (leaked) tracer came from, as JAX's UnexpectedTracerError tells it.
    jax 0.10.2 and 0.12: DynamicJaxprTracer._debug_info (func_src_info "forward at F:L")
    and ._line_info (the SourceInfo of the line that made it)."""
    import re

    dbg = getattr(x, "_debug_info", None)
    m = re.match(r"(\S+) at (.+):(\d+)$", str(getattr(dbg, "func_src_info", "") or ""))
    if m is None:
        return None
    created: tuple = ()
    try:
        frames = user_frames(getattr(x, "_line_info", None))
        if frames:
            created = (frames[-1].file, frames[-1].line)
    except Exception:  # a SourceInfo JAX shaped otherwise
        pass
    return TracerOrigin(m.group(1), m.group(2), int(m.group(3)), created)


# --- holding a jaxpr without holding JAX's caches ------------------------------------------


def per_jaxpr(cache: Any, j: Any, make: Callable[[Any], Any]) -> Any:
    """`make(j)`, remembered in `cache` (a weakref.WeakKeyDictionary) while JAX holds the
    jaxpr `j`: JAX's tracing cache hands a function called again with the same signature
    (a cell run again) the same jaxpr object. jax 0.10.2 and 0.12: ClosedJaxpr hashes by
    identity and is weakly referenceable; anything that is not is not remembered."""
    try:
        known = cache.get(j)
    except TypeError:
        return make(j)
    if known is None:
        known = cache[j] = make(j)
    return known


def detached(j: Any) -> Any:
    """The same jaxpr (the same equations) as a new object, for keeping after the cell.

    JAX's lowering and compilation caches are keyed weakly on the jaxpr object that jit
    traced: while that object lives, so does the compiled executable (measured, 24-layer
    MLP step: 6.4 MB per kept jaxpr, 0.7 MB for the same equations in a new object; jax
    0.10.2 and 0.12). JAX keeps its own object as long as the function lives. jax 0.12's
    ClosedJaxpr(jaxpr, consts) makes a new Jaxpr sharing the equations; 0.10.2's a new
    ClosedJaxpr around the same Jaxpr. Open jaxprs of 0.10.2 come back as they are.
    """
    if not isinstance(j, _ClosedJaxpr):
        return j
    return _ClosedJaxpr(j.jaxpr, j.consts)


def jaxpr_function(j: Any) -> Callable[..., list]:
    """A function of the jaxpr's inputs that evaluates it (JAX's eval_jaxpr): `f(*invals)`
    returns the list of outputs; traceable, so `jax.jit(f)` compiles the same program."""
    jaxpr, consts = open_jaxpr(j), jaxpr_consts(j)

    def evaluate(*invals: Any) -> list:
        return list(_core.eval_jaxpr(jaxpr, consts, *invals))

    return evaluate

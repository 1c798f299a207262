"""The donation table of a compiled program: for every argument leaf, whether it was donated,
which output reuses its buffer, and when a donation was wasted, why (JAX warns about some
of these with shapes only, and about the dtype-changing case not at all); for a leaf not
donated, which output could reuse it. `jaxviz.memory.compile.build_report` puts it in the
CompileReport; the spelling of types and shardings shared by its text twin lives here."""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

import jax
import numpy as np

from jaxviz import _compat


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


device_name = _compat.device_name  # `cpu:0`, `cuda:1`: platform and id


def sharding_str(s: Any) -> str:
    """Short text of a sharding: the PartitionSpec of a NamedSharding, else the device."""
    if s is None:
        return ""
    spec = getattr(s, "spec", None)
    if spec is not None:
        try:  # as the user writes it: P('x'), not JAX's str P('x',)
            return "P(" + ", ".join(_spec_entry(e) for e in spec) + ")"
        except TypeError:  # not a PartitionSpec after all
            return str(spec)
    devs = getattr(s, "device_set", None)
    if devs is not None and len(devs) == 1:
        return device_name(next(iter(devs)))
    return type(s).__name__


def _spec_entry(e: Any) -> str:
    if isinstance(e, str):
        return repr(e)
    if isinstance(e, (tuple, list)):
        return "(" + ", ".join(map(_spec_entry, e)) + ")"
    return str(e)  # None, P.UNCONSTRAINED


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


def _device_bytes(r: dict) -> int:
    """Bytes one device allocates for an argument leaf: its compiled layout's where that
    is tiled (a TPU's f32[64,64]{1,0:T(8,128)} takes 32 KiB, as memory_analysis counts
    it), else its shard's elements (CPU layouts have no tiles)."""
    leaf = r.get("layout")
    if leaf is not None and not isinstance(leaf, list) and leaf.tile:
        return int(leaf.bytes)
    return _shard_bytes(r["shape"], r["dtype"], r["sh"])


def arg_labels(fun: Any, args_spec: tuple, n_dyn_positional: int) -> tuple[list[str], list[int]]:
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


def donations(
    fun: Any,
    args_spec: tuple,
    lowered: Any,
    stablehlo: str,
    hlo: str,
    in_sh: list,
    outputs: tuple[Output, ...],
    num_devices: int,
) -> tuple[tuple[Donation, ...], int]:
    """(a Donation per argument leaf, bytes per device of the aliased leaves): the leaves
    read from the lowering, their aliases from the HLO (XLA's) or the StableHLO (JAX's)."""
    rows, taken = _rows(fun, args_spec, lowered, stablehlo, hlo, in_sh)
    out_leaves = jax.tree_util.tree_leaves(lowered.out_info)
    result, aliased_bytes = [], 0
    for r in rows:
        per_dev = _device_bytes(r)
        if r["out_idx"] is not None:
            aliased_bytes += per_dev
        result.append(_donation(r, outputs, out_leaves, taken))
    return tuple(result), aliased_bytes


def _rows(
    fun: Any, args_spec: tuple, lowered: Any, stablehlo: str, hlo: str, in_sh: list
) -> tuple[list[dict[str, Any]], set[int]]:
    """(a row of facts per argument leaf, the outputs that reuse a leaf's buffer)."""
    flat = jax.tree_util.tree_flatten_with_path(lowered.args_info)[0]
    n_dyn_pos = len(lowered.args_info[0]) if isinstance(lowered.args_info, tuple) else 0
    names, _ = arg_labels(fun, args_spec, n_dyn_pos)
    kept = _compat.kept_arg_indices(lowered)
    main_args = _compat.parse_main_args(stablehlo)
    if kept is None:
        kept = frozenset(range(len(flat))) if len(main_args) == len(flat) else frozenset()
    module_index = {flat_i: j for j, flat_i in enumerate(sorted(kept))}
    xla_alias = _compat.parse_hlo_aliases(hlo) if hlo else None
    laid_out = _compat.entry_parameters(hlo) if hlo else []

    rows: list[dict[str, Any]] = []
    taken: set[int] = set()
    for i, (path, info) in enumerate(flat):
        keys = list(path)
        arg = _arg_name(keys, i, names)
        j = module_index.get(i)
        attrs = main_args[j] if j is not None and j < len(main_args) else {}
        out_idx, by = _alias(j, attrs, xla_alias)
        if out_idx is not None:
            taken.add(out_idx)
        rows.append(
            dict(
                path=arg + jax.tree_util.keystr(tuple(keys[2:])),
                arg=arg,
                shape=tuple(info.shape),
                dtype=info.dtype,
                sh=in_sh[i] if i < len(in_sh) else None,
                donated=bool(info.donated),
                out_idx=out_idx,
                by=by,
                kept=j is not None,
                attrs=attrs,
                layout=laid_out[j] if j is not None and j < len(laid_out) else None,
            )
        )
    return rows, taken


def _arg_name(keys: list, i: int, names: list[str]) -> str:
    """The argument a leaf belongs to: its name in the signature, or its keyword."""
    if len(keys) >= 2 and getattr(keys[0], "idx", None) == 0:  # positional
        k = keys[1].idx
        return names[k] if k < len(names) else f"arg{k}"
    if len(keys) >= 2:  # keyword
        return str(getattr(keys[1], "key", keys[1]))
    return f"arg{i}"


def _alias(j: int | None, attrs: dict, xla_alias: dict | None) -> tuple[int | None, str]:
    """(the output reusing module argument j's buffer, who matched them: "jax" / "xla")."""
    if xla_alias is not None and j is not None and j in xla_alias:
        return xla_alias[j], "jax" if attrs.get("aliasing_output") is not None else "xla"
    if xla_alias is None and attrs.get("aliasing_output") is not None:
        return attrs["aliasing_output"], "jax"
    return None, ""


def _donation(r: dict, outputs: tuple[Output, ...], out_leaves: list, taken: set[int]) -> Donation:
    """A row's Donation: where its buffer went, why a donation was wasted, or a hint."""
    reason, silent, hint = "", False, ""
    if r["out_idx"] is None and r["donated"]:
        reason, silent = _why_not(r, outputs, out_leaves, taken)
    elif r["out_idx"] is None:
        cand = _matching_outputs(r, outputs, out_leaves, taken, same_dtype=True)
        if cand:
            hint = f"donate it to let {outputs[cand[0]].path} reuse its buffer"
    aliased = (
        outputs[r["out_idx"]].path
        if r["out_idx"] is not None and r["out_idx"] < len(outputs)
        else None
    )
    return Donation(
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

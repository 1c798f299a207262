"""nan: whether a value is non-finite, read without waiting for the device where it can
be, and which ops cannot make a non-finite value from finite inputs.

`nonfinite` reads one value: a float array on an accelerator is reduced there (4 bytes of flags
come back, `_compat.nonfinite_flags`), a small host array as Python floats. `KEEPS_FINITE`
and `KEEPS_FINITE_REAL` name the eager ops the watch need not check.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import ml_dtypes
import numpy as np

from jaxviz import _compat

MAX_CHECK_BYTES = 64 << 20  # larger arrays are not checked (a device->host read each)

_INEXACT: dict[Any, bool] = {}  # dtype -> floating or complex (np.issubdtype is slow)


# Eager primitives whose outputs are finite when their inputs are (the values move, or are
# compared, picked, rounded, made from integers): a non-finite output of one needs a
# non-finite input, which is not a finding of its own; it is checked only when an input
# carries a finding's taint, to follow the value. Random ops make keys and integers.
KEEPS_FINITE = frozenset(
    (
        "reshape",
        "broadcast_in_dim",
        "transpose",
        "squeeze",
        "expand_dims",
        "slice",
        "dynamic_slice",
        "concatenate",
        "copy",
        "copy_p",
        "device_put",
        "stage",  # jnp.asarray / jnp.array of host data (jax >= 0.10): the values move
        "select_n",
        "rev",
        "pad",
        "neg",
        "sign",
        "floor",
        "ceil",
        "round",
        "max",
        "min",
        "reduce_max",
        "reduce_min",
        "argmax",
        "argmin",
        "sort",
        "eq",
        "ne",
        "lt",
        "gt",
        "le",
        "ge",
        "and",
        "or",
        "not",
        "xor",
        "iota",
        "random_seed",
        "random_bits",
        "random_split",
        "random_fold_in",
        "random_wrap",
        "random_unwrap",
        "threefry2x32",
        "shift_left",
        "shift_right_logical",
        "shift_right_arithmetic",
        "stop_gradient",
        "is_finite",
        "split",
        "stack",
        "dynamic_update_slice",
    )
)
# ... and those whose outputs are finite when their inputs are real and finite (bounded, or
# growing slower than their input); a complex sin or tanh can overflow
KEEPS_FINITE_REAL = frozenset(
    ("sin", "cos", "tanh", "logistic", "erf", "erfc", "atan", "atan2", "clamp", "cbrt")
)


_HOLDS: dict[tuple, bool] = {}


def holds_every_value(src: Any, dst: Any) -> bool:
    """Whether a float type `dst` holds every value of type `src` (float32 -> float32 or
    float64, int16 or bool -> float16; not float32 -> bfloat16 or float16, int32 ->
    float16): convert_element_type to it makes a non-finite value only of one."""
    key = (src, dst)
    holds = _HOLDS.get(key)
    if holds is None and src is None:
        return False
    if holds is None:
        try:
            top = float(ml_dtypes.finfo(dst).max)
            s = np.dtype(src)
            if s == np.bool_:
                holds = True
            elif s.kind in "iu":
                holds = top >= float(ml_dtypes.iinfo(s).max)
            else:
                holds = top >= float(ml_dtypes.finfo(s).max)
        except (TypeError, ValueError):  # a key, an unknown type: checked
            holds = False
        _HOLDS[key] = holds
    return holds


def is_inexact(x: Any) -> bool:
    if isinstance(x, float):
        return True
    dt = getattr(x, "dtype", None)
    if dt is None:
        return False
    inexact = _INEXACT.get(dt)
    if inexact is None:
        try:
            # (jnp's issubdtype knows ml_dtypes' floats: bfloat16, float8_*; numpy's does not)
            inexact = _INEXACT[dt] = not _compat.is_key_dtype(dt) and bool(
                jax.numpy.issubdtype(dt, jax.numpy.inexact)
            )
        except (TypeError, ValueError):
            return False
    return inexact


ARRAY = _compat.ARRAY_TYPE
_FEW = 64  # a float array of at most this many values is checked in Python (nonfinite)
_isfinite = math.isfinite


def nonfinite(x: Any) -> int:
    """0 finite (or not a float array), 1 has Inf, 2 has NaN."""
    if isinstance(x, float):
        return 2 if x != x else (1 if x in (float("inf"), float("-inf")) else 0)
    # the dtype first: most eager outputs (keys, their uint32 data, indices) are exact
    if not is_inexact(x) or _compat.is_tracer(x):
        return 0
    try:
        if hasattr(x, "is_deleted") and x.is_deleted():
            return 0
        if not _compat.on_host(x):  # reduced on the device: 4 bytes come back, not x
            return _compat.read_flags(_compat.nonfinite_flags([x]))
        if _compat.aval_nbytes(_compat.aval_of(x)) > MAX_CHECK_BYTES:
            return 0
        parts = _compat.host_parts(x)  # (no host copy left on the user's array)
    except (TypeError, RuntimeError, ValueError):
        return 0
    worst = 0
    for a in parts:
        if a.size <= _FEW and a.dtype.kind == "f":
            # a scalar (most eager outputs) or a few values: read as Python floats, ~10x
            # faster than numpy's ufunc and reduction, whose code is cold after a loop
            w = 0
            for v in a.reshape(-1).tolist():
                if not _isfinite(v):
                    if v != v:
                        return 2
                    w = 1
        elif np.isfinite(a).all():
            w = 0
        else:
            w = 2 if np.isnan(a).any() else 1
        if w == 2:
            return 2
        worst = max(worst, w)
    return worst


def worst_of(xs) -> int:
    w = 0
    for x in xs:
        w = max(w, nonfinite(x))
        if w == 2:
            break
    return w


def chosen(params: dict) -> int:
    """A NaN (2) or Inf (1) the program put in an equation's params on purpose: gather's
    `fill_value` (`x.at[i].get(mode='fill', fill_value=jnp.nan)`); 0 when none. Its
    non-finite output is the program's own constant, as an Inf operand of `jnp.where` is."""
    w = 0
    for v in params.values():
        if isinstance(v, (float, np.floating)) and not math.isfinite(v):
            if v != v:
                return 2
            w = 1
    return w

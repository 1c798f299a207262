"""key-reuse's vocabulary, shared by the static and the runtime analyses.

A key is *consumed* by a sampler (`random_bits`), by `random_split` (both "full" uses) or by
`random_fold_in` ("fold" with its data). Two full uses of one key, a full use and a fold
(`split(k)[i] == fold_in(k, i)`), or two folds with the same data give the same random
numbers twice (`conflict`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxviz import _compat
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.report import finding
from jaxviz.diagnostics.rules import RULES

FULL = "full"
FOLD = "fold"
# the key ops: a walk does not look into them for sub-jaxprs (KeyFlow), and they are the
# consumptions the alternatives' walk numbers
RANDOM = {
    "random_bits",
    "random_split",
    "random_fold_in",
    "random_wrap",
    "random_unwrap",
    "random_seed",
    "threefry2x32",
}


@dataclasses.dataclass
class Use:
    vid: Any
    kind: str  # FULL | FOLD
    data: Any  # fold data: a Python int, a var id, or None
    what: str  # "random_bits", "random_split", "random_fold_in"
    chain: tuple  # eqns from the root jaxpr down to the consuming one
    loop: bool = False  # inside a loop body, on a key from outside the loop


@dataclasses.dataclass
class Reuse:
    first: Use
    second: Use
    why: str  # "twice" | "split-fold" | "loop" | "fold"


_DTYPE_KIND: dict[Any, str] = {}  # dtype -> "key" or its name (jax.dtypes.issubdtype is slow)


def _dtype_kind(dt: Any) -> str:
    kind = _DTYPE_KIND.get(dt)
    if kind is None:
        kind = _DTYPE_KIND[dt] = "key" if _compat.is_key_dtype(dt) else str(dt)
    return kind


def is_keyish(aval: Any) -> bool:
    """A typed key, or uint32 data (legacy keys are uint32[..., 2])."""
    dt = getattr(aval, "dtype", None)
    return dt is not None and _dtype_kind(dt) in ("key", "uint32")


def maybe_key(x: Any) -> bool:
    """A typed key array, or uint32 data shaped like legacy keys (last axis 2)."""
    if _compat.is_key_array(x):
        return True
    dt = getattr(x, "dtype", None)
    if dt is None:
        return False
    kind = _dtype_kind(dt)
    if kind == "key":
        return True
    shape: Any = getattr(x, "shape", ())
    return kind == "uint32" and len(shape) >= 1 and shape[-1] == 2


def conflict(k1: str, d1: Any, k2: str, d2: Any) -> str:
    if k1 == FULL and k2 == FULL:
        return "twice"
    if k1 == FOLD and k2 == FOLD:
        return "fold" if (d1 == d2 and not isinstance(d1, tuple)) else ""
    return "split-fold"


def reuse_info(msg: str, where: Any, case: str, **kw: Any) -> Diagnostic:
    """A key reuse that fits a known intent (a fixed key for evaluation, a jvp's pair, a
    library's own split): an info finding, with the rule's hint for that `case`."""
    return finding(
        "key-reuse", msg, where, severity="info", hint=RULES["key-reuse"].hint_for(case), **kw
    )

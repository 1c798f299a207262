"""Cost estimates from shapes: FLOPs and bytes read and written, per equation.

A rule table keyed by primitive name with a default rule, in the shape of JAX's own
interpreters. These are estimates from avals alone, before XLA fuses anything: bytes are
what the equation would read and write if it ran on its own. Equations with sub-jaxprs get
their cost from their bodies (`jaxpr_cost` in jaxviz.graph.build sums them).

    >>> import jax, jax.numpy as jnp
    >>> j = jax.make_jaxpr(lambda a, b: a @ b)(jnp.ones((8, 16)), jnp.ones((16, 4)))
    >>> eqn_cost(j.eqns[0]).flops
    1024.0
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

from jaxviz import _compat


class Cost(NamedTuple):
    flops: float  # floating point operations, 2 per multiply-add
    bytes: float  # bytes read (inputs) + written (outputs)


def _size(aval: Any) -> int:
    shape = getattr(aval, "shape", ())
    return math.prod(int(d) if isinstance(d, int) else 1 for d in shape)


def _io_bytes(eqn: Any) -> float:
    ins = sum(_compat.aval_nbytes(v.aval) for v in eqn.invars)
    outs = sum(_compat.aval_nbytes(v.aval) for v in eqn.outvars)
    return float(ins + outs)


def _elementwise(eqn: Any) -> Cost:
    return Cost(float(sum(_size(v.aval) for v in eqn.outvars)), _io_bytes(eqn))


def _data_movement(eqn: Any) -> Cost:
    return Cost(0.0, _io_bytes(eqn))


def _reduction(eqn: Any) -> Cost:
    return Cost(float(sum(_size(v.aval) for v in eqn.invars)), _io_bytes(eqn))


def _dot_general(eqn: Any) -> Cost:
    (lc, _rc), (_lb, _) = eqn.params["dimension_numbers"]
    lhs, _rhs = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
    contract = math.prod(lhs[d] for d in lc)
    out = _size(eqn.outvars[0].aval)
    return Cost(2.0 * out * contract, _io_bytes(eqn))


def _conv(eqn: Any) -> Cost:
    rhs = eqn.invars[1].aval.shape
    dn = eqn.params.get("dimension_numbers")
    groups = eqn.params.get("feature_group_count", 1) or 1
    out = _size(eqn.outvars[0].aval)
    # rhs spec (out_features, in_features, *spatial); per output: in_features/groups * window
    if dn is not None and hasattr(dn, "rhs_spec"):
        in_feat = rhs[dn.rhs_spec[1]]
        window = math.prod(rhs[d] for d in dn.rhs_spec[2:])
    else:
        in_feat, window = rhs[1], math.prod(rhs[2:])
    del groups  # rhs in_features is already per group
    return Cost(2.0 * out * in_feat * window, _io_bytes(eqn))


_MOVEMENT = (
    "reshape",
    "broadcast_in_dim",
    "transpose",
    "squeeze",
    "expand_dims",
    "slice",
    "dynamic_slice",
    "dynamic_update_slice",
    "gather",
    "concatenate",
    "pad",
    "rev",
    "copy",
    "copy_p",
    "device_put",
    "convert_element_type",
    "iota",
    "select_n",
    "bitcast_convert_type",
    "random_bits",
    "random_seed",
    "random_wrap",
    "random_unwrap",
    "threefry2x32",
    "sharding_constraint",
    "reduce_precision",
)
_REDUCTIONS = (
    "reduce_sum",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_and",
    "reduce_or",
    "argmax",
    "argmin",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "cumlogsumexp",
    "reduce_precision",
    "sort",
    "scatter-add",
    "scatter_add",
    "scatter",
)

COST_RULES: dict[str, Callable[[Any], Cost]] = {
    "dot_general": _dot_general,
    "conv_general_dilated": _conv,
    **{name: _data_movement for name in _MOVEMENT},
    **{name: _reduction for name in _REDUCTIONS},
}
ZERO = Cost(0.0, 0.0)


def eqn_cost(eqn: Any) -> Cost:
    """The estimated cost of one equation, ignoring any sub-jaxprs it carries."""
    rule = COST_RULES.get(eqn.primitive.name, _elementwise)
    try:
        return rule(eqn)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return Cost(0.0, _io_bytes(eqn))

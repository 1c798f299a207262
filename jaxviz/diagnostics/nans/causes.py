"""nan: whether a differentiated function's first NaN came from its forward pass or a derivative,
and whose derivative it was.

Under `jax.grad`, every equation of the forward pass carries a `jvp` name stack, as do the
derivative's factors JAX computes beside it (`0.5 / sqrt(x)` for sqrt); the backward pass
carries `transpose`. A NaN an op of the forward pass makes from a value outside its domain
(`jnp.sqrt(v)` where v < 0) is the forward value's NaN: the gradient only inherits it, and
the fix is to keep the input in the domain, not to mask the output. It is a derivative's
NaN when the op is one the line does not call (pow's derivative takes the log of its base),
or when the forward value is masked right away (`jnp.where(x > 0, jnp.sqrt(x), 0.)`): the
forward result is then finite and only the gradient is not.

A derivative's NaN is named after the forward op whose derivative went bad: the op nearest
upstream of the equation that first made an Inf (or the NaN), in the jaxpr that holds it
(`jnp.linalg.lstsq`'s gradient divides by the gaps between singular values inside `svd`'s
derivative, whatever else its line computes).
"""

from __future__ import annotations

import linecache
from typing import Any

from jaxviz import _compat

# op -> (what the user's line calls it, the values outside its real domain)
DOMAINS: dict[str, tuple[tuple[str, ...], str]] = {
    "sqrt": (("sqrt",), "a negative value"),
    "rsqrt": (("rsqrt",), "a negative value"),
    "log": (("log",), "a negative value"),
    "log1p": (("log1p",), "a value below -1"),
    "pow": (("**", "pow"), "a negative base with a non-integer exponent"),
    "asin": (("arcsin", "asin"), "a value outside [-1, 1]"),
    "acos": (("arccos", "acos"), "a value outside [-1, 1]"),
    "atanh": (("arctanh", "atanh"), "a value outside [-1, 1]"),
    "acosh": (("arccosh", "acosh"), "a value below 1"),
}

# op -> where its derivative is not finite although the op is: the ops a gradient's NaN is
# blamed on, likeliest first (a decomposition's derivative divides by gaps between values)
UNSAFE: dict[str, str] = {
    "svd": "where singular values repeat (or are 0): its derivative divides by their gaps",
    "eigh": "where eigenvalues repeat: its derivative divides by their gaps",
    "eig": "where eigenvalues repeat: its derivative divides by their gaps",
    "sqrt": "at 0 and below",
    "rsqrt": "at 0 and below",
    "log": "at 0 and below",
    "log1p": "at -1 and below",
    "pow": "where the base is 0 or below (its derivative takes the log of the base)",
    "div": "where the divisor is 0",
    "atan2": "at (0, 0)",
    "asin": "at -1 and 1 and beyond",
    "acos": "at -1 and 1 and beyond",
    "atanh": "at -1 and 1 and beyond",
    "acosh": "at 1 and below",
    "cbrt": "at 0",
    "integer_pow": "at 0 (a negative power)",
}
_RANK = {op: i for i, op in enumerate(UNSAFE)}
DECOMPOSITIONS = frozenset({"svd", "eigh", "eig"})  # the hint: differentiate another form

# ops a value passes through unchanged on its way to a mask (dtype, shape)
_PASS = frozenset({"convert_element_type", "broadcast_in_dim", "reshape", "squeeze"})


def causes(
    found: tuple | None,
    line: tuple[str, int],
    root: Any,
    inf_from: Any,
    outer: str = "",
    transformed: bool = False,
) -> dict:
    """A NanFinding's grad, derivative_of and inf_from fields, from locate's `found` (None:
    not localised), the user's line it is on and the jaxpr it ran in (outer: the name of
    the eager jit that ran it; transformed: it ran under jax.grad's jvp or transpose)."""
    if not found:
        return {"grad": False}
    code = linecache.getline(*line)
    grad = made_by_derivative(found[0], code, root)
    of = derivative_of(found, code, root) if grad else ""
    factor = derivative_factor(found[0], outer) if transformed and not grad else ""
    if factor:  # (an eager grad: the equations carry no name stack of their own)
        grad, of = True, factor
    return {"grad": grad, "derivative_of": of, "inf_from": inf_from(found)}


# jax.numpy's names of the unsafe ops (its jitted functions are named after them)
_JNP_NAMES = {
    "arcsin": "asin",
    "arccos": "acos",
    "arctanh": "atanh",
    "arccosh": "acosh",
    "power": "pow",
    "float_power": "pow",
    "true_divide": "div",
    "divide": "div",
    "reciprocal": "div",
}


def derivative_factor(chain: tuple, outer: str = "") -> str:
    """Under jax.grad's jvp, the op whose derivative's factor made the value: the equation
    sits in a jit named after an unsafe op (jnp.sqrt's jit, linearized, computes `0.5 /
    sqrt(x)` beside sqrt) and is not that op itself (`div` in the derivative of `sqrt`);
    "" otherwise. outer: the name of the jit the chain starts in, when it is an eager op."""
    bad = chain[-1].primitive.name
    names = [str(e.params.get("name", "")) for e in chain[:-1] if "name" in e.params]
    for name in reversed([outer, *names]):
        if not name:
            continue
        op = _JNP_NAMES.get(name, name)
        if op in UNSAFE:
            return op if op != bad else ""
        return ""
    return ""


def domain_of(op: str) -> str:
    """The values outside `op`'s real domain ("a negative value"), "" for other ops."""
    d = DOMAINS.get(op)
    return d[1] if d else ""


def made_by_derivative(chain: tuple, code: str, root: Any) -> bool:
    """Whether the equation at the end of `chain` (the first to make a NaN or Inf) belongs to
    a derivative: the backward pass, or a jvp's factor; not a forward op on a value outside
    its domain whose result is used unmasked.

    code: the source of the user's line it is on; root: the jaxpr the chain starts in.
    """
    stacks = [_compat.name_stack(e) for e in chain]
    if any("transpose" in s for s in stacks):
        return True
    if not any("jvp" in s for s in stacks):
        return False
    return not _forward_domain(chain, code, root)


def _forward_domain(chain: tuple, code: str, root: Any) -> bool:
    eqn = chain[-1]
    d = DOMAINS.get(eqn.primitive.name)
    if d is None or not any(name in code for name in d[0]):
        return False
    home = _home(chain, root)
    return home is not None and not _masked(eqn, home)


def _home(chain: tuple, root: Any) -> Any:
    """The open jaxpr whose equations hold the chain's last one."""
    eqn = chain[-1]
    if len(chain) == 1:
        return _compat.open_jaxpr(root)
    for s in _compat.sub_jaxprs(chain[-2]):
        j = _compat.open_jaxpr(s.jaxpr)
        if any(e is eqn for e in j.eqns):
            return j
    return None


def _masked(eqn: Any, jaxpr: Any) -> bool:
    """Whether `eqn`'s output goes (through casts and reshapes only) into a select: a
    `jnp.where` (a jit named `_where`) or `lax.select` that may drop its NaN."""
    values = set(eqn.outvars)
    seen = False
    for e in jaxpr.eqns:
        if e is eqn:
            seen = True
            continue
        if not seen or not any(
            v.__class__ is not _compat.LITERAL_TYPE and v in values for v in e.invars
        ):
            continue
        name = e.primitive.name
        if name == "select_n" or "where" in str(e.params.get("name", "")):
            return True
        if name in _PASS:
            values.update(e.outvars)
    return False


def derivative_of(found: tuple, code: str, root: Any) -> str:
    """The forward op whose derivative made a gradient's first non-finite value ("svd"), or
    "" when none is found in the jaxpr that holds it.

    found: locate's (NaN chain, kind, the chain of the Inf before it or None).
    """
    chain = found[2] or found[0]
    bad = chain[-1]
    op = bad.primitive.name
    if op in UNSAFE and op in DOMAINS and any(n in code for n in DOMAINS[op][0]):
        return op  # the line's own sqrt, masked: its derivative at the masked values
    home = _home(chain, root)
    if home is None:
        return ""
    near = _upstream(bad, home)
    if near:
        return near
    others = [e.primitive.name for e in home.eqns if e is not bad and e.primitive.name in UNSAFE]
    return min(others, key=_RANK.__getitem__, default="")


def _upstream(bad: Any, jaxpr: Any) -> str:
    """The unsafe op nearest upstream of `bad` in `jaxpr` (fewest equations between), the
    likeliest of those at the same distance."""
    made = {}
    for e in jaxpr.eqns:
        if e is bad:
            break
        for v in e.outvars:
            made[v] = e
    frontier = [v for v in bad.invars if v.__class__ is not _compat.LITERAL_TYPE]
    seen: set = set()
    while frontier:
        eqns = []
        for v in frontier:
            e = made.get(v)
            if e is not None and id(e) not in seen:
                seen.add(id(e))
                eqns.append(e)
        hits = [e.primitive.name for e in eqns if e.primitive.name in UNSAFE]
        if hits:
            return min(hits, key=_RANK.__getitem__)
        frontier = [v for e in eqns for v in e.invars if v.__class__ is not _compat.LITERAL_TYPE]
    return ""

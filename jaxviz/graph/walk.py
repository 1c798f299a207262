"""One walk over a jaxpr, in the shape of `eval_jaxpr`, for every pass that interprets one.

An environment maps each variable to the pass's value for it (`read`/`write`, literals read
through the pass's `literal`), a loop over the equations calls the rule of each equation's
primitive (a table keyed by primitive name, with a default rule), and a value leaves the
environment after its last use, as with JAX's `last_used`. Passes differ only in their
values and their rules: the graph builder's values are ports (build.py), KeyFlow's are key
identities (diagnostics/keys/flow.py), nan's are arrays (diagnostics/nans/locate.py).

A rule is `rule(ctx, eqn, invals) -> outvals`, one value per `eqn.outvars`; `ctx` is the
pass's own state for the jaxpr being walked (a rule that recurses walks a sub-jaxpr with a
new one). Sub-jaxprs, and how their inputs and outputs map to the equation's, come from
`_compat.sub_jaxprs` only: `Walker.enter` walks one of them.

    >>> import jax, jax.numpy as jnp
    >>> from jaxviz import _compat
    >>> def evaluate(ctx, eqn, invals):           # a default rule: what eval_jaxpr does
    ...     return _compat.bind_eqn(eqn, invals)
    >>> j = jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(0.5)
    >>> [float(y) for y in Walker({}, evaluate).walk(j, None, [0.5], _compat.jaxpr_consts(j))]
    [0.9588510990142822]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jaxviz import _compat

Rule = Callable[..., Sequence]
"""`rule(ctx, eqn, invals) -> outvals`: the pass's values of an equation's outputs."""

CALLS: frozenset[str] = _compat.CALL_PRIMITIVES
"""Call-like primitives, one body each: jit, closed_call, eval_jaxpr, remat2,
custom_jvp_call, custom_vjp_call, shard_map, xla_pmap, ..."""

LOOPS: frozenset[str] = frozenset({"scan", "while"})

_Literal, _DropVar = _compat.LITERAL_TYPE, _compat.DROPVAR_TYPE


def rules(
    *, call: Rule | None = None, loop: Rule | None = None, cond: Rule | None = None, **by_name: Rule
) -> dict[str, Rule]:
    """A rule table keyed by primitive name, from rules per family.

    Args:
      call: the rule of every call-like primitive (`CALLS`: one body, run once).
      loop: the rule of scan and while (bodies run many times).
      cond: the rule of cond (and lax.switch): one of its branches runs.
      by_name: rules of single primitives, `random_bits=...`; they win over families.

    >>> sorted(rules(loop=print, cond=print))
    ['cond', 'scan', 'while']
    """
    table: dict[str, Rule] = {}
    for names, rule in ((CALLS, call), (LOOPS, loop), (("cond",), cond)):
        if rule is not None:
            table.update(dict.fromkeys(names, rule))
    table.update(by_name)
    return table


class Stop(Exception):
    """Raised by a rule to end the walk of the current jaxpr before its next equation; the
    walk then returns its outputs as they stand (the graph builder's equation budget)."""


def _no_value(v: Any) -> None:
    return None


def last_uses(jaxpr: Any) -> list[tuple]:
    """For each equation of an open jaxpr, the variables dead once it ran: its inputs that
    no later equation nor the outputs read, and its outputs nothing reads (JAX's `last_used`
    as a list, so that freeing costs nothing where nothing dies).

    >>> import jax, jax.numpy as jnp
    >>> j = jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0).jaxpr
    >>> [len(d) for d in last_uses(j)]      # x dies at sin, sin's output at mul
    [1, 1]
    """
    live = {v for v in jaxpr.outvars if v.__class__ is not _Literal}
    eqns = jaxpr.eqns
    dead: list[tuple] = [()] * len(eqns)
    for k in range(len(eqns) - 1, -1, -1):
        eqn = eqns[k]
        d = [v for v in eqn.outvars if v not in live and v.__class__ is not _DropVar]
        for v in eqn.invars:
            if v.__class__ is not _Literal and v not in live:
                live.add(v)
                d.append(v)
        if d:
            dead[k] = tuple(d)
    return dead


def body_inputs(sub: _compat.SubJaxpr, invals: Sequence, fill: Any = None) -> list:
    """The values of a sub-jaxpr's inputs, gathered from its equation's through `in_map`
    (`fill` where no equation input feeds one)."""
    n = len(invals)
    return [invals[m] if 0 <= m < n else fill for m in sub.in_map]


def eqn_outputs(sub: _compat.SubJaxpr, body_outs: Sequence, outs: list) -> list:
    """Writes a sub-jaxpr's output values into its equation's `outs` through `out_map`
    (in place; outputs no body output maps to keep their value); returns `outs`."""
    n = len(body_outs)
    for i, m in enumerate(sub.out_map):
        if m >= 0 and i < n:
            outs[m] = body_outs[i]
    return outs


class Walker:
    """Walks jaxprs with one rule table; one walker per run of a pass (it remembers each
    jaxpr's last uses while it lives, and a jaxpr that many equations call is walked often).

    Args:
      rules: primitive name -> rule (see `rules`).
      default: the rule of every other primitive.
      literal: a literal's value, from the Literal (default: its Python/NumPy value).
      strict: a variable read before anything wrote it raises KeyError; False: it reads
        as None (partial jaxprs, passes whose values are partial).
      free: drop each value after its last use (the values are arrays); False where the
        values are small and kept anyway (the graph builder's ports).
    """

    def __init__(
        self,
        rules: dict[str, Rule],
        default: Rule,
        *,
        literal: Callable[[Any], Any] | None = _compat.literal_value,
        strict: bool = True,
        free: bool = True,
    ):
        self.rules = rules  # primitive name -> rule
        self.default = default  # the rule of every other primitive
        self.literal = literal or _no_value  # Literal -> the pass's value of it
        self.strict = strict  # unknown variables raise (else read None)
        self.free = free  # values leave the environment when dead
        self._dead: dict[int, tuple[Any, list[tuple]]] = {}  # id(jaxpr) -> (it, last_uses)

    def walk(
        self, jaxpr: Any, ctx: Any, inputs: Sequence, consts: Sequence = (), env: dict | None = None
    ) -> list:
        """Runs the rules over one jaxpr (ClosedJaxpr or Jaxpr) and returns the values of
        its outputs. `inputs` and `consts` bind its invars and constvars (zip: missing
        ones stay unbound); `env`: the environment to fill, for a pass that reads it too.
        """
        j = _compat.open_jaxpr(jaxpr)
        env = {} if env is None else env
        env.update(zip(j.constvars, consts))
        env.update(zip(j.invars, inputs))
        rules, default, literal = self.rules, self.default, self.literal
        read = env.__getitem__ if self.strict else env.get
        dead = self._last_uses(j) if self.free else None
        try:
            for k, eqn in enumerate(j.eqns):
                invals = [literal(v) if v.__class__ is _Literal else read(v) for v in eqn.invars]
                outvals = rules.get(eqn.primitive.name, default)(ctx, eqn, invals)
                for v, x in zip(eqn.outvars, outvals):
                    if v.__class__ is not _DropVar:
                        env[v] = x
                if dead is not None:
                    for v in dead[k]:
                        env.pop(v, None)
        except Stop:
            pass
        return [literal(v) if v.__class__ is _Literal else read(v) for v in j.outvars]

    def enter(
        self,
        sub: _compat.SubJaxpr,
        ctx: Any,
        invals: Sequence,
        outs: list,
        consts: Sequence | None = None,
    ) -> list:
        """Walks one sub-jaxpr of an equation: inputs from `invals` through `in_map` (None
        where none), its own consts unless given, outputs into `outs` through `out_map`."""
        if consts is None:
            consts = _compat.jaxpr_consts(sub.jaxpr)
        body_outs = self.walk(sub.jaxpr, ctx, body_inputs(sub, invals), consts)
        return eqn_outputs(sub, body_outs, outs)

    def _last_uses(self, j: Any) -> list[tuple]:
        hit = self._dead.get(id(j))
        if hit is None or hit[0] is not j:
            hit = self._dead[id(j)] = (j, last_uses(j))
        return hit[1]

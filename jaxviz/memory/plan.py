"""Which of a cell's functions jaxviz runs again after the cell, and why not the others.

Nothing runs the user's functions again unless asked: `%%jaxtrace --compare` (or `--steps N`)
compiles and runs each captured function on synthesised inputs (jaxviz.memory.run), with
and without donation. `runnable(trace)` is the policy: which traces may run so, and for the
others a note for the memory tab and the text twin saying why not and how to run it.

    >>> ok, why = runnable(ct["step"])
"""

from __future__ import annotations

from jaxviz import _compat
from jaxviz.graph.trace import Trace

DEFAULT_STEPS = 5  # steps of a run after the cell without --steps
DEFAULT_RUN_SECONDS = 1.0  # without --steps, a run ends after this long (at least 2 steps)
_EFFECT_OPS = {
    "debug_print",
    "io_callback",
    "pure_callback",
    "debug_callback",
    "outfeed",
    "infeed",
    "send",
    "recv",
}


def runnable(trace: Trace) -> tuple[bool, str]:
    """Whether jaxviz runs a trace's compiled function after the cell, and why not (a note
    for the memory tab and the text twin, never printed into the cell's output).

    Only the user's own jitted functions that traced cleanly run, on inputs synthesised
    from their avals (zeros, valid keys). A `while` loop's trip count depends on the data,
    so on zeros it may never end: those functions are left for `trace.run(*real_args)`.
    """
    if not (
        trace.kind == "jit" and trace.error is None and trace.fun is not None and trace.user_code
    ):
        return False, ""
    ops = {n.op for b in trace.graph.bodies for n in b.nodes if n.kind == "eqn"}
    effects = sorted(op for op in ops if "callback" in op or op in _EFFECT_OPS)
    if effects or _compat.has_effects(trace.jaxpr):
        return False, (
            f"not run again: it has side effects "
            f"({', '.join(effects) or 'ordered effects'}) that would repeat. "
            f"Run it on purpose with ct['{trace.name}'].live_run(*args) (use -o ct)."
        )
    if trace.rejitted:
        return False, (
            f"not run after the cell: jaxviz did not see the "
            f"jitted object that was called (Python 3.11, or a jitted method), and "
            f"jitting it again would run your Python again. Run it on purpose with "
            f"ct['{trace.name}'].live_run(*args) (use -o ct)."
        )
    if "while" in ops:
        return False, (
            f"not run on synthesised inputs: its while_loop "
            f"could run forever on zeros. Run it on real inputs with "
            f"ct['{trace.name}'].live_run(*args) (use -o ct)."
        )
    return True, ""

"""jaxviz.options: settings, each documented where it is defined.

    >>> import jaxviz
    >>> jaxviz.options.max_eqns = 200_000   # draw bigger programs (slower views)
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Options:
    max_eqns: int = 100_000
    """Equations the graph model holds per traced function (distinct, shared bodies once).
    A bigger program is cut there, and the Trace says so in its notes."""

    large_constant_bytes: int = 1 << 20
    """Constants captured at trace time above this size get a `large-constant` diagnostic."""


options = Options()

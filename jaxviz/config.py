"""jaxviz.options: settings, each documented where it is defined.

>>> import jaxviz
>>> jaxviz.options.max_eqns = 200_000   # draw bigger programs (slower views)
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

OUTPUTS = ("auto", "shared", "isolated")  # the values of Options.outputs


@dataclasses.dataclass
class Options:
    max_eqns: int = 100_000
    """Equations the graph model holds per traced function (distinct, shared bodies once).
    A bigger program is cut there, and the Trace says so in its notes."""

    large_constant_bytes: int = 1 << 20
    """Constants captured at trace time above this size get a `large-constant` diagnostic."""

    check_every_call: bool = False
    """Check the outputs of every jitted call for NaN and Inf, not only each function's first
    call: every call takes JAX's Python path (dispatch ~10x slower, like `jax_debug_nans`),
    until the first non-finite value is found and located. `%%jaxtrace --nans` sets it for
    one cell; `python -m jaxviz --nans FILE.py` for a script."""

    keep_cells: int = 20
    """%%jaxtrace cells whose traces the session keeps for their views (a click in a view
    selects the equation in Python: `ct.widget.selected_eqn`). Older cells' views keep their
    drawing; their traces are let go unless stored with `-o`. A re-run cell lets go of its
    previous run's at once (its widgets are closed). 0: keep none."""

    memory_limit: int | None = None
    """Bytes of the device you mean to run on (None: no limit). After a cell, each jitted
    function of yours is compiled again (never run) and one whose compiled peak exceeds the
    limit gets an `out-of-memory` finding with its largest buffers, as if the device had run
    out of memory: `jaxviz.options.memory_limit = 16 * 2**30` checks a 16 GiB GPU's budget
    on a laptop's CPU. Uses the compiled memory each cell computes anyway (see
    compiled_memory_budget); a function past that budget is compiled again."""

    compiled_memory_budget: float = 1.0
    """Seconds a %%jaxtrace cell (or trace_cell) spends, after the cell, on its own jitted
    functions' compiled memory (the memory tab's buffers at each compiled peak). The cell
    has compiled them already, so each costs its analysis only (~1 ms for a small step);
    functions past the budget are named in the view with how to get theirs
    (`ct['step'].memory()`). 0: none."""

    compiled_memory_max: int = 8
    """At most this many functions get their compiled memory after a cell (see
    compiled_memory_budget)."""

    rss_lane: bool | None = None
    """Whether a %%jaxtrace cell's live memory chart has a lane for the process's resident
    memory (RSS). None: only where no device reports `memory_stats()` (CPU), where the RSS is
    the one signal that sees buffers inside a call. On an accelerator the RSS is mostly the
    runtime's own mappings (13-15 GiB on a TPU host from the start), nothing a cell moves;
    True shows it there too (host-side data, a leak in numpy)."""

    outputs: str = "auto"
    """How the graph view reaches Python in a notebook: "shared" (JupyterLab, Notebook 7: the
    view is self-contained HTML, and clicks reach the page's widget model through the shared
    page), "isolated" (each output in its own iframe or webview, as Colab and VS Code render
    them: the GraphWidget itself is displayed and clicks travel through its own comm, with
    the HTML copy beside it for saved notebooks), or "auto": "isolated" in Colab
    ('google.colab' imported) and in VS Code (its kernel has VSCODE_PID / VSCODE_CWD set),
    "shared" elsewhere."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "outputs" and value not in OUTPUTS:
            raise ValueError(
                f"jaxviz.options.outputs must be one of {', '.join(map(repr, OUTPUTS))}, got "
                f'{value!r}: e.g. jaxviz.options.outputs = "isolated" where each output is '
                f"its own iframe (Colab, VS Code)."
            )
        super().__setattr__(name, value)

    @contextlib.contextmanager
    def using(self, **changes: Any) -> Iterator[Options]:
        """Sets options for a block, then restores them: `with options.using(max_eqns=10):`."""
        for k in changes:
            if not hasattr(self, k):
                raise AttributeError(f"jaxviz.options has no option {k!r}")
        before = {k: getattr(self, k) for k in changes}
        for k, v in changes.items():
            setattr(self, k, v)
        try:
            yield self
        finally:
            for k, v in before.items():
                setattr(self, k, v)


options = Options()

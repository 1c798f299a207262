"""Diagnostics: the analyses that fill Trace.diagnostics and CellTrace.diagnostics.

Every analysis over a jaxpr is an interpreter in the shape of eval_jaxpr; analyses of a
cell also read what the capture recorded and the cell's exception. Rules and messages:
docs/diagnostics.md.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from jaxviz._diagnostic import Diagnostic

if TYPE_CHECKING:
    from jaxviz._cell import CellTrace
    from jaxviz._trace import Trace


def diagnose_trace(trace: "Trace") -> list[Diagnostic]:
    """Static checks on one staged function."""
    return []


def diagnose_cell(cell: "CellTrace") -> list[Diagnostic]:
    """Checks on a whole cell: every trace's diagnostics, then the cell's own."""
    out: list[Diagnostic] = []
    for t in cell.traces:
        if not t.diagnostics:
            t.diagnostics.extend(diagnose_trace(t))
        out.extend(t.diagnostics)
    return out

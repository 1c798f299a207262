"""The collective rule: a sharded program's costly reshards, from its compiled memory reports
(their facts and messages: jaxviz.mesh.findings), at the line that asked for them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.report import finding, quoted
from jaxviz.diagnostics.rules import RULES
from jaxviz.mesh.findings import collective_findings


def collective_diagnostics(reports: Sequence[Any]) -> list[Diagnostic]:
    """The findings of a cell's MemoryReports (`CellTrace.compiled`); none on one device."""
    rule = RULES["collective"]
    return [
        finding("collective", quoted(f.where) + f.message, f.where, hint=rule.hint_for(f.variant),
                node_ids=f.node_ids, trace=f.trace)
        for f in collective_findings(reports)
    ]  # fmt: skip

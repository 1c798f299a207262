"""The Diagnostic record: one misuse, at the line the user must change.

Analyses that produce diagnostics live in jaxviz/diagnostics/check.py (and the modules it
imports); this module is only the shared record, so capture, graph and views can
name it without importing the analyses.
"""

from __future__ import annotations

import dataclasses

from jaxviz.diagnostics import rules
from jaxviz.graph.files import place
from jaxviz.schema import DiagnosticEntry

RULES = tuple(rules.RULES)  # the rule names, from the table: ("leaked-tracer", ...)
SEVERITIES = rules.SEVERITIES  # ("error", "warning", "info")


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """A misuse of JAX found in a traced function or cell.

    Example:
        Diagnostic(rule="tracer-bool", severity="error", filename="<cell 3>", line=5,
                   message="`if x > 0` needs a concrete value, but `x` is traced by jax.jit",
                   hint="Use jnp.where(x > 0, a, b) or lax.cond.")
    """

    rule: str  # one of RULES, "tracer-bool"
    severity: str  # "error" | "warning" | "info"
    message: str  # the fact, with the user's names
    filename: str = ""  # "<cell 3>" or a path
    line: int | None = None  # 1-based: the line the user must change, as the file numbers
    # it (linecache, tracebacks); what jaxviz prints is the editor's number: files.shown_line
    node_ids: tuple[str, ...] = ()  # graph nodes, "body:id" strings, e.g. ("0:12",)
    related: tuple[
        tuple[str, int, str], ...
    ] = ()  # (filename, line, why): where created, used later
    hint: str = ""  # the fix, with a short bad -> good example
    trace: str = ""  # name of the Trace it belongs to, "" for the cell
    code: str = ""  # the source text of `line`, stripped
    compare: tuple[int, int] | None = None  # recompile: the earlier and the later trace,
    # as indices in CellTrace.traces (the view's "compare" action opens them side by side)

    def __post_init__(self):
        if self.rule not in RULES:
            raise ValueError(f"unknown diagnostic rule {self.rule!r}; expected one of {RULES}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}; expected one of {SEVERITIES}")

    def format(self) -> str:
        """`FILE:LINE: severity: rule: message`, the form compilers and linters use (FILE as
        the user knows it: `cell [3]` for a notebook cell)."""
        where = place(self.filename, self.line)
        return f"{where}: {self.severity}: {self.rule}: {self.message}"

    def to_dict(self) -> DiagnosticEntry:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "filename": self.filename,
            "line": self.line,
            "node_ids": list(self.node_ids),
            "related": [list(r) for r in self.related],
            "hint": self.hint,
            "trace": self.trace,
            "code": self.code,
            "compare": list(self.compare) if self.compare else None,
        }

"""Making a Diagnostic: the line's code, the place as the user calls it, the message's lead.

Every rule family builds its findings with `finding(rule, message, where, ...)`, which reads
the code of the line and the rule's default severity from the rule table; `quoted` leads a
message with the line's code, `library_related` names the library lines that made a call.
"""

from __future__ import annotations

import linecache

from jaxviz import _compat
from jaxviz.capture.places import is_user_file, library_label
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.rules import RULES
from jaxviz.graph.files import place
from jaxviz.graph.trace import Trace


def code_of(filename: str, line: int | None) -> str:
    return linecache.getline(filename, line).strip() if filename and line else ""


def finding(
    rule: str,
    message: str,
    where: tuple[str, int] | None,
    *,
    severity: str = "",
    hint: str = "",
    node_ids=(),
    related=(),
    trace: str = "",
    compare: tuple[int, int] | None = None,
) -> Diagnostic:
    """A Diagnostic at `where`, with its line's code; severity "" is the rule's default."""
    filename, line = where if where else ("", None)
    severity = severity or RULES[rule].severity
    return Diagnostic(
        rule=rule,
        severity=severity,
        message=message,
        filename=filename,
        line=line,
        node_ids=tuple(node_ids),
        related=tuple(related),
        hint=hint,
        trace=trace,
        code=code_of(filename, line),
        compare=compare,
    )


def place_label(file: str, line: int) -> str:
    return place(file, line)


def quoted(where: tuple[str, int] | None) -> str:
    code = code_of(*where) if where else ""
    return f"`{code}`: " if code else ""


def library_related(t: Trace, name: str = "") -> tuple[tuple[str, int, str], ...]:
    """The library lines that called `t` (the user's function `name`) on the user's behalf,
    as related places."""
    name = name or t.name
    return tuple((f, l, f"{library_label(f)} calls {name} here") for f, l in t.library_sites[:2])


def chain_line(chain: tuple) -> tuple[str, int] | None:
    """The innermost user line of an equation chain (inner equations first): not a
    library's (jaxviz.capture.places), unless the equation has no other."""
    for eqn in reversed(chain):
        frames = _compat.user_frames(eqn)
        if frames:
            f = next((f for f in reversed(frames) if is_user_file(f.file)), frames[-1])
            return f.file, f.line
    return None

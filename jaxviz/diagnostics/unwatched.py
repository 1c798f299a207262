"""unwatched: what a cell ran with jaxviz stepped aside, said where it ran.

IPython's %timeit and %%timeit in a traced cell run as without jaxviz (capture/aside.py):
their calls are neither recorded nor checked, so a misuse that runs only inside them (a
jit of a partial or a lambda made per call, which compiles again each time) has no finding.
The cell says so, one info per %timeit line, instead of staying silent about it.
"""

from __future__ import annotations

from typing import Any

from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.report import finding, quoted


def unwatched_findings(obs: Any) -> list[Diagnostic]:
    """An info per %timeit the cell ran (the observer's `aside`), at its line."""
    out, seen = [], set()
    for filename, line, what in getattr(obs, "aside", ()):
        if (filename, line) in seen:  # (a %timeit in a loop: once)
            continue
        seen.add((filename, line))
        where = (filename, line)
        msg = (
            f"{quoted(where)}`{what}` ran with jaxviz stepped aside, as a plain cell runs it "
            "(its timings are a plain cell's): its calls were neither recorded nor checked, "
            "so nothing it runs has a finding or a graph here."
        )
        out.append(finding("unwatched", msg, where))
    return out

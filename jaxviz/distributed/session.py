"""A run's multi-process side, from its start to the one exchange at its end.

`Processes(prefix)` gives the capture two observers (`observers`): the programs' watchdog
(watch.py) and the step clock (summary.py). When the run ends, `finish(ct, ...)` does
nothing in a single process; in a `jax.distributed` run each process summarises its
CellTrace and publishes it, and process 0 gathers the others' (waiting at most `wait`
seconds) and returns the MergedReport.

    >>> p = Processes("jaxviz/run/")
    >>> rec, obs = recorder(path, observers=p.observers)
    >>> ... run the script ...
    >>> done = p.finish(ct, seconds=12.5, wait=30.0)
    >>> done.report        # process 0: the MergedReport; others: None (done.sent: bytes)
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Any

from jaxviz import _compat
from jaxviz.distributed.exchange import gather, publish
from jaxviz.distributed.merge import MergedReport, merge
from jaxviz.distributed.summary import StepClock, summarise
from jaxviz.distributed.watch import ProgramWatch

WAIT = 30.0  # seconds process 0 waits for the others' summaries, by default

_cells = itertools.count(1)


def cell_prefix() -> str:
    """The keys of the kernel's next traced cell, "jaxviz/cell3/": every process's kernel
    runs the same cells in the same order, so the n-th traced cell of each meets the
    others' n-th."""
    return f"jaxviz/cell{next(_cells)}/"


@dataclasses.dataclass
class Finished:
    """A multi-process run's end on this process: its index and the number of processes,
    the bytes it published, and on process 0 the merged report."""

    process: int
    processes: int
    sent: int = 0
    report: MergedReport | None = None
    seconds: float = 0.0  # the end's cost on this process: summary, exchange, merge


class Processes:
    """The observers of one run, then its exchange (`prefix`: its keys in the store)."""

    def __init__(self, prefix: str = "jaxviz/run/") -> None:
        self.prefix = prefix
        self.watch = ProgramWatch(prefix)
        self.clock = StepClock()

    @property
    def observers(self) -> list:
        return [self.watch, self.clock]

    def finish(
        self, ct: Any, *, seconds: float, wait: float = WAIT, live: Any = None
    ) -> Finished | None:
        """The end's exchange (None in a single process, or when jax.distributed was shut
        down before the run ended); `live`: the cell's CellMemory, when it was watched."""
        t0 = time.perf_counter()
        self.watch.stop()
        group = _compat.process_group()
        if group is None:
            return None
        summary = summarise(ct, group, seconds=seconds, clock=self.clock, live=live)
        if group[0] != 0:
            sent = publish(self.prefix, summary)
            return Finished(group[0], group[1], sent=sent, seconds=time.perf_counter() - t0)
        g = gather(self.prefix, summary, wait)
        report = merge(g, self.watch.mismatches, self.watch.programs())
        report.seconds = time.perf_counter() - t0
        return Finished(0, group[1], report=report, seconds=report.seconds)

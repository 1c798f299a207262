"""The one exchange at a run's end: each process publishes its summary, process 0 gathers.

Through the key-value store of JAX's coordination service (`_compat.kv_set`, `kv_dir`): no
socket of jaxviz's. Nothing waits on another process but process 0, and it waits at most
`wait` seconds (a process that died, or is still running, is named missing); the others
publish and go on. Keys: `{prefix}summary/{process}`, the prefix naming the run or cell
("jaxviz/run/", "jaxviz/cell3/").

    >>> g = gather("jaxviz/run/", mine, wait=30.0)   # on process 0
    >>> g.missing                                      # processes that sent nothing in time
    []
"""

from __future__ import annotations

import dataclasses
import time

from jaxviz import _compat
from jaxviz.distributed.summary import ProcessSummary

POLL = 0.01  # seconds between process 0's reads while it waits (one round trip each)


def publish(prefix: str, summary: ProcessSummary) -> int:
    """Stores this process's summary for process 0; its size in bytes."""
    text = summary.to_json()
    _compat.kv_set(f"{prefix}summary/{summary.process}", text)
    return len(text.encode())


@dataclasses.dataclass
class Gathered:
    """What process 0 received: each process's summary (its own included), their sizes in
    bytes, the processes missing at the deadline, and how long it waited."""

    summaries: dict[int, ProcessSummary]
    sizes: dict[int, int]
    missing: list[int]
    waited: float
    wait: float  # the bound it waited under


def gather(prefix: str, mine: ProcessSummary, wait: float) -> Gathered:
    """Process 0: its own summary and the others', read until all are there or `wait`
    seconds have passed."""
    t0 = time.perf_counter()
    summaries = {mine.process: mine}
    sizes = {mine.process: len(mine.to_json().encode())}
    want = set(range(mine.processes))
    while True:
        for key, text in _compat.kv_dir(f"{prefix}summary/").items():
            p = int(key.rsplit("/", 1)[1])
            if p not in summaries:
                summaries[p] = ProcessSummary.from_json(text)
                sizes[p] = len(text.encode())
        waited = time.perf_counter() - t0
        if want <= summaries.keys() or waited >= wait:
            break
        time.sleep(POLL)
    missing = sorted(want - summaries.keys())
    return Gathered(dict(sorted(summaries.items())), sizes, missing, waited, wait)

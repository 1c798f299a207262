"""Memory while a cell runs: the sampler in the background, the cell's own calls as marks.

`CellWatch` starts a `Sampler` (one lane per device: `memory_stats()` on an accelerator, live
JAX arrays on CPU, and the process RSS) when a %%jaxtrace cell starts, with an `ArrayLog` of
the arrays it sees (type, bytes, first seen, freed or deleted: never the arrays), and reads
the recorder's list of jitted calls (`Recorder.calls`). Nothing runs the user's functions
again: the numbers are the cell's own. While the cell runs, `on_update` gets what is new at
most 30 times a second (from the sampler's thread); when it ends, `stop()` returns the
`CellMemory` record.

    >>> import jax, jax.numpy as jnp
    >>> from jaxviz.capture.recorder import Recorder
    >>> rec = Recorder()
    >>> with CellWatch(rec) as w, rec:
    ...     y = jax.jit(lambda x: x + 1)(jnp.zeros(1000))
    >>> mem = w.stop()
    >>> [name for _t, name, _line in mem.calls]
    ['<lambda>']
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import jax

from jaxviz.capture.recorder import call_mark
from jaxviz.format import fmt_bytes
from jaxviz.memory.sampler import ArrayLife, ArrayLog, Lane, Sampler

MAX_ARRAYS = 20_000  # arrays the log keeps per cell; later ones are counted, not listed


@dataclasses.dataclass(frozen=True)
class CallMark:
    """One jitted call the capture saw, a mark on the chart's time axis."""

    t: float  # 0.52: seconds since the cell started
    name: str  # "train_step"
    line: int  # 7: the cell's line (0 when the call came from elsewhere)
    file: str  # "" for the cell itself, else the file, "util.py"


@dataclasses.dataclass(eq=False)
class CellMemory:
    """The memory stage's record of one cell: memory over time, its calls, its arrays.

    No user arrays: `arrays` holds types, sizes and times only.
    """

    lanes: tuple[Lane, ...]  # what each sample's lane index measures
    samples: list[tuple[float, int, float]]  # (t seconds, lane, bytes)
    calls: list[CallMark]
    arrays: list[ArrayLife]
    seconds: float  # how long the cell ran
    calls_dropped: int = 0  # calls past the recorder's cap (counted, not marked)
    arrays_dropped: int = 0  # arrays past the log's cap (counted, not listed)

    def alive_at(self, t: float) -> list[ArrayLife]:
        """The arrays alive at `t` seconds (seen by then, not yet freed or deleted)."""
        return [a for a in self.arrays if a.born <= t and (a.gone is None or a.gone > t)]

    def creator(self, a: ArrayLife) -> CallMark | None:
        """The last call before `a` was first seen (the call that made it, or the one before
        the statement that did)."""
        i = bisect.bisect_right([c.t for c in self.calls], a.born) - 1
        return self.calls[i] if i >= 0 else None

    def peaks(self) -> dict[str, float]:
        """Each lane's highest reading, by lane id."""
        out: dict[str, float] = {}
        for _t, lane, v in self.samples:
            k = self.lanes[lane].id
            out[k] = max(out.get(k, 0.0), v)
        return out

    def __str__(self) -> str:
        peaks = self.peaks()
        lines = [
            f"memory while the cell ran ({self.seconds:.2f} s, {len(self.samples)} samples, "
            f"{len(self.calls) + self.calls_dropped} jitted calls):"
        ]
        for lane in self.lanes:
            lines.append(f"  {lane.label}: peak {fmt_bytes(peaks.get(lane.id))}")
        donated = [a for a in self.arrays if a.deleted]
        if donated:
            total = sum(a.nbytes for a in donated)
            lines.append(f"  {len(donated)} arrays donated or deleted ({fmt_bytes(total)})")
        if self.arrays_dropped:
            lines.append(f"  {self.arrays_dropped} later arrays counted, not listed")
        return "\n".join(lines)


class CellWatch:
    """Samples memory while a cell runs and collects its calls; `stop()` gives the record.

    Args:
        recorder: the cell's Recorder; its `calls` list is switched on here.
        on_update: called from the sampler's thread, at most 30 times a second, with
            (new samples, new CallMarks, arrays first seen, arrays gone) since the last call.
        top_filename: the cell's file: its calls are marked with the cell's line numbers.
    """

    def __init__(
        self,
        recorder: Any,
        on_update: Callable[[list, list[CallMark], list[ArrayLife], list[ArrayLife]], None]
        | None = None,
        top_filename: str | None = None,
        devices: list | None = None,
    ) -> None:
        self.recorder = recorder
        recorder.calls = []
        self.top_filename = top_filename or getattr(recorder, "top_filename", None)
        self.on_update = on_update
        self.log = ArrayLog(MAX_ARRAYS)
        self.sampler = Sampler(
            devices if devices is not None else jax.local_devices(),
            on_batch=self._batch,
            log=self.log,
        )
        self.marks: list[CallMark] = []
        self._lock = threading.Lock()
        self._arrays_sent = 0
        self._open_sent: dict[int, ArrayLife] = {}  # sent alive; sent again once gone
        self._t_end = 0.0
        self.error: BaseException | None = None

    @property
    def lanes(self) -> tuple[Lane, ...]:
        return self.sampler.lanes

    def _new_marks(self) -> list[CallMark]:
        with self._lock:
            calls = self.recorder.calls or []
            new = []
            t0 = self.sampler.t0
            for c in calls[len(self.marks) : len(calls)]:
                t, name, file, line = call_mark(c)
                if file == self.top_filename:
                    file = ""
                new.append(CallMark(max(t - t0, 0.0), name, line, file))
            self.marks.extend(new)
            return new

    def _new_arrays(self) -> tuple[list[ArrayLife], list[ArrayLife]]:
        recs = self.log.records
        born = recs[self._arrays_sent : len(recs)]
        self._arrays_sent += len(born)
        for a in born:
            if a.gone is None:
                self._open_sent[a.id] = a
        gone = [a for a in self._open_sent.values() if a.gone is not None]
        for a in gone:
            del self._open_sent[a.id]
        return born, gone

    def _batch(self, samples: list) -> None:
        if self.on_update is None:
            return
        try:
            marks = self._new_marks()
            born, gone = self._new_arrays()
            self.on_update(samples, marks, born, gone)
        except Exception as e:  # a broken view must not stop the sampling
            self.error, self.on_update = e, None

    def start(self) -> CellWatch:
        self.sampler.start()
        return self

    def stop(self) -> CellMemory:
        """Stops sampling (after one last sample) and returns the cell's record."""
        self._t_end = time.perf_counter() - self.sampler.t0
        self.sampler.sample()
        self.sampler.stop()  # its last batch reaches on_update
        self._new_marks()
        rec = self.recorder
        mem = CellMemory(
            lanes=self.sampler.lanes,
            samples=list(self.sampler.samples),
            calls=list(self.marks),
            arrays=list(self.log.records),
            seconds=self._t_end,
            calls_dropped=getattr(rec, "calls_dropped", 0),
            arrays_dropped=self.log.dropped,
        )
        rec.calls = None  # the call list holds the jitted functions: let them go
        self.log._open.clear()
        return mem

    def __enter__(self) -> CellWatch:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        if self.sampler.running:
            self.sampler.stop()

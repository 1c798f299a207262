"""Memory while a cell runs: the sampler in the background, the cell's own calls as marks.

`CellWatch` starts a `Sampler` (one lane per device: `memory_stats()` on an accelerator, live
JAX arrays on CPU, and the process RSS on CPU) when a %%jaxtrace cell starts, with an
`ArrayLog` of the arrays it sees (type, bytes, first seen, freed or deleted: never the
arrays). The sampler asks JAX nothing until the cell has touched a device (`touched`): a
cell that sets a config before JAX's backends start runs as without jaxviz, and a trivial
cell pays nothing for the arrays alive. The watch reads
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
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from jaxviz import _compat
from jaxviz.capture.handover import call_mark
from jaxviz.capture.lines import shown_line
from jaxviz.capture.places import is_user_file
from jaxviz.config import options
from jaxviz.format import fmt_bytes
from jaxviz.memory.sampler import ArrayLife, ArrayLog, Lane, Sampler

MAX_ARRAYS = 20_000  # arrays the log keeps per cell; later ones are counted, not listed
# a cell that has not touched a device (no jitted call, no eager op) is watched from this
# long on: a trivial cell (`lr = 0.01`) costs nothing, whatever the arrays alive
LAZY_SECONDS = 0.25


class CallMark(NamedTuple):
    """One jitted call the capture saw, a mark on the chart's time axis. (A named tuple:
    the sampler's thread makes one per call of the cell's loop, taking the GIL from it,
    and a frozen dataclass takes twice as long to make: 0.67 against 0.31 us.)"""

    t: float  # 0.52: seconds since the cell started
    name: str  # "train_step"
    line: int  # 7: the cell's line (0 when the call came from elsewhere)
    file: str  # "" for the cell itself, else the file, "util.py"
    donates: bool = False  # the function donates an argument (donate_argnums / argnames)


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
    # Python < 3.12: the places whose later calls ran on JAX's fast path, neither marked nor
    # counted ("step (line 5)"): without sys.monitoring each marked call would take JAX's
    # Python path (~20x slower), so after CHARTED_CALLS_WATCHED calls a place is let go
    unmarked: tuple[str, ...] = ()
    # when outputs of the cell's calls were still being computed, as the live-array looks
    # saw it without waiting for any (`Sampler.computing`): (t, 1) from, (t, 0) until
    computing: list[tuple[float, int]] = dataclasses.field(default_factory=list)

    def computed_until(self) -> float | None:
        """When the last outputs seen still computing were found computed (None: none was
        seen so, or they still were at the cell's end: `still_computing`)."""
        if not self.computing or self.computing[-1][1]:
            return None
        return self.computing[-1][0]

    @property
    def still_computing(self) -> bool:
        return bool(self.computing) and self.computing[-1][1] == 1

    def calls_note(self) -> str:
        """How many jitted calls the chart marks (each when Python dispatched it: the
        device may run it later), and which it does not and why."""
        n = len(self.calls)
        text = f"{n} jitted call{'s' if n != 1 else ''} marked"
        if n:  # (dispatch runs ahead of the device: a mark is not when the call ran)
            text += " at dispatch"
            last = self.calls[-1].t
            until = self.computed_until()
            if self.still_computing:
                text += "; their outputs were still being computed when the cell ended"
            elif until is not None and until > last + 0.1 * max(self.seconds, 1e-3):
                text += (
                    f"; the device computed their outputs until {until:.2f} s, "
                    f"{until - last:.2f} s after the last dispatch"
                )
        if self.calls_dropped:
            text += f", {self.calls_dropped} more counted, not marked (past {n:,})"
        if self.unmarked:
            text += (
                f"; later calls of {', '.join(self.unmarked)} ran unmarked and uncounted on "
                f"JAX's fast path (Python {sys.version_info[0]}.{sys.version_info[1]} has no "
                "sys.monitoring to see them; Python 3.12 marks every call)"
            )
        return text

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
            f"{self.calls_note()}):"
        ]
        for lane in self.lanes:
            lines.append(f"  {lane.label}: peak {fmt_bytes(peaks.get(lane.id))}")
        if not self.lanes:
            lines.append("  nothing sampled: no JAX work seen in the cell")
        donated = [a for a in self.arrays if a.deleted]
        if donated:
            total = sum(a.nbytes for a in donated)
            lines.append(f"  {len(donated)} arrays donated or deleted ({fmt_bytes(total)})")
        if self.arrays_dropped:
            lines.append(f"  {self.arrays_dropped} later arrays counted, not listed")
        return "\n".join(lines)


def _unmarked(rec: Any, top: str | None) -> tuple[str, ...]:
    """Python < 3.12: the jitted functions (and lines) whose later calls the recorder let run
    on JAX's fast path, unseen."""
    if _compat.has_sys_monitoring():
        return ()
    out = []
    for e in list(getattr(rec, "entries", {}).values()):
        if getattr(e, "uncounted", False):
            lines = sorted(shown_line(f, ln) for f, ln in e.sites if f == top)
            where = f" (line {', '.join(map(str, lines))})" if lines else ""
            out.append(f"{e.name}{where}")
    return tuple(dict.fromkeys(out))


def _place(where: Any, at: int) -> tuple[str, int]:
    """(file, line) of one entry's place in `Recorder.calls` (a code object and its bytecode
    offset, or a file and line)."""
    if isinstance(where, str):
        return where, at
    for start, end, line in where.co_lines():
        if start <= at < end:
            return where.co_filename, line or 0
    return where.co_filename, where.co_firstlineno


class CellWatch:
    """Samples memory while a cell runs and collects its calls; `stop()` gives the record.

    Args:
        recorder: the cell's Recorder; its call marks are switched on here
            (`Recorder.mark_calls`), and off again by `stop()`.
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
        on_lanes: Callable[[tuple[Lane, ...]], None] | None = None,
    ) -> None:
        self.recorder = recorder
        # the cell's first jitted call (the recorder appends to `calls` in the cell's thread,
        # before the call runs) starts the watch there: its first look at the arrays sees
        # them before any is donated. An eager op (its run begun, after it ran) donates
        # nothing: the cell is marked as touched, looked at when it ends (one look, not two)
        # or by the sampler's thread after LAZY_SECONDS
        recorder.mark_calls(self._touch, self._touch_eager)
        self.top_filename = top_filename or getattr(recorder, "top_filename", None)
        self.on_update = on_update
        self.on_lanes = on_lanes
        # called with the sampler's new `computing` changes (t, 1 | 0) since the last call
        self.on_computing: Callable[[list[tuple[float, int]]], None] | None = None
        self._computing_sent = 0
        self.log = ArrayLog(MAX_ARRAYS)
        # JAX's backends as the cell found them: initialised during the cell, by its code
        self._backends_before = _compat.backends_ready()
        self._t_start = time.perf_counter()
        self.touched = False  # the cell made a jitted call or an eager op
        self.sampler = Sampler(
            devices,
            on_batch=self._batch,
            log=self.log,
            ready=self._due,
            on_lanes=self._lanes_known,
            rss=options.rss_lane,
            where=self._where,
        )
        self._thread = threading.get_ident()  # the thread that runs the cell
        self._places: set[tuple[str, int]] = set()  # (file, line) of its jitted calls
        self._places_seen = 0  # entries of recorder.calls read into _places
        self._place_keys: set[tuple[int, int]] = set()  # their (id of code or file, offset)
        self.marks: list[CallMark] = []
        self._mark_of: dict[tuple[int, int, int], tuple[str, int, str, bool]] = {}
        self._lock = threading.Lock()
        self._arrays_sent = 0
        self._open_sent: dict[int, ArrayLife] = {}  # sent alive; sent again once gone
        self._renamed: list[ArrayLife] = []  # named at the cell's end: sent again
        self._t_end = 0.0
        self.error: BaseException | None = None

    def _touch(self) -> None:
        """The cell's first jitted call, in its thread (before the call runs):
        the sampler's lanes are made and its first look taken here, where no call of the
        cell is in flight."""
        self.touched = True
        try:
            if not self.sampler.active and _compat.backends_ready():
                self.sampler.sample()
                # the arrays from before the cell, named by the globals holding them now: a
                # donating call may free them soon, so the cell's end would not name them
                self._name_globals()
        except Exception as e:  # jaxviz's own failure must never become the cell's
            self.error = e

    def _name_globals(self) -> None:
        """Names the listed arrays the cell's globals hold now by their path (sent again)."""
        names = global_arrays(getattr(self.recorder, "_namespace", None))
        self._renamed.extend(self.sampler.name_arrays(names))
        del names

    def _touch_eager(self) -> None:
        self.touched = True

    def _due(self) -> bool:
        """The sampler thread's question, until the cell touches a device: whether to start
        anyway (JAX's backends were initialised during the cell, by its code, or the cell has
        run LAZY_SECONDS: work the capture does not see, such as device_put)."""
        return not self._backends_before or time.perf_counter() - self._t_start >= LAZY_SECONDS

    def _where(self) -> tuple[int, int] | None:
        """Where the cell's thread is (its frame and instruction), when it is surely in no
        jitted call: in the user's code, at a line that has made none. None otherwise (in
        JAX's or a library's code, or at a line of a jitted call: its inputs may be donated
        and its outputs not yet arrays)."""
        calls = self.recorder.calls
        if calls:
            n = len(calls)
            seen = self._place_keys
            for c in calls[self._places_seen : n]:
                # (a loop's calls at one place: its (file, line) worked out once; per call
                # it took ~0.7 us of the GIL from the loop)
                key = (id(c[2]), c[3])  # (the list holds the code meanwhile)
                if key not in seen:
                    seen.add(key)
                    self._places.add(_place(c[2], c[3]))
            self._places_seen = n
        f = sys._current_frames().get(self._thread)
        if f is None:
            return None
        name = f.f_code.co_filename
        if not is_user_file(name, self.top_filename) or (name, f.f_lineno) in self._places:
            return None
        return id(f), f.f_lasti

    def _lanes_known(self, lanes: tuple[Lane, ...]) -> None:
        if self.on_lanes is not None:
            self.on_lanes(lanes)

    @property
    def lanes(self) -> tuple[Lane, ...]:
        return self.sampler.lanes

    def _new_marks(self) -> list[CallMark]:
        with self._lock:
            calls = self.recorder.calls or []
            new = []
            t0 = self.sampler.t0
            known = self._mark_of
            for c in calls[len(self.marks) : len(calls)]:
                # (a loop's calls at one place: one mark's name, line and donation each; the
                # list holds the function and the code, so their ids are theirs meanwhile.
                # Worked out per call in the sampler's thread, ~8 us a mark took the GIL from
                # a loop of 4 us calls: 2.4x a plain 1,000-call cell on Python 3.11)
                key = (id(c[1]), id(c[2]), c[3])
                got = known.get(key)
                if got is None:
                    _t, name, file, line = call_mark(c)
                    if file == self.top_filename:
                        file = ""
                    fn = c[1]
                    got = known[key] = (name, line, file, not isinstance(fn, str) and _donates(fn))
                new.append(CallMark(max(c[0] - t0, 0.0), *got))
            self.marks.extend(new)
            return new

    def _new_arrays(self) -> tuple[list[ArrayLife], list[ArrayLife]]:
        recs = self.log.records
        sent = self._arrays_sent
        born = recs[sent : len(recs)]
        self._arrays_sent += len(born)
        born += [a for a in self._renamed if a.id < sent]  # named once the cell ended
        self._renamed.clear()
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
            changes = self.sampler.computing
            if self.on_computing is not None and len(changes) > self._computing_sent:
                new, self._computing_sent = changes[self._computing_sent :], len(changes)
                self.on_computing(list(new))
        except Exception as e:  # a broken view must not stop the sampling
            self.error, self.on_update = e, None

    def start(self) -> CellWatch:
        self.sampler.start()
        return self

    def stop(self) -> CellMemory:
        """Stops sampling (after one last sample, where the cell touched a device) and
        returns the cell's record."""
        self._t_end = time.perf_counter() - self.sampler.t0
        touched = self.touched or not self._backends_before  # (backends started by the cell)
        if self.sampler.active or (touched and _compat.backends_ready()):
            self.sampler.sample()
            self._name_globals()  # the arrays the cell's globals hold at its end
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
            unmarked=_unmarked(rec, self.top_filename),
            computing=list(self.sampler.computing),
        )
        rec.stop_marking()  # the call list holds the jitted functions: let them go
        self._mark_of.clear()  # (their ids are no longer theirs)
        return mem

    def __enter__(self) -> CellWatch:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        if self.sampler.running:
            self.sampler.stop()


MAX_NAMED = 20_000  # arrays of the cell's globals named at its end
# globals that hold no arrays of the cell's: skipped without a look
_NOT_HOLDERS = (
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    type,
    _compat.JIT_FUNCTION_TYPE,
)


def global_arrays(ns: dict | None) -> dict[int, tuple[Any, str]]:
    """The JAX arrays the cell's globals hold, one level of pytree deep: id -> (array,
    `params['blocks'][2]['w1']`), at most MAX_NAMED; IPython's own names skipped."""
    out: dict[int, tuple[Any, str]] = {}
    for k, v in list((ns or {}).items()):
        if k.startswith("_") or k in ("In", "Out") or isinstance(v, _NOT_HOLDERS):
            continue
        if isinstance(v, (list, tuple)) and len(v) > 64 and not _holder(v[0]):
            continue  # a long list of numbers or strings: ~1 us an item to flatten, no array
        try:
            flat = jax.tree_util.tree_flatten_with_path(v)[0]
        except Exception:  # a value that is no pytree after all
            continue
        for path, leaf in flat:
            if isinstance(leaf, _compat.ARRAY_TYPE):
                out.setdefault(id(leaf), (leaf, k + jax.tree_util.keystr(path)))
                if len(out) >= MAX_NAMED:
                    return out
    return out


def _donates(fn: Any) -> bool:
    """Whether a jitted function the cell called donates an argument (the chart marks donated
    inputs released only in a cell that made such a call)."""
    try:
        return _compat.donates(fn)
    except Exception:  # an object JAX shaped otherwise: no donation claimed
        return False


def _holder(x: Any) -> bool:
    """Whether a list's first item is an array or a container that may hold some."""
    return isinstance(x, (_compat.ARRAY_TYPE, list, tuple, dict)) or hasattr(x, "__dict__")

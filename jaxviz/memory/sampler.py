"""A background thread that samples device memory while a run goes on.

One lane per device plus one for the process:
- GPU / TPU: `Device.memory_stats()["bytes_in_use"]` (what the allocator holds);
- CPU, where memory_stats() is None: bytes of live JAX arrays on each device
  (jaxviz.memory.live: followed incrementally, for the whole session), and the process's
  resident memory (RSS), which is the only signal that sees buffers while a call runs (an
  output exists as a JAX array only after the call). On an accelerator the RSS lane is left
  out unless asked for (`rss=True`): there it is the runtime's mappings, not the user's data.
Each lane says what it measures. RSS and memory_stats are cheap and sampled at >= 100 Hz;
the live-array look costs ~0.15 ms per 1k live arrays (JAX's list of them) plus what changed,
so its rate adapts to stay within `budget` of one core.

With devices=None the sampler makes no lane and asks JAX nothing until JAX's backends are
initialised by someone else and `ready()` says so (the cell magic: the cell has touched a
device): a watched cell's config (`jax_num_cpu_devices`) is set as in a plain one.

    >>> import jax
    >>> with Sampler(jax.devices()) as s:
    ...     x = jax.numpy.zeros((1024, 1024))
    ...     s.sample()
    >>> max(v for t, lane, v in s.samples if s.lanes[lane].source == "live_arrays") >= 4 << 20
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax

from jaxviz import _compat
from jaxviz.memory.live import LiveArrays, tracker

MAX_COMPUTING_CHANGES = 10_000  # `Sampler.computing`: an eager loop's outputs flip it often


@dataclasses.dataclass(frozen=True)
class Lane:
    """One measured quantity over time."""

    id: str  # "cpu:0" / "rss"
    label: str  # "cpu:0 live JAX arrays": what the numbers are
    source: str  # "live_arrays" | "memory_stats" | "rss"
    device: str | None  # "cpu:0"; None for the process lane


class _Rss:
    """Resident set size of this process, read cheaply (None where it cannot be read)."""

    def __init__(self) -> None:
        self._fd = None
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        try:
            self._fd = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            try:
                import psutil

                self._proc = psutil.Process()
            except Exception:
                self._proc = None

    @property
    def available(self) -> bool:
        return self._fd is not None or getattr(self, "_proc", None) is not None

    def read(self) -> int | None:
        if self._fd is not None:
            return int(os.pread(self._fd, 128, 0).split()[1]) * self._page
        if getattr(self, "_proc", None) is not None:
            return int(self._proc.memory_info().rss)
        return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclasses.dataclass
class ArrayLife:
    """One JAX array the sampler saw alive: never the array, only what it was and when.

    Times are seconds since the sampler started; an array is seen at the first live-array
    walk after it was made, so `born` is at most one walk late.
    """

    id: int  # a number unique within the log (not Python's id(), which is reused)
    born: float  # 1.25: first seen alive
    type: str  # "f32[1024,1024]"
    nbytes: int  # 4194304: on all devices together
    gone: float | None = None  # 2.5: freed (no reference left) or deleted; None: alive at the end
    deleted: bool = False  # gone while still referenced: donated to a call, or .delete()
    name: str = ""  # "params['w1']": the cell's global (and path) holding it at the cell's
    # first jitted call (an array from before the cell) or when the cell ended; "" when none
    # did (a temporary, or named only inside a function)


class ArrayLog:
    """The arrays a sampler saw, with birth and death times, at most `limit` of them (in a
    long loop the first `limit` are kept and the rest only counted, in `dropped`)."""

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self.records: list[ArrayLife] = []
        self.dropped = 0  # arrays seen after the log was full

    def born(self, kind: str, nbytes: int, t: float) -> ArrayLife | None:
        """A new record (None once the log is full: then counted in `dropped`)."""
        if len(self.records) >= self.limit:
            self.dropped += 1
            return None
        rec = ArrayLife(len(self.records), t, kind, nbytes)
        self.records.append(rec)
        return rec

    def gone(self, rec: ArrayLife, t: float, deleted: bool) -> None:
        rec.gone, rec.deleted = max(t, rec.born), deleted


class Sampler:
    """Samples memory on a background thread; also samples on demand (`sample()`).

    Args:
        devices: the devices to give a lane each; None: the local devices, once JAX's
            backends are initialised by someone else (never by the sampler: a config such as
            `jax_num_cpu_devices` must be set before) and `ready()` says so. Until then the
            sampler has no lanes and takes no samples.
        interval: seconds between cheap samples (RSS, memory_stats): 0.008 is 125 Hz.
        max_interval: the longest the thread backs off to while the main thread holds the GIL.
        budget: fraction of one core the live-array look may take (it adapts its rate).
        on_batch: called from the sampler thread, at most 30 times a second, with the
            samples `(t, lane, bytes)` taken since the previous call.
        log: the ArrayLog told of the arrays born and gone while the sampler runs.
        ready: with devices=None, whether to start sampling now (polled by the thread).
        on_lanes: called with the lanes once they are known (from the thread that found out).
        rss: whether to chart the process's RSS; None: where no device has memory_stats
            (on a TPU host the RSS is the runtime's mappings, 13-15 GiB from the start).
        where: for the thread's looks at the live arrays: where the thread that runs the
            calls is, when it is surely in none of them (else None). A look is `settled`
            (jaxviz.memory.live) when it says the same before and after; a look from any
            other thread than the sampler's is.
    """

    def __init__(
        self,
        devices: list[Any] | None,
        *,
        interval: float = 0.008,
        budget: float = 0.01,
        max_interval: float = 0.1,
        on_batch: Callable[[list[tuple[float, int, float]]], None] | None = None,
        batch_interval: float = 1 / 30,
        log: ArrayLog | None = None,
        ready: Callable[[], bool] | None = None,
        on_lanes: Callable[[tuple[Lane, ...]], None] | None = None,
        rss: bool | None = None,
        where: Callable[[], Any] | None = None,
    ) -> None:
        self.interval, self.budget, self.max_interval = interval, budget, max_interval
        self.on_batch, self.batch_interval = on_batch, batch_interval
        self.log, self.ready, self.on_lanes, self.rss = log, ready, on_lanes, rss
        self.where = where
        self.lanes: tuple[Lane, ...] = ()
        self._devices = None if devices is None else list(devices)
        self._stats: list[Any] = []
        self._live_lanes: list[tuple[int, int]] = []  # (lane index, device id)
        self._live: LiveArrays | None = None
        self._rss: _Rss | None = None
        self._rss_lane = -1
        self.active = False  # lanes known, sampling
        self.samples: list[tuple[float, int, float]] = []
        # (t, 1): a look found outputs not computed yet; (t, 0): the next look that found
        # none (the device done with what was dispatched, to within a look)
        self.computing: list[tuple[float, int]] = []
        self.t0 = time.perf_counter()
        self.live_cost = 0.0  # seconds the last live-array look took
        self.live_samples = 0
        self._next_live = 0.0
        self._contended = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._paused = threading.Event()  # set: the thread takes no samples (`paused`)
        self._thread: threading.Thread | None = None
        self._sent = 0
        self._last_batch = 0.0
        self.error: BaseException | None = None
        if self._devices is not None:
            self._activate()

    def _activate(self) -> bool:
        """Makes the lanes (asking JAX for its devices: its backends must be initialised)."""
        with self._lock:
            if self.active:
                return True
            devices = self._devices if self._devices is not None else jax.local_devices()
            self._stats = [d for d in devices if _memory_stats(d) is not None]
            name = _compat.device_name
            lanes = [
                Lane(name(d), f"{name(d)} bytes_in_use (memory_stats)", "memory_stats", name(d))
                for d in self._stats
            ]
            for d in devices:
                if d not in self._stats:
                    self._live_lanes.append((len(lanes), d.id))
                    lanes.append(
                        Lane(name(d), f"{name(d)} live JAX arrays", "live_arrays", name(d))
                    )
            rss = self.rss if self.rss is not None else not self._stats
            if rss:
                self._rss = _Rss()
                if self._rss.available:
                    self._rss_lane = len(lanes)
                    lanes.append(
                        Lane("rss", "process resident memory (RSS, all devices and host)", "rss",
                             None)
                    )  # fmt: skip
            self.lanes = tuple(lanes)
            # with a log, the live arrays are followed where memory_stats gives the lanes too
            if self._live_lanes or self.log is not None:
                self._live = tracker()
                if self.log is not None:
                    self._live.attach(self.log, self.t0)
            self.active = True
        if self.on_lanes is not None:
            try:
                self.on_lanes(self.lanes)
            except Exception as e:  # a broken view must not stop the sampling
                self.error, self.on_lanes = e, None
        return True

    def _may_start(self) -> bool:
        """devices=None: whether the lanes can be made now (JAX's backends initialised, by
        the user's code) and are wanted (`ready()`)."""
        if not _compat.backends_ready():
            return False
        return self.ready is None or bool(self.ready())

    # -- sampling -----------------------------------------------------------------------------

    def sample(self, live: bool | None = True) -> None:
        """Takes one sample of every lane now (`live=False`: the cheap lanes only; None: the
        live arrays too if a look is due). Before the lanes are made (devices=None), makes
        them if JAX's backends are initialised."""
        if not self.active:
            if not _compat.backends_ready():
                return
            self._activate()
        settled: bool | Callable[[], bool] = True  # (a look from the thread of the calls)
        if threading.current_thread() is self._thread:
            where = self.where() if self.where is not None and live is not False else None
            # settled if the thread of the calls is still there once the arrays are counted
            settled = False if where is None else (lambda: self._where_now() == where)
        with self._lock:
            t = time.perf_counter() - self.t0
            if live is None:  # (asked before the lock: another thread's look may be done)
                live = time.perf_counter() >= self._next_live
            out = self.samples
            for i, d in enumerate(self._stats):
                st = _memory_stats(d)
                if st and "bytes_in_use" in st:
                    out.append((t, i, float(st["bytes_in_use"])))
            if live and self._live is not None:
                c0 = time.perf_counter()
                first = self._live.look(settled)
                c1 = time.perf_counter()
                self.live_cost = max(c1 - c0 - first, 0.0)
                self.live_samples += 1
                # The next look waits long enough to keep within the budget.
                # (a quarter of the budget while the main thread is busy holding the GIL)
                budget = self.budget / 4 if self._contended else self.budget
                self._next_live = c1 + max(self.interval, self.live_cost / budget)
                live_bytes = self._live.bytes_on
                for lane, dev in self._live_lanes:
                    out.append((t, lane, float(live_bytes(dev))))
                now = int(self._live.computing)
                if now != (self.computing[-1][1] if self.computing else 0) and (
                    not now or len(self.computing) < MAX_COMPUTING_CHANGES
                ):
                    self.computing.append((t, now))
            if self._rss is not None and self._rss_lane >= 0:
                v = self._rss.read()
                if v is not None:
                    out.append((t, self._rss_lane, float(v)))

    def _where_now(self) -> Any:
        return self.where() if self.where is not None else None

    def live_due(self, seconds: float) -> bool:
        """Whether a live-array look fits the budget for a step that took `seconds`."""
        return self._live is not None and self.live_cost <= self.budget * seconds

    def _loop(self) -> None:
        # Adaptive rate: a wake-up that comes late means the main thread holds the GIL (a
        # dispatch-bound Python loop), where every sample would steal time from it and memory
        # changes little per step: back off, up to `max_interval`. On time (the main thread
        # waits in XLA or sleeps): sample at `interval` (>= 100 Hz).
        wait = self.interval
        try:
            while not self.active:  # devices=None: until the cell has touched a device
                if self._stop.wait(wait):
                    return
                if self._may_start():
                    self._activate()
            while True:
                t0 = time.perf_counter()
                if self._stop.wait(wait):
                    break
                late = time.perf_counter() - t0 - wait
                wait = (
                    min(wait * 2, self.max_interval)
                    if late > 0.001
                    else max(wait / 2, self.interval)
                )
                self._contended = wait > self.interval
                if self._paused.is_set():  # (a %timeit inside the cell: nothing competes)
                    continue
                self.sample(live=None)
                self._flush()
        except BaseException as e:  # never let the thread die silently
            self.error = e

    def _flush(self, force: bool = False) -> None:
        if self.on_batch is None:
            return
        now = time.perf_counter()
        if not force and now - self._last_batch < self.batch_interval:
            return
        n = len(self.samples)
        if n > self._sent:
            batch, self._sent = self.samples[self._sent : n], n
            self._last_batch = now
            try:
                self.on_batch(batch)
            except Exception as e:  # a broken view must not stop the sampling
                self.error, self.on_batch = e, None

    # -- lifetime -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No samples in the block (a %timeit the cell runs: its timings compete with
        nothing of jaxviz's, as in a plain cell); sampling goes on after it."""
        self._paused.set()
        try:
            yield
        finally:
            self._paused.clear()

    def name_arrays(self, names: dict[int, tuple[Any, str]]) -> list[ArrayLife]:
        """Names the log's records of these arrays (id -> (array, name)): LiveArrays.name."""
        if self._live is None or self.log is None:
            return []
        return self._live.name(names)

    def start(self) -> Sampler:
        if self.active:
            self.sample()
        self._thread = threading.Thread(target=self._loop, name="jaxviz-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> float:
        """Stops the thread; returns the seconds it took to stop (well under 0.1)."""
        t0 = time.perf_counter()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        took = time.perf_counter() - t0
        self._flush(force=True)
        if self._rss is not None:
            self._rss.close()
        if self._live is not None and self.log is not None:
            self._live.detach()  # the log's records are let go by the tracker
            self.log = None
        return took

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _memory_stats(d: Any) -> dict | None:
    try:
        return d.memory_stats()
    except Exception:
        return None

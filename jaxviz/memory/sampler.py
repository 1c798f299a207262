"""A background thread that samples device memory while a run goes on.

One lane per device plus one for the process:
- GPU / TPU: `Device.memory_stats()["bytes_in_use"]` (what the allocator holds);
- CPU, where memory_stats() is None: bytes of live JAX arrays on each device (from
  `addressable_shards`), and the process's resident memory (RSS), which is the only signal
  that sees buffers while a call runs (an output exists as a JAX array only after the call).
Each lane says what it measures. RSS and memory_stats are cheap and sampled at >= 100 Hz;
the live-array walk costs ~1 ms per 10k arrays, so its rate adapts to stay within `budget`
of one core. Sizes are cached by array identity (a weakref callback drops them), so a sample
only pays for arrays it has not seen yet.

    >>> import jax
    >>> with Sampler(jax.devices()) as s:
    ...     x = jax.numpy.zeros((1024, 1024))
    ...     s.sample()
    >>> max(v for t, lane, v in s.samples if s.lanes[lane].source == "live_arrays") >= 4 << 20
    True
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import jax


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


class ArrayLog:
    """The arrays a sampler saw, with birth and death times, at most `limit` of them (in a
    long loop the first `limit` are kept and the rest only counted, in `dropped`)."""

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self.records: list[ArrayLife] = []
        self.dropped = 0  # arrays seen after the log was full
        self._open: dict[int, ArrayLife] = {}  # id(array) -> its record while it lives

    def born(self, k: int, a: Any, t: float, nbytes: int) -> None:
        if len(self.records) >= self.limit:
            self.dropped += 1
            return
        try:
            kind = f"{a.dtype.name}[{','.join(map(str, a.shape))}]"
        except Exception:  # deleted while we looked
            kind = "?"
        rec = ArrayLife(len(self.records), t, kind, nbytes)
        self.records.append(rec)
        self._open[k] = rec

    def gone(self, k: int, t: float, deleted: bool) -> None:
        rec = self._open.pop(k, None)
        if rec is not None:
            rec.gone, rec.deleted = t, deleted


class _LiveArrays:
    """Per-device bytes of live JAX arrays, with sizes cached by array identity."""

    def __init__(
        self, device_index: dict[int, int], n_lanes: int, log: ArrayLog | None = None
    ) -> None:
        self._dev = device_index  # device id -> lane index (n_lanes: counted in no lane)
        self._sizes: dict[int, tuple[Any, tuple[tuple[int, int], ...]]] = {}
        self._counted: set[int] = set()
        self._dead: deque[tuple[int, float]] = deque()
        self.totals = [0] * (n_lanes + 1)
        self.log = log
        self.t0 = 0.0  # the sampler's start (time.perf_counter()): the log's time zero

    def _sizes_of(self, a: Any) -> tuple[tuple[int, int], ...]:
        # The sharding's index map, not `a.addressable_shards`: that makes (and keeps) one
        # more Array object per shard, which jax.live_arrays() would then count twice.
        try:
            per: dict[int, int] = {}
            itemsize = a.dtype.itemsize
            shape = a.shape
            for dev, index in a.sharding.addressable_devices_indices_map(shape).items():
                lane = self._dev.get(dev.id)
                if lane is None:
                    continue
                n = itemsize
                for sl, dim in zip(index, shape):
                    n *= len(range(*sl.indices(dim))) if isinstance(sl, slice) else 1
                per[lane] = per.get(lane, 0) + n
            return tuple(per.items())
        except Exception:  # deleted / donated while we looked
            return ()

    def walk(self, t: float = 0.0) -> float:
        """Updates `totals` (and the log, at time `t`); returns the seconds spent sizing
        arrays seen for the first time (a one-off cost, left out when the sampler adapts its
        rate)."""
        first = 0.0
        log = self.log
        while self._dead:  # arrays freed since the last walk
            k, t_dead = self._dead.popleft()
            e = self._sizes.get(k)
            if e is not None and e[0]() is None:
                del self._sizes[k]
                if k in self._counted:
                    self._counted.discard(k)
                    for lane, n in e[1]:
                        self.totals[lane] -= n
                    if log is not None:
                        log.gone(k, t_dead - self.t0, deleted=False)
        arrays = jax.live_arrays()
        cur = set(map(id, arrays))
        for k in self._counted - cur:  # deleted (donated) or freed
            self._counted.discard(k)
            for lane, n in self._sizes[k][1]:
                self.totals[lane] -= n
            if log is not None:  # still referenced: deleted (donated); else freed just now
                log.gone(k, t, deleted=self._sizes[k][0]() is not None)
        new = cur - self._counted
        if new:
            f0 = time.perf_counter()
            dead = self._dead
            for a in arrays:
                k = id(a)
                if k not in new:
                    continue
                e = self._sizes.get(k)
                if e is None or e[0]() is not a:
                    ref = weakref.ref(a, functools.partial(_forget, dead, k))
                    e = self._sizes[k] = (ref, self._sizes_of(a))
                self._counted.add(k)
                if log is not None:
                    log.born(k, a, t, sum(n for _lane, n in e[1]))
                for lane, n in e[1]:
                    self.totals[lane] += n
            first = time.perf_counter() - f0
        del arrays
        return first


class Sampler:
    """Samples memory on a background thread; also samples on demand (`sample()`).

    Args:
        devices: the devices to give a lane each.
        interval: seconds between cheap samples (RSS, memory_stats): 0.008 is 125 Hz.
        max_interval: the longest the thread backs off to while the main thread holds the GIL.
        budget: fraction of one core the live-array walk may take (it adapts its rate).
        on_batch: called from the sampler thread, at most 30 times a second, with the
            samples `(t, lane, bytes)` taken since the previous call.
    """

    def __init__(
        self,
        devices: list[Any],
        *,
        interval: float = 0.008,
        budget: float = 0.01,
        max_interval: float = 0.1,
        on_batch: Callable[[list[tuple[float, int, float]]], None] | None = None,
        batch_interval: float = 1 / 30,
        log: ArrayLog | None = None,
    ) -> None:
        self.interval, self.budget, self.max_interval = interval, budget, max_interval
        self.on_batch, self.batch_interval = on_batch, batch_interval
        self._devices = list(devices)
        self._stats = [d for d in self._devices if _memory_stats(d) is not None]
        lanes: list[Lane] = []
        if self._stats:
            lanes += [
                Lane(_name(d), f"{_name(d)} bytes_in_use (memory_stats)", "memory_stats", _name(d))
                for d in self._stats
            ]
        live_devs = [d for d in self._devices if d not in self._stats]
        self._live_first = len(lanes)
        lanes += [
            Lane(_name(d), f"{_name(d)} live JAX arrays", "live_arrays", _name(d))
            for d in live_devs
        ]
        self._rss = _Rss()
        if self._rss.available:
            lanes.append(
                Lane("rss", "process resident memory (RSS, all devices and host)", "rss", None)
            )
        self.lanes: tuple[Lane, ...] = tuple(lanes)
        self._n_live = len(live_devs)
        # with a log, the live-array walk also runs where memory_stats gives the lanes
        # (its arrays then count in no lane: index len(lanes))
        index = {d.id: len(lanes) for d in self._stats}
        index.update({d.id: self._live_first + i for i, d in enumerate(live_devs)})
        self._live = _LiveArrays(index, len(lanes), log) if live_devs or log else None
        self.log = log
        self.samples: list[tuple[float, int, float]] = []
        self.t0 = time.perf_counter()
        if self._live is not None:
            self._live.t0 = self.t0
        self.live_cost = 0.0  # seconds the last live-array walk took
        self.live_samples = 0
        self._next_live = 0.0
        self._contended = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sent = 0
        self._last_batch = 0.0
        self.error: BaseException | None = None

    # -- sampling -----------------------------------------------------------------------------

    def sample(self, live: bool = True) -> None:
        """Takes one sample of every lane now (`live=False`: the cheap lanes only)."""
        with self._lock:
            t = time.perf_counter() - self.t0
            out = self.samples
            for i, d in enumerate(self._stats):
                st = _memory_stats(d)
                if st and "bytes_in_use" in st:
                    out.append((t, i, float(st["bytes_in_use"])))
            if live and self._live is not None:
                c0 = time.perf_counter()
                first = self._live.walk(t)
                c1 = time.perf_counter()
                self.live_cost = max(c1 - c0 - first, 0.0)
                self.live_samples += 1
                # The next walk waits long enough to keep within the budget.
                # (a quarter of the budget while the main thread is busy holding the GIL)
                budget = self.budget / 4 if self._contended else self.budget
                self._next_live = c1 + max(self.interval, self.live_cost / budget)
                for lane in range(self._live_first, self._live_first + self._n_live):
                    out.append((t, lane, float(self._live.totals[lane])))
            if self._rss.available:
                v = self._rss.read()
                if v is not None:
                    out.append((t, len(self.lanes) - 1, float(v)))

    def live_due(self, seconds: float) -> bool:
        """Whether a live-array walk fits the budget for a step that took `seconds`."""
        return self._live is not None and self.live_cost <= self.budget * seconds

    def _loop(self) -> None:
        # Adaptive rate: a wake-up that comes late means the main thread holds the GIL (a
        # dispatch-bound Python loop), where every sample would steal time from it and memory
        # changes little per step: back off, up to `max_interval`. On time (the main thread
        # waits in XLA or sleeps): sample at `interval` (>= 100 Hz).
        wait = self.interval
        try:
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
                self.sample(live=time.perf_counter() >= self._next_live)
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

    def start(self) -> Sampler:
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
        self._rss.close()
        if self._live is not None:  # drop the weakrefs: nothing stays behind
            self._live._sizes.clear()
            self._live._counted.clear()
        return took

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _name(d: Any) -> str:
    return f"{d.platform}:{d.id}"


def _memory_stats(d: Any) -> dict | None:
    try:
        return d.memory_stats()
    except Exception:
        return None


def _forget(dead: deque[tuple[int, float]], k: int, _ref: Any) -> None:
    """A weakref callback: the array `k` is gone, its size is dropped at the next sample."""
    dead.append((k, time.perf_counter()))

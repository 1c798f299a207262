"""The session's live JAX arrays, followed incrementally: what a live-array lane reads.

One `LiveArrays` per process (`tracker()`), kept across cells, so that a cell pays for the
arrays that changed since the last look, not for every array alive (a notebook holding 150k
arrays paid ~10 us per array per cell when each cell sized them all again):

- `jax.live_arrays()` lists the default backend's arrays newest first (jax 0.10.2 and 0.12):
  the new ones are the head of the list, up to the first one already known.
- An array freed (no reference left) is reported by a weakref callback, at no cost per look.
- An array deleted while still referenced (donated to a call, or `.delete()`) drops out of the
  list: their number is what the counts leave over, and they are found newest first (a
  training loop donates what it made last).

Donation in flight: a look from another thread while the main thread is inside a donating
call sees the call's inputs deleted and its outputs not yet made (they become arrays only when
the call returns), and the main thread, waiting on the call, lets that thread run then above
all. Counted as gone, a donated training loop's params vanished from the lane for most of the
loop (they are donated, then freed when the names are bound to the outputs). So a look that
is not `settled` (one that cannot rule out a call in flight) keeps counting the last arrays
that went (`pending`: the inputs of the call in flight, donated and maybe freed since) until a
look sees new arrays of at least half as many bytes (the outputs that took the buffers over),
a later group of as many bytes goes instead, or a settled look comes (from the thread that
runs the calls, or from the sampler's while that one is surely outside any jitted call). One
group, not all: the calls of a loop hand the same buffers on, one generation at a time.

Sizes are read once per array (bytes per device id); nothing keeps a user array alive: the
tracker holds weak references, and a look's list is dropped before it returns.

An array that holds an error instead of values has no buffer: it counts 0 bytes. CPU's
dispatch returns the result of a call that could not allocate it ("Out of memory allocating
596 GiB") and defers the error to its first use; the lane counted the 596 GiB as live, on
every later chart too. Asked without waiting (`_compat.held_error`: only arrays already
ready are asked, ~1 us each, from LISTED_BYTES up); one not ready when first seen is asked
again at each look until it is, and counted meanwhile, unless it is larger than its device's
memory (`device_memory`): no buffer of that size can exist yet.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import jax

from jaxviz import _compat

LISTED_BYTES = 1024  # arrays alive before a cell are listed one by one from this size up
LISTED_BEFORE = 1000  # at most this many of them (the largest); the rest in one line
HOLDS_ERROR = " (holds an error, not allocated)"  # the record of an array without buffers
UNREADY_MAX = 10_000  # arrays not ready when first seen, asked again at the next looks


class _Ref(weakref.ref):
    """A weak reference to one live array, with what the tracker knows of it."""

    __slots__ = ("dev", "failed", "k", "later", "life", "n", "per")
    k: int  # id() of the array while it lives
    dev: int  # the id of its one device; -1: several (`per`)
    n: int  # its bytes on `dev` (all devices together when several)
    per: tuple[tuple[int, int], ...] | None  # (device id, bytes) when on several devices
    life: Any  # its ArrayLife in the current cell's log, or None
    failed: bool  # it holds an error, not values (no buffer: 0 bytes)
    later: int  # bytes not counted until it is known to hold values (larger than memory)


_devs: dict[int, tuple[Any, int]] = {}  # id(sharding) -> (it, its one device's id, or -1)


def _size_of(r: _Ref, a: Any) -> None:
    r.dev, r.n, r.per = -1, 0, None
    try:
        sh = a.sharding
        known = _devs.get(id(sh))
        if known is None or known[0] is not sh:
            devs = sh.device_set
            if len(_devs) >= 4096:
                _devs.clear()
            known = _devs[id(sh)] = (sh, next(iter(devs)).id if len(devs) == 1 else -1)
        if known[1] >= 0:
            r.dev, r.n = known[1], a.size * a.dtype.itemsize
            return
        per: dict[int, int] = {}
        itemsize, shape = a.dtype.itemsize, a.shape
        for dev, index in sh.addressable_devices_indices_map(shape).items():
            k = itemsize
            for sl, dim in zip(index, shape):
                k *= len(range(*sl.indices(dim))) if isinstance(sl, slice) else 1
            per[dev.id] = per.get(dev.id, 0) + k
        r.n, r.per = sum(per.values()), tuple(per.items())
    except Exception:  # deleted or donated while we looked: counted as nothing
        pass


def _failed(r: _Ref) -> None:
    """`r` holds an error, not values: no bytes."""
    r.n, r.per, r.failed = 0, None, True


def _known(known: dict[int, _Ref], a: Any) -> bool:
    r = known.get(id(a))
    return r is not None and r() is a


def _type_of(a: Any) -> str:
    try:
        return f"{a.dtype.name}[{','.join(map(str, a.shape))}]"
    except Exception:
        return "?"


class LiveArrays:
    """Bytes of the live JAX arrays per device id, updated by `look()`."""

    def __init__(self) -> None:
        self.known: dict[int, _Ref] = {}  # id(array) -> its reference, oldest first
        self.totals: dict[int, int] = {}  # device id -> bytes (pending ones included)
        self.pending: list[_Ref] = []  # gone while a call may be in flight, still counted
        self._pending_deleted: set[int] = set()  # id() of those in `pending` deleted (donated)
        self.unready: list[_Ref] = []  # not ready when first seen: they may hold an error
        self.capacity: int | None = None  # bytes of one device (`_capacity`)
        self._freed: deque[tuple[_Ref, float]] = deque()  # from the weakref callbacks
        self._lock = threading.Lock()
        self.log: Any = None  # the ArrayLog of the cell being watched (`attach`)
        self.t0 = 0.0  # the log's time zero (time.perf_counter())
        self._listed: list[_Ref] = []  # references holding a record of `log`
        self._list_before = False  # the next look lists the arrays alive before the cell
        self.looks = 0

    def _on_free(self, ref: Any) -> None:  # a weakref callback (any thread, at the free)
        self._freed.append((ref, time.perf_counter()))

    # -- the cell's log ---------------------------------------------------------------------

    def attach(self, log: Any, t0: float) -> None:
        """The log to tell of births and deaths from now on (times from `t0`); the next look
        lists the arrays it finds alive from before (born at 0)."""
        with self._lock:
            self.log, self.t0 = log, t0
            self._list_before = True

    def detach(self) -> None:
        """Forgets the log (and the records the references held)."""
        with self._lock:
            for r in self._listed:
                r.life = None
            self._listed.clear()
            self.log = None

    def name(self, names: dict[int, tuple[Any, str]]) -> list[Any]:
        """Names the records of the arrays in `names` (id(array) -> (array, name)) that the
        log lists and has no name for; returns the records named."""
        out = []
        with self._lock:
            for k, (a, nm) in names.items():
                r = self.known.get(k)
                life = getattr(r, "life", None) if r is not None and r() is a else None
                if life is not None and not life.name:
                    life.name = nm
                    out.append(life)
        return out

    def _born(self, r: _Ref, a: Any, t: float) -> None:
        rec = self.log.born(_type_of(a) + (HOLDS_ERROR if r.failed else ""), r.n, t)
        if rec is not None:
            r.life = rec
            self._listed.append(r)

    # -- looking ------------------------------------------------------------------------------

    def look(self, settled: bool | Callable[[], bool]) -> float:
        """Updates `totals` from `jax.live_arrays()` (JAX's backends must be initialised);
        returns the seconds spent sizing arrays seen for the first time (a one-off cost).

        settled: no call is in flight (the caller is the thread that runs the user's calls),
        so what is gone is gone; a function: asked once the arrays are counted."""
        with self._lock:
            return self._look(settled)

    def _look(self, settled: bool | Callable[[], bool]) -> float:
        t = time.perf_counter() - self.t0
        arrays = jax.live_arrays()  # newest first; no deleted ones
        self.looks += 1
        # frees since the last look (after the list: nothing in it can be freed while held)
        fewer = self._drain()
        known = self.known
        new = []
        for a in arrays:
            r = known.get(id(a))
            if r is not None:
                o = r()
                if o is a:
                    break  # this one and all older ones are known
                if o is None:  # freed, its id taken by a new array before its callback ran
                    del known[r.k]
                    fewer.append((r, t))
            new.append(a)
        # known ones not in the list: deleted while still referenced (or freed just now)
        gone = len(known) - (len(arrays) - len(new))
        if gone < 0:  # more than the head is new: the list is not newest first, look at all
            new = [a for a in arrays if not _known(known, a)]
            gone = len(known) - (len(arrays) - len(new))
        del arrays
        deleted = self._deleted(gone, fewer, t) if gone > 0 else []
        if self.unready:
            self._recheck()
        # the cell's first look: what it finds new was there before the cell (made by a cell
        # not watched), listed with what the tracker knew
        before = self._list_before and self.log is not None
        f0 = time.perf_counter()
        new_bytes = self._know(new, None if before else self.log, t) if new else 0
        first = time.perf_counter() - f0 if new else 0.0
        if before:
            self._list_alive(deleted)
        if not isinstance(settled, bool):
            settled = bool(settled())
        self._settle(fewer, deleted, new_bytes, settled, t)
        return first

    def _deleted(self, gone: int, fewer: list[tuple[_Ref, float]], t: float) -> list[_Ref]:
        """Takes out of `known` the `gone` newest ones freed or deleted (added to `fewer`);
        returns those deleted while still referenced."""
        known = self.known
        found = []
        for r in reversed(known.values()):
            o = r()
            if o is None or o.is_deleted():
                found.append(r)
                if len(found) >= gone:
                    break
        deleted = []
        for r in found:
            if known.get(r.k) is r:
                del known[r.k]
                fewer.append((r, t))
                if r() is not None:
                    deleted.append(r)
        return deleted

    def _know(self, new: list, log: Any, t: float) -> int:
        """References for the arrays seen for the first time (newest first), counted and, with
        a log, recorded as born at `t`; returns their bytes."""
        known, totals, callback = self.known, self.totals, self._on_free
        new_bytes = 0
        for a in reversed(new):  # oldest first: `known` stays in birth order
            r = _Ref(a, callback)
            r.k = k = id(a)
            r.life, r.failed, r.later = None, False, 0
            _size_of(r, a)
            if r.n >= LISTED_BYTES:  # (a small array's bytes would not show)
                error = _compat.held_error(a)
                if error:
                    _failed(r)
                elif error is None and len(self.unready) < UNREADY_MAX:
                    self.unready.append(r)
                    if r.per is None and r.n > self._capacity():
                        r.later, r.n = r.n, 0
            known[k] = r
            if r.per is None:
                totals[r.dev] = totals.get(r.dev, 0) + r.n
            else:
                self._add(r, 1)
            new_bytes += r.n
            if log is not None:
                self._born(r, a, t)
        return new_bytes

    def _settle(
        self,
        fewer: list[tuple[_Ref, float]],
        deleted: list[_Ref],
        new_bytes: int,
        settled: bool,
        t: float,
    ) -> None:
        """Stops counting what went, and ends its records. Settled: what is gone is gone.
        Else a call may be in flight, holding the bytes of what was donated to it (and freed
        since) for its outputs, not yet arrays: they stay counted (`pending`) until outputs
        of as many bytes are seen, or a settled look."""
        pending = self.pending
        is_deleted = {id(r) for r in deleted}
        went = sum(r.n for r, _ in fewer)
        if settled or 2 * new_bytes >= max(went, sum(r.n for r in pending)):
            keep: list[_Ref] = []  # (the outputs are here: nothing is held for them)
        elif went >= sum(r.n for r in pending):
            keep = [r for r, _ in fewer]  # the call in flight holds the last ones that went
        else:
            keep = list(pending)  # (or what went before: a loss freed is not a generation)
        held = {id(r) for r in keep}
        # (held or not, an array is donated only when it went still referenced: one freed
        # while a call was in flight is counted as held, never as donated)
        was_deleted = self._pending_deleted | is_deleted
        for r in pending:
            if id(r) not in held:
                self._drop(r, t, deleted=id(r) in was_deleted)
        # what went is replaced by what came (`x = f(x)`, a donated step's outputs): its record
        # ends where its successors are first seen, so that a click in between lists one of
        # them; gone with no successor (`del x`), it ends when it went. Fewer bytes came than
        # went (`del keep[:-1]` after the append that made the one kept): the last to go,
        # as many bytes of them as came, end where the new ones are seen, the rest when they went
        replaced = _replaced(fewer, new_bytes, went)
        for r, when in fewer:
            if id(r) not in held:
                self._drop(r, t if id(r) in replaced else when, deleted=id(r) in is_deleted)
        self.pending = keep
        self._pending_deleted = {id(r) for r in keep if id(r) in was_deleted}

    def _recheck(self) -> None:
        """The arrays not ready when first seen: those ready now that hold an error no
        longer count (their records say so); those still not ready are asked again."""
        still = []
        for r in self.unready:
            a = r()
            if a is None or self.known.get(r.k) is not r:
                continue
            error = _compat.held_error(a)
            if error is None:
                still.append(r)
            elif error:
                self._add(r, -1)
                _failed(r)
                if r.life is not None:
                    r.life.nbytes = 0
                    r.life.type += HOLDS_ERROR
            elif r.later:  # it holds values after all (swap): counted from now
                r.n, r.later = r.later, 0
                self._add(r, 1)
                if r.life is not None:
                    r.life.nbytes = r.n
        self.unready = still

    @property
    def computing(self) -> bool:
        """Whether an array seen at the last look was not computed yet then (its call's work
        still queued or running on its device: asked without waiting, `held_error`), from
        LISTED_BYTES up. A loop that runs ahead of the device leaves its latest outputs so."""
        return bool(self.unready)

    def _capacity(self) -> int:
        """Bytes of one device of the live arrays' backend (JAX's default), asked once."""
        if self.capacity is None:
            try:
                known = device_memory(jax.default_backend())
            except Exception:  # no backend to ask
                known = None
            self.capacity = known[0] if known else 1 << 62
        return self.capacity

    def _drain(self) -> list[tuple[_Ref, float]]:
        """The known arrays freed since the last look (taken out of `known`), with when."""
        known, q, out = self.known, self._freed, []
        while q:
            r, when = q.popleft()
            if known.get(r.k) is r:
                del known[r.k]
                out.append((r, when - self.t0))
        return out

    def _add(self, r: _Ref, sign: int) -> None:
        totals = self.totals
        if r.per is None:
            totals[r.dev] = totals.get(r.dev, 0) + sign * r.n
        else:
            for dev, n in r.per:
                totals[dev] = totals.get(dev, 0) + sign * n

    def _drop(self, r: _Ref, t: float, *, deleted: bool) -> None:
        """Its bytes no longer counted, its record (if any) closed at `t`."""
        self._add(r, -1)
        if r.life is not None:
            if self.log is not None:
                self.log.gone(r.life, t, deleted)
            r.life = None

    def _list_alive(self, deleted: list[_Ref]) -> None:
        """Records, born at 0, of the arrays alive before the cell (the known ones, those
        deleted since the last look): the largest LISTED_BEFORE of those from LISTED_BYTES
        up, one by one, and the others as one line (count and bytes)."""
        self._list_before = False
        refs = [*self.known.values(), *self.pending, *deleted]
        big = [r for r in refs if r.n >= LISTED_BYTES]
        if len(big) > LISTED_BEFORE:
            big = heapq.nlargest(LISTED_BEFORE, big, key=lambda r: r.n)
        else:
            big.sort(key=lambda r: -r.n)
        listed = 0
        for r in big:
            a = r()
            if a is None:
                continue
            self._born(r, a, 0.0)
            listed += r.n
        rest = len(refs) - len(big)
        if rest > 0:
            total = sum(r.n for r in refs) - listed
            self.log.born(f"({rest:,} other arrays, not listed one by one)", total, 0.0)

    def bytes_on(self, dev: int) -> int:
        return self.totals.get(dev, 0)


def _replaced(fewer: list[tuple[_Ref, float]], came: int, went: int) -> set[int]:
    """The ids of the references among `fewer` (those gone since the last look, with when)
    whose record the `came` bytes first seen at this look replace: all of them when at least
    half the bytes that went came; else the last to go, one by one, while at least half of
    each one's bytes are left of `came`."""
    if 2 * came >= went:
        return {id(r) for r, _ in fewer}
    out: set[int] = set()
    for r, _when in sorted(fewer, key=lambda rw: -rw[1]):
        if 2 * came < r.n:
            break
        out.add(id(r))
        came -= r.n
    return out


def device_memory(platform: str) -> tuple[int, str] | None:
    """(bytes, what they are) of one device of `platform`: an accelerator's
    `memory_stats()["bytes_limit"]`; on CPU, where JAX reports none, the machine's RAM
    (its cgroup's limit when lower). None: unknown."""
    try:
        dev = jax.local_devices(backend=platform)[0]
        stats = dev.memory_stats()
    except Exception:  # no such backend here
        return None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{_compat.device_name(dev)}'s memory"
    if platform != "cpu":
        return None
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                limit = f.read().strip()
        except OSError:
            continue
        if limit.isdigit() and 0 < int(limit) < ram:
            return int(limit), "this machine's memory (its cgroup's limit)"
    return ram, "this machine's RAM"


_tracker: LiveArrays | None = None
_tracker_lock = threading.Lock()


def tracker() -> LiveArrays:
    """The process's one LiveArrays (made at its first use)."""
    global _tracker
    with _tracker_lock:
        if _tracker is None:
            _tracker = LiveArrays()
        return _tracker

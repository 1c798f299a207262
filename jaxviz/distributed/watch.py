"""The programs' watchdog: each process publishes a function's program when its first call
is traced, and process 0 compares them while the run goes on.

`ProgramWatch` is an observer of the capture (its `on_jit` sees each jitted call on JAX's
Python path, where every function's first call of each signature goes). It does nothing in
a single process. In a `jax.distributed` run, a new program of a function whose arguments
span several processes is queued, and a thread of jaxviz's (started at the first such call,
after `jax.distributed.initialize` returned) publishes its signature (programs.py) to the
coordination service's key-value store. On process 0 the same thread reads the others'
every `POLL` seconds and prints a `program-mismatch` finding at once: processes that traced
different programs hang in its collectives, and the finding is printed while they hang.
The user's thread only queues (a set lookup and an append at a function's first call).

    >>> watch = ProgramWatch("jaxviz/run/")        # passed to the Recorder as an observer
    >>> watch.stop()                              # at the end: the last comparison
    >>> watch.mismatches
    []
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz.diagnostics.diagnostic import Diagnostic
from jaxviz.diagnostics.report import finding
from jaxviz.diagnostics.rules import RULES
from jaxviz.distributed.programs import Difference, first_difference, short_place, signature

POLL = 0.5  # seconds between process 0's reads of the others' programs
GRACE = 5.0  # seconds process 0 may take to trace a program another process traced anew
NEVER = -1.0  # Mismatch.waited of a program process 0 never traced (its run ended)


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """Process `process` traced another program of `name` (its n-th) than process 0."""

    name: str
    n: int
    process: int
    difference: Difference
    mine: str  # process 0's signature, "step(x: f32[8,8])"
    theirs: str
    waited: float = 0.0  # > 0: a new program of `process` that process 0 has not traced in
    # so many seconds (compared with process 0's last program of the function)

    def diagnostic(self) -> Diagnostic:
        d = self.difference
        nth = _ordinal(self.n + 1)
        lacks = "never traced" if self.waited == NEVER else f"has not traced in {self.waited:.0f} s"
        head = (
            f"process {self.process} traced a new program of {self.name} (its {nth}) that "
            f"process 0 {lacks}"
            if self.waited
            else f"process {self.process} traced another program of {self.name} than process 0"
        )
        msg = (
            f"{head}: {d.what} (process 0: {self.mine}; process {self.process}: {self.theirs}). "
            f"Processes that run different programs wait forever in its collectives, or "
            f"exchange mismatched shards"
        )
        hint = RULES["program-mismatch"].hint
        return finding("program-mismatch", msg, (d.file, d.line) if d.line else None, hint=hint)


class ProgramWatch:
    """The capture's observer of programs, and the watchdog thread of a multi-process run
    (`prefix`: the run's keys in the store, "jaxviz/run/"; `out`: where process 0 prints a
    mismatch, stderr by default)."""

    def __init__(self, prefix: str, out: Callable[[str], None] | None = None) -> None:
        self.prefix = prefix
        self.group: tuple[int, int] | None = None
        self.mismatches: list[Mismatch] = []
        self.errors: list[Exception] = []
        self.published_bytes = 0
        self._sent = 0  # programs published, the key's last part
        self._out = out or _to_stderr
        self._seen: set[int] = set()
        self._per_name: dict[str, int] = {}
        self._queue: list[tuple] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._theirs: dict[str, dict] = {}  # key -> signature read from the store
        self._mine: dict[tuple[str, int], dict] = {}  # process 0's own, by (name, n)
        self._told: set[tuple[str, int, int]] = set()
        self._extra: dict[tuple, float] = {}  # another's program process 0 lacks: first seen

    # --- the user's thread: one set lookup per call on JAX's Python path ---------------------

    def on_jit(self, call: Any, frame: Any, run: Callable[[], Any]) -> Any:
        __tracebackhide__ = True  # a hook: never in the user's tracebacks
        try:
            self._note(call, frame)
        except Exception as e:  # jaxviz's own failure must never become the user's
            self.errors.append(e)
        return run()

    def _note(self, call: Any, frame: Any) -> None:
        jaxpr = _compat.open_jaxpr(call.jaxpr)
        if id(jaxpr) in self._seen:
            return
        self._seen.add(id(jaxpr))
        group = _compat.process_group()
        if group is None:
            return
        spans = any(not getattr(a, "is_fully_addressable", True) for a in call.args_flat)
        n = self._per_name.get(call.name, 0)
        self._per_name[call.name] = n + 1
        site = _compat.site_of(frame)
        with self._lock:
            self._queue.append((call.name, jaxpr, tuple(call.arg_names), site, spans, n))
        if self._thread is None:
            self.group = group
            self._thread = threading.Thread(target=self._loop, name="jaxviz-programs", daemon=True)
            self._thread.start()
        self._wake.set()

    # --- jaxviz's thread ------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            self._wake.wait(POLL)
            self._wake.clear()
            stopping = self._stopping
            if _compat.process_group() is None:  # the user shut jax.distributed down
                return
            try:
                self._publish()
                if self.group is not None and self.group[0] == 0:
                    self._compare()
            except Exception as e:  # the service gone (shut down by the user): stop
                self.errors.append(e)
                return
            if stopping:
                return

    def _publish(self) -> None:
        with self._lock:
            todo, self._queue = self._queue, []
        assert self.group is not None
        me = self.group[0]
        for name, jaxpr, arg_names, site, spans, n in todo:
            sig = signature(name, jaxpr, arg_names, site, spans, n)
            if me == 0:
                self._mine[(name, n)] = sig
            text = json.dumps(sig, separators=(",", ":"))
            _compat.kv_set(f"{self.prefix}prog/{me}/{self._sent}", text)
            self._sent += 1
            self.published_bytes += len(text)

    def _compare(self) -> None:
        if not self._mine:
            return
        for key, text in _compat.kv_dir(f"{self.prefix}prog/").items():
            if key not in self._theirs:
                self._theirs[key] = json.loads(text)
        for key, sig in self._theirs.items():
            process = int(key[len(self.prefix) + len("prog/") :].split("/", 1)[0])
            if process == 0:
                continue
            told = (sig["name"], sig["n"], process)
            if told in self._told:
                continue
            mine, waited = self._counterpart(sig, told)
            if mine is None or not (mine["spans"] or sig["spans"]):
                continue
            diff = first_difference(mine, sig, ("process 0", f"process {process}"))
            if diff is None:
                continue
            self._told.add(told)
            m = Mismatch(sig["name"], sig["n"], process, diff, _called(mine), _called(sig), waited)
            self.mismatches.append(m)
            d = m.diagnostic()
            where = short_place(d.filename, d.line or 0)
            self._out(f"jaxviz: {where}: {d.severity}: {d.rule}: {d.message}")

    def _counterpart(self, sig: dict, told: tuple) -> tuple[dict | None, float]:
        """Process 0's program to compare `sig` with: its n-th of the function; or, for a
        program process 0 has not traced (a recompile on another process alone), its last
        one, once GRACE seconds have passed without process 0 tracing the n-th (then the
        seconds waited)."""
        name, n = sig["name"], sig["n"]
        mine = self._mine.get((name, n))
        if mine is not None or not n or (name, n - 1) not in self._mine:
            self._extra.pop(told, None)
            return mine, 0.0
        first = self._extra.setdefault(told, time.monotonic())
        waited = time.monotonic() - first
        if self._stopping:  # process 0's run has ended: it never will
            return self._mine[(name, n - 1)], NEVER
        return (self._mine[(name, n - 1)], waited) if waited >= GRACE else (None, 0.0)

    def programs(self) -> dict[tuple[str, int], dict[int, dict]]:
        """Process 0: every program it read, {(name, n): {process: signature}} (after
        stop(), the last comparison's)."""
        out: dict[tuple[str, int], dict[int, dict]] = {}
        for which, sig in self._mine.items():
            out.setdefault(which, {})[0] = sig
        for key, sig in self._theirs.items():
            process = int(key[len(self.prefix) + len("prog/") :].split("/", 1)[0])
            out.setdefault((sig["name"], sig["n"]), {})[process] = sig
        return out

    def stop(self) -> None:
        """At the run's end: what is queued is published, process 0 compares once more."""
        thread = self._thread
        if thread is None:
            return
        self._stopping = True
        self._wake.set()
        thread.join(timeout=10)


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _called(sig: dict) -> str:
    return f"{sig['name']}({', '.join(sig['inputs'])})"


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)

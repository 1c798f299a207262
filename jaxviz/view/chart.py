"""The live memory chart: device memory over time while a run goes on.

`live_run(trace)` displays a `MemoryChart` (unless `display=False`: %%jaxtrace shows the chart in
the graph view's memory tab instead), then runs the trace (`jaxviz.memory.run.run_trace`) and
streams the sampler's readings to it as binary custom messages, at most 30 a second: one lane
per device (and one for the process RSS on CPU), step boundaries, XLA's peak estimate, donation
events, and the run with donation beside the run without. Messages that reach the page before
the model's ESM has started are lost (create the chart, then stream): the ESM's `initialize`
keeps every later message in the model's store, views or not, so a view made late (the
memory tab opened mid-run) still draws everything.

    >>> import jax, jax.numpy as jnp, jaxviz
    >>> from jaxviz.view.chart import live_run
    >>> t = jaxviz.trace(jax.jit(lambda x: x * 2 + 1), jnp.zeros((1024, 1024)))
    >>> report = live_run(t, steps=20)      # in a notebook: the chart draws while it runs

Wire format (the JS in js/src/entries/memory.js reads exactly this; jaxviz.schema declares it:
SamplesMessage, StepsMessage, EventsMessage, StopMessage, StoppingMessage):
    {"kind": "samples", "run": 0, "n": 12}, buffers=[float64 (n, 3): t seconds, lane, bytes]
    {"kind": "steps", "run": 0, "n": 5},    buffers=[float64 (n, 2): t start, seconds]
    {"kind": "events", "run": 0, "events": [{"t": 0.1, "kind": "donation", "label": "..."}]}
    {"kind": "stop"} from the view: the Stop button; answered with {"kind": "stopping"}.
    A kernel busy running the cell reads that message only after the cell, so when no answer
    comes within 0.4 s the view interrupts the kernel (JupyterLab / Notebook 7 widget manager);
    the run loop turns the KeyboardInterrupt into a partial report marked `stopped`.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import threading
import time
import uuid
from typing import Any

import anywidget
import numpy as np
import traitlets

from jaxviz.format import fmt_bytes
from jaxviz.memory.run import RunReport, run_trace
from jaxviz.memory.timeline import CellMemory
from jaxviz.schema import (
    ArrayEntry,
    ArraysMessage,
    CallMarkEntry,
    ChartLane,
    ChartRun,
    ComputingMessage,
    EventsMessage,
    MarksMessage,
    SamplesMessage,
    StepsMessage,
    StoppingMessage,
)
from jaxviz.view.assets import bundle, packed_bundle
from jaxviz.view.html import chart_fragment

STATIC_POINTS = 3000  # samples per lane and run the saved (static) chart keeps
STATIC_MARKS = 3000  # call marks the saved chart keeps (the rest are counted)
STATIC_ARRAYS = 5000  # arrays the saved chart lists (the rest are counted)

ESM = bundle("memory.js")  # the bundled view (a path), or a stand-in that says it is missing


class MemoryChart(anywidget.AnyWidget):
    """Memory over time, one lane per device, runs side by side, with a Stop button.

    Traits (plain JSON, replaced whole; jaxviz.schema.ChartLane and ChartRun):
        title: "x = step(x): 256 MiB, 10 steps"
        phase: "compiling" | "running" | "done" | "stopped" | "error: ..."
        lanes: [{"id": "cpu:0", "label": "cpu:0 live JAX arrays", "source": "live_arrays"}]
        runs: [{"label": "with donation", "xla_peak": 268435456 | None,
                "baseline": {"cpu:0": 0.0, "rss": 3.1e8}, "step": 3, "steps": 10,
                "summary": "peak +256 MiB"}]
        live_token: "3f2a...": the graph view's memory tab finds the model by it.

    Shown on its own (`live_run(trace)`) or, under %%jaxtrace, inside the graph view's memory
    tab without being displayed: its ESM keeps every streamed message from the moment the
    model exists, so a tab opened late still draws the whole run.
    """

    _esm = ESM
    title = traitlets.Unicode("").tag(sync=True)
    phase = traitlets.Unicode("").tag(sync=True)
    lanes: traitlets.List = traitlets.List().tag(sync=True)
    runs: traitlets.List = traitlets.List().tag(sync=True)
    # how the graph view's memory tab finds this model in the page
    # (jaxviz.view.payload.memory_entries)
    live_token = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("live_token", uuid.uuid4().hex)  # in the state the model opens with
        super().__init__(**kwargs)
        self.stop_event = threading.Event()
        self._steps: dict[int, list[tuple[float, float]]] = {}
        self._last_steps_sent = 0.0
        self._last_progress = 0.0
        self._lock = threading.Lock()
        # what was sent, for the saved copy (`static_bundle`): samples per run, the rest as is
        self._history: list[tuple[dict, list[bytes]]] = []
        self._samples: dict[int, list[np.ndarray]] = {}
        self.on_msg(self._handle)

    def send(self, content: Any, buffers: Any = None) -> None:
        """Sends a custom message to the views, and keeps it for the saved copy."""
        if isinstance(content, dict) and content.get("kind") == "samples" and buffers:
            self._samples.setdefault(int(content["run"]), []).append(
                np.frombuffer(buffers[0], dtype=np.float64).reshape(-1, 3)
            )
        elif isinstance(content, dict) and content.get("kind") != "stopping":
            self._history.append((content, list(buffers or [])))
        super().send(content, buffers)

    def __repr__(self) -> str:
        runs = "; ".join(
            f"{r.get('label', '')}: step {r.get('step', 0)}/{r.get('steps', 0)}"
            + (f", {r['summary']}" if r.get("summary") else "")
            for r in self.runs
        )
        return f"MemoryChart({self.title!r}, {self.phase or 'idle'}" + (
            f"; {runs})" if runs else ")"
        )

    # -- from the view ---------------------------------------------------------------------------

    def _handle(self, _widget: Any, content: dict, _buffers: list) -> None:
        if isinstance(content, dict) and content.get("kind") == "stop":  # a StopMessage
            self.stop_event.set()
            msg: StoppingMessage = {"kind": "stopping"}
            self.send(msg)

    # -- to the view (callbacks of run_trace; any thread) ------------------------------------------

    def on_run(
        self, run: int, label: str, lanes: tuple, xla_peak: int | None, baseline: dict[str, float]
    ) -> None:
        chart_lanes: list[ChartLane] = [
            {"id": ln.id, "label": ln.label, "source": ln.source} for ln in lanes
        ]
        self.lanes = chart_lanes
        runs: list[dict] = [dict(r) for r in self.runs]
        while len(runs) <= run:
            runs.append({})
        info: ChartRun = {
            "label": label,
            "xla_peak": xla_peak,
            "baseline": dict(baseline),
            "step": 0,
            "steps": 0,
            "summary": "",
        }
        runs[run] = dict(info)
        self.runs = runs
        self.phase = "running"

    def on_sample(self, run: int, batch: list[tuple[float, int, float]]) -> None:
        if not batch:
            return
        data = np.asarray(batch, dtype=np.float64).reshape(-1, 3)
        msg: SamplesMessage = {"kind": "samples", "run": run, "n": len(data)}
        self.send(msg, buffers=[data.tobytes()])

    def on_step(self, run: int, step: int, steps: int, t0: float, dt: float) -> None:
        with self._lock:
            self._steps.setdefault(run, []).append((t0, dt))
        now = time.perf_counter()
        if now - self._last_steps_sent >= 1 / 30 or step == steps:
            self._flush_steps()
            self._last_steps_sent = now
        if now - self._last_progress >= 0.1 or step == steps:
            self._last_progress = now
            runs = [dict(r) for r in self.runs]
            if run < len(runs):
                runs[run].update(step=step, steps=steps)
                self.runs = runs

    def on_events(self, run: int, events: tuple) -> None:
        self._flush_steps()
        msg: EventsMessage = {
            "kind": "events",
            "run": run,
            "events": [{"t": e.t, "kind": e.kind, "label": e.label} for e in events],
        }
        self.send(msg)

    def _flush_steps(self) -> None:
        with self._lock:
            pending, self._steps = self._steps, {}
        for run, rows in pending.items():
            data = np.asarray(rows, dtype=np.float64).reshape(-1, 2)
            msg: StepsMessage = {"kind": "steps", "run": run, "n": len(data)}
            self.send(msg, buffers=[data.tobytes()])

    # -- a cell's own memory (jaxviz.memory.timeline.CellWatch's on_update; any thread) -------

    def start_cell(self, lanes: tuple) -> None:
        """Shows one run, "this cell", with the sampler's lanes (none yet: `set_lanes`)."""
        self.set_lanes(lanes)
        run: ChartRun = {
            "label": "this cell",
            "xla_peak": None,
            "baseline": {},
            "step": 0,
            "steps": 0,
            "summary": "",
        }
        self.runs = [dict(run)]
        self.phase = "running"

    def set_lanes(self, lanes: tuple) -> None:
        """The sampler's lanes, once known (the cell's first touch of a device; any thread)."""
        self.lanes = [{"id": ln.id, "label": ln.label, "source": ln.source} for ln in lanes]

    def on_cell(self, samples: list, marks: list, born: list, gone: list, dropped: int = 0) -> None:
        """Streams what the cell's sampler and capture saw since the last call."""
        self.on_sample(0, samples)
        if marks:
            entries: list[CallMarkEntry] = [
                {"t": m.t, "name": m.name, "line": m.line, "file": m.file, "donates": m.donates}
                for m in marks
            ]
            msg: MarksMessage = {"kind": "marks", "run": 0, "marks": entries}
            self.send(msg)
        if born or gone:
            arrays: ArraysMessage = {
                "kind": "arrays",
                "run": 0,
                "born": [_array_entry(a) for a in born],
                "gone": [_array_entry(a) for a in gone],
                "dropped": dropped,
            }
            self.send(arrays)

    def on_computing(self, changes: list[tuple[float, int]]) -> None:
        """When the cell's outputs were still being computed: (t, 1) from, (t, 0) until."""
        msg: ComputingMessage = {
            "kind": "computing",
            "run": 0,
            "changes": [[t, v] for t, v in changes],
        }
        self.send(msg)

    def finish_cell(self, mem: Any) -> None:
        """Puts the cell's summary under the chart and marks it done."""
        runs = [dict(r) for r in self.runs] or [{}]
        runs[0]["summary"] = (
            lane_summary(mem.lanes, mem.peaks(), _readings(mem))
            or "nothing sampled: no JAX work seen in the cell"
        ) + (f"; {mem.arrays_dropped} later arrays not listed" if mem.arrays_dropped else "")
        self.runs = runs
        self.phase = f"done: {mem.calls_note()} ({mem.seconds:.2f} s)"

    def static_bundle(self, text: str = "") -> dict:
        """text/plain and a self-contained text/html copy of the chart as it is now, which
        works without a kernel or widget manager (a saved notebook, nbconvert, an output
        rendered in its own iframe as Colab and VS Code do)."""
        plain = text or repr(self)
        packed = packed_bundle("memory.js")
        if packed is None:
            return {"text/plain": plain, "text/html": f"<pre>{html.escape(plain)}</pre>"}
        return {"text/plain": plain, "text/html": chart_fragment(self.state_for_page(), plain)}

    def state_for_page(self) -> dict:
        """The traits and the messages sent so far (samples thinned to STATIC_POINTS per lane
        and run, marks to STATIC_MARKS, arrays to STATIC_ARRAYS), as plain JSON with base64
        buffers."""
        msgs: list[dict] = []
        for run, parts in sorted(self._samples.items()):
            data = _thin(np.concatenate(parts) if parts else np.zeros((0, 3)), STATIC_POINTS)
            msgs.append(
                {
                    "msg": {"kind": "samples", "run": run, "n": len(data)},
                    "buffers": [base64.b64encode(data.tobytes()).decode()],
                }
            )
        marks = arrays = 0
        for content, buffers in self._history:
            if content.get("kind") == "marks":
                room = max(STATIC_MARKS - marks, 0)
                content = dict(content, marks=content["marks"][:room])
                marks += len(content["marks"])
            elif content.get("kind") == "arrays":  # births past the cap are counted only
                room = max(STATIC_ARRAYS - arrays, 0)
                born = content["born"]
                content = dict(
                    content,
                    born=born[:room],
                    dropped=content["dropped"] + max(arrays + len(born) - STATIC_ARRAYS, 0),
                )
                arrays += len(born)
            msgs.append(
                {"msg": content, "buffers": [base64.b64encode(b).decode() for b in buffers]}
            )
        return {
            "traits": {
                "title": self.title,
                "phase": self.phase,
                "lanes": self.lanes,
                "runs": self.runs,
                "live_token": self.live_token,
            },
            "messages": msgs,
        }

    def finish(self, report: Any) -> None:
        """Puts each run's summary line under its chart and marks the chart done."""
        runs = [dict(r) for r in self.runs]
        for r, run in zip(runs, report.runs):
            dev = max((v for k, v in run.peak_rise.items() if k != "rss"), default=None)
            rss = run.peak_rise.get("rss")  # (no RSS lane where devices report memory_stats)
            r["summary"] = (
                f"peak +{fmt_bytes(dev)} on a device, "
                + (f"RSS +{fmt_bytes(rss)}, " if rss is not None else "")
                + step_spread(run.step_times)
            )
        self.runs = runs
        ratio = (
            f": donation ratio {report.donation_ratio:.2f}x"
            if report.donation_ratio is not None
            else ""
        )
        self.phase = ("stopped" if report.stopped else "done") + ratio


def live_run(
    trace: Any,
    *args: Any,
    steps: int = 10,
    compare: bool = True,
    donate: Any = None,
    chart: MemoryChart | None = None,
    display: bool = True,
    **kwargs: Any,
) -> Any:
    """Displays a MemoryChart, then runs `trace` (see `run_trace`) and streams to it.

    Returns the RunReport; a Stop click (or an interrupt) ends the run early and returns
    what ran so far, marked `stopped`.
    """
    chart = chart or MemoryChart(title=f"{getattr(trace, 'name', 'f')}: {steps} steps")
    if display:
        from IPython.display import display as show

        show(chart)
    chart.phase = "compiling"
    try:
        report = run_trace(
            trace,
            *args,
            steps=steps,
            compare=compare,
            donate=donate,
            on_sample=chart.on_sample,
            on_step=chart.on_step,
            on_run=chart.on_run,
            on_events=chart.on_events,
            stop=chart.stop_event,
            on_interrupt="return",
            **kwargs,
        )
    except KeyboardInterrupt:  # outside the step loop (compiling, between runs)
        chart.phase = "stopped"
        raise
    except Exception as e:
        chart.phase = f"error: {type(e).__name__}: {e}"
        raise
    chart.finish(report)
    return report


def _readings(mem: Any) -> dict[str, list[float]]:
    """Each lane's readings in time order, by lane id (at the cell's end, not while sampling)."""
    out: dict[str, list[float]] = {}
    for _t, lane, v in mem.samples:
        out.setdefault(mem.lanes[lane].id, []).append(v)
    return out


def lane_summary(lanes: Any, peaks: dict, readings: dict | None = None) -> str:
    """Each lane's peak, folded as the chart folds its lanes: the devices that held nothing into
    one clause, the devices whose readings agree (to within SAME_SHARE of their peak, one SPMD
    program's shards; without `readings`, their peaks) into one: "cpu:0-7 live JAX arrays:
    peak 1.0 MiB each, RSS: peak 9 MiB"; "cpu:0 live JAX arrays: peak 80 B, ...; 7 more
    devices: no arrays"."""
    groups: list[list[Any]] = []
    idle = []
    for ln in lanes:
        p = peaks.get(ln.id) or 0.0
        if ln.source != "rss" and not p:
            idle.append(ln)
            continue
        same = next(
            (
                g
                for g in groups
                if g[0].source == ln.source != "rss" and _near(peaks, readings, g[0], ln)
            ),
            None,
        )
        if same is None:
            groups.append([ln])
        else:
            same.append(ln)
    shown = [_peak_clause(g, peaks) for g in groups]
    if idle and not shown:  # nothing anywhere: the first lane says so, the rest fold
        shown.append(f"{idle[0].label}: peak {fmt_bytes(0)}")
        idle = idle[1:]
    more = f"{len(idle)} more device{'s' if len(idle) > 1 else ''}: no arrays" if idle else ""
    return ", ".join(shown) + (f"; {more}" if more else "")


SAME_SHARE = 0.005  # the chart's (js/src/entries/memory.js): peaks this close are one lane's


def _near(peaks: dict, readings: dict | None, a: Any, b: Any) -> bool:
    pa, pb = peaks.get(a.id) or 0.0, peaks.get(b.id) or 0.0
    tol = SAME_SHARE * max(pa, pb)
    if readings is None:
        return abs(pa - pb) <= tol
    ra, rb = readings.get(a.id, []), readings.get(b.id, [])
    return all(abs(x - y) <= tol for x, y in zip(ra, rb))


def _peak_clause(group: list[Any], peaks: dict) -> str:
    first = group[0]
    if len(group) == 1:
        return f"{first.label}: peak {fmt_bytes(peaks.get(first.id))}"
    ids = [ln.id for ln in group]
    what = first.label[len(first.id) :] if first.label.startswith(first.id) else f" {first.label}"
    return f"{devices_text(ids)}{what}: peak {fmt_bytes(max(peaks[i] for i in ids))} each"


def devices_text(ids: list[str]) -> str:
    """ "cpu:0-7" (3 or more consecutive numbers of one platform), else "cpu:0, cpu:2" or
    "cpu:0 … cpu:6 (4 devices)" (the chart's devicesText)."""
    if len(ids) < 3:
        return ", ".join(ids)
    parts = [i.rpartition(":") for i in ids]
    if all(p[0] == parts[0][0] and p[2].isdigit() for p in parts):
        n = [int(p[2]) for p in parts]
        if n == list(range(n[0], n[0] + len(n))):
            return f"{parts[0][0]}:{n[0]}-{n[-1]}"
    return f"{ids[0]} … {ids[-1]} ({len(ids)} devices)"


def step_spread(times: Any) -> str:
    """ "1.20 ms/step (min 1.10, max 3.00 ms, noisy)": the median with its spread, marked
    noisy when the spread is more than half the median."""
    if not len(times):
        return "no steps"
    ms = np.asarray(times, dtype=np.float64) * 1e3
    med, lo, hi = float(np.median(ms)), float(np.min(ms)), float(np.max(ms))
    noisy = len(ms) > 1 and hi - lo > 0.5 * med
    return f"{med:.2f} ms/step (min {lo:.2f}, max {hi:.2f} ms{', noisy' if noisy else ''})"


def _array_entry(a: Any) -> ArrayEntry:
    return {
        "id": a.id,
        "born": a.born,
        "type": a.type,
        "nbytes": a.nbytes,
        "gone": a.gone,
        "deleted": a.deleted,
        "name": a.name,
    }


def _thin(data: np.ndarray, points: int) -> np.ndarray:
    """At most ~`points` rows per lane: each lane's readings in buckets, each bucket's lowest
    and highest reading kept (so peaks survive)."""
    out = []
    for lane in np.unique(data[:, 1]) if len(data) else []:
        rows = data[data[:, 1] == lane]
        if len(rows) > points:
            keep: set[int] = set()
            for chunk in np.array_split(np.arange(len(rows)), points // 2):
                v = rows[chunk, 2]
                keep.update((int(chunk[np.argmin(v)]), int(chunk[np.argmax(v)])))
            rows = rows[sorted(keep)]
        out.append(rows)
    return np.concatenate(out) if out else np.zeros((0, 3))


@dataclasses.dataclass(eq=False)
class MemoryEntry:
    """One function's run in the memory tab: the memory stage's record, filled as it runs.

    %%jaxtrace makes one per function it runs after the cell (`CellTrace.memory`), with a
    chart the view finds by its token; the run then sets `report`, or `note` says why none.
    """

    trace: str  # the Trace's name, "step"
    chart: MemoryChart | None = None  # the live chart (a kernel), or None
    report: RunReport | None = None  # the finished run
    note: str = ""  # "the run was interrupted", "could not run ..."
    cell: CellMemory | None = None  # the cell's own memory while it ran (default %%jaxtrace)

"""A traced cell's memory charts: the cell's own while it runs, and one per function run
after it.

While a %%jaxtrace cell runs, its memory chart (a MemoryChart fed by the cell's CellWatch,
jaxviz.memory.timeline) is displayed before the cell's own output, fed through its own comm:
device memory from a background sampler, each jitted call a mark, the arrays alive at any
moment. When the cell ends, that output becomes a self-contained copy of the finished chart
(`CellChart`). With --compare or --steps, each of the user's functions that may run again
(jaxviz.memory.plan) is compiled and run on synthesised inputs after the cell, streaming to
its own chart (`planned`, `run_planned`).

    >>> live = CellChart()
    >>> live.start(rec, filename, 3, chart=True)   # displays "cell [3]: memory while it runs"
    >>> cell_memory = live.stop(rec)               # the CellMemory record, or None
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from IPython.display import display

from jaxviz.graph.trace import Trace
from jaxviz.memory.plan import runnable
from jaxviz.memory.timeline import CellMemory, CellWatch
from jaxviz.view.chart import MemoryChart, MemoryEntry, live_run


class CellChart:
    """The cell's memory watch, its live chart and the chart's display handle (each None
    when off: -q, --no-run, --text, outside a kernel, or jaxviz failed to start them)."""

    def __init__(self) -> None:
        self.watch: CellWatch | None = None
        self.chart: MemoryChart | None = None
        self.handle: Any = None
        self.blanked = False  # `blank`: its output stays empty (the sealed copy too)

    def start(self, rec: Any, filename: str, number: int, *, chart: bool) -> None:
        """Starts the cell's memory watch and (`chart`: in a kernel, with the view) displays
        its live chart before the cell's own output. jaxviz's failure is kept in the
        recorder's internal_errors: the cell runs without its chart rather than not at all."""
        watch = None
        try:
            if chart:
                self.chart = MemoryChart(title=f"cell [{number}]: memory while it runs")
            # (its lanes are made once the cell touches a device: JAX is asked nothing before)
            watch = CellWatch(rec, top_filename=filename)
            if self.chart is not None:
                log, to = watch.log, self.chart
                watch.on_update = lambda s, m, b, g: to.on_cell(s, m, b, g, log.dropped)
                watch.on_lanes = to.set_lanes
                watch.on_computing = to.on_computing
                to.start_cell(watch.lanes)
                self.handle = display(to, display_id=True)  # display first, then stream
            watch.start()
        except Exception as e:
            rec.internal_errors.append(e)
            if watch is not None and watch.sampler.running:
                watch.sampler.stop()
            self.chart = None
            return
        self.watch = watch

    def paused(self) -> contextlib.AbstractContextManager:
        """The watch paused (a %timeit the cell runs: its sampler competes with nothing
        being timed); nothing when the cell has no watch."""
        watch = self.watch
        return watch.sampler.paused() if watch is not None else contextlib.nullcontext()

    def stop(
        self, rec: Any, schedule: Callable[[Callable[[], None]], bool] | None = None
    ) -> CellMemory | None:
        """Stops the watch (the live chart shows its end now); the chart's output becomes
        its self-contained copy, after the cell's reply when `schedule` can run it then
        (jaxviz.capture.reply: compressing the copy took ~12 ms of a 50-step loop's cell).
        The cell's CellMemory record, or None."""
        watch, chart, handle = self.watch, self.chart, self.handle
        if watch is None:
            return None
        try:
            mem = watch.stop()
            if chart is not None:
                chart.finish_cell(mem)

                def seal() -> None:
                    try:
                        if handle is not None and not self.blanked:
                            handle.update(chart.static_bundle(str(mem)), raw=True)
                    finally:
                        chart.close()  # its comm: the output no longer needs it

                if schedule is None or not schedule(seal):
                    seal()
            return mem
        except Exception as e:  # jaxviz's own failure: never the cell's
            rec.internal_errors.append(e)
            return None

    def blank(self, line: str = "") -> None:
        """The chart's output made `line` (JAX raised while tracing: nothing ran, and the
        chart's flat lines would stand above the view that says what went wrong)."""
        self.blanked = True
        if self.handle:
            self.handle.update({"text/plain": line}, raw=True)


def plan_runs(ct: Any) -> tuple[list[Trace], list[MemoryEntry]]:
    """The traces %%jaxtrace runs after the cell, and a memory entry for each of the user's
    functions it will not run, whose note says why (shown by the memory tab and the text
    twin)."""
    todo, skipped = [], []
    for t in ct.traces:
        ok, why = runnable(t)
        if ok:
            todo.append(t)
        elif why:
            skipped.append(MemoryEntry(t.name, note=why))
    return todo, skipped


def charted(todo: list[Trace]) -> list[MemoryEntry]:
    """A memory entry with a MemoryChart for each trace to run (--compare, --steps): each
    chart is displayed as its own output when its run starts; the graph view's memory tab
    shows the finished run's summary."""
    return [
        MemoryEntry(t.name, MemoryChart(title=f"{t.name}: compiled and run on synthesised inputs"))
        for t in todo
    ]


def planned(ct: Any, *, run: bool, charts: bool) -> tuple[list[Trace], list[MemoryEntry]]:
    """The traces to run after the cell (none unless `run`) and their memory entries, each
    with its live chart when `charts` (the view shows, in a kernel); `ct.memory` gets those
    entries, then one per function not run, with why: the memory tab and the text twin
    show them, never a print after the cell's own output."""
    todo, skipped = plan_runs(ct) if run else ([], [])
    runs = charted(todo) if charts else [MemoryEntry(t.name) for t in todo]
    ct.memory.extend(runs + skipped)  # before the view: its memory tab lists them
    return todo, runs


def run_planned(
    ct: Any,
    todo: list[Trace],
    entries: list[MemoryEntry],
    *,
    steps: int,
    compare: bool,
    show: bool,
    max_seconds: float | None = None,
    text: bool = False,
    handle: Any = None,
) -> None:
    """Compiles and runs each trace of `todo` (its entry of `ct.memory` in `entries`),
    streaming to its chart in the memory tab.

    Each run's live chart is its own output; when its run ends that output becomes the
    chart's self-contained copy, and when all end the graph view (`handle`) is updated
    in place with each RunReport's summary in its memory tab, which is what a saved
    notebook keeps. With --text the report's text follows instead. The user's cell
    already succeeded, so nothing here raises.
    """
    try:
        for k, (t, m) in enumerate(zip(todo, entries)):
            # each chart is its own output, fed through its own comm (self-contained:
            # Colab and VS Code render every output apart), then its finished copy
            shown = display(m.chart, display_id=True) if m.chart is not None and show else None
            try:
                m.report = live_run(
                    t,
                    steps=steps,
                    compare=compare,
                    display=False,
                    max_seconds=max_seconds,
                    chart=m.chart,
                )
            except KeyboardInterrupt:
                m.note = "the run was interrupted"
                if show and text:  # the text twin's part; the view shows the note
                    print(f"{t.name}: {m.note}")
                return
            except Exception as e:
                m.note = (
                    f"could not run on synthesised inputs ({type(e).__name__}: {e}); "
                    f"use --no-run to skip running"
                )
                if show and text:
                    print(f"{t.name}: {m.note}")
                continue
            if show and text:
                print(str(m.report))
            if shown is not None and m.chart is not None:
                shown.update(m.chart.static_bundle(str(m.report)), raw=True)
            if m.report.stopped:  # Stop or an interrupt: no further runs either
                for rest in entries[k + 1 :]:
                    rest.note = f"not run: the run of {t.name} was stopped"
                return
    finally:
        if handle is not None:
            handle.update(ct)  # the memory tab's static summary, saved with the notebook

"""A %%jaxtrace cell's outputs in a notebook session: shown under the cell, kept across cells.

`show_cell` shows a traced cell's CellTrace under the cell's own output (the graph view, or
its text twin), with its memory while it ran, and the runs after it that were asked for,
each streaming to its chart (jaxviz.view.cellcharts). Those outputs are widgets, each with
a comm to the page: the views of the newest `options.keep_cells` cells keep their traces
(a click in a view selects the equation in Python); older ones let go of them and keep
their drawing. A cell run again (the same notebook cell id, `cell_id`) closes its previous
run's widgets: their outputs are gone from the page (`Kept`).

    >>> show_cell(ct, live, ct_memory, text=False, quiet=False, run=False)
    >>> kept.add_cell(cell_id(shell), ct, stored=False)
"""

from __future__ import annotations

import html
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from IPython.display import display

from jaxviz.config import options
from jaxviz.memory.plan import DEFAULT_RUN_SECONDS, DEFAULT_STEPS
from jaxviz.memory.timeline import CellMemory
from jaxviz.view.assets import in_kernel
from jaxviz.view.cellcharts import CellChart, planned, run_planned
from jaxviz.view.chart import MemoryEntry
from jaxviz.view.text import analysis_note


def show_cell(
    ct: Any,
    live: CellChart,
    cell_memory: CellMemory | None,
    *,
    text: bool,
    quiet: bool,
    run: bool,
    steps: int | None = None,
    compare: bool = False,
    tracing_failed: bool = False,
) -> None:
    """Shows a traced cell's CellTrace under its output: the graph view (`text`: its text
    twin; `quiet`: nothing), with its memory while it ran (`cell_memory`, the finished
    chart of `live`), then with `run` runs each of its functions that may run again
    (`steps` steps, else about DEFAULT_RUN_SECONDS; `compare`: with and without donation).
    `tracing_failed`: the cell's error was raised while JAX traced a function (a library's
    own check): the chart's output says in one line what was captured before it, and the
    view shows only when it has findings."""
    failed = ct.error is not None and (tracing_failed or any(t.error for t in ct.traces))
    if failed:  # JAX raised while tracing: nothing ran; no flat chart, no empty output
        live.blank(failed_line(ct))
    if cell_memory is not None:
        ct.memory.append(MemoryEntry(ct.label, cell=cell_memory))
        if text and not quiet:
            print(str(cell_memory))
    visible = not quiet and bool(ct.diagnostics if failed else ct.traces or ct.diagnostics)
    # runs of the user's functions again: only when asked for, each with its live chart
    # when the view shows, and an entry of `ct.memory` for each (before the view)
    todo, runs = planned(ct, run=run, charts=visible and not text and in_kernel())
    handle = None
    if visible:
        if text:
            print(str(ct))
        else:
            handle = display(ct, display_id=True)
    if todo:
        # the default run is a look at memory, not a benchmark: at most ~1 s per run
        budget = None if steps else DEFAULT_RUN_SECONDS
        run_planned(
            ct,
            todo,
            runs,
            steps=steps or DEFAULT_STEPS,
            compare=compare,
            max_seconds=budget,
            show=not quiet,
            text=text,
            handle=handle,
        )


def failed_line(ct: Any) -> str:
    """One line for a cell JAX raised in while tracing: where, and what was captured before."""
    frames = ct.error_frames or []
    fn = frames[-1][2] if frames and frames[-1][2] not in ("", "<module>") else ""
    where = f" `{fn}`" if fn else ""
    got = [t.name for t in ct.traces if t.graph.n_eqns]
    if ct.diagnostics:
        what = "the view below shows what was traced before it"
    elif got:
        shown = ", ".join(n.split(":")[0] for n in got[:3]) + (" ..." if len(got) > 3 else "")
        what = f"captured before it: {shown} (%%jaxtrace -o NAME keeps them)"
    else:
        what = "nothing was captured before it"
    return f"jaxviz: JAX raised while tracing{where}: {what}."


ANALYSING = "jaxviz: analysing {label}..."


def _bundle(text: str, css: str) -> dict:
    """A plain output: `text` as text and as escaped HTML."""
    body = html.escape(text)
    return {"text/plain": text, "text/html": f'<pre class="{css}">{body}</pre>'}


def show_later(
    label: str,
    make: Callable[[], Any],
    cell_memory: CellMemory | None,
    *,
    schedule: Callable[[Callable[[], None]], bool],
    then: Callable[[Any], None],
) -> bool:
    """Shows a traced cell's view after its reply: now, under the cell's output, a note
    that it is analysing; after the reply (`schedule`: jaxviz.capture.reply), its CellTrace
    (`make()`: the analysis), with its memory while it ran (as show_cell), in the note's
    place, then `then(ct)`. The analysis's own failure, or an interrupt, becomes a note in
    the view's place. False: nothing shown, nothing scheduled (no kernel to run it after the
    reply): the caller shows the cell now (as it does a cell JAX raised in while tracing:
    show_cell's one line, no "analysing" output left empty)."""
    handle: Any = None

    def note(text: str) -> None:
        handle.update(_bundle(text, "jaxviz-note"), raw=True)

    def job() -> None:
        try:
            ct = make()
            if cell_memory is not None:
                ct.memory.append(MemoryEntry(ct.label, cell=cell_memory))
            if ct.analysis_error is not None:
                note(str(ct))
            elif ct.traces or ct.diagnostics:
                handle.update(ct)
            else:
                handle.update({"text/plain": ""}, raw=True)
        except KeyboardInterrupt:
            note(f"jaxviz: {label}: its analysis was interrupted")
            return
        except Exception as e:  # the analysis failed: a note, not another cell's error
            note(analysis_note(e))
            return
        then(ct)

    if not schedule(job):
        return False
    handle = display(
        _bundle(ANALYSING.format(label=label), "jaxviz-analysing"), raw=True, display_id=True
    )
    return True


def cell_id(shell: Any) -> str | None:
    """The notebook's id of the running cell (JupyterLab and Notebook 7 send it with each
    execute request as metadata "cellId"); None outside a notebook frontend."""
    try:
        header = shell.parent_header if hasattr(shell, "parent_header") else None
        cid = ((header or {}).get("metadata") or {}).get("cellId")
    except Exception:  # a shell of another kind: no ids, no re-run detection
        return None
    return cid if isinstance(cid, str) and cid else None


class Kept:
    """What a session keeps of its %%jaxtrace cells: each cell's widgets, newest last.

    The views of the newest `options.keep_cells` cells keep their traces (a click in a view
    selects the equation in Python); older ones let go of them and keep their drawing. A
    cell run again (the same notebook cell id) closes its previous run's widgets: their
    outputs are gone from the page. A CellTrace stored with -o keeps its traces.
    """

    def __init__(self) -> None:
        # cell id (an object() for cells without one) -> [stored, widgets]; widgets let go
        # of are dropped from the list (a cell with an id stays, to be closed on a re-run)
        self.cells: OrderedDict[Any, list] = OrderedDict()

    def add(self, cell_id: str | None, widgets: list, stored: bool = False) -> None:
        """The widgets of the cell just run (`stored`: the user keeps its CellTrace, -o)."""
        if cell_id is not None and cell_id in self.cells:
            for w in self.cells.pop(cell_id)[1]:
                _let_go(w, close=True)
        if cell_id is None and not widgets:
            return  # nothing to let go of later (a cell run with -q, outside a notebook)
        self.cells[cell_id if cell_id is not None else object()] = [stored, list(widgets)]
        holding = [k for k, (kept, ws) in self.cells.items() if ws and not kept]
        for k in holding[: max(0, len(holding) - max(0, options.keep_cells))]:
            for w in self.cells[k][1]:
                _let_go(w, close=False)
            if isinstance(k, str):
                self.cells[k][0] = True  # let go of: only a re-run closes them now
            else:
                del self.cells[k]

    def add_cell(self, cell_id: str | None, ct: Any, stored: bool = False) -> None:
        """The widgets of the CellTrace just shown: its graph view and its memory charts."""
        widgets = [ct._widget] if ct._widget is not None else []
        charts = [m.chart for m in ct.memory if m.chart is not None]
        self.add(cell_id, widgets + charts, stored=stored)


def _let_go(w: Any, close: bool) -> None:
    try:
        release = getattr(w, "release", None)
        if release is not None:
            release()
        if close:
            w.close()
    except Exception:  # a widget whose comm is already gone
        pass

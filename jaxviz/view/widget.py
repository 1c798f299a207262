"""The interactive graph as a Jupyter widget (anywidget: one Python class + one ESM file).

State is two synced traits: `payload` (traces, diagnostics, source lines; see
`jaxviz.view.payload`) and `selected` (the node clicked in the view, written by the browser).

Example:
    w = make_widget([jaxviz.trace(f, x)])
    w                       # displays the graph; click a node, then:
    w.selected_node         # Node(id=12, kind="eqn", op="dot_general", ...)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import anywidget
import traitlets

from jaxviz.view.assets import bundle
from jaxviz.view.payload import build_payload

ESM = bundle("graph.js")  # the bundled view (a path), or a stand-in that says it is missing


class GraphWidget(anywidget.AnyWidget):
    """The jaxpr graph view: overview, inspector, search, diagnostics.

    Traits:
        payload: {"traces": [{"name", "graph", "calls", "call_sites", "diagnostics"}],
                  "diagnostics": [...], "sources": {file: {line: text}}}
        selected: {"trace": 0, "body": 2, "node": 12} for the clicked node, {} for none.
        live_token: links the widget's model to HTML views of the same traces in the page.
    """

    _esm = ESM
    payload = traitlets.Dict().tag(sync=True)
    selected = traitlets.Dict().tag(sync=True)
    # set when an HTML view of the same page (jaxviz.view.html.mimebundle) writes clicks here
    live_token = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        traces: Iterable[Any] = (),
        diagnostics: Iterable[Any] = (),
        sources: dict[str, str] | None = None,
        **kwargs,
    ):
        traces = [t for t in traces if getattr(t, "graph", None) is not None]
        self._traces = traces
        self._diagnostics = list(diagnostics)
        self._sources = sources
        if "payload" not in kwargs:
            kwargs["payload"] = build_payload(traces, self._diagnostics, sources)
        kwargs.setdefault("live_token", uuid.uuid4().hex)  # in the state the model opens with
        super().__init__(**kwargs)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # made selection-only (payload={}, its HTML view carries the payload), then displayed
        # on its own: it needs its payload now
        if not self.payload and self._traces:
            self.payload = dict(build_payload(self._traces, self._diagnostics, self._sources))
        return super()._repr_mimebundle_(**kwargs)

    def release(self) -> None:
        """Lets go of the traces (the view keeps its payload): selection then reads None."""
        self._traces, self._diagnostics, self._sources = [], [], None

    @property
    def traces(self) -> list:
        """The traces shown, in tab order."""
        return list(self._traces)

    @property
    def selected_trace(self) -> Any | None:
        sel = self.selected or {}
        i = sel.get("trace")
        return self._traces[i] if isinstance(i, int) and 0 <= i < len(self._traces) else None

    @property
    def selected_node(self):
        """The graph model Node clicked in the view, or None."""
        t = self.selected_trace
        sel = self.selected or {}
        try:
            return t.graph.bodies[sel["body"]].nodes[sel["node"]]
        except (AttributeError, IndexError, KeyError, TypeError):
            return None

    @property
    def selected_eqn(self):
        """The JAX equation behind the selected node, when its trace can map it (else None).

        Uses `trace.eqn(body, node)` when the trace provides it.
        """
        t = self.selected_trace
        node = self.selected_node
        if t is None or node is None or node.kind != "eqn":
            return None
        lookup = getattr(t, "eqn", None)
        if callable(lookup):
            return lookup(self.selected["body"], self.selected["node"])
        return None


def make_widget(
    traces: Iterable[Any],
    diagnostics: Iterable[Any] = (),
    sources: dict[str, str] | None = None,
    *,
    lazy: bool = False,
) -> GraphWidget:
    """A GraphWidget for duck-typed traces (.name, .graph, .calls, .call_sites, .diagnostics).

    lazy: the payload is built when the widget itself is displayed, not before (a widget
    that only receives the clicks of an HTML view never ships it).
    """
    return GraphWidget(traces, diagnostics, sources, **({"payload": {}} if lazy else {}))

"""Two traces side by side: `jaxviz.compare(a, b)`, its text twin, payload and views.

The diff itself is jaxviz.graph.compare's; this module renders it: `compare_text` (the text
twin: the call paths whose cost or equations changed, with FLOPs and bytes deltas, then each
equation that differs), `compare_payload` (what js/src/entries/compare.js draws: two graph
views whose panes follow each other, the differences coloured), and the `Comparison` a user
holds (rich display, `str()`, `save_html`, `widget`).

Example:
    >>> c = jaxviz.compare(jaxviz.trace(mlp, params_16, x), jaxviz.trace(mlp, params_32, x))
    >>> print(c)            # changed mlp > layer[0]  FLOPs 1.3 kFLOP -> 2.6 kFLOP (+1.3 kFLOP) ...
"""

from __future__ import annotations

import html
import pathlib
import uuid
from typing import Any

import anywidget
import traitlets

from jaxviz.graph.compare import GraphDiff, diff_graphs
from jaxviz.graph.trace import CellTrace, Trace
from jaxviz.schema import ComparePayload
from jaxviz.view import html as _html
from jaxviz.view.assets import bundle
from jaxviz.view.diff import TEXT_NODES, compare_text, diff_entry, label
from jaxviz.view.payload import build_payload


def compare_payload(
    d: GraphDiff, a: Trace, b: Trace, sources: dict[str, str] | None = None
) -> ComparePayload:
    """What the compare view reads (docs/graph-json.md, "Compare")."""
    return {
        "kind": "compare",
        "names": [label(a), label(b)],
        "a": build_payload([a], sources=sources),
        "b": build_payload([b], sources=sources),
        "diff": diff_entry(d),
        "text": compare_text(d, a, b, TEXT_NODES),
    }


class CompareWidget(anywidget.AnyWidget):
    """The compare view as a Jupyter widget: two graph panes that follow each other.

    Traits: payload (ComparePayload), selected ({"side": "a", "body": 0, "node": 7}: the node
    clicked last, in either pane).
    """

    _esm = bundle("compare.js")
    payload = traitlets.Dict().tag(sync=True)
    selected = traitlets.Dict().tag(sync=True)
    live_token = traitlets.Unicode("").tag(sync=True)


class Comparison:
    """Two traces compared: `str()` is the text twin; in a notebook, two graph views whose
    panes follow each other, the differences coloured. Made by `jaxviz.compare(a, b)`.

    Attributes: a, b (the Traces), diff (jaxviz.graph.compare.GraphDiff).
    """

    def __init__(self, a: Trace, b: Trace, sources: dict[str, str] | None = None):
        self.a, self.b = a, b
        self.diff = diff_graphs(a.graph, b.graph)
        self._sources = sources
        self._widget: CompareWidget | None = None

    def payload(self) -> ComparePayload:
        return compare_payload(self.diff, self.a, self.b, self._sources)

    def __str__(self) -> str:
        return compare_text(self.diff, self.a, self.b)

    def __repr__(self) -> str:
        d = self.diff
        return (
            f"<jaxviz.Comparison {label(self.a)} vs {label(self.b)}: {d.count('changed')} "
            f"changed, {d.count('added')} added, {d.count('removed')} removed, {d.same} same>"
        )

    @property
    def widget(self) -> CompareWidget:
        """The compare view as a widget (display it; `.selected` is the node clicked last)."""
        if self._widget is None:
            self._widget = CompareWidget(payload=dict(self.payload()), live_token=uuid.uuid4().hex)
        return self._widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        payload = self.payload()
        plain = payload["text"]
        try:
            fragment = _html.html_fragment(payload, plain, bundle="compare.js")
        except _html.BundleMissing as e:
            fragment = f"<pre>{html.escape(plain)}\n\n{html.escape(str(e))}</pre>"
        return {"text/plain": plain, "text/html": fragment}

    def save_html(self, path: str | pathlib.Path, title: str | None = None) -> pathlib.Path:
        """Writes the compare view as one self-contained HTML page (works offline)."""
        payload = self.payload()
        fragment = _html.html_fragment(payload, payload["text"], bundle="compare.js")
        path = pathlib.Path(path)
        name = title or f"jaxviz compare: {self.a.name} vs {self.b.name}"
        path.write_text(_html.page(fragment, name), encoding="utf-8")
        return path


def _one_trace(x: Any, which: str) -> Trace:
    if isinstance(x, Trace):
        if x.graph is None or (x.graph.n_eqns == 0 and x.error is not None):
            raise ValueError(f"jaxviz.compare: {which} ({x.name}) has no graph: tracing failed.")
        return x
    if isinstance(x, CellTrace):
        own = [t for t in x.traces if t.user_code]
        if len(own) == 1:
            return own[0]
        names = [t.name for t in own] or [t.name for t in x.traces]
        raise TypeError(
            f"jaxviz.compare: {which} is a CellTrace of {len(own)} functions of your own "
            f"({names}); pick one, e.g. jaxviz.compare(ct_a[{names[0]!r}], ct_b[{names[0]!r}])."
            if names
            else f"jaxviz.compare: {which} is a CellTrace that traced nothing."
        )
    raise TypeError(
        f"jaxviz.compare expects two jaxviz.Trace objects (jaxviz.trace(f, x), or one of "
        f"%%jaxtrace -o ct's ct.traces), got {type(x).__name__} for {which}."
    )


def compare(a: Any, b: Any) -> Comparison:
    """Shows two traces side by side: which equations were added, removed or changed
    (shape, dtype, params), matched by call path and source line, then by structure (two
    versions of a function under different names match), with the FLOPs and bytes of each
    call path in both. `str()` of the result lists the differences.

    Example:
        >>> c = jaxviz.compare(jaxviz.trace(mlp, small, x), jaxviz.trace(mlp, wide, x))
        >>> c                     # in a notebook: both graphs, the changed layer coloured
        >>> print(c)              # the text twin
    """
    ta, tb = _one_trace(a, "a"), _one_trace(b, "b")
    return Comparison(ta, tb)

"""Where rich outputs are chosen: the widget in a kernel, self-contained HTML elsewhere,
and always the text twin."""
from __future__ import annotations

import html
import pathlib

STATIC = pathlib.Path(__file__).parent / "static"


def bundle(name: str) -> pathlib.Path | str:
    """A widget's ESM: jaxviz/static/NAME (built at install), or a stand-in that says why not."""
    path = STATIC / name
    if path.is_file():
        return path
    return ("export default { render({ el }) {\n"
            f"  el.textContent = \"jaxviz: the bundle jaxviz/static/{name} is missing; \" +\n"
            "    \"reinstall with `pip install .` (it needs npm) or run `cd js && npm run build`.\";\n"
            "} };\n")

TEXT_LINES = 400    # the text/plain twin of a big graph is cut here; str() shows all


def in_kernel() -> bool:
    """Whether a Jupyter kernel runs us (so a widget model can sync to a front-end)."""
    from jaxviz._html import _in_kernel
    return _in_kernel()


def mimebundle(traces, diagnostics, text: str, widget=None, sources=None) -> dict:
    """text/plain, and the self-contained interactive text/html view (jaxviz._html)."""
    try:
        from jaxviz._html import mimebundle as rich
    except ImportError:   # the widget bundle was not built: the text twin still shows
        return {"text/plain": text, "text/html": f"<pre>{html.escape(text)}</pre>"}
    return rich(traces, diagnostics, text, widget=widget, sources=sources)

"""Where rich outputs are chosen: the widget in a kernel, self-contained HTML elsewhere,
and always the text twin."""
from __future__ import annotations

import html

TEXT_LINES = 400    # the text/plain twin of a big graph is cut here; str() shows all


def mimebundle(traces, diagnostics, text: str) -> dict:
    try:
        from jaxviz._html import mimebundle as rich
    except ImportError:
        return {"text/plain": text, "text/html": f"<pre>{html.escape(text)}</pre>"}
    return rich(traces, diagnostics, text)

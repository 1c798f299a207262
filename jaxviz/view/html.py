"""The graph view as self-contained HTML: a file (`save_html`) or a notebook output.

Saved notebooks and nbconvert pages load ipywidgets' manager from a CDN, so offline they
show nothing; jaxviz therefore puts its own `text/html` next to the widget view in every
output. That HTML inlines the bundled view (js/src/entries/graph.js) and the payload, both
zlib-compressed and base64-encoded, inflated in the browser by DecompressionStream, and
mounts the view on a small in-page model. Untrusted pages (scripts stripped) show the text
twin instead.

Example:
    jaxviz.save_html(jaxviz.trace(f, x), "f.html")
"""

from __future__ import annotations

import base64
import html
import json
import pathlib
import uuid
import zlib
from collections.abc import Iterable
from typing import Any

from jaxviz.view.assets import MISSING, in_kernel, isolated_outputs, packed_bundle
from jaxviz.view.payload import build_payload


class BundleMissing(FileNotFoundError):
    """jaxviz/static/graph.js is not there (a source checkout that was never built)."""


def _esm(name: str = "graph.js") -> tuple[str, str]:
    packed = packed_bundle(name)
    if packed is None:
        raise BundleMissing(MISSING.format(name=name))
    return packed


def script_json(obj: Any) -> str:
    """JSON safe inside <script type="application/json">: `<`, `>`, `&` written as \\u escapes."""
    s = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _pack(payload: Any) -> str:
    raw = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
    return base64.b64encode(zlib.compress(raw, 6)).decode()


# Runs in the page (classic script, so JupyterLab and nbconvert execute it the same way).
_LOADER = """(function(){var id=%s,host=document.getElementById(id);
if(!host||host.dataset.jvMounted)return;host.dataset.jvMounted="1";
var d=JSON.parse(document.getElementById(id+"-data").textContent);
function inflate(b){var u=Uint8Array.from(atob(b),function(c){return c.charCodeAt(0)});
return new Response(new Blob([u]).stream().pipeThrough(new DecompressionStream("deflate"))).text();}
function load(code){var u=URL.createObjectURL(new Blob([code],{type:"text/javascript"}));
return import(u).catch(function(){return import("data:text/javascript;charset=utf-8,"+encodeURIComponent(code));});}
var mods=window.__jaxvizModules||(window.__jaxvizModules={});
var m=mods[d.h]||(mods[d.h]=inflate(d.esm).then(load));
function live(){var r=window.__jaxvizLive;return d.live&&r&&r[d.live];}
function shim(p){var s={payload:p,selected:{},live_token:d.live},h={};return{get:function(k){return s[k]},
set:function(k,v){s[k]=v;(h["change:"+k]||[]).slice().forEach(function(f){f({new:v})});
var m=live();if(m&&k==="selected"){try{m.set(k,v)}catch(e){}}},
on:function(e,f){(h[e]=h[e]||[]).push(f)},off:function(e,f){if(!e){h={};return}h[e]=(h[e]||[]).filter(function(g){return g!==f&&f})},
send:function(){},save_changes:function(){var m=live();if(m){try{m.save_changes()}catch(e){}}}};}
Promise.all([m,inflate(d.payload)]).then(function(r){var view=document.createElement("div");
host.replaceChildren(view);r[0].default.render({model:shim(JSON.parse(r[1])),el:view});
}).catch(function(e){var p=document.createElement("pre");p.textContent="jaxviz: the interactive view could not start ("+e+"); the text summary is above.";host.appendChild(p);});
})();"""


_FALLBACK_CSS = "max-height:520px;overflow:auto"  # the text twin until the view starts
# Lines of the text twin the page holds until the view starts (and shows where scripts do
# not run). All of a 20k-equation trace's (1.4 MB, 20k lines) cost Chromium ~0.9 s of parsing
# and layout before the view's first paint; its head (the summary and findings come first)
# is what a reader of the text reads; str() / print() of the trace has every line.
FALLBACK_LINES = 400


def fallback_text(text: str, max_lines: int | None = None) -> str:
    """The text twin cut to its first `max_lines` (FALLBACK_LINES) lines, saying how many
    more there are."""
    max_lines = FALLBACK_LINES if max_lines is None else max_lines
    head = text.split("\n", max_lines)
    if len(head) <= max_lines:
        return text
    more = text.count("\n", len(text) - len(head[-1])) + 1
    return "\n".join(head[:max_lines]) + (
        f"\n... {more:,} more line{'s' if more != 1 else ''} (print() of the trace, or the view, shows them all)"
    )


def html_fragment(
    payload: Any, text: str = "", live: str | None = None, bundle: str = "graph.js"
) -> str:
    """A <div> plus scripts that mount the view on `payload`; `text` shows until it starts.

    `live`: the `live_token` of a GraphWidget whose model exists in the same page (a kernel
    is running); clicks in this view are then written to that widget's `selected` trait.
    `bundle`: the view (jaxviz/static/NAME: graph.js, compare.js).
    """
    esm, digest = _esm(bundle)
    vid = "jaxviz-" + uuid.uuid4().hex[:12]
    data = script_json({"h": digest, "esm": esm, "payload": _pack(payload), "live": live or ""})
    fallback = html.escape(
        fallback_text(text) or "jaxviz graph (enable JavaScript / trust the notebook to see it)"
    )
    # the text shows at most the view's height (a notebook measures the output before the
    # view replaces it: Notebook 7 puts a cell over ~1800 px into a small scroll box)
    return (
        f'<div id="{vid}" class="jaxviz-output"><pre class="jaxviz-text" style="{_FALLBACK_CSS}">'
        f"{fallback}</pre></div>\n"
        f'<script type="application/json" id="{vid}-data">{data}</script>\n'
        f"<script>{_LOADER % json.dumps(vid)}</script>"
    )


def render_html(
    traces: Iterable[Any],
    diagnostics: Iterable[Any] = (),
    title: str = "jaxviz",
    text: str = "",
    sources: dict[str, str] | None = None,
    memory: Iterable[Any] = (),
    memory_reports: Iterable[Any] = (),
    memory_notes: Iterable[str] = (),
    cost: Any = None,
    profile: Any = None,
) -> str:
    """One self-contained HTML page with the interactive graph of `traces` (works offline).

    `memory_reports`: jaxviz.MemoryReport of the traces (`Trace.memory()`): the memory tab
    shows each one's buffers at its compiled peak."""
    payload = build_payload(
        traces, diagnostics, sources, memory, memory_reports, memory_notes, cost=cost,
        profile=profile,
    )  # fmt: skip
    return page(html_fragment(payload, text), title)


def page(fragment: str, title: str) -> str:
    """A whole HTML page around a view's fragment."""
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<style>body{margin:12px;font-family:system-ui,sans-serif}"
        "@media (prefers-color-scheme:dark){body{background:#1e1e1e;color:#e6e6e6}}"
        ".jaxviz-output .jv-root{height:calc(100vh - 70px)}</style></head><body>\n"
        f'<h3 style="margin:0 0 8px">{html.escape(title)}</h3>\n'
        f"{fragment}\n</body></html>\n"
    )


# Runs in the page (a classic script: JupyterLab, nbconvert, an iframe run it alike). It mounts
# the chart's own ESM on a small in-page model holding the saved traits, then replays the
# saved messages: no kernel, no widget manager, no shared `window`.
_CHART_LOADER = """(function(){var id=%s,host=document.getElementById(id);
if(!host||host.dataset.jvMounted)return;host.dataset.jvMounted="1";
var d=JSON.parse(document.getElementById(id+"-data").textContent);
function bytes(b){return Uint8Array.from(atob(b),function(c){return c.charCodeAt(0)})}
function inflate(b){return new Response(new Blob([bytes(b)]).stream().pipeThrough(new DecompressionStream("deflate"))).text();}
function load(code){var u=URL.createObjectURL(new Blob([code],{type:"text/javascript"}));
return import(u).catch(function(){return import("data:text/javascript;charset=utf-8,"+encodeURIComponent(code));});}
Promise.all([inflate(d.esm).then(load),inflate(d.state)]).then(function(r){var st=JSON.parse(r[1]),h={};
var model={get:function(k){return st.traits[k]},set:function(){},save_changes:function(){},send:function(){},
on:function(e,f){(h[e]=h[e]||[]).push(f)},off:function(e,f){if(!e){h={};return}h[e]=(h[e]||[]).filter(function(g){return g!==f&&f})}};
var view=document.createElement("div");host.replaceChildren(view);
r[0].default.render({model:model,el:view});
st.messages.forEach(function(m){var b=m.buffers.map(function(x){var u=bytes(x);return new DataView(u.buffer)});
(h["msg:custom"]||[]).forEach(function(f){f(m.msg,b)})});
}).catch(function(e){var p=document.createElement("pre");p.textContent="jaxviz: the chart could not start ("+e+"); the text summary is above.";host.appendChild(p);});
})();"""


def chart_fragment(state: dict, text: str = "") -> str:
    """A <div> plus scripts that draw a MemoryChart from its saved `state` (no kernel)."""
    packed = packed_bundle("memory.js")
    if packed is None:
        return f"<pre>{html.escape(text)}\n\n{html.escape(MISSING.format(name='memory.js'))}</pre>"
    esm, digest = packed
    raw = json.dumps(state, separators=(",", ":"), allow_nan=False).encode()
    data = script_json(
        {"h": digest, "esm": esm, "state": base64.b64encode(zlib.compress(raw, 6)).decode()}
    )
    vid = "jaxviz-mem-" + uuid.uuid4().hex[:12]
    return (
        f'<div id="{vid}" class="jaxviz-memory"><pre class="jaxviz-text" style="{_FALLBACK_CSS}">'
        f"{html.escape(text or 'jaxviz memory chart')}</pre></div>\n"
        f'<script type="application/json" id="{vid}-data">{data}</script>\n'
        f"<script>{_CHART_LOADER % json.dumps(vid)}</script>"
    )


def _unpack(obj: Any) -> tuple[list, list, str, list]:
    """(traces, cell diagnostics, name, memory entries) from a Trace, a CellTrace or a list
    of traces."""
    if isinstance(obj, (list, tuple)):
        return list(obj), [], "jaxviz", []
    if hasattr(obj, "traces"):
        return (
            list(obj.traces),
            list(getattr(obj, "diagnostics", None) or ()),
            "jaxviz: cell",
            list(getattr(obj, "memory", None) or ()),
        )
    return [obj], [], f"jaxviz: {getattr(obj, 'name', '')}", []


def _profile_of(obj: Any) -> Any:
    """A CellTrace's ProfileReport (a Trace's `profile` is the method that makes one)."""
    p = getattr(obj, "profile", None)
    return None if callable(p) else p


def _checked(obj: Any, memory_reports: Iterable[Any]) -> list[Any]:
    """The memory reports, once obj and they are what save_html takes (else a TypeError that
    says how to make them)."""
    from jaxviz.memory.report import MemoryReport

    # (the views read a trace's fields, not its class: a Trace has a graph, a CellTrace traces)
    items = obj if isinstance(obj, (list, tuple)) else [obj]
    if not items or not all(hasattr(o, "graph") or hasattr(o, "traces") for o in items):
        raise TypeError(
            f"jaxviz.save_html expects a jaxviz.Trace, a jaxviz.CellTrace or a list of "
            f"Traces, got {type(obj).__name__}. Make one with jaxviz.trace(f, x) or "
            f"%%jaxtrace -o ct."
        )
    reports = list(memory_reports)
    bad = [type(r).__name__ for r in reports if not isinstance(r, MemoryReport)]
    if bad:
        raise TypeError(
            f"jaxviz.save_html's memory_reports expects jaxviz.MemoryReport records, got "
            f"{', '.join(bad)}. Make them with trace.memory(): "
            f"jaxviz.save_html(t, 'f.html', memory_reports=[t.memory()])."
        )
    return reports


def save_html(
    obj: Any,
    path: str | pathlib.Path,
    title: str | None = None,
    memory_reports: Iterable[Any] = (),
    processes: Any = None,
) -> pathlib.Path:
    """Writes a Trace, CellTrace or list of Traces as one self-contained, offline HTML page
    (a CellTrace's own compiled memory included); returns the pathlib.Path written.
    `memory_reports` (`trace.memory()`) add each function's buffers at its compiled peak to
    the memory tab, each row selecting its graph node, replacing a CellTrace's own.

    Example:
        jaxviz.save_html(jaxviz.trace(f, x), "f.html")   # open it offline in any browser
    """
    reports = _checked(obj, memory_reports)
    traces, diags, name, memory = _unpack(obj)
    given = {getattr(r, "name", None) for r in reports}
    reports += [r for r in getattr(obj, "compiled", None) or () if r.name not in given]
    reports += list(getattr(obj, "eager_collectives", None) or ())  # (its eager ops')
    text = str(obj) if not isinstance(obj, (list, tuple)) else ""
    path = pathlib.Path(path)
    page = render_html(
        traces,
        diags,
        title or name,
        text=text,
        memory=memory,
        memory_reports=reports,
        memory_notes=getattr(obj, "compiled_notes", None) or (),
        cost=getattr(obj, "cost", None),
        # (a CellTrace's profile is its ProfileReport; a Trace's is the method that makes one)
        profile=_profile_of(obj),
    )
    processes = processes if processes is not None else getattr(obj, "processes", None)
    if processes is not None:  # a multi-process run merged on process 0: its section first
        from jaxviz.view.processes import merged_html

        page = page.replace("<body>\n", "<body>\n" + merged_html(processes) + "\n", 1)
    path.write_text(page, encoding="utf-8")
    return path


def mimebundle(
    traces: Iterable[Any],
    diagnostics: Iterable[Any] = (),
    text: str = "",
    widget: Any = None,
    sources: dict[str, str] | None = None,
    memory: Iterable[Any] = (),
    memory_reports: Iterable[Any] = (),
    memory_notes: Iterable[str] = (),
    cost: Any = None,
    profile: Any = None,
    processes: Any = None,
) -> dict | tuple[dict, dict]:
    """text/plain and a self-contained text/html view; in a kernel, clicks reach `widget`.

    Where outputs share one page (JupyterLab, Notebook 7) the bundle deliberately carries no
    widget-view entry: JupyterLab prefers it over text/html, and after a reload without the
    widget's model it shows only "Loading widget..." or "model not found" (measured with
    ipywidgets 8.1). Instead, inside a kernel the HTML view finds the model of `widget` (a
    GraphWidget, made here when not given and never displayed) in the page through its
    `live_token`, and writes clicks to its `selected` trait. The payload travels once, in the
    HTML: the widget's own payload trait stays empty unless the widget itself is displayed.
    The saved notebook keeps a view that works offline, untouched.

    Where each output is its own iframe or webview (Colab, VS Code: `isolated_outputs()`),
    no page-wide model can be found, so the widget itself is displayed (its widget-view
    entry, the payload through its comm, clicks back through it), with the same
    self-contained text/html beside it for saved notebooks and pages without the widget
    manager; the bundle then comes with the widget's metadata (Colab's widget manager).

    `memory`: the memory tab's entries (jaxviz.view.chart.MemoryEntry): live, the
    MemoryChart models found in the page by their tokens; offline, the static summary of
    each finished RunReport carried in the payload. `memory_reports` / `memory_notes`: each
    function's compiled memory (jaxviz.MemoryReport) and what was not computed.

    Without the bundled view (a checkout that was never built) the text twin shows, with
    a line that says how to build the view: displaying never fails.
    """
    traces = list(traces)
    diagnostics = list(diagnostics)
    payload = build_payload(
        traces, diagnostics, sources, memory, memory_reports, memory_notes, cost=cost,
        profile=profile,
    )  # fmt: skip
    if widget is None and in_kernel() and payload["traces"]:
        from jaxviz.view.widget import GraphWidget

        widget = GraphWidget(traces, diagnostics, payload={})  # selection only: never displayed
    isolated = widget is not None and widget.comm is not None and isolated_outputs()
    live = None
    if widget is not None and not isolated:
        if not widget.live_token:
            widget.live_token = uuid.uuid4().hex
        live = widget.live_token
    plain = text or _summary(traces)
    try:
        fragment = html_fragment(payload, text, live)
    except BundleMissing as e:
        fragment = f"<pre>{html.escape(plain)}\n\n{html.escape(str(e))}</pre>"
        isolated = False  # the widget would show the same missing-bundle line, less clearly
    if processes is not None:  # a jax.distributed run merged on process 0: its section first
        from jaxviz.view.processes import merged_html, merged_text

        plain = merged_text(processes) + "\n\n" + plain
        fragment = merged_html(processes) + fragment
    bundle = {"text/plain": plain, "text/html": fragment}
    if not isolated:
        return bundle
    if widget.payload != payload:
        widget.payload = dict(payload)  # the view draws from its own model here
    shown = widget._repr_mimebundle_()
    data, meta = shown if isinstance(shown, tuple) else (shown, {})
    return {**data, **bundle}, dict(meta or {})


def _summary(traces: list) -> str:
    lines = []
    for t in traces:
        g = getattr(t, "graph", None)
        if g is None:
            lines.append(f"{getattr(t, 'name', '?')}: no graph")
        else:
            lines.append(f"{t.name}: {g.n_eqns} equations in {len(g.bodies)} jaxprs")
    return "\n".join(lines) or "jaxviz: nothing captured"

// jaxviz's interactive jaxpr graph: an anywidget view (also mounted by the offline HTML page
// through a small model shim). Model traits: `payload` (see graph/model.js typedefs) and
// `selected` ({trace, body, node}, written back when a node is clicked).

import {
  prepareGraph, buildView, initialExpanded, expandAll, search, firstRefs, trailTo, revealTrail, repOfTrail, nodeKey, tabLabels, openingTrace,
} from "../graph/model.js";
import { layout, HEAD } from "../graph/layout.js";
import { paint, readTheme, ensureLabels, LABEL_ZOOM } from "../graph/draw.js";
import { routeEdges, edgeAt, labelText, pointAt } from "../graph/edges.js";
import { h, fillInspector, fillDiagnostics, tooltipText } from "../graph/panels.js";
import { memoryPanel } from "../graph/memory.js";

const CSS = `
.jv-root{--jv-bg:var(--jp-layout-color0,#fff);--jv-fg:var(--jp-ui-font-color0,#1f2328);--jv-fg2:var(--jp-ui-font-color2,#57606a);
--jv-border:var(--jp-border-color1,#c9ced6);--jv-panel:var(--jp-layout-color1,#f6f8fa);--jv-brand:var(--jp-brand-color1,#1976d2);
display:flex;flex-direction:column;height:560px;min-height:240px;resize:vertical;overflow:hidden;border:1px solid var(--jv-border);
border-radius:4px;background:var(--jv-bg);color:var(--jv-fg);font:12px var(--jp-ui-font-family,system-ui,sans-serif);box-sizing:border-box}
@media (prefers-color-scheme:dark){.jv-root:not(.jv-jp){--jv-bg:#1e1e1e;--jv-fg:#e6e6e6;--jv-fg2:#a8b0ba;--jv-border:#4a4f57;--jv-panel:#26282c;--jv-brand:#64b5f6}}
.jv-root *{box-sizing:border-box}
.jv-bar{display:flex;flex-wrap:wrap;gap:6px;align-items:center;padding:4px 6px;border-bottom:1px solid var(--jv-border);background:var(--jv-panel)}
.jv-bar input,.jv-bar select,.jv-btn{font:inherit;color:var(--jv-fg);background:var(--jv-bg);border:1px solid var(--jv-border);border-radius:3px;padding:2px 6px}
.jv-btn{cursor:pointer}.jv-btn:hover{border-color:var(--jv-brand)}
.jv-tab{font:inherit;color:var(--jv-fg);background:transparent;border:none;border-bottom:2px solid transparent;padding:2px 6px;cursor:pointer}
.jv-tab[aria-selected=true]{border-bottom-color:var(--jv-brand);font-weight:600}
.jv-tab-lib{color:var(--jv-fg2)}
.jv-name{font-weight:600;padding:2px 6px;max-width:40ch;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.jv-status{margin-left:auto;color:var(--jv-fg2)}
.jv-main{flex:1;display:flex;min-height:0}
.jv-stage{position:relative;flex:1;min-width:0;outline:none}
.jv-stage:focus-visible{box-shadow:inset 0 0 0 2px var(--jv-brand)}
.jv-stage canvas{position:absolute;inset:0;width:100%;height:100%;cursor:grab;touch-action:none}
.jv-insp{width:300px;flex:none;overflow:auto;padding:8px;border-left:1px solid var(--jv-border);background:var(--jv-panel)}
.jv-title{font-weight:600;font-size:13px;margin-bottom:6px;word-break:break-all}
.jv-row{display:flex;gap:6px;margin:3px 0}.jv-k{flex:none;width:72px;color:var(--jv-fg2)}.jv-v{flex:1;min-width:0;word-break:break-word}
.jv-list div{white-space:pre-wrap}.jv-mono,.jv-src,.jv-eqn{font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:11px}
.jv-src,.jv-eqn{margin:4px 0;padding:4px;background:var(--jv-bg);border:1px solid var(--jv-border);border-radius:3px;overflow:auto;white-space:pre}
.jv-src-hit{background:rgba(255,200,0,.22)}.jv-ln{color:var(--jv-fg2)}
.jv-muted{color:var(--jv-fg2)}
.jv-tip{position:absolute;pointer-events:none;z-index:2;max-width:420px;padding:4px 6px;border:1px solid var(--jv-border);border-radius:3px;
background:var(--jv-bg);color:var(--jv-fg);white-space:pre;font:11px var(--jp-code-font-family,ui-monospace,monospace);box-shadow:0 1px 4px rgba(0,0,0,.2)}
.jv-diags{max-height:30%;overflow:auto;border-top:1px solid var(--jv-border);background:var(--jv-panel);padding:4px 6px}
.jv-diag-head{font-weight:600;margin-bottom:2px}
.jv-diag{padding:3px 6px;margin:2px 0;border-left:3px solid var(--jv-border);cursor:pointer}
.jv-diag-msg,.jv-hint{white-space:pre-wrap}
.jv-hint{font-family:var(--jp-code-font-family,ui-monospace,monospace)}
.jv-diag:hover,.jv-diag:focus{background:var(--jv-bg);outline:none}
.jv-main[hidden],.jv-membox[hidden],.jv-mem-charts[hidden]{display:none}
.jv-membox{flex:1;min-height:0;overflow:auto;padding:8px}
.jv-mem-entry{margin-bottom:14px}.jv-mem-ratio{font-weight:600;margin:4px 0}
.jv-mem-table{border-collapse:collapse;margin:6px 0}.jv-mem-table th,.jv-mem-table td{border:1px solid var(--jv-border);padding:2px 8px;text-align:left}
.jv-mem-charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:10px}
.jv-mem-rlabel{font-weight:600}.jv-mem-svg{display:block;width:100%;height:56px;border-bottom:1px solid var(--jv-border)}
.jv-mem-live .jvm{color:var(--jv-fg)}
.jv-error{border-left-color:var(--jp-error-color0,#d32f2f)}.jv-warning{border-left-color:var(--jp-warn-color0,#f57c00)}.jv-info{border-left-color:var(--jv-brand)}
`;

function injectCss() {
  if (document.getElementById("jaxviz-graph-css")) return;
  const s = document.createElement("style");
  s.id = "jaxviz-graph-css";
  s.textContent = CSS;
  document.head.appendChild(s);
}

const now = () => performance.now();

function render({ model, el }) {
  const t0 = now();
  injectCss();
  const cleanups = [];
  const on = (target, ev, fn, opt) => { target.addEventListener(ev, fn, opt); cleanups.push(() => target.removeEventListener(ev, fn, opt)); };

  // ---- DOM
  const tabs = h("div", { className: "jv-tabs", role: "tablist" });
  const q = h("input", { type: "search", placeholder: "search op, var, scope, line…", className: "jv-search", size: 24, "aria-label": "search" });
  const count = h("span", { className: "jv-count jv-muted" });
  const colorSel = h("select", { className: "jv-color", "aria-label": "colour by" },
    h("option", { value: "none" }, "colour: none"), h("option", { value: "flops" }, "colour: FLOPs"), h("option", { value: "bytes" }, "colour: bytes"));
  const status = h("span", { className: "jv-status" });
  const btn = (label, fn, cls) => h("button", { className: "jv-btn " + (cls || ""), onclick: fn, title: label }, label);
  const bar = h("div", { className: "jv-bar" }, tabs, q, btn("◀", () => nextMatch(-1), "jv-prev"), btn("▶", () => nextMatch(1), "jv-next"), count,
    btn("Fit", () => { fit(); draw(); }, "jv-fit"), btn("Expand all", () => doExpandAll(), "jv-expand-all"),
    btn("Collapse all", () => doCollapseAll(), "jv-collapse-all"), colorSel, status);
  const canvas = h("canvas");
  const tip = h("div", { className: "jv-tip", hidden: true });
  const stage = h("div", { className: "jv-stage", tabIndex: 0, "aria-label": "jaxpr graph" }, canvas, tip);
  const insp = h("div", { className: "jv-insp" });
  const diagBox = h("div", { className: "jv-diags" });
  const main = h("div", { className: "jv-main" }, stage, insp);
  const memBox = h("div", { className: "jv-membox", hidden: true });
  const root = h("div", { className: "jv-root" }, bar, main, memBox, diagBox);
  if (getComputedStyle(el).getPropertyValue("--jp-layout-color0").trim()) root.classList.add("jv-jp");
  el.replaceChildren(root);
  const ctx = canvas.getContext("2d");

  // ---- state
  let payload = null, traces = [], cur = 0, T = null, theme = readTheme(root);
  const st = { tx: 0, ty: 0, z: 1, cw: 1, ch: 1, dpr: window.devicePixelRatio || 1, color: "none", sel: null, matches: null, diag: null, hlNodes: null, hlEdges: null };
  const timings = { firstPaint: null, layout: null, edges: null, paint: null, build: null };
  let raf = 0;
  // the memory tab (payload.memory): its panel, and whether it is the open tab
  let mem = null, memOpen = false;
  // which tab was open, kept per live token: an output re-rendered in place (the run's summary
  // arriving through update_display) opens where the last one was
  const uiKey = (() => { try { return model.get("live_token") || ""; } catch (e) { return ""; } })();
  const ui = uiKey ? ((window.__jaxvizUi = window.__jaxvizUi || {})[uiKey] = window.__jaxvizUi[uiKey] || {}) : {};

  function load() {
    payload = model.get("payload") || { traces: [] };
    traces = (payload.traces || []).map((t, i) => ({ i, name: t.name, graph: t.graph, diags: t.diagnostics || [], refs: null, expanded: null, view: null, sel: null, cam: null, matches: [], mi: -1 }));
    tabs.replaceChildren();
    if (mem) mem.dispose();
    const memory = payload.memory || [];
    mem = memory.length ? memoryPanel(memory) : null;
    memBox.replaceChildren(...(mem ? [mem.el] : []));
    memBox.hidden = true; main.hidden = false; diagBox.style.display = "";
    root.dataset.memory = String(memory.length);
    const labels = tabLabels(payload.traces || []);
    if (traces.length > 1 || mem) traces.forEach((t) => tabs.append(h("button", { className: "jv-tab" + (labels[t.i].lib ? " jv-tab-lib" : ""), role: "tab", title: labels[t.i].title, onclick: () => { showMemory(false); setTrace(t.i); } }, labels[t.i].text)));
    // one trace has no tab, but its name still says what the graph is
    else if (traces.length === 1) tabs.append(h("span", { className: "jv-name", title: labels[0].title }, labels[0].text));
    if (mem) tabs.append(h("button", { className: "jv-tab jv-tab-memory", role: "tab", onclick: () => showMemory(true) }, "memory"));
    memOpen = false;
    // the trace open before a re-render in place, else the most useful one
    const kept = traces.findIndex((t) => ui.trace != null && t.name === ui.trace);
    setTrace(kept >= 0 ? kept : openingTrace(payload.traces || []), true);
    if (mem && ui.memory) showMemory(true);
  }

  function showMemory(on) {
    on = !!(on && mem);
    if (on === memOpen && (!on || !mem.el.hidden)) return;
    memOpen = on;
    ui.memory = on;
    main.hidden = on;
    diagBox.style.display = on ? "none" : "";
    memBox.hidden = !on;
    if (mem) { if (on) mem.show(); else mem.hide(); }
    root.dataset.tab = on ? "memory" : "graph";
    tabs.querySelectorAll(".jv-tab").forEach((b, k) => b.setAttribute("aria-selected", String(on ? b.classList.contains("jv-tab-memory") : k === cur)));
    if (!on) { resize(); draw(true); }
  }

  function setTrace(i, force) {
    if (!force && i === cur && T) return;
    if (T) T.cam = { tx: st.tx, ty: st.ty, z: st.z };
    cur = i;
    T = traces[i] || null;
    tabs.querySelectorAll(".jv-tab").forEach((b, k) => b.setAttribute("aria-selected", String(!memOpen && k === i)));
    if (!T) { status.textContent = "no captured functions"; fillDiagnostics(diagBox, payload.diagnostics || [], pickDiag); return; }
    prepareGraph(T.graph);
    T.refs = T.refs || firstRefs(T.graph);
    if (!T.expanded) T.expanded = initialExpanded(T.graph);
    if (!force) ui.trace = T.name;
    rebuild();
    // the diagnostics first: the panel takes its height from the canvas the fit must use
    fillDiagnostics(diagBox, [...T.diags, ...(payload.diagnostics || [])], pickDiag);
    resize();
    if (T.cam) Object.assign(st, T.cam); else autoFit();
    select(T.sel ? T.view.items.get(T.sel) || null : null, false);
    markDiagnostics();
    if (q.value) runSearch(false);
    draw(true);
  }

  function rebuild() {
    const a = now();
    T.view = buildView(T.graph, T.expanded);
    const b = now();
    T.size = layout(T.view, T.graph);
    const c = now();
    routeEdges(T.view);
    timings.build = b - a;
    timings.layout = c - b;
    timings.edges = now() - c;
    root.dataset.visible = String(T.view.boxes.length);
    status.textContent = `${T.view.boxes.length} shown · ${T.graph.bodies[T.graph.root].n_eqns} eqns`;
    if (st.sel) st.sel = T.view.items.get(st.sel.key) || null;
    markDiagnostics();
    remapMatches();
    flow();
  }

  // ---- camera
  function resize() {
    const r = stage.getBoundingClientRect();
    if (!r.width || !r.height) return;   // not in the page yet, or the memory tab is open
    st.cw = Math.max(1, r.width); st.ch = Math.max(1, r.height);
    st.dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(st.cw * st.dpr); canvas.height = Math.round(st.ch * st.dpr);
  }
  function fit(readable) {
    if (!T) return;
    const { w, h: hh } = T.size;
    const m = 20;
    let z = Math.min((st.cw - 2 * m) / Math.max(w, 1), (st.ch - 2 * m) / Math.max(hh, 1));
    z = Math.max(readable ? 0.6 : 0.03, Math.min(1.4, z));
    st.z = z;
    st.tx = w * z < st.cw ? (st.cw - w * z) / 2 : m;
    st.ty = hh * z < st.ch ? (st.ch - hh * z) / 2 : m;
  }
  // the first fit of a trace, kept while the user has not moved the camera: a canvas that
  // settles its size later (a panel filled, the output area grown) is fitted again
  let fitCam = null;
  function autoFit() {
    fit(true);
    fitCam = { tx: st.tx, ty: st.ty, z: st.z };
  }
  const untouched = () => fitCam && fitCam.tx === st.tx && fitCam.ty === st.ty && fitCam.z === st.z;
  function centerOn(it) {
    if (st.z < 0.7) st.z = 0.9;
    st.tx = st.cw / 2 - (it.x + it.w / 2) * st.z;
    st.ty = st.ch / 2 - (it.y + it.h / 2) * st.z;
  }
  function zoomAt(f, px, py) {
    const z = Math.max(0.03, Math.min(4, st.z * f));
    st.tx = px - (px - st.tx) * (z / st.z);
    st.ty = py - (py - st.ty) * (z / st.z);
    st.z = z;
    draw();
  }

  function draw(sync) {
    if (sync) { cancelAnimationFrame(raf); raf = 0; drawNow(); return; }
    if (!raf) raf = requestAnimationFrame(() => { raf = 0; drawNow(); });
  }
  function drawNow() {
    if (!T) { ctx.setTransform(1, 0, 0, 1, 0, 0); ctx.clearRect(0, 0, canvas.width, canvas.height); return; }
    const a = now();
    root.dataset.drawn = String(paint(ctx, T.view, st, theme));
    timings.paint = now() - a;
    if (timings.firstPaint == null) { timings.firstPaint = now() - t0; timings.firstPaintAt = now(); root.dataset.painted = "1"; }
  }

  // ---- selection, expansion
  function selectedPayload(it) {
    if (!it || it.kind !== "node") return {};
    return { trace: cur, body: it.B, node: it.s.node.id, key: it.key };
  }
  function select(it, sync = true) {
    st.sel = it;
    T.sel = it ? it.key : null;
    fillInspector(insp, it, T.graph, payload.sources, { toggle });
    root.dataset.selected = it ? it.key : "";
    flow();
    if (sync) {
      try { model.set("selected", selectedPayload(it)); model.save_changes(); } catch (e) { /* read-only host */ }
    }
    draw();
  }
  function toggle(it) {
    if (!it || it.kind === "branch") return 0;
    const a = now();
    const key = it.key;
    if (T.expanded.has(key)) T.expanded.delete(key); // inner state is kept for the next open
    else T.expanded.add(key);
    // keep the toggled item where it was on screen
    const sx = it.x * st.z + st.tx, sy = it.y * st.z + st.ty;
    rebuild();
    const again = T.view.items.get(key);
    if (again) { st.tx = sx - again.x * st.z; st.ty = sy - again.y * st.z; }
    if (st.sel && st.sel.key === key) select(again || null, false);
    else if (!st.sel && again) select(again, false);
    else fillInspector(insp, st.sel, T.graph, payload.sources, { toggle });
    draw(true);
    return (timings.toggle = now() - a);
  }
  function doExpandAll() {
    const capped = expandAll(T.graph, T.expanded, T.view);
    rebuild(); fit(); draw(true);
    if (capped) status.textContent += " (expand-all stopped at 3000; open groups one by one)";
  }
  function doCollapseAll() {
    T.expanded = new Set();
    rebuild(); fit(); draw(true);
  }
  function revealNode(B, nid, doSelect = true) {
    const trail = trailTo(T.graph, T.refs, B, nid);
    if (!trail) return null;
    revealTrail(T.graph, trail, T.expanded);
    rebuild();
    const it = T.view.items.get(nodeKey(trail[trail.length - 1].P, nid)) || repOfTrail(T.view, T.graph, trail);
    if (it) { if (doSelect) select(it); centerOn(it); }
    draw(true);
    return it;
  }

  // dataflow: an input lights everything it feeds, an output everything feeding it
  function flow() {
    st.hlNodes = st.hlEdges = null;
    const it = st.sel;
    if (!it || !T || !T.view || (it.kind !== "node" && it.kind !== "io") || it.open) return;
    // a cluster of inputs (outputs) lights what its arrays feed (what feeds them), as one input does
    const kind = it.kind === "io" ? it.s.dir : it.s.node.kind;
    const fwd = kind === "in" || kind === "const", back = kind === "out";
    const nodes = new Set([it]), edges = new Set();
    const adj = new Map();
    for (const e of T.view.edges) {
      const from = fwd ? e.s : e.t;
      if (!adj.has(from)) adj.set(from, []);
      adj.get(from).push(e);
    }
    const stack = [it];
    const deep = fwd || back;
    while (stack.length) {
      const x = stack.pop();
      for (const e of adj.get(x) || []) {
        const y = fwd ? e.t : e.s;
        edges.add(e);
        if (!nodes.has(y)) { nodes.add(y); if (deep) stack.push(y); }
      }
      if (!deep) {
        for (const e of T.view.edges) if (e.t === it) { edges.add(e); nodes.add(e.s); }
        break;
      }
    }
    st.hlNodes = nodes; st.hlEdges = edges;
  }

  // ---- search
  function runSearch(move) {
    const res = search(T.graph, q.value);
    T.matches = res.map((r) => trailTo(T.graph, T.refs, r.B, r.nid)).filter(Boolean);
    T.mi = -1;
    remapMatches();
    count.textContent = q.value.trim() ? `${T.matches.length} match${T.matches.length === 1 ? "" : "es"}` : "";
    root.dataset.matches = String(T.matches.length);
    if (move && T.matches.length) nextMatch(1);
    draw();
  }
  function remapMatches() {
    if (!T || !T.matches || !T.matches.length) { st.matches = null; return; }
    const s = new Set();
    for (const tr of T.matches.slice(0, 5000)) { const it = repOfTrail(T.view, T.graph, tr); if (it) s.add(it); }
    st.matches = s;
  }
  function nextMatch(d) {
    if (!T || !T.matches.length) return;
    T.mi = (T.mi + d + T.matches.length) % T.matches.length;
    const tr = T.matches[T.mi];
    const last = tr[tr.length - 1];
    revealNode(last.B, last.nid);
    count.textContent = `${T.mi + 1} of ${T.matches.length}`;
  }
  let searchTimer = 0;
  on(q, "input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(() => runSearch(true), 120); });
  on(q, "keydown", (ev) => {
    if (ev.key === "Enter") { ev.preventDefault(); clearTimeout(searchTimer); if (!T.matches.length || T.mi < 0) runSearch(true); else nextMatch(ev.shiftKey ? -1 : 1); }
    if (ev.key === "Escape") { q.value = ""; runSearch(false); stage.focus(); }
  });
  on(colorSel, "change", () => { st.color = colorSel.value; root.dataset.color = st.color; draw(); });

  // ---- diagnostics
  function diagTrail(d) {
    for (const id of d.node_ids || []) {
      const [b, n] = String(id).split(":").map(Number);
      const tr = trailTo(T.graph, T.refs, b, n);
      if (tr) return tr;
    }
    if (d.line != null) {
      const hit = search(T.graph, String(d.line), 1)[0];
      if (hit) return trailTo(T.graph, T.refs, hit.B, hit.nid);
    }
    return null;
  }
  function markDiagnostics() {
    if (!T || !T.view) return;
    const s = new Set();
    for (const d of [...T.diags, ...((payload && payload.diagnostics) || [])]) {
      for (const id of d.node_ids || []) {
        const [b, n] = String(id).split(":").map(Number);
        const tr = trailTo(T.graph, T.refs, b, n);
        const it = tr && repOfTrail(T.view, T.graph, tr);
        if (it) s.add(it);
      }
    }
    st.diag = s;
  }
  function pickDiag(d) {
    if (d.trace && T.name !== d.trace) {
      const other = traces.find((t) => t.name === d.trace);
      if (other) setTrace(other.i);
    }
    const tr = diagTrail(d);
    if (tr) { const last = tr[tr.length - 1]; revealNode(last.B, last.nid); }
  }

  // ---- pointer
  function toWorld(ev) {
    const r = canvas.getBoundingClientRect();
    const px = ev.clientX - r.left, py = ev.clientY - r.top;
    return { px, py, x: (px - st.tx) / st.z, y: (py - st.ty) / st.z };
  }
  function hit(x, y) {
    if (!T) return null;
    const bs = T.view.boxes;
    for (let i = bs.length - 1; i >= 0; i--) {
      const b = bs[i];
      if (x >= b.x && x <= b.x + b.w && y >= b.y && y <= b.y + b.h) return { it: b, part: x > b.x + b.w - 24 && y < b.y + 22 && b.kind !== "node" ? "glyph" : "body" };
    }
    const fs = T.view.frames;
    for (let i = fs.length - 1; i >= 0; i--) {
      const f = fs[i];
      if (x >= f.x && x <= f.x + f.w && y >= f.y && y <= f.y + HEAD) return { it: f, part: x > f.x + f.w - 26 ? "glyph" : "head" };
    }
    return null;
  }
  function edgeTip(e) {
    return `${labelText(e)}\n${e.s.lines[0]} → ${e.t.lines[0]}`;
  }
  let drag = null;
  on(canvas, "pointerdown", (ev) => {
    stage.focus({ preventScroll: true });
    drag = { x: ev.clientX, y: ev.clientY, tx: st.tx, ty: st.ty, moved: false };
    canvas.setPointerCapture(ev.pointerId);
  });
  on(canvas, "pointermove", (ev) => {
    if (drag) {
      const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) { st.tx = drag.tx + dx; st.ty = drag.ty + dy; tip.hidden = true; draw(); }
      return;
    }
    const w = toWorld(ev);
    const hh = hit(w.x, w.y);
    // off the boxes, an edge says its aval (the only place for a label that had no room)
    const e = !hh && T ? edgeAt(T.view, w.x, w.y, 5 / st.z) : null;
    const text = hh && hh.part !== "glyph" ? tooltipText(hh.it, T.graph) : e ? edgeTip(e) : "";
    if (text) {
      tip.textContent = text;
      tip.hidden = false;
      tip.style.left = Math.min(w.px + 14, st.cw - 200) + "px";
      tip.style.top = (w.py + 14) + "px";
    } else tip.hidden = true;
    canvas.style.cursor = hh ? "pointer" : "grab";
  });
  on(canvas, "pointerleave", () => { tip.hidden = true; });
  on(canvas, "pointerup", (ev) => {
    const d = drag;
    drag = null;
    if (!d || d.moved) return;
    const w = toWorld(ev);
    const hh = hit(w.x, w.y);
    if (!hh) { select(null); return; }
    if (hh.part === "glyph") toggle(hh.it);
    else select(hh.it);
  });
  on(canvas, "dblclick", (ev) => {
    const w = toWorld(ev);
    const hh = hit(w.x, w.y);
    if (hh && hh.part !== "glyph" && (hh.it.open || hh.it.kind !== "node" || (hh.it.s.node.subs || []).length)) toggle(hh.it);
  });
  on(canvas, "wheel", (ev) => {
    ev.preventDefault();
    const w = toWorld(ev);
    if (ev.shiftKey && !ev.ctrlKey) { st.tx -= ev.deltaY || ev.deltaX; draw(); return; }
    if (!ev.ctrlKey && Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) { st.tx -= ev.deltaX; draw(); return; }
    zoomAt(Math.exp(-ev.deltaY * (ev.ctrlKey ? 0.01 : 0.0015)), w.px, w.py);
  }, { passive: false });

  // ---- keyboard
  function neighbour(dir) {
    const it = st.sel;
    if (!it) return T.view.boxes[0] || null;
    if (dir === "down" || dir === "up") {
      let best = null;
      for (const e of T.view.edges) {
        const c = dir === "down" ? (e.s === it ? e.t : null) : (e.t === it ? e.s : null);
        if (c && (!best || Math.abs(c.x - it.x) < Math.abs(best.x - it.x))) best = c;
      }
      return best;
    }
    let best = null, bd = Infinity;
    for (const b of T.view.boxes) {
      if (b === it || Math.abs(b.y - it.y) > 4) continue;
      const dx = b.x - it.x;
      if ((dir === "right" ? dx > 0 : dx < 0) && Math.abs(dx) < bd) { bd = Math.abs(dx); best = b; }
    }
    return best;
  }
  on(stage, "keydown", (ev) => {
    if (!T) return;
    const k = ev.key;
    const dirs = { ArrowDown: "down", ArrowUp: "up", ArrowLeft: "left", ArrowRight: "right" };
    if (dirs[k]) {
      const n = neighbour(dirs[k]);
      if (n) { select(n); if (n.x * st.z + st.tx < 0 || n.x * st.z + st.tx > st.cw - 40 || n.y * st.z + st.ty < 0 || n.y * st.z + st.ty > st.ch - 30) centerOn(n); draw(); }
    } else if (k === "Enter" || k === " ") toggle(st.sel);
    else if (k === "+" || k === "=") zoomAt(1.25, st.cw / 2, st.ch / 2);
    else if (k === "-") zoomAt(0.8, st.cw / 2, st.ch / 2);
    else if (k === "f" || k === "0") { fit(); draw(); }
    else if (k === "/") { q.focus(); }
    else if (k === "Escape") select(null);
    else if (k === "n") nextMatch(ev.shiftKey ? -1 : 1);
    else return;
    ev.preventDefault();
  });

  // ---- theme, size, model
  const retheme = () => {
    theme = readTheme(root);
    if (T && T.view) T.view.labelsPlaced = false;   // the code font may have changed: measure again
    root.classList.toggle("jv-jp", !!getComputedStyle(el).getPropertyValue("--jp-layout-color0").trim());
    root.dataset.theme = theme.dark ? "dark" : "light";
    root.dataset.bg = theme.bg;
    draw();
  };
  root.dataset.theme = theme.dark ? "dark" : "light";
  root.dataset.bg = theme.bg;
  const mo = new MutationObserver(retheme);
  mo.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light", "class", "style"] });
  mo.observe(document.documentElement, { attributes: true, attributeFilter: ["class", "style", "data-theme"] });
  cleanups.push(() => mo.disconnect());
  const mq = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  if (mq) { on(mq, "change", retheme); }
  const ro = new ResizeObserver(() => {
    if (main.hidden || stage.getBoundingClientRect().width === 0) return;   // memory tab open
    const refit = st.cw <= 1 || untouched(); resize(); if (refit) autoFit(); draw();
  });
  ro.observe(stage);
  cleanups.push(() => ro.disconnect());
  const onPayload = () => load();
  model.on("change:payload", onPayload);
  cleanups.push(() => model.off("change:payload", onPayload));
  // Python may set `selected` too: reveal and select that node
  const onSelected = () => {
    const s = model.get("selected") || {};
    if (s.body == null || s.node == null) return;
    if (st.sel && st.sel.kind === "node" && st.sel.B === s.body && st.sel.s.node.id === s.node && (s.trace ?? cur) === cur) return;
    if (s.trace != null && s.trace !== cur && traces[s.trace]) setTrace(s.trace);
    if (T) revealNode(s.body, s.node);
  };
  model.on("change:selected", onSelected);
  cleanups.push(() => model.off("change:selected", onSelected));

  // test and benchmark hooks (read-only views of the state, plus the actions a user has)
  root.jaxviz = {
    timings,
    boxes: () => {
      const r = canvas.getBoundingClientRect();
      return (T ? T.view.boxes : []).map((b) => ({ key: b.key, kind: b.kind, label: b.lines[0], sub: b.lines[1],
        op: b.kind === "node" ? b.s.node.op : null, nodeKind: b.kind === "node" ? b.s.node.kind : null,
        cx: r.left + st.tx + (b.x + b.w / 2) * st.z, cy: r.top + st.ty + (b.y + b.h / 2) * st.z, w: b.w * st.z, h: b.h * st.z,
        onScreen: (b.x + b.w) * st.z + st.tx > 0 && b.x * st.z + st.tx < st.cw && (b.y + b.h) * st.z + st.ty > 0 && b.y * st.z + st.ty < st.ch }));
    },
    frames: () => (T ? T.view.frames.map((f) => f.key) : []),
    // open clusters with their header text and whether any of them is in the canvas
    frameBoxes: () => (T ? T.view.frames.map((f) => ({ key: f.key, kind: f.kind, label: f.lines[0],
      onScreen: (f.x + f.w) * st.z + st.tx > 0 && f.x * st.z + st.tx < st.cw && (f.y + f.h) * st.z + st.ty > 0 && f.y * st.z + st.ty < st.ch })) : []),
    // edges with their drawn label (null: no room, or not drawn at this zoom), in page px
    edges: () => {
      if (!T) return [];
      const r = canvas.getBoundingClientRect();
      const shown = st.z >= LABEL_ZOOM;
      if (shown) ensureLabels(ctx, T.view, theme);
      const px = (x, y) => ({ x: r.left + st.tx + x * st.z, y: r.top + st.ty + y * st.z });
      return T.view.edges.map((e) => {
        const lr = shown && e.lr ? { ...px(e.lr.x, e.lr.y), w: e.lr.w * st.z, h: e.lr.h * st.z } : null;
        const m = pointAt(e, 0.5);
        const mp = px(m.x, m.y);
        return { s: e.s.key, t: e.t.key, type: e.type, label: lr ? labelText(e) : null, rect: lr,
          x0: px(e.x0, e.y0).x, x1: px(e.x1, e.y1).x, y1: px(e.x1, e.y1).y, mx: mp.x, my: mp.y };
      });
    },
    // the items the selection's dataflow lights (keys), empty when nothing is lit
    flow: () => (st.hlNodes ? [...st.hlNodes].map((it) => it.key) : []),
    toggle: (key) => toggle(T.view.items.get(key)),
    center: (key) => { const it = T.view.items.get(key); if (it) { centerOn(it); draw(true); } },
    expandAll: () => { const a = now(); doExpandAll(); return now() - a; },
    collapseAll: () => { const a = now(); doCollapseAll(); return now() - a; },
    setTrace: (i) => { showMemory(false); setTrace(i); },
    showMemory: (on = true) => showMemory(on),
    theme: () => ({ ...theme }),
  };

  resize();
  load();
  return () => {
    cancelAnimationFrame(raf);
    clearTimeout(searchTimer);
    if (mem) mem.dispose();
    for (const c of cleanups) c();
  };
}

/** On model creation (displayed or not): lets HTML views of the page find this live model. */
function initialize({ model }) {
  const reg = (window.__jaxvizLive = window.__jaxvizLive || {});
  let tok = "";
  const link = () => {
    if (tok && reg[tok] === model) delete reg[tok];
    tok = model.get("live_token") || "";
    if (tok) reg[tok] = model;
  };
  link();
  model.on("change:live_token", link);
  return () => { model.off("change:live_token", link); if (tok && reg[tok] === model) delete reg[tok]; };
}

export default { initialize, render };

// The compare view: two traces side by side (jaxviz.compare(a, b), and a recompile's
// "compare" action in the graph view). Each pane is a
// whole graph view (the graph entry's parts, mounted on a small model of its own: one
// trace's payload); the panes follow each other (opening or closing a group, selecting a
// node opens and selects its match in the other pane; panning and zooming one moves the
// other to the same zoom, with the match of what is in the middle at the same place); what differs is coloured (changed,
// added, removed: graph/compare.js); below them, the list of differences, each a link to
// its place in both panes. Model trait: `payload` (ComparePayload: jaxviz.view.compare).
// js/src/entries/compare.js is its widget; openCompare mounts it under a graph view.

import { injectCss, mountView } from "./dom.js";
import { createState, dispose, rebuild, select, revealNode } from "./state.js";
import { bindToolbar } from "./toolbar.js";
import { bindSearch } from "./search.js";
import { bindPointer, bindKeyboard } from "./input.js";
import { watchTheme, watchSize, watchModel } from "./host.js";
import { installHooks } from "./hooks.js";
import { resize, autoFit, centerOn, draw, untouched } from "./camera.js";
import { load } from "./traces.js";
import { trailTo } from "./model.js";
import { h } from "./panels.js";
import { fmt, fmtBytes } from "./format.js";
import { STATUS_COLORS, statusOf, tinter, matchMaps, translateKey, delta, lineText, summaryText } from "./compare.js";

const CSS = `
.jv-cmp{display:flex;flex-direction:column;gap:4px;font:12px var(--jp-ui-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color0,inherit)}
.jv-cmp-head{display:flex;flex-wrap:wrap;gap:10px;align-items:center}
.jv-cmp-title{font-weight:600}.jv-cmp-sum{color:var(--jp-ui-font-color2,#57606a)}
.jv-cmp-key{display:inline-flex;align-items:center;gap:3px}.jv-cmp-sw{width:10px;height:10px;border-radius:2px;display:inline-block}
.jv-cmp-panes{display:flex;gap:6px;min-height:0}
.jv-cmp-pane{flex:1;min-width:0;display:flex;flex-direction:column}
.jv-cmp-side{font-weight:600;padding:2px 4px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.jv-cmp .jv-root{height:460px}.jv-cmp .jv-insp{width:190px}
.jv-cmp .jv-root:not([data-selected]) .jv-insp,.jv-cmp .jv-root[data-selected=""] .jv-insp{display:none}
.jv-cmp-list{max-height:200px;overflow:auto;border:1px solid var(--jp-border-color1,#c9ced6);border-radius:4px;padding:4px 6px}
.jv-cmp-row{padding:2px 4px;cursor:pointer;white-space:pre-wrap;font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:11px;border-left:3px solid transparent}
.jv-cmp-row:hover,.jv-cmp-row:focus{background:rgba(127,127,127,.12);outline:none}
.jv-cmp-h{font-weight:600;margin-top:4px}
`;

function injectCompareCss() {
  injectCss();
  if (document.getElementById("jaxviz-compare-css")) return;
  const s = document.createElement("style");
  s.id = "jaxviz-compare-css";
  s.textContent = CSS;
  document.head.appendChild(s);
}

/** A pane's model: one side's payload, `selected` kept here (the page has no kernel model). */
function paneModel(payload) {
  const state = { payload, selected: {}, live_token: "" }, handlers = {};
  return {
    get: (k) => state[k],
    set: (k, val) => { state[k] = val; for (const f of (handlers["change:" + k] || []).slice()) f({ new: val }); },
    on: (e, f) => { (handlers[e] = handlers[e] || []).push(f); },
    off: (e, f) => { handlers[e] = (handlers[e] || []).filter((g) => g !== f); },
    send: () => {},
    save_changes: () => {},
  };
}

/** A whole graph view of one side in `el`; returns its state. */
function mountPane(payload, el) {
  const v = createState(paneModel(payload), el, mountView(el), performance.now());
  bindSearch(v);
  bindToolbar(v);
  bindPointer(v);
  bindKeyboard(v);
  watchTheme(v);
  watchSize(v);
  watchModel(v);
  installHooks(v);
  resize(v);
  load(v);
  return v;
}

const SIDES = ["a", "b"];

/**
 * Mounts the compare view of `model` (its `payload`: a ComparePayload) in `el`; returns its
 * cleanup.
 * @param {{model:any, el:HTMLElement}} args
 */
export function renderCompare({ model, el }) {
  injectCompareCss();
  const p = model.get("payload") || {};
  const diff = p.diff || { nodes: [], groups: [], pairs: [], gpairs: [], same: 0, marks: [{}, {}] };
  const names = p.names || ["a", "b"];
  const count = (s) => diff.nodes.filter((n) => n.status === s).length;
  const legend = Object.entries(STATUS_COLORS).map(([s, c]) =>
    h("span", { className: "jv-cmp-key" }, h("span", { className: "jv-cmp-sw", style: `background:${c}` }), s));
  const head = h("div", { className: "jv-cmp-head" },
    h("span", { className: "jv-cmp-title" }, "compare"),
    h("span", { className: "jv-cmp-sum" }, summaryText(diff)),
    ...legend);
  const hosts = SIDES.map(() => h("div"));
  const panes = h("div", { className: "jv-cmp-panes" }, ...SIDES.map((s, k) =>
    h("div", { className: "jv-cmp-pane", dataset: { side: s } },
      h("div", { className: "jv-cmp-side", title: names[k] }, `${s}: ${names[k]}`), hosts[k])));
  const list = h("div", { className: "jv-cmp-list" });
  const root = h("div", { className: "jv-cmp" }, head, panes, list);
  root.dataset.changed = String(count("changed"));
  root.dataset.added = String(count("added"));
  root.dataset.removed = String(count("removed"));
  el.replaceChildren(root);

  const views = SIDES.map((s, k) => mountPane(p[s] || { traces: [], diagnostics: [], sources: {} }, hosts[k]));
  const marks = diff.marks || [{}, {}];
  views.forEach((v, k) => {
    v.st.tint = tinter(marks[k] || {});
    // a fold of alike calls that holds a difference opens: the changed call shows at once
    const folds = v.T ? v.T.view.boxes.filter((it) => it.kind === "fold" && statusOf(marks[k], it) !== "same") : [];
    for (const it of folds) v.T.expanded.add(it.key);
    // (kept when the pane gets its size: the first view chosen then would shut them again)
    if (folds.length) { v.T.auto = false; rebuild(v); autoFit(v); }
    draw(v, true);
  });
  const graphs = views.map((v) => (v.T ? v.T.graph : null));
  const maps = matchMaps(diff, graphs);
  const ready = graphs.every(Boolean);

  // --- the panes follow each other --------------------------------------------------------
  const seenOpen = views.map((v) => new Set(v.T ? v.T.expanded : []));
  const seenSel = views.map((v) => (v.st.sel ? v.st.sel.key : ""));
  const other = (k) => 1 - k;
  const tr = (key, k) => translateKey(key, k, graphs[k], maps, graphs[k].root, graphs[other(k)].root);

  function followOpen(k) {
    const v = views[k], o = views[other(k)];
    if (!v.T || !o.T) return;
    const now = v.T.expanded, was = seenOpen[k];
    let changed = false;
    for (const key of now) if (!was.has(key)) { const t = tr(key, k); if (t && !o.T.expanded.has(t)) { o.T.expanded.add(t); changed = true; } }
    for (const key of was) if (!now.has(key)) { const t = tr(key, k); if (t && o.T.expanded.has(t)) { o.T.expanded.delete(t); changed = true; } }
    seenOpen[k] = new Set(now);
    if (changed) { rebuild(o); draw(o, true); }
    seenOpen[other(k)] = new Set(o.T.expanded);
    settle();
  }

  function followSelection(k) {
    const v = views[k], o = views[other(k)];
    const it = v.st.sel;
    const key = it ? it.key : "";
    if (key === seenSel[k]) return;
    seenSel[k] = key;
    if (!it || !o.T) return;
    const t = tr(key, k);
    let got = t ? o.T.view.items.get(t) : null;
    if (got) { select(o, got, false); centerOn(o, got); draw(o, true); }
    else if (it.kind === "node") {
      const m = maps.nodes[k].get(`${it.B}:${it.s.node.id}`);
      if (m) got = revealNode(o, m[0], m[1]);
    } else if (it.kind === "group" || it.kind === "fold") {
      const g = it.kind === "group" ? it.s.g : it.s.head.g;
      const m = maps.groups[k].get(`${it.B}:${g.id}`);
      const member = m && (o.T.graph.bodies[m[0]].nodes.find((n) => n.group === m[1]) || null);
      if (member) {
        const trail = trailTo(o.T.graph, o.T.refs, m[0], member.id);
        revealNode(o, m[0], member.id, false);
        got = trail ? o.T.view.items.get(trail[trail.length - 1].P + "g" + m[1]) : null;
        if (got) { select(o, got, false); centerOn(o, got); draw(o, true); }
      }
    }
    seenSel[other(k)] = o.st.sel ? o.st.sel.key : "";
    seenOpen[other(k)] = new Set(o.T.expanded);
    settle();   // each pane shows its own selection: neither camera drags the other
  }

  // pan and zoom: the other pane at the same zoom, with the match of the item nearest the
  // middle of this pane at the same place in it (no match shown: the same camera)
  const camOf = (v) => ({ tx: v.st.tx, ty: v.st.ty, z: v.st.z });
  const settle = () => views.forEach((v) => { v.camSeen = camOf(v); });  // moves made here
  function followCamera(k) {
    const v = views[k], o = views[other(k)];
    if (!v.T || !o.T || untouched(v)) return;      // a fit of its own (resize, first view)
    const { st } = v;
    const mx = (st.cw / 2 - st.tx) / st.z, my = (st.ch / 2 - st.ty) / st.z;
    // the boxes on screen, nearest the middle first, up to the first with a match shown there
    const x0 = -st.tx / st.z, y0 = -st.ty / st.z, x1 = x0 + st.cw / st.z, y1 = y0 + st.ch / st.z;
    const near = v.T.view.boxes.filter((it) => it.x + it.w > x0 && it.x < x1 && it.y + it.h > y0 && it.y < y1)
      .map((it) => [Math.hypot(it.x + it.w / 2 - mx, it.y + it.h / 2 - my), it]).sort((p, q) => p[0] - q[0]);
    let best = null;
    for (const [, it] of near) {
      const got = o.T.view.items.get(tr(it.key, k) || "");
      if (got) { best = [it, got]; break; }
    }
    const os = o.st;
    if (best) {
      const [it, got] = best;
      const sx = (st.tx + (it.x + it.w / 2) * st.z) * (os.cw / st.cw);
      const sy = (st.ty + (it.y + it.h / 2) * st.z) * (os.ch / st.ch);
      Object.assign(os, { z: st.z, tx: sx - (got.x + got.w / 2) * st.z, ty: sy - (got.y + got.h / 2) * st.z });
    } else Object.assign(os, camOf(v));
    o.camSeen = camOf(o);                           // moved here: it does not move this one back
    draw(o);
  }

  const observers = [];
  if (ready) {
    settle();
    views.forEach((v, k) => { v.onCamera = () => followCamera(k); });
    views.forEach((v, k) => {
      const mo = new MutationObserver((recs) => {
        for (const r of recs) {
          if (r.attributeName === "data-visible") followOpen(k);
          if (r.attributeName === "data-selected") followSelection(k);
        }
      });
      mo.observe(v.dom.root, { attributes: true, attributeFilter: ["data-visible", "data-selected"] });
      observers.push(mo);
    });
  }

  // --- the list of differences ------------------------------------------------------------
  function goTo(n) {
    SIDES.forEach((s, k) => { const at = n[s]; if (at && views[k].T) { revealNode(views[k], at[0], at[1]); seenSel[k] = views[k].st.sel ? views[k].st.sel.key : ""; seenOpen[k] = new Set(views[k].T.expanded); } });
    settle();
  }
  const row = (status, text, onPick) => {
    const r = h("div", { className: "jv-cmp-row", tabIndex: 0, dataset: { status }, onclick: onPick,
      onkeydown: (e) => { if (e.key === "Enter") onPick(); } }, text);
    r.style.borderLeftColor = STATUS_COLORS[status] || "transparent";
    return r;
  };
  const groups = diff.groups.filter((g) => g.status !== "same");
  if (groups.length) list.append(h("div", { className: "jv-cmp-h" }, "call paths (a → b)"));
  for (const g of groups) {
    const first = diff.nodes.find((n) => n.path === g.path || n.path.startsWith(g.path + " > "));
    const text = `${g.status.padEnd(8)} ${g.path}  FLOPs ${fmt(g.flops_a)} → ${fmt(g.flops_b)} (${delta(g.flops_a, g.flops_b, fmt)})` +
      `  bytes ${fmtBytes(g.bytes_a)} → ${fmtBytes(g.bytes_b)} (${delta(g.bytes_a, g.bytes_b, fmtBytes)})`;
    const r = row(g.status, text, () => { if (first) goTo(first); });
    r.dataset.path = g.path;
    r.dataset.kind = "group";
    list.append(r);
  }
  if (diff.nodes.length) list.append(h("div", { className: "jv-cmp-h" }, "equations"));
  for (const n of diff.nodes) {
    const line = lineText(n);
    const types = (x) => x.join(", ") || "()";
    const what = n.status === "changed"
      ? [n.ins_a.join() !== n.ins_b.join() ? `in ${types(n.ins_a)} → ${types(n.ins_b)}` : "",
        n.out_a.join() !== n.out_b.join() ? `out ${types(n.out_a)} → ${types(n.out_b)}` : "",
        n.params_a.length || n.params_b.length ? `params ${types(n.params_a)} → ${types(n.params_b)}` : ""].filter(Boolean).join("; ")
      : types(n.status === "added" ? n.out_b : n.out_a);
    const r = row(n.status, `${n.status.padEnd(8)} ${n.path || "(top)"}  ${n.op} (${line})  ${what}`, () => goTo(n));
    r.dataset.kind = "node";
    r.dataset.path = n.path;
    list.append(r);
  }
  if (!diff.nodes.length) list.append(h("div", { className: "jv-muted" }, "No differences: the two traces staged the same equations."));

  // --- hooks for tests --------------------------------------------------------------------
  root.jaxvizCompare = {
    panes: () => views.map((v) => v.dom.root),
    // every box and open frame of pane k with its status
    marks: (k) => {
      const v = views[k];
      if (!v.T) return [];
      return [...v.T.view.boxes, ...v.T.view.frames].map((it) => ({ key: it.key, kind: it.kind, label: it.lines[0], status: statusOf(marks[k], it), open: !!it.open }));
    },
    selected: (k) => (views[k].st.sel ? views[k].st.sel.key : null),
    expanded: (k) => (views[k].T ? [...views[k].T.expanded] : []),
    select: (k, key) => { const it = views[k].T.view.items.get(key); if (it) select(views[k], it); return !!it; },
    camera: (k) => camOf(views[k]),
    match: (k, key) => (ready ? tr(key, k) || null : null),   // key's match in the other pane
  };
  root.dataset.ready = ready ? "1" : "0";

  // --- the first look: the first difference in both panes, centred, nothing selected (each
  // pane's inspector opens with a selection only); a pane without a size yet does it when
  // it gets one (after its own first fit)
  const first = diff.nodes.find((n) => n.a && n.b) || diff.nodes[0];
  function showFirst(k) {
    const at = first && first[SIDES[k]], v = views[k];
    if (!at || !v.T) return;
    revealNode(v, at[0], at[1], false);
    seenOpen[k] = new Set(v.T.expanded);
    settle();
    root.dataset.first = String((root.dataset.first ? +root.dataset.first : 0) + 1);
  }
  views.forEach((v, k) => {
    if (v.st.cw > 1) { showFirst(k); return; }
    const ro = new ResizeObserver(() => { if (v.st.cw > 1) { ro.disconnect(); showFirst(k); } });
    ro.observe(v.dom.stage);
    observers.push(ro);
  });
  return () => { for (const mo of observers) mo.disconnect(); views.forEach(dispose); };
}

/**
 * A recompile's "compare": the two traces of diagnostic `d` (d.compare, indices into the
 * payload's traces) side by side under the graph view `v`, from the payload's `compares`
 * entry for them; a second click closes it.
 * @param {import("./state.js").ViewState} v
 * @param {import("./model.js").Diagnostic} d
 */
export function openCompare(v, d) {
  const [ia, ib] = d.compare || [];
  const p = v.payload || {};
  const entry = (p.compares || []).find((c) => c.a === ia && c.b === ib);
  const old = v.cmp;
  if (old) { old.dispose(); old.box.remove(); v.cmp = null; if (old.ia === ia && old.ib === ib) return; }
  if (!entry) return;
  const side = (i) => ({ traces: [p.traces[i]], diagnostics: [], sources: p.sources || {} });
  const payload = { kind: "compare", names: entry.names, a: side(ia), b: side(ib), diff: entry.diff, text: entry.text };
  const close = h("button", { className: "jv-btn jv-cmp-close", onclick: () => openCompare(v, d) }, "Close compare");
  const host = h("div");
  const box = h("div", { className: "jv-cmp-host" }, close, host);
  v.dom.root.after(box);
  const dispose = renderCompare({ model: paneModel(payload), el: host });
  v.cmp = { box, dispose, ia, ib };
  v.cleanups.push(() => { if (v.cmp && v.cmp.box === box) { dispose(); box.remove(); v.cmp = null; } });
  box.scrollIntoView({ block: "nearest" });
}

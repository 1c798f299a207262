// The graph view's state object and its transitions. One object, `v`, holds everything the
// view knows (the payload, its traces, the open trace `T`, the camera and highlights `st`, the
// memory panel, timers); every part of the view (toolbar, search, input, camera, traces) is a
// set of functions taking it. The transitions here rebuild the visible graph, select and
// open items, reveal a node, and recompute the highlights (dataflow, matches, diagnostics).

import { buildView, expandAll, trailTo, revealTrail, repOfTrail, nodeKey, staticTree } from "./model.js";
import { layout } from "./layout.js";
import { routeEdges } from "./edges.js";
import { readTheme } from "./draw.js";
import { fmtSeconds } from "./format.js";
import { fillInspector, diagnosticItems } from "./panels.js";
import { fit, centerOn, draw, followCamera, stageMoved, READABLE_Z } from "./camera.js";

const now = () => performance.now();

/**
 * One trace of the payload as the view keeps it.
 * @typedef {{i:number, name:string, graph:import("./model.js").Graph,
 *   diags:import("./model.js").Diagnostic[], refs:any[]|null, expanded:Set<string>|null,
 *   view:any, size?:{w:number, h:number}, sel:string|null, cam:{tx:number, ty:number, z:number}|null,
 *   matches:{trail:any[], grp?:number, where:string, tier:number}[], mi:number, summary?:string,
 *   auto?:boolean}} TraceState   (auto: the expansion is still the first view's choice)
 *
 * The view's camera and what the painter highlights (draw.js's paint reads it).
 * @typedef {{tx:number, ty:number, z:number, cw:number, ch:number, dpr:number, color:string,
 *   sel:any, matches:Set<any>|null, diag:Set<any>|null, hlNodes:Set<any>|null, hlEdges:Set<any>|null,
 *   tint?:function(any): (string|null)}} Camera   (tint: the compare view's colour per item)
 *
 * @typedef {{model:any, el:HTMLElement, t0:number, dom:import("./dom.js").ViewDom,
 *   ctx:CanvasRenderingContext2D, payload:import("./model.js").Payload|null, traces:TraceState[],
 *   cur:number, T:TraceState|null, theme:any, st:Camera, timings:Object<string, number|null>,
 *   raf:number, mem:any, memOpen:boolean, ui:{trace?:string, memory?:boolean},
 *   fitCam:{tx:number, ty:number, z:number}|null, sizeHandled:{w:number, h:number}|null, searchTimer:any, drag:any,
 *   cleanups:function[], openCompare?:function(ViewState, any): void, cmp?:any}} ViewState
 */

/**
 * The state of a new view of `model` in `el`, whose elements are `dom` (dom.js's mountView).
 * @param {any} model      the anywidget model (traits `payload`, `selected`, `live_token`)
 * @param {HTMLElement} el
 * @param {import("./dom.js").ViewDom} dom
 * @param {number} t0      performance.now() when the render began (for timings.firstPaint)
 * @returns {ViewState}
 */
export function createState(model, el, dom, t0) {
  const ctx = dom.canvas.getContext("2d");
  const theme = readTheme(dom.root);
  // which tab was open, kept per live token: an output re-rendered in place (the run's summary
  // arriving through update_display) opens where the last one was
  const uiKey = (() => { try { return model.get("live_token") || ""; } catch (e) { return ""; } })();
  const ui = uiKey ? ((window.__jaxvizUi = window.__jaxvizUi || {})[uiKey] = window.__jaxvizUi[uiKey] || {}) : {};
  return {
    model, el, t0, dom, ctx,
    payload: null, traces: [], cur: 0, T: null, theme,
    st: { tx: 0, ty: 0, z: 1, cw: 1, ch: 1, dpr: window.devicePixelRatio || 1, color: "none", sel: null, matches: null, diag: null, hlNodes: null, hlEdges: null },
    timings: { firstPaint: null, layout: null, edges: null, paint: null, build: null },
    raf: 0,
    // the memory tab (payload.memory): its panel, and whether it is the open tab
    mem: null, memOpen: false,
    ui,
    fitCam: null, sizeHandled: null, searchTimer: 0, wheelTimer: 0, engaged: false, drag: null, legendKey: "",
    cleanups: [],
  };
}

/**
 * addEventListener, undone by the view's cleanup.
 * @param {ViewState} v
 * @param {EventTarget} target
 * @param {string} ev
 * @param {function(any): void} fn
 * @param {any} [opt]
 */
export function listen(v, target, ev, fn, opt) {
  target.addEventListener(ev, fn, opt);
  v.cleanups.push(() => target.removeEventListener(ev, fn, opt));
}

/**
 * The view's cleanup: frames, timers, the memory panel, every listener and observer.
 * @param {ViewState} v
 */
export function dispose(v) {
  cancelAnimationFrame(v.raf);
  clearTimeout(v.searchTimer);
  clearTimeout(v.wheelTimer);
  if (v.mem) v.mem.dispose();
  for (const c of v.cleanups) c();
}

/**
 * Builds, lays out and routes the open trace's visible graph from its expanded keys, and
 * maps the selection and the highlights onto it.
 * @param {ViewState} v
 */
export function rebuild(v) {
  const { T, st, timings } = v;
  const { root, status } = v.dom;
  if (!T.layouts) setLayouts(v, T);
  const a = now();
  T.view = buildView(T.graph, T.expanded, T.flatIO !== false);
  const b = now();
  T.size = layout(T.view, T.graph);
  const c = now();
  routeEdges(T.view);
  timings.build = b - a;
  timings.layout = c - b;
  timings.edges = now() - c;
  root.dataset.visible = String(T.view.boxes.length);
  status.textContent = `${T.view.boxes.length} shown · ${T.graph.bodies[T.graph.root].n_eqns} eqns`;
  const cost = v.payload.cost;  // what jaxviz added to the cell's time, as it measured it
  if (cost) {
    status.textContent += ` · jaxviz +${fmtSeconds(cost.capture_seconds + cost.analysis_seconds)}`;
    status.title = cost.text;
  }
  if (st.sel) {
    st.sel = T.view.items.get(st.sel.key) || null;
    // the selection went out of sight (collapse all): the inspector must not show it
    if (!st.sel) { T.sel = null; root.dataset.selected = ""; inspect(v, null); }
  }
  v.dom.tip.hidden = true;   // what the pointer was over may have changed
  markDiagnostics(v);
  remapMatches(v);
  flow(v);
}

/** The `selected` trait for an item: {trace, body, node, key} for a node, else {}. */
function selectedPayload(v, it) {
  if (!it || it.kind !== "node") return {};
  return { trace: v.cur, body: it.B, node: it.s.node.id, key: it.key };
}

/** Fills the inspector for item `it` (its buttons toggle through this view). */
function inspect(v, it) {
  fillInspector(v.dom.insp, it, v.T.graph, v.payload.sources, { toggle: (x) => toggle(v, x) });
}

/**
 * Selects item `it` (or nothing): inspector, dataflow highlight, and, when `sync`, the model's
 * `selected` trait.
 * @param {ViewState} v
 * @param {any} it
 * @param {boolean} [sync]
 */
export function select(v, it, sync = true) {
  const { st, T, model } = v;
  st.sel = it;
  T.sel = it ? it.key : null;
  inspect(v, it);
  const had = !!v.dom.root.dataset.selected;
  v.dom.root.dataset.selected = it ? it.key : "";
  if (had !== !!it) stageMoved(v, it);   // the inspector opened or closed: the canvas resized
  flow(v);
  if (sync) {
    try { model.set("selected", selectedPayload(v, it)); model.save_changes(); } catch (e) { /* read-only host */ }
  }
  draw(v);
}

/**
 * Opens or closes item `it`, keeping it where it was on screen. Returns the time it took (ms).
 * @param {ViewState} v
 * @param {any} it
 * @returns {number}
 */
export function toggle(v, it) {
  if (!it || it.kind === "branch") return 0;
  const { T, st } = v;
  const a = now();
  const key = it.key;
  if (T.expanded.has(key)) T.expanded.delete(key); // inner state is kept for the next open
  else T.expanded.add(key);
  // keep the toggled item where it was on screen
  const sx = it.x * st.z + st.tx, sy = it.y * st.z + st.ty;
  rebuild(v);
  const again = T.view.items.get(key);
  if (again) {
    st.tx = sx - again.x * st.z; st.ty = sy - again.y * st.z;
    // an opened group comes into the canvas whole (or its header, when larger than the canvas)
    if (again.open) Object.assign(st, followCamera(st, again, st.cw, st.ch, READABLE_Z));
  }
  T.auto = false;
  if (st.sel && st.sel.key === key) select(v, again || null, false);
  else if (!st.sel && again) select(v, again, false);
  else inspect(v, st.sel);
  draw(v, true);
  return (v.timings.toggle = now() - a);
}

/**
 * Opens everything (up to expandAll's cap) and fits the graph.
 * @param {ViewState} v
 */
export function expandAllItems(v) {
  const { T } = v;
  const capped = expandAll(T.graph, T.expanded, T.view);
  T.auto = false;
  rebuild(v); fit(v); draw(v, true);
  if (capped) v.dom.status.textContent += " (expand-all stopped at 3000; open groups one by one)";
}

/**
 * Closes everything and fits the graph.
 * @param {ViewState} v
 */
export function collapseAllItems(v) {
  v.T.expanded = new Set();
  v.T.auto = false;
  rebuild(v); fit(v); draw(v, true);
}

/**
 * Opens the clusters around node `nid` of body `B`, centres it (or the cluster standing for
 * it) and selects it unless `doSelect` is false. Returns the item, or null.
 * @param {ViewState} v
 * @param {number} B
 * @param {number} nid
 * @param {boolean} [doSelect]
 */
export function revealNode(v, B, nid, doSelect = true) {
  const { T } = v;
  const trail = trailTo(T.graph, T.refs, B, nid);
  if (!trail) return null;
  revealTrail(T.graph, trail, T.expanded);
  T.auto = false;
  rebuild(v);
  const it = T.view.items.get(nodeKey(trail[trail.length - 1].P, nid)) || repOfTrail(T.view, T.graph, trail);
  if (it) { if (doSelect) select(v, it); centerOn(v, it); }
  draw(v, true);
  return it;
}

/**
 * Goes to search match `m` ({trail, grp}): a node is revealed and selected (revealNode); a
 * group (`grp`) has the clusters around it opened and is selected itself, shut or open as it was.
 * @param {ViewState} v
 * @param {{trail:any[], grp?:number}} m
 */
export function revealMatch(v, m) {
  const { T } = v;
  const last = m.trail[m.trail.length - 1];
  if (m.grp == null) return revealNode(v, last.B, last.nid);
  const s = staticTree(T.graph.bodies[last.B], T.graph.bodies).groupItems[m.grp];
  if (m.trail.length > 1) revealTrail(T.graph, m.trail.slice(0, -1), T.expanded);
  for (const a of s.anc.slice(0, -1)) T.expanded.add(last.P + a.lk);
  T.auto = false;
  rebuild(v);
  const it = T.view.items.get(last.P + s.lk) || repOfTrail(T.view, T.graph, m.trail);
  if (it) { select(v, it); centerOn(v, it); }
  draw(v, true);
  return it;
}

/**
 * Dataflow highlight of the selection: an input lights everything it feeds, an output
 * everything feeding it (st.hlNodes, st.hlEdges; null when nothing is lit).
 * @param {ViewState} v
 */
export function flow(v) {
  const { st, T } = v;
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

/**
 * Each equation's layout as XLA compiled it (payload.compiled_memory[].layouts of the open
 * trace), as `node.layout`: its box and the inspector show it. Once per trace.
 * @param {ViewState} v
 * @param {any} T
 */
function setLayouts(v, T) {
  T.layouts = true;
  const i = v.traces.indexOf(T);
  for (const e of ((v.payload && v.payload.compiled_memory) || []).filter((x) => x.index === i)) {
    for (const [key, typ] of Object.entries(e.layouts || {})) {
      const [b, k] = key.split(":").map(Number);
      const node = T.graph.bodies[b] && T.graph.bodies[b].nodes[k];
      if (node) node.layout = typ;
    }
  }
}

/**
 * The visible items standing for the open trace's diagnostics (and the payload's), st.diag.
 * @param {ViewState} v
 */
export function markDiagnostics(v) {
  const { T, payload } = v;
  if (!T || !T.view) return;
  v.st.diag = diagnosticItems(T.graph, T.refs, T.view, [...T.diags, ...((payload && payload.diagnostics) || [])]);
  v.st.donated = T.donated && T.donated.size ? T.donated : null;  // inputs given by donate_argnums
  // the ops a sharded program's collectives serve (payload.compiled_memory[].collectives)
  const mine = ((payload && payload.compiled_memory) || []).filter((e) => e.index === v.cur);
  const colls = mine.flatMap((e) => e.collectives || []);
  v.st.coll = colls.length ? diagnosticItems(T.graph, T.refs, T.view, colls) : null;

}

/** The visible item for a group match: the group's box or frame, else what stands for its first node. */
function groupRep(T, m) {
  const last = m.trail[m.trail.length - 1];
  const s = staticTree(T.graph.bodies[last.B], T.graph.bodies).groupItems[m.grp];
  const it = T.view.items.get(last.P + s.lk);
  return it && !it.open ? it : repOfTrail(T.view, T.graph, m.trail);
}

/**
 * The visible items standing for the open trace's search matches (the first 5000), st.matches.
 * @param {ViewState} v
 */
export function remapMatches(v) {
  const { T, st } = v;
  if (!T || !T.matches || !T.matches.length) { st.matches = null; return; }
  const s = new Set();
  for (const m of T.matches.slice(0, 5000)) {
    const it = m.grp != null ? groupRep(T, m) : repOfTrail(T.view, T.graph, m.trail);
    if (it) s.add(it);
  }
  st.matches = s;
}

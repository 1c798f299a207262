// Which trace (or the memory tab) the graph view shows: loading the `payload` trait into
// traces and tabs, switching traces (each keeps its camera, selection, expansion and
// matches), the memory tab, and the diagnostics list that leads to a trace's node.

import { prepareGraph, initialExpanded, firstRefs, openingTrace, staticTree } from "./model.js";
import { tabGroups } from "./tabs.js";
import { fillDiagnostics, diagTrail, h } from "./panels.js";
import { memoryPanel } from "./memory.js";
import { buffersPanel, summaryBlock } from "./buffers.js";
import { timeTab } from "./timetab.js";
import { fillTabs, markTabs } from "./toolbar.js";
import { rebuild, select, markDiagnostics, revealNode } from "./state.js";
import { runSearch } from "./search.js";
import { inNotebook, goToLine } from "./editor.js";
import { resize, autoFit, draw, fitsReadable } from "./camera.js";

/**
 * Reads the model's `payload`: traces, tabs, the memory panel; opens the trace open before a
 * re-render in place, else the most useful one.
 * @param {import("./state.js").ViewState} v
 */
export function load(v) {
  const { tabs, memBox, main, diagBox, root } = v.dom;
  const payload = v.payload = v.model.get("payload") || { traces: [] };
  v.traces = (payload.traces || []).map((t, i) => ({ i, name: t.name, graph: t.graph, diags: t.diagnostics || [], donated: new Set(t.donated || []), refs: null, expanded: null, view: null, sel: null, cam: null, matches: [], mi: -1 }));
  if (v.mem) v.mem.dispose();
  const memory = payload.memory || [];
  const compiled = payload.compiled_memory || [];
  const notes = payload.compiled_notes || [];
  v.mem = memory.length || compiled.length || notes.length ? memoryPanel(memory) : null;
  // the compiled programs' buffers at their peaks (buffers.js): a row selects its node
  if (compiled.length || notes.length) v.mem.el.append(buffersPanel(compiled, (e, b) => { showMemory(v, false); pickBuffer(v, e, b); }, notes));
  // the tab opens with each function's three lines: its peak, what donation saves, what more would
  if (compiled.length) {
    const runs = {};
    for (const m of memory) if (m.summary) runs[m.trace] = m.summary;
    v.mem.el.prepend(summaryBlock(compiled, runs));
  }
  memBox.replaceChildren(...(v.mem ? [v.mem.el] : []));
  memBox.hidden = true; main.hidden = false; diagBox.style.display = "";
  root.dataset.memory = String(memory.length);
  // a finding names its tab as the strip does (an eager statement's parts share one)
  const labels = [];
  for (const g of tabGroups(payload.traces || [])) for (const i of g.traces) labels[i] = { text: g.text };
  fillTabs(tabs, payload.traces || [], !!v.mem, {
    trace: (i) => { showMemory(v, false); setTrace(v, i); },
    memory: () => showMemory(v, true),
    cur: () => (v.memOpen ? -1 : v.cur),
  });
  timeTab(v, payload.profile, (d) => pickDiag(v, d));   // --profile: the time tab (timetab.js)
  // every finding of the cell in one list (whichever tab is open), each tab marked with its count
  showDiagnostics(v, allFindings(v.traces, payload.diagnostics || [], labels));
  v.memOpen = false;
  // the trace open before a re-render in place, else the most useful one
  const kept = v.traces.findIndex((t) => v.ui.trace != null && t.name === v.ui.trace);
  setTrace(v, kept >= 0 ? kept : openingTrace(payload.traces || []), true);
  if (v.mem && v.ui.memory) showMemory(v, true);
}

/**
 * Opens or leaves the memory tab (nothing without a memory panel).
 * @param {import("./state.js").ViewState} v
 * @param {boolean} on
 */
export function showMemory(v, on) {
  const { main, diagBox, memBox, root, tabs } = v.dom;
  on = !!(on && v.mem);
  if (on === v.memOpen && (!on || !v.mem.el.hidden)) return;
  v.memOpen = on;
  v.ui.memory = on;
  main.hidden = on;
  diagBox.style.display = on ? "none" : "";
  memBox.hidden = !on;
  if (v.mem) { if (on) v.mem.show(); else v.mem.hide(); }
  root.dataset.tab = on ? "memory" : "graph";
  markTabs(tabs, v.cur, on);
  if (!on) { resize(v); draw(v, true); }
}

/**
 * Shows trace `i` (unless it is open already; `force`: a new payload), where it was left.
 * @param {import("./state.js").ViewState} v
 * @param {number} i
 * @param {boolean} [force]
 */
export function setTrace(v, i, force) {
  const { st } = v;
  if (!force && i === v.cur && v.T) return;
  if (v.T) v.T.cam = { tx: st.tx, ty: st.ty, z: st.z };
  v.cur = i;
  const T = v.T = v.traces[i] || null;
  markTabs(v.dom.tabs, i, v.memOpen);
  if (!T) { v.dom.status.textContent = "no captured functions"; return; }
  prepareGraph(T.graph);
  T.refs = T.refs || firstRefs(T.graph);
  const fresh = !T.expanded;
  if (fresh) T.expanded = initialExpanded(T.graph);
  if (!force) v.ui.trace = T.name;
  rebuild(v);
  // (the findings list, filled by load, takes its height from the canvas the fit must use)
  resize(v);
  if (fresh) firstView(v);
  if (T.cam) Object.assign(st, T.cam); else autoFit(v);
  select(v, T.sel ? T.view.items.get(T.sel) || null : null, false);
  markDiagnostics(v);
  if (v.dom.q.value) runSearch(v, false);
  draw(v, true);
}

/** Budgets (boxes) the first view tries, most open first: it keeps the first that fits. */
const FIRST_BUDGETS = [90, 48, 24, 12, 0];

/**
 * The first view of the open trace: the most open overview (model.js's initialExpanded) whose
 * layout fits the canvas at a readable zoom, with an argument's arrays side by side; failing
 * that, with them in one box each (`params`, 6 arrays: iogroups.js's soft clusters);
 * everything shut when none fits. Kept as the trace's expansion until the user opens or
 * closes something (T.auto).
 * @param {import("./state.js").ViewState} v
 */
export function firstView(v) {
  const { T, st } = v;
  T.auto = true;
  if (st.cw <= 1) return;   // no size yet: watchSize chooses again once there is one
  const soft = staticTree(T.graph.bodies[T.graph.root], T.graph.bodies).root.children.some((s) => s.soft);
  for (const flat of soft ? [true, false] : [true]) {
    T.flatIO = flat;
    for (const budget of FIRST_BUDGETS) {
      T.expanded = initialExpanded(T.graph, budget, flat);
      rebuild(v);
      if (fitsReadable(v)) return;
    }
  }
}

/**
 * Every finding of the cell, the traces' (each tagged with its trace: `ti`, and its tab's
 * label: `tab`, when there are several) then the cell's own.
 * @param {{i:number, diags:any[]}[]} traces
 * @param {any[]} cellDiags
 * @param {{text:string}[]} labels   each trace's tab (tabs.js's tabGroups)
 */
export function allFindings(traces, cellDiags, labels) {
  const many = traces.length > 1;
  const out = [];
  for (const t of traces) for (const d of t.diags) out.push({ ...d, ti: t.i, tab: many && labels[t.i] ? labels[t.i].text : "" });
  return [...out, ...cellDiags];
}

/** The findings list above the tabs; a click goes to the finding's node (in its trace). */
function showDiagnostics(v, diags) {
  // in a notebook, each finding's cell line puts the editor's cursor there (editor.js)
  const onLine = inNotebook(v.el) ? (d) => goToLine(v.el, d.filename, d.line) : null;
  fillDiagnostics(v.dom.diagBox, diags, (d) => pickDiag(v, d), v.openCompare && ((d) => v.openCompare(v, d)), onLine);
}

/**
 * Goes to a compiled buffer's node: the trace the entry explains (by index: two signatures
 * of one function share a name), then the node (revealed and selected).
 * @param {import("./state.js").ViewState} v
 * @param {import("./buffers.js").CompiledMemoryEntry} e
 * @param {import("./buffers.js").CompiledBuffer} b
 */
export function pickBuffer(v, e, b) {
  const at = e.index != null && v.traces[e.index] ? e.index : null;
  if (at != null && at !== v.cur) setTrace(v, at);
  pickDiag(v, { trace: at != null ? null : e.trace, node_ids: b.node_ids, line: null });
}

/**
 * Goes to a diagnostic's node: its trace, then the node (revealed and selected).
 * @param {import("./state.js").ViewState} v
 * @param {import("./model.js").Diagnostic} d
 */
export function pickDiag(v, d) {
  if (v.memOpen) showMemory(v, false);
  if (d.ti != null && v.traces[d.ti]) { if (d.ti !== v.cur) setTrace(v, d.ti); }
  else if (d.trace && v.T.name !== d.trace) {
    const other = v.traces.find((t) => t.name === d.trace);
    if (other) setTrace(v, other.i);
  }
  const tr = diagTrail(v.T.graph, v.T.refs, d);
  if (tr) {
    const last = tr[tr.length - 1];
    // the graph into the page's view: below a long findings list (a narrow window) the
    // click selected the node out of sight, and the view seemed to stay where it was
    if (revealNode(v, last.B, last.nid) && v.dom.stage.scrollIntoView) v.dom.stage.scrollIntoView({ block: "nearest" });
  }
}

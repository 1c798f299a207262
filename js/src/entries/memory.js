// jaxviz memory chart (anywidget ESM): device memory over time while a run goes on.
// Python side: jaxviz/view/chart.py (MemoryChart); jaxviz/schema.py declares the traits and
// messages below as TypedDicts. All text goes in via textContent.
// `initialize` keeps every message in one store per model, whether or not a view exists, and
// registers {model, render} under the model's live_token in window.__jaxvizLive, where the
// graph view's memory tab (js/src/graph/memory.js) finds it: the chart is drawn there,
// inside the graph's output, from everything received since the model started.

/**
 * @typedef {{id: string, label: string, source: string}} Lane
 * @typedef {{label: string, xla_peak: number|null, baseline: Object<string, number>,
 *            step: number, steps: number, summary: string}} RunInfo
 * @typedef {{t: number, kind: string, label: string}} RunEvent
 * Messages from Python:
 *   {kind: "samples", run, n} + [Float64 (n,3): t, lane, bytes]
 *   {kind: "steps", run, n}   + [Float64 (n,2): t start, seconds]
 *   {kind: "events", run, events: RunEvent[]}
 *   {kind: "stopping"}        (the Stop click arrived)
 * Message to Python: {kind: "stop"} (the Stop button)
 */

import { fmtBytes } from "../graph/format.js";

const LANE_H = 84;
const PAD_L = 4;
const FRAME_MS = 33; // <= 30 frames per second

function f64(dv) {
  // DataView -> Float64Array (copied: the offset may not be 8-aligned)
  const buf = dv.buffer.slice(dv.byteOffset, dv.byteOffset + dv.byteLength);
  return new Float64Array(buf);
}

// the one byte formatter (graph/format.js), still exported from this module as before
export { fmtBytes };

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}

const CSS = `
.jvm{font:12px sans-serif;color:#222;max-width:1100px}
.jvm-head{display:flex;gap:8px;align-items:center;margin-bottom:4px}
.jvm-title{font-weight:600}
.jvm-bar{flex:1;height:6px;background:#eee;border-radius:3px;overflow:hidden;min-width:80px}
.jvm-fill{height:100%;width:0;background:#4a7bd0;transition:width .1s}
.jvm-bar.busy .jvm-fill{width:30%;animation:jvm-slide 1.2s infinite linear}
@keyframes jvm-slide{from{margin-left:-30%}to{margin-left:100%}}
.jvm-runs{display:grid;gap:10px}
.jvm-run{border:1px solid #ddd;border-radius:4px;padding:4px}
.jvm-rlabel{font-weight:600}
.jvm-sum{color:#555;min-height:1em}
.jvm-lanes{font-size:11px;color:#555}
.jvm canvas{width:100%;display:block}
.jvm button{font-size:12px}
`;

export function createStore() {
  /** per run: {lanes: Map<laneIndex, {t: number[], v: number[]}>, steps: number[][], events: RunEvent[], tmax} */
  const runs = [];
  const get = (i) => (runs[i] ||= { lanes: new Map(), steps: [], events: [], tmax: 0 });
  return {
    runs,
    samples(run, arr) {
      const r = get(run);
      for (let i = 0; i + 2 < arr.length; i += 3) {
        const lane = arr[i + 1];
        let s = r.lanes.get(lane);
        if (!s) r.lanes.set(lane, (s = { t: [], v: [] }));
        s.t.push(arr[i]); s.v.push(arr[i + 2]);
        if (arr[i] > r.tmax) r.tmax = arr[i];
      }
    },
    steps(run, arr) {
      const r = get(run);
      for (let i = 0; i + 1 < arr.length; i += 2) r.steps.push([arr[i], arr[i + 1]]);
    },
    events(run, evs) { get(run).events.push(...evs); },
  };
}

function draw(canvas, store, runIndex, model) {
  const lanes = model.get("lanes") || [];
  const info = (model.get("runs") || [])[runIndex] || {};
  const r = store.runs[runIndex];
  const dpr = window.devicePixelRatio || 1;
  const W = canvas.clientWidth || 400;
  const H = Math.max(lanes.length, 1) * LANE_H;
  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(H * dpr)) {
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    canvas.style.height = `${H}px`;
  }
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, W, H);
  if (!r) return;
  // one time axis for all runs (side by side, comparable); one y scale per lane across runs
  const tmax = Math.max(...store.runs.map((x) => (x ? x.tmax : 0)), 1e-3);
  lanes.forEach((lane, li) => {
    const y0 = li * LANE_H;
    let vmax = 0;
    store.runs.forEach((x) => {
      const s = x && x.lanes.get(li);
      if (s) for (const v of s.v) if (v > vmax) vmax = v;
    });
    const base = (info.baseline || {})[lane.id] || 0;
    const xla = lane.source !== "rss" && info.xla_peak != null ? base + info.xla_peak : null;
    if (xla != null && xla > vmax) vmax = xla;
    vmax = vmax * 1.1 || 1;
    const X = (t) => PAD_L + (t / tmax) * (W - PAD_L - 2);
    const Y = (v) => y0 + LANE_H - 4 - (v / vmax) * (LANE_H - 16);
    g.strokeStyle = "#e5e5e5"; g.beginPath(); g.moveTo(0, y0 + LANE_H - 0.5); g.lineTo(W, y0 + LANE_H - 0.5); g.stroke();
    // step boundaries
    if (r.steps.length > 1 && (W - PAD_L) / (r.steps.length * tmax / Math.max(r.tmax, 1e-9)) >= 4) {
      g.strokeStyle = "rgba(0,0,0,0.12)"; g.beginPath();
      for (const [t] of r.steps) { const x = Math.round(X(t)) + 0.5; g.moveTo(x, y0 + 12); g.lineTo(x, y0 + LANE_H - 2); }
      g.stroke();
    }
    // XLA's peak estimate
    if (xla != null) {
      g.strokeStyle = "#d08a2a"; g.setLineDash([4, 3]); g.beginPath();
      g.moveTo(PAD_L, Y(xla)); g.lineTo(W, Y(xla)); g.stroke(); g.setLineDash([]);
    }
    const s = r.lanes.get(li);
    if (s && s.t.length) {
      g.strokeStyle = lane.source === "rss" ? "#888" : "#2f62c0"; g.lineWidth = 1.5; g.beginPath();
      for (let i = 0; i < s.t.length; i++) { const x = X(s.t[i]), y = Y(s.v[i]); i ? g.lineTo(x, y) : g.moveTo(x, y); }
      g.stroke(); g.lineWidth = 1;
    }
    g.fillStyle = "#444"; g.font = "11px sans-serif";
    const last = s && s.v.length ? s.v[s.v.length - 1] : null;
    const peak = s && s.v.length ? Math.max(...s.v) : null;
    g.fillText(`${lane.label}  now ${fmtBytes(last)}  peak ${fmtBytes(peak)}` +
      (xla != null ? `  XLA est. +${fmtBytes(info.xla_peak)} (dashed)` : ""), PAD_L, y0 + 10);
  });
  // donation events: markers on top of the first lane
  g.fillStyle = "#c03030";
  for (const e of r.events) {
    if (e.kind !== "donation") continue;
    const x = PAD_L + (e.t / tmax) * (W - PAD_L - 2);
    g.beginPath(); g.moveTo(x - 3, 12); g.lineTo(x + 3, 12); g.lineTo(x, 17); g.fill();
  }
}

/**
 * The model's store and message listeners, shared by every view of the model. anywidget hands
 * initialize and each render a different proxy of one model, so the state made by initialize
 * is found through the page registry, by the model's live_token.
 */
const states = new WeakMap();
function newState(model) {
  const s = { store: createStore(), n: 0, views: new Set(), onMsg: null };
  s.onMsg = (msg, buffers) => {
    if (!msg || !msg.kind) return;
    if (msg.kind === "samples" && buffers && buffers[0]) { s.store.samples(msg.run, f64(buffers[0])); s.n += msg.n || 0; }
    else if (msg.kind === "steps" && buffers && buffers[0]) s.store.steps(msg.run, f64(buffers[0]));
    else if (msg.kind === "events") s.store.events(msg.run, msg.events || []);
    for (const v of [...s.views]) v(msg);
  };
  model.on("msg:custom", s.onMsg);
  return s;
}
function stateOf(model) {
  const tok = model.get("live_token") || "";
  const entry = tok && window.__jaxvizLive && window.__jaxvizLive[tok];
  if (entry && entry.state) return entry.state;
  if (!states.has(model)) states.set(model, newState(model));
  return states.get(model);
}

function render({ model, el: root }) {
  const style = el("style"); style.textContent = CSS;
  const wrap = el("div", "jvm");
  // what a test (or a person with devtools) can read: samples received, runs shown, phase
  wrap.dataset.samples = "0"; wrap.dataset.frames = "0"; wrap.dataset.runs = "0";
  const head = el("div", "jvm-head");
  const title = el("span", "jvm-title");
  const bar = el("div", "jvm-bar"); const fill = el("div", "jvm-fill"); bar.appendChild(fill);
  const status = el("span", "jvm-status");
  const stop = el("button", null, "Stop");
  head.append(title, bar, status, stop);
  const runsDiv = el("div", "jvm-runs");
  wrap.append(head, runsDiv);
  root.append(style, wrap);

  const state = stateOf(model);
  const store = state.store;
  wrap.dataset.samples = String(state.n);
  let views = []; // [{box, label, canvas, sum, events}]
  let dirty = true;
  let last = 0;
  let raf = 0;

  function layout() {
    const runs = model.get("runs") || [];
    while (views.length < runs.length) {
      const box = el("div", "jvm-run");
      const label = el("div", "jvm-rlabel");
      const canvas = document.createElement("canvas");
      const sum = el("div", "jvm-sum");
      const evs = el("div", "jvm-lanes");
      box.append(label, canvas, sum, evs);
      runsDiv.appendChild(box);
      views.push({ box, label, canvas, sum, evs });
    }
    runsDiv.style.gridTemplateColumns = `repeat(${Math.max(runs.length, 1)}, 1fr)`;
    runs.forEach((r, i) => {
      views[i].label.textContent = r.label || "";
      views[i].sum.textContent = r.summary || "";
    });
  }

  function header() {
    title.textContent = model.get("title") || "";
    const phase = model.get("phase") || "";
    const runs = model.get("runs") || [];
    const cur = runs[runs.length - 1];
    const busy = phase === "compiling" || (phase === "running" && !(cur && cur.steps));
    bar.classList.toggle("busy", busy);
    if (!busy) {
      const frac = phase === "running" && cur ? cur.step / cur.steps : (phase.startsWith("done") ? 1 : 0);
      fill.style.width = `${Math.round(100 * Math.min(Math.max(frac, 0), 1))}%`;
    } else fill.style.width = "";
    const stepTxt = phase === "running" && cur && cur.steps ? ` ${cur.label}: step ${cur.step}/${cur.steps}` : "";
    status.textContent = phase + stepTxt;
    wrap.dataset.phase = phase;
    stop.disabled = !(phase === "compiling" || phase === "running");
  }

  let connected = false;
  function frame(now) {
    raf = 0;
    // a view dropped from the page without its cleanup (an output re-rendered in place)
    if (wrap.isConnected) connected = true;
    else if (connected) { dispose(); return; }
    if (!dirty) return;
    if (now - last < FRAME_MS) { raf = requestAnimationFrame(frame); return; }
    last = now; dirty = false;
    layout();
    wrap.dataset.frames = String(Number(wrap.dataset.frames) + 1);
    wrap.dataset.runs = String(views.length);
    views.forEach((v, i) => {
      draw(v.canvas, store, i, model);
      const r = store.runs[i];
      const n = r ? r.events.filter((e) => e.kind === "donation").length : 0;
      const first = r && r.events.find((e) => e.kind === "donation");
      v.evs.textContent = (first ? `buffers reused by donation at ${n} steps: ${first.label}` : "") +
        (r && r.events.some((e) => e.kind === "stop") ? " stopped" : "");
    });
  }
  const invalidate = () => { dirty = true; if (!raf) raf = requestAnimationFrame(frame); };

  function onMsg(msg) {
    wrap.dataset.samples = String(state.n);
    if (msg.kind === "stopping") { acked = true; status.textContent = "stopping…"; }
    invalidate();
  }
  const onChange = () => { header(); invalidate(); };
  // Stop: ask Python (it sets an Event the run loop checks). A kernel busy in the cell only
  // reads that message after the cell; with no answer soon, interrupt the kernel instead
  // (the run loop turns KeyboardInterrupt into a clean, partial report).
  let acked = false;
  let stopTimer = 0;
  const onStop = () => {
    acked = false;
    model.send({ kind: "stop" });
    status.textContent = "stop requested";
    stopTimer = setTimeout(() => {
      stopTimer = 0;
      const phase = model.get("phase") || "";
      if (acked || !(phase === "running" || phase === "compiling")) return;
      const kernel = model.widget_manager && model.widget_manager.kernel;
      if (kernel && typeof kernel.interrupt === "function") {
        status.textContent = "interrupting the kernel";
        kernel.interrupt().catch(() => { status.textContent = "could not interrupt the kernel"; });
      }
    }, 400);
  };
  stop.addEventListener("click", onStop);
  state.views.add(onMsg);
  for (const k of ["change:runs", "change:lanes", "change:phase", "change:title"]) model.on(k, onChange);
  const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(invalidate) : null;
  if (ro) ro.observe(wrap);
  header(); invalidate();

  let disposed = false;
  function dispose() {
    if (disposed) return;
    disposed = true;
    state.views.delete(onMsg);
    for (const k of ["change:runs", "change:lanes", "change:phase", "change:title"]) model.off(k, onChange);
    if (raf) cancelAnimationFrame(raf);
    if (stopTimer) clearTimeout(stopTimer);
    stop.removeEventListener("click", onStop);
    if (ro) ro.disconnect();
  }
  return dispose;
}

/** On model creation (displayed or not): keep its messages, and let the graph view find it. */
function initialize({ model }) {
  const reg = (window.__jaxvizLive = window.__jaxvizLive || {});
  const state = newState(model);
  const entry = { model, render, state };
  let tok = "";
  const link = () => {
    if (tok && reg[tok] === entry) delete reg[tok];
    tok = model.get("live_token") || "";
    if (tok) reg[tok] = entry;
  };
  link();
  model.on("change:live_token", link);
  return () => {
    model.off("change:live_token", link);
    if (tok && reg[tok] === entry) delete reg[tok];
    model.off("msg:custom", state.onMsg);
  };
}

export default { initialize, render };

// jaxviz memory chart (anywidget ESM): memory over time, while a cell or a run goes on.
// Python side: jaxviz/view/chart.py (MemoryChart); jaxviz/schema.py declares the traits and
// messages below as TypedDicts. All text goes in via textContent.
// Self-contained: everything a view draws comes through its own model (traits and custom
// messages on the widget's comm), never through another output of the page, so it works
// where each output lives in its own iframe (Colab, VS Code). `initialize` keeps every
// message in one store per model, views or not; a view made late draws everything. The
// saved copy (jaxviz/view/html.py chart_fragment) mounts this same `render` on an in-page
// model and replays the saved messages.

/**
 * @typedef {{id: string, label: string, source: string}} Lane
 * @typedef {{label: string, xla_peak: number|null, baseline: Object<string, number>,
 *            step: number, steps: number, summary: string}} RunInfo
 * @typedef {{t: number, kind: string, label: string}} RunEvent
 * @typedef {{t: number, name: string, line: number, file: string, donates?: boolean}} CallMark
 * @typedef {{id: number, born: number, type: string, nbytes: number, gone: number|null,
 *            deleted: boolean, name?: string}} ArrayEntry   (name: "params['w1']", the cell's global holding it at its end)
 * Messages from Python:
 *   {kind: "samples", run, n} + [Float64 (n,3): t, lane, bytes]
 *   {kind: "steps", run, n}   + [Float64 (n,2): t start, seconds]
 *   {kind: "events", run, events: RunEvent[]}
 *   {kind: "marks", run, marks: CallMark[]}            (the cell's jitted calls)
 *   {kind: "arrays", run, born: ArrayEntry[], gone: ArrayEntry[], dropped}
 *   {kind: "stopping"}        (the Stop click arrived)
 * Message to Python: {kind: "stop"} (the Stop button)
 */

import { fmtBytes } from "../graph/format.js";

const LANE_H = 96;
const PAD_L = 64; // the bytes axis
const PAD_B = 34; // the seconds axis and its title
const MARKS_H = 12; // the strip of call marks above the lanes
const COMPUTING_COLOR = "#2a9d8f"; // the bar of outputs still being computed, under the marks
const FRAME_MS = 33; // <= 30 frames per second
const RUN_COLORS = ["#3b74d9", "#e07b00", "#2a9d55", "#b04fc0"];

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

// Colours from JupyterLab's theme variables (light and dark), with fallbacks for a plain page
// that follow the reader's colour scheme.
const CSS = `
.jvm{--jvm-fg:var(--jp-ui-font-color1,#1f1f1f);--jvm-muted:var(--jp-ui-font-color2,#4d4d4d);
--jvm-line:var(--jp-border-color2,#d9d9d9);--jvm-bg:transparent;
--jvm-panel:var(--jp-layout-color2,#f3f3f3);
font:12px var(--jp-ui-font-family,sans-serif);color:var(--jvm-fg);background:var(--jvm-bg);max-width:1100px;position:relative}
@media (prefers-color-scheme:dark){.jvm:not([data-jp]){--jvm-fg:var(--jp-ui-font-color1,#e6e6e6);
--jvm-muted:var(--jp-ui-font-color2,#b8b8b8);--jvm-line:var(--jp-border-color2,#4a4a4a);--jvm-panel:var(--jp-layout-color2,#2b2b2b)}}
.jvm-head{display:flex;gap:8px;align-items:center;margin-bottom:4px}
.jvm-title{font-weight:600}
.jvm-bar{flex:1;height:6px;background:var(--jvm-line);border-radius:3px;overflow:hidden;min-width:80px}
.jvm-fill{height:100%;width:0;background:#3b74d9;transition:width .1s}
.jvm-bar.busy .jvm-fill{width:30%;animation:jvm-slide 1.2s infinite linear}
@keyframes jvm-slide{from{margin-left:-30%}to{margin-left:100%}}
.jvm-legend{display:flex;flex-wrap:wrap;gap:12px;color:var(--jvm-muted);margin:2px 0}
.jvm-key{display:inline-flex;align-items:center;gap:4px}
.jvm-sw{display:inline-block;width:14px;height:3px;border-radius:1px}
.jvm-sw.dash{height:0;border-top:2px dashed #d08a2a}
.jvm-sw.mark{width:2px;height:10px;background:var(--jvm-muted)}
.jvm-rlabel{font-weight:600}
.jvm-sum,.jvm-lanes,.jvm-hint{color:var(--jvm-muted);min-height:1em}
.jvm-idle{color:var(--jvm-muted);padding-left:64px;margin:-2px 0 4px}
.jvm canvas{width:100%;display:block;cursor:crosshair}
.jvm button{font-size:12px}
.jvm-tip{position:absolute;pointer-events:none;background:var(--jvm-panel);color:var(--jvm-fg);
border:1px solid var(--jvm-line);border-radius:3px;padding:2px 6px;white-space:pre;z-index:2}
.jvm-alive table{border-collapse:collapse;margin-top:4px}
.jvm .jvm-alive table th,.jvm .jvm-alive table td{border:0;border-bottom:1px solid var(--jvm-line);padding:1px 8px;text-align:left;color:var(--jvm-fg)}
.jvm .jvm-alive table td.num,.jvm .jvm-alive table th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.jvm-alive-head{display:flex;align-items:center;gap:8px}.jvm-alive-close{margin-left:auto;padding:0 6px}
.jvm-group{cursor:pointer}.jvm-group:hover{background:var(--jvm-panel)}.jvm-name{font-family:var(--jp-code-font-family,monospace)}
.jvm-member td:first-child{padding-left:24px;color:var(--jvm-muted);white-space:pre}.jvm-member[hidden],.jvm-group[hidden]{display:none}
.jvm-more{margin-top:4px}.jvm-types{color:var(--jvm-muted)}
`;

/** The state of one model: samples per run and lane, steps, events, call marks, arrays. */
export function createStore() {
  /** per run: {lanes: Map<laneIndex, {t: number[], v: number[]}>, steps: number[][], events: RunEvent[], tmax} */
  const runs = [];
  const get = (i) => (runs[i] ||= { lanes: new Map(), steps: [], events: [], tmax: 0 });
  const store = {
    runs,
    /** @type {CallMark[]} */
    marks: [],
    /** [t, 1 | 0]: outputs of the calls still being computed from t (1), or none (0) */
    computing: [],
    /** @type {Map<number, ArrayEntry>} */
    arrays: new Map(),
    dropped: 0,
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
    addMarks(run, marks) {
      const r = get(run);
      for (const m of marks) { store.marks.push(m); if (m.t > r.tmax) r.tmax = m.t; }
    },
    addComputing(run, changes) {
      const r = get(run);
      for (const ch of changes) { store.computing.push(ch); if (ch[0] > r.tmax) r.tmax = ch[0]; }
    },
    addArrays(msg) {
      for (const a of msg.born || []) store.arrays.set(a.id, { ...a });
      for (const a of msg.gone || []) {
        const cur = store.arrays.get(a.id);
        if (cur) { cur.gone = a.gone; cur.deleted = a.deleted; }
      }
      store.dropped = msg.dropped || 0;
    },
  };
  return store;
}

/** The spans [from, to] in which outputs of the cell's calls were still being computed,
 * from the sampler's changes ([t, 1] from, [t, 0] until); one still open ends at `tmax`. */
export function computingSpans(changes, tmax) {
  const out = [];
  let from = null;
  for (const [t, on] of changes) {
    if (on && from == null) from = t;
    else if (!on && from != null) { out.push([from, t]); from = null; }
  }
  if (from != null) out.push([from, Math.max(tmax, from)]);
  return out;
}

/** The arrays alive at `t` seconds (seen by then, not yet gone), largest first. */
export function aliveAt(arrays, t) {
  const out = [];
  for (const a of arrays.values ? arrays.values() : arrays) {
    if (a.born <= t && (a.gone == null || a.gone > t)) out.push(a);
  }
  return out.sort((a, b) => b.nbytes - a.nbytes || a.id - b.id);
}

/** The last call mark at or before `t` (marks in time order), or null. */
export function markBefore(marks, t) {
  let lo = 0, hi = marks.length - 1, best = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (marks[mid].t <= t) { best = mid; lo = mid + 1; } else hi = mid - 1;
  }
  return best < 0 ? null : marks[best];
}

/** The marks within `px` pixels of x, for a hover: {name: count} and the nearest one. */
export function marksNear(marks, t, secondsPerPx, px = 4) {
  const near = marks.filter((m) => Math.abs(m.t - t) <= px * secondsPerPx);
  if (!near.length) return null;
  const nearest = near.reduce((a, b) => (Math.abs(b.t - t) < Math.abs(a.t - t) ? b : a));
  const counts = {};
  for (const m of near) counts[m.name] = (counts[m.name] || 0) + 1;
  return { nearest, counts, n: near.length };
}

/**
 * The cell's donated (deleted while referenced) arrays, grouped at the call that released
 * them: the last call mark before the sampler saw them gone. [{t, n, bytes, call}]; none
 * when no call of the cell donates (an array deleted otherwise is no donation).
 */
export function donations(store) {
  // only in a cell that called a donating function (its marks say; a chart saved before
  // they said it counts every array deleted while referenced)
  if (store.marks.some((m) => "donates" in m) && !store.marks.some((m) => m.donates)) return [];
  const at = new Map();
  for (const a of store.arrays.values()) {
    if (!a.deleted || a.gone == null) continue;
    const m = markBefore(store.marks, a.gone);
    const t = m ? m.t : a.gone;
    const d = at.get(t) || { t, n: 0, bytes: 0, call: m };
    d.n += 1; d.bytes += a.nbytes;
    at.set(t, d);
  }
  return [...at.values()].sort((p, q) => p.t - q.t);
}

/** Round axis ticks for 0..vmax: [0, step, 2 step, ...], at most ~`n` of them. */
export function niceTicks(vmax, n = 3) {
  if (!(vmax > 0)) return [0];
  const raw = vmax / n;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * p).find((s) => s >= raw) || raw;
  const out = [];
  for (let v = 0; v <= vmax * 1.0001; v += step) out.push(v);
  return out;
}

/** Byte ticks at round values of a binary unit: 0, 64 MiB, 128 MiB...; whole bytes, each
 * label once (an axis up to 1 B reads "0 B, 1 B", never "0 B, 1 B, 1 B"). */
export function byteTicks(vmax, n = 3) {
  if (!(vmax > 0)) return [0];
  const unit = 1024 ** Math.max(0, Math.floor(Math.log(vmax) / Math.log(1024)));
  const out = [], seen = new Set();
  for (const t of niceTicks(vmax / unit, n).map((v) => v * unit)) {
    if (unit === 1 && t !== Math.round(t)) continue;
    const label = fmtBytes(t);
    if (!seen.has(label)) { seen.add(label); out.push(t); }
  }
  return out;
}

/** `at t`: where a mark or an array's call came from, "line 7" or "util.py:12". */
export function where(m) {
  if (!m) return "";
  if (!m.file) return m.line ? `line ${m.line}` : "";
  return `${m.file.split("/").pop()}:${m.line}`;
}

/** The chart's colours, read from the page's theme (so dark themes get light text). */
function colors(wrap) {
  const cs = getComputedStyle(wrap);
  const v = (k, d) => cs.getPropertyValue(k).trim() || d;
  return { fg: cs.color || "#1f1f1f", muted: v("--jvm-muted", "#4d4d4d"), line: v("--jvm-line", "#d9d9d9") };
}

/** Readings of two device lanes this close, a share of their peak, are drawn as one: less than
 * a pixel of a lane's height (the default device also holds the session's few scalars). */
export const SAME_SHARE = 0.005;

/**
 * The lanes a chart draws and the ones it folds: a device lane on which no run ever read a
 * byte above zero (seven idle CPU devices of eight) folds into one line; device lanes whose
 * readings are the same in every run (one SPMD program's shards: each device holds the same
 * bytes; to within SAME_SHARE of their peak) fold into one lane, drawn once for each of them
 * ("cpu:0-7 live JAX arrays, each"); a device whose readings differ keeps its own. Before a
 * device lane's first reading only its source's first lane is drawn (with the RSS).
 * Returns {shown: lane indices drawn, idle: labels, groups: Map(shown index -> the lane indices
 * it stands for, 2 or more)}.
 * @param {Lane[]} lanes
 * @param {{lanes: Map<number, {v: number[]}>}[]} runs   the store's runs
 */
export function splitLanes(lanes, runs) {
  const seen = (li) => runs.some((r) => r && r.lanes.has(li));
  const peak = lanes.map((_, li) => {
    let m = 0;
    for (const r of runs) { const s = r && r.lanes.get(li); if (s) for (const x of s.v) if (x > m) m = x; }
    return m;
  });
  const drawn = [], idle = [];
  lanes.forEach((lane, li) => {
    if (lane.source !== "rss" && seen(li) && !(peak[li] > 0)) idle.push(lane.id || lane.label);
    else drawn.push(li);
  });
  // nothing on any device: the first lane stays, flat, with its axis
  if (!drawn.length && lanes.length) { drawn.push(0); idle.shift(); }
  const shown = [], groups = new Map();
  for (const li of drawn) {
    // a device lane before its first reading: drawn only as its source's first (one lane, not
    // eight, at a cell's start, until the readings say which fold)
    if (lanes[li].source !== "rss" && !seen(li) && shown.some((k) => lanes[k].source === lanes[li].source)) continue;
    const rep = lanes[li].source === "rss" || !seen(li) ? undefined
      : shown.find((k) => lanes[k].source === lanes[li].source && seen(k)
        && sameReadings(runs, k, li, SAME_SHARE * Math.max(peak[k], peak[li])));
    if (rep === undefined) { shown.push(li); continue; }
    if (!groups.has(rep)) groups.set(rep, [rep]);
    groups.get(rep).push(li);
  }
  return { shown, idle, groups };
}

/** Whether lanes `a` and `b` read bytes at most `tol` apart at every sample of every run (the
 * samples both have so far: a message may end between two lanes of one reading). */
function sameReadings(runs, a, b, tol) {
  return runs.every((r) => {
    const x = r && r.lanes.get(a), y = r && r.lanes.get(b);
    if (!x || !y) return !x && !y;
    const n = Math.min(x.v.length, y.v.length);
    for (let i = 0; i < n; i++) if (Math.abs(x.v[i] - y.v[i]) > tol) return false;
    return true;
  });
}

/** The devices of a folded lane: "cpu:0-7" (a run of 3 or more of one platform's
 * numbers), else "cpu:0, cpu:2", "cpu:0 … cpu:9 (6 devices)". */
export function devicesText(ids) {
  if (ids.length < 3) return ids.join(", ");
  const m = ids.map((id) => /^(.*):(\d+)$/.exec(id));
  if (m.every((x) => x && x[1] === m[0][1])) {
    const n = m.map((x) => Number(x[2]));
    if (n.every((k, i) => !i || k === n[i - 1] + 1)) return `${m[0][1]}:${n[0]}-${n[n.length - 1]}`;
  }
  return ids.length <= 3 ? ids.join(", ") : `${ids[0]} … ${ids[ids.length - 1]} (${ids.length} devices)`;
}

/** A folded lane's label: "cpu:0-7 live JAX arrays, each" (its first lane's, for them all). */
export function groupLabel(lanes, members) {
  const first = lanes[members[0]];
  const ids = members.map((li) => lanes[li].id || lanes[li].label);
  const what = first.id && first.label.startsWith(first.id) ? first.label.slice(first.id.length) : ` ${first.label}`;
  return `${devicesText(ids)}${what}, each`;
}

/** The legend's words for the folded lanes: "cpu:1-7: one lane for 7 devices that held the
 * same bytes throughout (...); cpu:0 differs: a lane of its own". */
export function foldedText(lanes, split) {
  if (!split.groups.size) return "";
  const ids = (g) => devicesText(g.map((li) => lanes[li].id || lanes[li].label));
  const parts = [...split.groups.values()].map((g) => `${ids(g)}: one lane for ${g.length} devices that held the same bytes throughout (each device's own, to within ${SAME_SHARE * 100}% of its peak)`);
  const apart = split.shown.filter((li) => !split.groups.has(li) && lanes[li].source !== "rss");
  if (apart.length) parts.push(`${ids(apart)} ${apart.length > 1 ? "differ: a lane each" : "differs: a lane of its own"}`);
  return parts.join("; ");
}

/** "7 more devices: no arrays (cpu:1 … cpu:7)": the folded lanes' line. */
export function idleText(idle) {
  if (!idle.length) return "";
  const names = idle.length <= 3 ? idle.join(", ") : `${idle[0]} … ${idle[idle.length - 1]}`;
  return `${idle.length} more device${idle.length > 1 ? "s" : ""}: no arrays (${names})`;
}

function draw(canvas, store, model, c, view) {
  const all = model.get("lanes") || [];
  const infos = model.get("runs") || [];
  const dpr = window.devicePixelRatio || 1;
  // the container's width: a chart out of the layout for now (a theme loading, a hidden
  // output) is not drawn at a guessed size but when it has one again (its ResizeObserver)
  const W = canvas.clientWidth;
  if (!W) return false;
  const split = view.split || splitLanes(all, store.runs);
  const lanes = split.shown.map((li) => ({ ...all[li], li, label: split.groups.has(li) ? groupLabel(all, split.groups.get(li)) : all[li].label }));
  const H = MARKS_H + Math.max(lanes.length, 1) * LANE_H + PAD_B;
  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(H * dpr)) {
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    canvas.style.height = `${H}px`;
  }
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, W, H);
  // one time axis for every run (overlaid, comparable); one bytes scale per lane across runs
  const tmax = Math.max(...store.runs.map((x) => (x ? x.tmax : 0)), 1e-3);
  const X = (t) => PAD_L + (t / tmax) * (W - PAD_L - 8);
  view.X = X; view.tmax = tmax; view.W = W;
  g.font = "11px sans-serif"; g.textBaseline = "middle";
  // call marks (the cell's jitted calls), in a strip above the lanes
  if (store.marks.length) {
    g.strokeStyle = c.muted; g.globalAlpha = store.marks.length > W / 2 ? 0.35 : 0.8; g.beginPath();
    for (const m of store.marks) { const x = Math.round(X(m.t)) + 0.5; g.moveTo(x, 1); g.lineTo(x, MARKS_H - 1); }
    g.stroke(); g.globalAlpha = 1;
  }
  // when the device was still computing the calls' outputs: a bar under the marks
  g.fillStyle = COMPUTING_COLOR;
  for (const [a, b] of computingSpans(store.computing, tmax)) {
    g.fillRect(X(a), MARKS_H - 4, Math.max(X(b) - X(a), 1), 3);
  }
  lanes.forEach((lane, row) => {
    const li = lane.li;
    const y0 = MARKS_H + row * LANE_H;
    let vmax = 0;
    store.runs.forEach((x) => {
      const s = x && x.lanes.get(li);
      if (s) for (const v of s.v) if (v > vmax) vmax = v;
    });
    const xlas = infos.map((info) => {
      const base = (info.baseline || {})[lane.id] || 0;
      return lane.source !== "rss" && info.xla_peak != null ? base + info.xla_peak : null;
    });
    for (const x of xlas) if (x != null && x > vmax) vmax = x;
    const ticks = byteTicks(vmax * 1.05 || 1);
    const top = Math.max(ticks[ticks.length - 1], vmax * 1.05) || 1;
    const Y = (v) => y0 + LANE_H - 4 - (v / top) * (LANE_H - 20);
    // the bytes axis: absolute values, ticks labelled
    g.strokeStyle = c.line; g.fillStyle = c.muted; g.textAlign = "right"; g.beginPath();
    for (const v of ticks) { const y = Math.round(Y(v)) + 0.5; g.moveTo(PAD_L, y); g.lineTo(W - 8, y); g.fillText(fmtBytes(v), PAD_L - 4, y); }
    g.stroke(); g.textAlign = "left";
    // step boundaries of each run, faint
    store.runs.forEach((r, ri) => {
      if (!r || r.steps.length < 2 || (W - PAD_L) / r.steps.length < 4) return;
      g.strokeStyle = RUN_COLORS[ri % RUN_COLORS.length]; g.globalAlpha = 0.15; g.beginPath();
      for (const [t] of r.steps) { const x = Math.round(X(t)) + 0.5; g.moveTo(x, y0 + 14); g.lineTo(x, y0 + LANE_H - 4); }
      g.stroke(); g.globalAlpha = 1;
    });
    // XLA's peak estimate of each run, dashed
    xlas.forEach((xla) => {
      if (xla == null) return;
      g.strokeStyle = "#d08a2a"; g.setLineDash([4, 3]); g.beginPath();
      g.moveTo(PAD_L, Y(xla)); g.lineTo(W - 8, Y(xla)); g.stroke(); g.setLineDash([]);
    });
    // every run's curve on the same axes
    const parts = [];
    store.runs.forEach((r, ri) => {
      const s = r && r.lanes.get(li);
      if (!s || !s.t.length) return;
      g.strokeStyle = RUN_COLORS[ri % RUN_COLORS.length]; g.lineWidth = 1.5; g.beginPath();
      for (let i = 0; i < s.t.length; i++) { const x = X(s.t[i]), y = Y(s.v[i]); i ? g.lineTo(x, y) : g.moveTo(x, y); }
      g.stroke(); g.lineWidth = 1;
      const peak = Math.max(...s.v);
      parts.push(`${infos.length > 1 ? (infos[ri] || {}).label + ": " : ""}now ${fmtBytes(s.v[s.v.length - 1])}, peak ${fmtBytes(peak)}, at start ${fmtBytes(s.v[0])}`);
    });
    g.fillStyle = c.fg;
    g.fillText(`${lane.label}   ${parts.join("   ")}`, PAD_L + 4, y0 + 7);
    // the cell's donated inputs, released at the call that donated them
    if (row === 0 && view.donated.length) {
      g.fillStyle = "#c0392b";
      for (const d of view.donated) {
        const x = X(d.t);
        g.beginPath(); g.moveTo(x - 4, y0 + 14); g.lineTo(x + 4, y0 + 14); g.lineTo(x, y0 + 20); g.fill();
      }
    }
    // donation events of each run: markers on the curve's lane
    store.runs.forEach((r, ri) => {
      if (!r) return;
      g.fillStyle = RUN_COLORS[ri % RUN_COLORS.length];
      for (const e of r.events) {
        if (e.kind !== "donation") continue;
        const x = X(e.t);
        g.beginPath(); g.moveTo(x - 3, y0 + 14); g.lineTo(x + 3, y0 + 14); g.lineTo(x, y0 + 19); g.fill();
      }
    });
  });
  // the seconds axis
  const yb = MARKS_H + lanes.length * LANE_H;
  g.strokeStyle = c.line; g.fillStyle = c.muted; g.textAlign = "center"; g.beginPath();
  g.moveTo(PAD_L, yb + 0.5); g.lineTo(W - 8, yb + 0.5);
  for (const t of niceTicks(tmax, 6)) {
    const x = Math.round(X(t)) + 0.5;
    g.moveTo(x, yb); g.lineTo(x, yb + 4);
    if (x <= W - 24) g.fillText(`${+t.toPrecision(3)} s`, x, yb + 11); // (not clipped at the edge)
  }
  g.stroke(); g.textAlign = "right";
  g.fillText("time: seconds since the start →", W - 8, yb + 26); g.textAlign = "left";
  g.fillText("bytes ↑", 4, MARKS_H + 7);
  // the moment picked by a click
  if (view.picked != null) {
    const x = Math.round(X(view.picked)) + 0.5;
    g.strokeStyle = c.fg; g.setLineDash([2, 2]); g.beginPath(); g.moveTo(x, MARKS_H); g.lineTo(x, yb); g.stroke(); g.setLineDash([]);
  }
  return true;
}

/**
 * The model's store and message listeners, shared by every view of the model. anywidget hands
 * initialize and each render a different proxy of one model, so the state made by initialize
 * is found by the model's live_token, in this module (never through the page's `window`).
 */
const states = new Map();
const byModel = new WeakMap();
function newState(model) {
  const s = { store: createStore(), n: 0, views: new Set(), onMsg: null };
  s.onMsg = (msg, buffers) => {
    if (!msg || !msg.kind) return;
    if (msg.kind === "samples" && buffers && buffers[0]) { s.store.samples(msg.run, f64(buffers[0])); s.n += msg.n || 0; }
    else if (msg.kind === "steps" && buffers && buffers[0]) s.store.steps(msg.run, f64(buffers[0]));
    else if (msg.kind === "events") s.store.events(msg.run, msg.events || []);
    else if (msg.kind === "marks") s.store.addMarks(msg.run, msg.marks || []);
    else if (msg.kind === "computing") s.store.addComputing(msg.run, msg.changes || []);
    else if (msg.kind === "arrays") s.store.addArrays(msg);
    for (const v of [...s.views]) v(msg);
  };
  model.on("msg:custom", s.onMsg);
  return s;
}
function stateOf(model) {
  const tok = model.get("live_token") || "";
  if (tok && states.has(tok)) return states.get(tok);
  if (!byModel.has(model)) byModel.set(model, newState(model));
  return byModel.get(model);
}

/** Groups of the "alive at" list shown before the rest fold under "N more". */
export const GROUPS_SHOWN = 12;
/** Arrays listed under an opened group. */
const MEMBERS_SHOWN = 20;

/** The global an array's path starts from: `params` of `params['blocks'][2]['w1']`. */
const rootName = (name) => /^[^[.]*/.exec(name)[0] || name;

/**
 * The arrays alive at a moment, grouped: by the global whose path names them (`params`,
 * jaxviz names an array by the cell's global holding it when the cell ended), else by the
 * call that made them (the call before each was first seen); largest group first.
 * @param {ArrayEntry[]} alive
 * @param {CallMark[]} marks   in time order
 * @returns {{key:string, label:string, by:string, arrays:ArrayEntry[], bytes:number}[]}
 */
export function aliveGroups(alive, marks) {
  const groups = new Map();
  for (const a of alive) {
    let key, label, by;
    if (a.name) { key = "n:" + rootName(a.name); label = rootName(a.name); by = "name"; }
    else {
      const m = markBefore(marks, a.born);
      label = m ? `made by ${m.name} (${where(m)})` : "before the first call";
      key = "c:" + label; by = "call";
    }
    if (!groups.has(key)) groups.set(key, { key, label, by, arrays: [], bytes: 0 });
    const g = groups.get(key);
    g.arrays.push(a); g.bytes += a.nbytes;
  }
  const out = [...groups.values()];
  for (const g of out) {
    g.arrays.sort((x, y) => y.nbytes - x.nbytes || x.id - y.id);
    if (g.by === "name" && g.arrays.length === 1) g.label = g.arrays[0].name;   // one array: its whole path
  }
  return out.sort((x, y) => y.bytes - x.bytes || (x.key < y.key ? -1 : 1));
}

/** An array's state at the end: "alive at the end", "freed at 1.250 s", "donated/deleted at ...". */
const stateOf_ = (a) => (a.gone == null ? "alive at the end" : `${a.deleted ? "donated/deleted" : "freed"} at ${a.gone.toFixed(3)} s`);

/** A group's arrays by type: "float32[512,512] ×8, float32[512] ×4" (the three most common). */
export function typesOf(arrays) {
  const types = new Map();
  for (const a of arrays) types.set(a.type, (types.get(a.type) || 0) + 1);
  const parts = [...types].sort((x, y) => y[1] - x[1]).slice(0, 3).map(([t, n]) => (n > 1 ? `${t} ×${n}` : t));
  return parts.join(", ") + (types.size > 3 ? `, ${types.size - 3} more types` : "");
}

/** The "alive at" list: its head (with a close button, `onClose`), its groups, folded. */
function aliveTable(store, t, onClose) {
  const box = el("div", "jvm-alive");
  const alive = aliveAt(store.arrays, t);
  const total = alive.reduce((n, a) => n + a.nbytes, 0);
  const head = el("div", "jvm-alive-head");
  const close = el("button", "jvm-alive-close", "✕");
  close.title = "close (Escape)";
  close.setAttribute("aria-label", "close the list");
  close.addEventListener("click", onClose);
  head.append(el("span", null,
    `${alive.length} arrays alive at ${t.toFixed(3)} s, ${fmtBytes(total)} in all` +
    (store.dropped ? ` (the list stopped after the first arrays; ${store.dropped} later ones are not listed)` : "")), close);
  box.append(head);
  if (!alive.length) return box;
  const groups = aliveGroups(alive, store.marks);
  const table = el("table");
  const hr = el("tr");
  for (const [k, cls] of [["by the name that holds them, else the call that made them", null], ["arrays", null], ["bytes", "num"]]) hr.append(el("th", cls, k));
  table.append(hr);
  const rows = [];
  for (const g of groups) {
    const tr = el("tr", "jvm-group");
    const open = el("span", "jvm-open", g.arrays.length > 1 || g.by === "call" ? "▸ " : "  ");
    const what = el("td"); what.append(open, el("span", g.by === "name" ? "jvm-name" : null, g.label));
    tr.append(what, el("td", "jvm-types", typesOf(g.arrays)), el("td", "num", fmtBytes(g.bytes)));
    tr.title = g.arrays.length === 1 ? `${g.arrays[0].type}, ${stateOf_(g.arrays[0])}` : "click to list its arrays";
    const members = [];
    tr.addEventListener("click", () => {
      if (!members.length) {
        let after = tr;
        for (const a of g.arrays.slice(0, MEMBERS_SHOWN)) {
          const m = el("tr", "jvm-member");
          m.append(el("td", null, a.name || "(no name)"), el("td", "jvm-types", `${a.type}, ${stateOf_(a)}`), el("td", "num", fmtBytes(a.nbytes)));
          after.after(m); after = m; members.push(m);
        }
        if (g.arrays.length > MEMBERS_SHOWN) {
          const m = el("tr", "jvm-member"); m.append(el("td", null, `and ${g.arrays.length - MEMBERS_SHOWN} smaller arrays`));
          after.after(m); members.push(m);
        }
        open.textContent = "▾ ";
        return;
      }
      const hide = !members[0].hidden;
      for (const m of members) m.hidden = hide;
      open.textContent = hide ? "▸ " : "▾ ";
    });
    table.append(tr);
    rows.push(tr);
  }
  box.append(table);
  const folded = rows.slice(GROUPS_SHOWN);
  if (folded.length) {
    for (const r of folded) r.hidden = true;
    const n = groups.slice(GROUPS_SHOWN).reduce((k, g) => k + g.arrays.length, 0);
    const more = el("button", "jvm-more", `${folded.length} more groups (${n} arrays)`);
    more.addEventListener("click", () => { for (const r of folded) r.hidden = false; more.remove(); });
    box.append(more);
  }
  return box;
}

function render({ model, el: root }) {
  const style = el("style"); style.textContent = CSS;
  const wrap = el("div", "jvm");
  if (root.closest && root.closest("[data-jp-theme-name]")) wrap.dataset.jp = "1";
  // what a test (or a person with devtools) can read: samples received, runs shown, phase
  wrap.dataset.samples = "0"; wrap.dataset.frames = "0"; wrap.dataset.runs = "0";
  const head = el("div", "jvm-head");
  const title = el("span", "jvm-title");
  const bar = el("div", "jvm-bar"); const fill = el("div", "jvm-fill"); bar.appendChild(fill);
  const status = el("span", "jvm-status");
  const stop = el("button", null, "Stop");
  head.append(title, bar, status, stop);
  const legend = el("div", "jvm-legend");
  const canvas = document.createElement("canvas");
  const sums = el("div", "jvm-sum");
  const idleLine = el("div", "jvm-idle"); idleLine.hidden = true;
  const evs = el("div", "jvm-lanes");
  const hint = el("div", "jvm-hint", "Click the chart to list the arrays alive at that moment; hover a mark for its call (a mark is the call's dispatch, not its run on the device).");
  const picked = el("div", "jvm-picked");
  const tip = el("div", "jvm-tip"); tip.hidden = true;
  wrap.append(head, legend, canvas, idleLine, sums, evs, hint, picked, tip);
  root.append(style, wrap);

  const state = stateOf(model);
  const store = state.store;
  wrap.dataset.samples = String(state.n);
  const view = { X: null, tmax: 1, W: 400, picked: null, donated: [], split: null };
  let dirty = true;
  let last = 0;
  let raf = 0;

  function layout() {
    const runs = model.get("runs") || [];
    legend.replaceChildren();
    runs.forEach((r, i) => {
      const sw = el("span", "jvm-sw"); sw.style.background = RUN_COLORS[i % RUN_COLORS.length];
      const key = el("span", "jvm-key"); key.append(sw, el("span", "jvm-rlabel", r.label || `run ${i + 1}`));
      legend.append(key);
    });
    if (runs.some((r) => r.xla_peak != null)) {
      const key = el("span", "jvm-key"); key.append(el("span", "jvm-sw dash"), el("span", null, "XLA's peak estimate (above the run's start)"));
      legend.append(key);
    }
    if (store.marks.length) {
      const key = el("span", "jvm-key"); key.append(el("span", "jvm-sw mark"), el("span", null, `a jitted call (${store.marks.length}), marked when Python dispatched it: the device may run it later`));
      legend.append(key);
    }
    if (store.computing.length) {
      const sw = el("span", "jvm-sw"); sw.style.background = COMPUTING_COLOR;
      const key = el("span", "jvm-key");
      key.append(sw, el("span", null, "the device still computing the calls' outputs (seen without waiting for them)"));
      legend.append(key);
    }
    if (view.donated.length) {
      const key = el("span", "jvm-key"); const tri = el("span", null, "▼"); tri.style.color = "#c0392b";
      key.append(tri, el("span", null, "donated inputs released (at the call before they were seen gone)"));
      legend.append(key);
    }
    const folded = view.split ? foldedText(model.get("lanes") || [], view.split) : "";
    if (folded) legend.append(el("span", "jvm-key jvm-folded", folded));
    if (store.runs.some((r) => r && r.events.some((e) => e.kind === "donation"))) {
      legend.append(el("span", "jvm-key", "▼ buffers reused by donation"));
    }
    // (the arrays of a moment are known where the sampler logged them: a cell's own chart)
    hint.hidden = !(store.arrays.size || store.marks.length);
    sums.textContent = runs.filter((r) => r.summary).map((r) => `${r.label}: ${r.summary}`).join("\n");
    sums.style.whiteSpace = "pre-line";
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
    const live = phase === "compiling" || phase === "running";
    stop.disabled = !live;
    stop.hidden = !live && !phase.startsWith("stopped");
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
    view.donated = donations(store);
    view.split = splitLanes(model.get("lanes") || [], store.runs);
    wrap.dataset.donated = String(view.donated.reduce((n, d) => n + d.n, 0));
    layout();
    wrap.dataset.frames = String(Number(wrap.dataset.frames) + 1);
    wrap.dataset.runs = String((model.get("runs") || []).length);
    wrap.dataset.marks = String(store.marks.length);
    wrap.dataset.computing = JSON.stringify(computingSpans(store.computing, Math.max(...store.runs.map((x) => (x ? x.tmax : 0)), 0)));
    wrap.dataset.arrays = String(store.arrays.size);
    if (!draw(canvas, store, model, colors(wrap), view)) { dirty = true; return; }   // no size yet: the ResizeObserver calls again
    idleLine.textContent = idleText(view.split.idle);
    idleLine.hidden = !idleLine.textContent;
    wrap.dataset.lanes = String(view.split.shown.length);
    wrap.dataset.folded = [...view.split.groups.values()].map((g) => g.length).join(" ");
    wrap.dataset.width = String(canvas.width);
    const notes = [];
    store.runs.forEach((r, i) => {
      const don = r ? r.events.filter((e) => e.kind === "donation") : [];
      const label = ((model.get("runs") || [])[i] || {}).label || "";
      if (don.length) notes.push(`${label}: buffers reused by donation at ${don.length} steps: ${don[0].label}`);
      if (r && r.events.some((e) => e.kind === "stop")) notes.push(`${label}: stopped`);
    });
    evs.textContent = notes.join("\n"); evs.style.whiteSpace = "pre-line";
  }
  const invalidate = () => { dirty = true; if (!raf) raf = requestAnimationFrame(frame); };

  const timeAt = (ev) => {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    if (!view.X || x < PAD_L) return null;
    return Math.max(0, ((x - PAD_L) / Math.max(view.W - PAD_L - 8, 1)) * view.tmax);
  };
  const onMove = (ev) => {
    const t = timeAt(ev);
    if (t == null) { tip.hidden = true; return; }
    const near = marksNear(store.marks, t, view.tmax / Math.max(view.W - PAD_L - 8, 1));
    const r = canvas.getBoundingClientRect(), w = wrap.getBoundingClientRect();
    const lines = [`${t.toFixed(3)} s`];
    if (near) {
      const m = near.nearest;
      lines.push(`${m.name} dispatched at ${where(m) || "?"}, ${m.t.toFixed(3)} s (when Python handed it to the device, which may run it later)`);
      if (near.n > 1) lines.push(`${near.n} calls here: ` + Object.entries(near.counts).map(([k, n]) => `${k} ×${n}`).join(", "));
    }
    const spx = view.tmax / Math.max(view.W - PAD_L - 8, 1);
    for (const d of view.donated) {
      if (Math.abs(d.t - t) <= 4 * spx) lines.push(`donated here: ${d.n} array${d.n > 1 ? "s" : ""}, ${fmtBytes(d.bytes)}` + (d.call ? ` (${d.call.name}, ${where(d.call)})` : ""));
    }
    tip.textContent = lines.join("\n");
    tip.hidden = false;
    tip.style.left = `${ev.clientX - w.left + 12}px`;
    tip.style.top = `${ev.clientY - w.top + 12 - (r.top - w.top) * 0}px`;
  };
  const onLeave = () => { tip.hidden = true; };
  const closeList = () => {
    view.picked = null;
    picked.replaceChildren();
    delete wrap.dataset.picked;
    document.removeEventListener("keydown", onKey);
    invalidate();
  };
  const onKey = (ev) => { if (ev.key === "Escape" && view.picked != null) closeList(); };
  const onClick = (ev) => {
    const t = timeAt(ev);
    if (t == null || hint.hidden) return;
    view.picked = t;
    picked.replaceChildren(aliveTable(store, t, closeList));
    wrap.dataset.picked = t.toFixed(3);
    document.addEventListener("keydown", onKey);
    invalidate();
  };
  canvas.addEventListener("mousemove", onMove);
  canvas.addEventListener("mouseleave", onLeave);
  canvas.addEventListener("click", onClick);

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
  if (ro) { ro.observe(wrap); ro.observe(canvas); }
  // a theme switch (JupyterLab sets data-jp-theme-* on <body>): redraw in its colours, and
  // again once its stylesheet has loaded (its sizes and colours settle after the attribute)
  let themeTimers = [];
  const retheme = () => {
    invalidate();
    for (const t of themeTimers) clearTimeout(t);
    themeTimers = [300, 1200].map((ms) => setTimeout(invalidate, ms));
  };
  const mo = typeof MutationObserver !== "undefined" ? new MutationObserver(retheme) : null;
  if (mo) mo.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name"] });
  header(); invalidate();

  let disposed = false;
  function dispose() {
    if (disposed) return;
    disposed = true;
    state.views.delete(onMsg);
    for (const k of ["change:runs", "change:lanes", "change:phase", "change:title"]) model.off(k, onChange);
    if (raf) cancelAnimationFrame(raf);
    if (stopTimer) clearTimeout(stopTimer);
    for (const t of themeTimers) clearTimeout(t);
    stop.removeEventListener("click", onStop);
    canvas.removeEventListener("mousemove", onMove);
    canvas.removeEventListener("mouseleave", onLeave);
    canvas.removeEventListener("click", onClick);
    document.removeEventListener("keydown", onKey);
    if (ro) ro.disconnect();
    if (mo) mo.disconnect();
  }
  return dispose;
}

/** On model creation (displayed or not): keep its messages from the start. */
function initialize({ model }) {
  const state = newState(model);
  const tok = model.get("live_token") || "";
  if (tok) states.set(tok, state);
  return () => {
    if (tok && states.get(tok) === state) states.delete(tok);
    model.off("msg:custom", state.onMsg);
  };
}

export default { initialize, render };

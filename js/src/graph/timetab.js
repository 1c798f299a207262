// The time tab (%%jaxtrace --profile): where the device time went, by source line, from the
// accelerator's own profile (payload.profile, jaxviz/view/timetab.py). The step timeline's
// verdict, each line's time per step and share with its code (a click selects its nodes in
// the graph), the top kernels with the lines each fused, achieved FLOP/s and compile times.
// The rows are pure (timeRows, kernelRows: tested in node); the panel writes text as text.
// The tab is its own: it adds its button to the tab strip and its box to the view, and
// closes itself when another tab is clicked (the shared parts are not changed for it).

import { h } from "./panels.js";
import { fmtBytes } from "./format.js";
import { resize, draw } from "./camera.js";

/**
 * Python side: jaxviz/view/timetab.py; jaxviz/schema.py's ProfileEntry.
 * @typedef {{label: string, file: string, line: number, fn: string, text: string, us: number,
 *   per_step_us: number, share: number, estimated: boolean, kernels: string[], prims: string[],
 *   trace: string, node_ids: string[], category: boolean, bytes: number, calls: number}} LineTime
 * @typedef {{name: string, module: string, kind: string, us: number, calls: number, share: number,
 *   lines: [string, number][], prims: string[], flops: number, bytes: number}} KernelTime
 * @typedef {{name: string, trace: string, calls: number, us: number, flops_per_call: number|null,
 *   flops_per_s: number|null, peak_flops_per_s: number|null}} ModuleTime
 * @typedef {{name: string, where: string, tracing_s: number, lowering_s: number, compile_s: number,
 *   total_s: number}} CompileTime
 * @typedef {{calls: number, span_us: number, busy_us: number, idle_share: number,
 *   host_per_step_us: number, verdict: string, message: string, skipped: number, spans: number[][],
 *   steps: number, step_us: number, skipped_us: number}} Timeline
 * @typedef {{name: string, platform: string, device: string, total_us: number, steps: number,
 *   attributed_share: number, events: number, lines: LineTime[], rest_us: number,
 *   kernels: KernelTime[], modules: ModuleTime[], compiles: CompileTime[], timeline: Timeline|null,
 *   node_us: Object<string, Object<string, number>>, notes: string[], step_note: string,
 *   nan_check_us: number, nan_check_calls: number, nan_check_compile_s: number, text: string}} ProfileEntry
 */

const CSS = `
.jv-timebox{flex:1;min-height:0;overflow:auto;padding:8px}.jv-timebox[hidden]{display:none}
.jv-time-verdict{font-weight:600;margin:4px 0}
.jv-time-table{border-collapse:collapse;margin:6px 0}
.jv-root .jv-time-table th,.jv-root .jv-time-table td{border:1px solid var(--jv-border);padding:2px 8px;text-align:left;vertical-align:top}
.jv-root .jv-time-table td:nth-child(-n+2),.jv-root .jv-time-table th{white-space:nowrap}
.jv-time-row[data-pickable=true],.jv-time-kernel[data-pickable=true]{cursor:pointer}
.jv-time-row:hover,.jv-time-row:focus,.jv-time-kernel:hover,.jv-time-kernel:focus{background:var(--jv-panel);outline:none}
.jv-time-cat td{color:var(--jv-fg2)}
.jv-time-code{font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:11px;white-space:pre}
.jv-time-bar{display:inline-block;height:8px;background:var(--jv-brand);vertical-align:middle;margin-right:4px}
.jv-root[data-tab=time] .jv-gt{display:none}
.jv-time-strip{display:block;width:100%;max-width:900px;height:14px;border:1px solid var(--jv-border);margin:4px 0}
.jv-time-strip rect{fill:var(--jv-brand)}
`;

const SVG = "http://www.w3.org/2000/svg";

/**
 * The calls on the device along the span (x in [0, W]): one [x, width] per call, at least
 * half a pixel wide.
 * @param {Timeline} tl
 */
export function spanRects(tl, W = 600) {
  const total = Math.max(tl.span_us || 0, 1e-9);
  return (tl.spans || []).map(([s, d]) => [(s / total) * W, Math.max(0.5, (d / total) * W)]);
}

function strip(tl) {
  const W = 600, H = 14;
  const s = document.createElementNS(SVG, "svg");
  for (const [k, v] of Object.entries({ viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", class: "jv-time-strip", role: "img", "aria-label": "the device's calls: busy (filled) and idle" })) s.setAttribute(k, v);
  for (const [x, w] of spanRects(tl, W)) {
    const r = document.createElementNS(SVG, "rect");
    for (const [k, v] of Object.entries({ x: x.toFixed(2), y: 1, width: w.toFixed(2), height: H - 2 })) r.setAttribute(k, String(v));
    s.append(r);
  }
  return s;
}

/** Microseconds as the text twin says them: 12.3 us, 4.56 ms, 1.23 s. */
export function fmtUs(us) {
  if (!Number.isFinite(us)) return "?";
  if (us >= 1e6) return `${(us / 1e6).toFixed(2)} s`;
  if (us >= 1e3) return `${(us / 1e3).toFixed(2)} ms`;
  return `${us.toFixed(1)} us`;
}

/** FLOP/s in its unit: 165.2 TFLOP/s. */
export function fmtRate(x) {
  for (const [u, k] of [["PFLOP/s", 1e15], ["TFLOP/s", 1e12], ["GFLOP/s", 1e9], ["MFLOP/s", 1e6]]) {
    if (x >= k) return `${(x / k).toFixed(1)} ${u}`;
  }
  return `${Math.round(x || 0)} FLOP/s`;
}

const pct = (x) => `${(100 * (x || 0)).toFixed(1)}%`;

/**
 * The headline: device time, steps, events and how much found a line or a named category.
 * @param {ProfileEntry} p
 */
export function headline(p) {
  if (!p.events) return `${p.name}: no op events profiled`;
  const steps = p.steps ? `, ${p.steps} step${p.steps === 1 ? "" : "s"}` : "";
  return `${p.name}: device time ${fmtUs(p.total_us)} on ${p.device || p.platform}${steps} ` +
    `(${p.events} op events; ${pct(p.attributed_share)} to a line or a named category)`;
}

/**
 * One row per line (and named category), most time first: its cells, the nodes a click
 * selects (none for a category), whether its time is partly a fused kernel's estimated split.
 * @param {ProfileEntry} p
 */
export function timeRows(p) {
  const moved = hasCollectives(p);
  return (p.lines || []).map((x) => ({
    cells: [(x.estimated ? "~" : "") + fmtUs(x.per_step_us), pct(x.share), x.label, x.text ? x.text.trim() : "", (x.prims || []).slice(0, 4).join(", "),
      ...(moved ? collectiveCells(x) : [])],
    share: x.share || 0, nodes: x.node_ids || [], trace: x.trace || "", category: !!x.category,
    line: x.line || 0, title: (x.kernels || []).length ? `kernels: ${x.kernels.join(", ")}` : "",
  }));
}

/**
 * Whether a line of `p` is a collective's own row with its bytes (a sharded program's
 * profile): the table then has its bytes and bandwidth columns, none otherwise.
 * @param {ProfileEntry} p
 */
export function hasCollectives(p) {
  return (p.lines || []).some((x) => x.bytes > 0 && x.calls > 0);
}

/**
 * A collective's row: the bytes one call moves on each device (the compiled program's shapes)
 * and the rate its device time achieved, as the text twin says them ("32.0 KiB", "0.01 GB/s");
 * empty cells for other rows.
 * @param {LineTime} x
 */
export function collectiveCells(x) {
  if (!(x.bytes > 0 && x.calls > 0)) return ["", ""];
  const rate = x.us > 0 ? `${(x.bytes / (x.us * 1e-6) / 1e9).toFixed(2)} GB/s` : "";
  return [fmtBytes(x.bytes / x.calls), rate];
}

/**
 * One row per kernel: "fusion.23: cell [3]:43, cell [3]:44 (dot_general, tanh), 1.80 ms, 41%".
 * @param {ProfileEntry} p
 */
export function kernelRows(p) {
  return (p.kernels || []).map((k) => {
    const lines = (k.lines || []).map(([label, f]) => (k.lines.length > 1 ? `${label} (~${Math.round(100 * f)}%)` : label));
    return [k.name, k.kind, lines.join(", ") || "no source", (k.prims || []).slice(0, 5).join(", "),
      fmtUs(k.us / Math.max(k.calls, 1)), String(k.calls), pct(k.share)];
  });
}

/**
 * The graph nodes of a kernel's lines (those of the listed lines whose label starts with
 * the kernel's line label, "cell [3]:5" of "cell [3]:5 (step)"), and their trace.
 * @param {ProfileEntry} p
 * @param {KernelTime} k
 * @returns {{trace: string, node_ids: string[]}}
 */
export function kernelNodes(p, k) {
  const labels = (k.lines || []).map(([label]) => label);
  let trace = "";
  const ids = [];
  for (const x of p.lines || []) {
    if (x.category || !(x.node_ids || []).length) continue;
    if (!labels.some((l) => x.label === l || x.label.startsWith(`${l} (`))) continue;
    if (trace && x.trace !== trace) continue;
    trace = x.trace;
    ids.push(...x.node_ids);
  }
  return { trace, node_ids: ids };
}

/**
 * The FLOP/s lines: "step: 165.2 TFLOP/s achieved of a 197.0 TFLOP/s peak (84%)".
 * @param {ProfileEntry} p
 */
export function rateLines(p) {
  return (p.modules || []).filter((m) => m.flops_per_s != null).map((m) => {
    const peak = m.peak_flops_per_s ? ` of a ${fmtRate(m.peak_flops_per_s)} peak (${Math.round((100 * m.flops_per_s) / m.peak_flops_per_s)}%)` : "";
    return `${m.trace || m.name}: ${fmtRate(m.flops_per_s)} achieved${peak}`;
  });
}

/**
 * What compiling cost the block: "compiling took 14.20 s; most of it step at cell [3]:9 (13.90 s)".
 * @param {ProfileEntry} p
 */
export function compileLine(p) {
  const cs = p.compiles || [];
  if (!cs.length) return "";
  const total = cs.reduce((a, c) => a + c.total_s, 0);
  const top = cs[0];
  return `compiling took ${total.toFixed(2)} s; most of it ${top.name}${top.where ? ` at ${top.where}` : ""} (${top.total_s.toFixed(2)} s)`;
}

/**
 * What the strip of busy and idle shows: the verdict's calls, "the last 24 of the step's 40
 * calls" when it left the first ones out.
 * @param {Timeline} tl
 */
export function stripLabel(tl) {
  const which = tl.skipped ? `the last ${tl.calls} of the step's ${tl.steps || tl.calls + tl.skipped} calls` : `the step's ${tl.calls} calls`;
  return `${which} on the device over ${fmtUs(tl.span_us)}: filled busy, blank idle`;
}

/**
 * jaxviz's own NaN check, apart from the user's time ("" when it did not run): "jaxviz's NaN
 * check: 31.3 us on the device (5 calls), 0.07 s compiling: in none of the times above".
 * @param {ProfileEntry} p
 */
export function ownLine(p) {
  const us = p.nan_check_us || 0, calls = p.nan_check_calls || 0, s = p.nan_check_compile_s || 0;
  if (!us && !calls && !s) return "";
  const n = calls ? ` (${calls} call${calls === 1 ? "" : "s"})` : "";
  return `jaxviz's NaN check: ${fmtUs(us)} on the device${n}, ${s.toFixed(2)} s compiling: in none of the times above`;
}

function table(head, rows, rowProps) {
  const t = h("table", { className: "jv-time-table" },
    h("thead", null, h("tr", null, ...head.map((c) => h("th", null, c)))));
  const body = h("tbody");
  rows.forEach((r, i) => body.append(h("tr", rowProps ? rowProps(r, i) : null, ...r.cells.map((c, k) => h("td", k === 3 && head[3] === "code" ? { className: "jv-time-code" } : null, c)))));
  t.append(body);
  return t;
}

/**
 * The tab's content for `p`; `onPick({trace, node_ids})` when a line's row is clicked.
 * @param {ProfileEntry} p
 * @param {function({trace: string, node_ids: string[], line: null}): void} onPick
 */
export function timePanel(p, onPick) {
  const box = h("div", { className: "jv-time" });
  box.append(h("div", { className: "jv-title" }, headline(p)));
  const tl = p.timeline;
  if (tl && tl.message) box.append(h("div", { className: "jv-time-verdict", dataset: { verdict: tl.verdict || "" } }, tl.message));
  if (tl && (tl.spans || []).length > 1) box.append(strip(tl), h("div", { className: "jv-muted jv-time-strip-label" }, stripLabel(tl)));
  const rows = timeRows(p);
  const moved = hasCollectives(p) ? "; a collective's row: the bytes a call moves on each device (the compiled program's shapes) and the bandwidth its device time achieved" : "";
  box.append(h("div", { className: "jv-muted" }, `device time per step by line, most first (~: part of it is a fused kernel's time, split over its lines by estimated work${moved}; click a line to select its nodes):`));
  if (p.step_note) box.append(h("div", { className: "jv-muted jv-time-sum" }, p.step_note));
  const head = ["time / step", "share", "line", "code", "ops", ...(hasCollectives(p) ? ["moved / call", "bandwidth"] : [])];
  box.append(table(head, rows, (r) => ({
    className: "jv-time-row" + (r.category ? " jv-time-cat" : ""), tabIndex: 0, title: r.title,
    dataset: { line: String(r.line), nodes: r.nodes.join(" "), pickable: String(r.nodes.length > 0) },
    onclick: () => r.nodes.length && onPick({ trace: r.trace, node_ids: r.nodes, line: null }),
    onkeydown: (ev) => { if (ev.key === "Enter" && r.nodes.length) onPick({ trace: r.trace, node_ids: r.nodes, line: null }); },
  })));
  if (p.rest_us > 0) box.append(h("div", { className: "jv-muted" }, `... and ${fmtUs(p.rest_us)} more on other lines`));
  const kr = kernelRows(p);
  if (kr.length) {
    box.append(h("div", { className: "jv-title" }, "top kernels"));
    const picks = (p.kernels || []).map((k) => kernelNodes(p, k));
    box.append(table(["kernel", "kind", "lines", "ops", "time / call", "calls", "share"], kr.map((cells, i) => ({ cells, pick: picks[i] })), (r) => ({
      className: "jv-time-kernel", tabIndex: 0,
      dataset: { nodes: r.pick.node_ids.join(" "), pickable: String(r.pick.node_ids.length > 0) },
      onclick: () => r.pick.node_ids.length && onPick({ ...r.pick, line: null }),
      onkeydown: (ev) => { if (ev.key === "Enter" && r.pick.node_ids.length) onPick({ ...r.pick, line: null }); },
    })));
  }
  for (const line of rateLines(p)) box.append(h("div", { className: "jv-time-rate" }, line));
  if ((p.compiles || []).length) {
    box.append(h("div", { className: "jv-title" }, "compile time (tracing + lowering + XLA compile)"));
    box.append(h("div", { className: "jv-time-compiled" }, compileLine(p)));
    box.append(table(["function", "where", "total", "tracing", "lowering", "compile"],
      p.compiles.map((c) => ({ cells: [c.name, c.where || "", `${c.total_s.toFixed(2)} s`, `${c.tracing_s.toFixed(2)} s`, `${c.lowering_s.toFixed(2)} s`, `${c.compile_s.toFixed(2)} s`] })),
      () => ({ className: "jv-time-compile" })));
  }
  for (const n of p.notes || []) box.append(h("div", { className: "jv-muted" }, `note: ${n}`));
  const own = ownLine(p);
  if (own) box.append(h("div", { className: "jv-muted jv-time-own" }, own));
  return box;
}

/**
 * Sets `time_us` (device time per step) on the graph nodes `nodeUs` names (payload.profile's
 * node_us: {trace: {"body:node": us}}); the number of nodes set.
 * @param {{name: string, graph: any}[]} traces
 * @param {Object<string, Object<string, number>>} nodeUs
 */
export function nodeTimes(traces, nodeUs) {
  let n = 0;
  for (const t of traces) {
    const times = nodeUs[t.name];
    if (!times || !t.graph) continue;
    for (const [key, us] of Object.entries(times)) {
      const [b, i] = key.split(":").map(Number);
      const body = t.graph.bodies.find((x) => x.id === b) || t.graph.bodies[b];
      const node = body && (body.nodes.find((x) => x.id === i) || body.nodes[i]);
      if (node) { node.time_us = us; n++; }
    }
  }
  return n;
}

/**
 * Adds the time tab to the view `v` for `profile` (nothing without one): its tab button,
 * its box beside the memory box, and the way back when another tab is clicked.
 * `pick(d)`: goes to a line's nodes in the graph (traces.js's pickDiag).
 * @param {any} v   the view state (state.js)
 * @param {ProfileEntry|undefined} profile
 * @param {function(any): void} pick
 */
export function timeTab(v, profile, pick) {
  const { root, tabs, main, diagBox, memBox } = v.dom;
  root.querySelectorAll(":scope > .jv-timebox").forEach((e) => e.remove());
  if (v.timeOff) v.timeOff();
  v.timeOff = null;
  const colorSel = v.dom.colorSel;
  colorSel.querySelectorAll("option[value=time]").forEach((o) => o.remove());
  if (!profile) { delete root.dataset.time; return; }
  // the graph's "colour: device time": each node's time per step, set on the graph's nodes
  // before they are laid out (model.js sums them into their groups)
  if (nodeTimes(v.traces, profile.node_us || {})) {
    colorSel.append(h("option", { value: "time" }, "colour: device time"));
  }
  if (!root.querySelector(":scope > style.jv-time-css")) root.prepend(h("style", { className: "jv-time-css" }, CSS));
  let open = false;
  const close = () => {
    if (!open) return;
    open = false;
    wrap.hidden = true;
    main.hidden = false; diagBox.style.display = ""; memBox.hidden = true;
    root.dataset.tab = "graph";
    resize(v); draw(v, true);
  };
  const box = timePanel(profile, (d) => { close(); mark(); pick(d); });
  const wrap = h("div", { className: "jv-timebox", hidden: true }, box);
  memBox.after(wrap);
  const show = () => {
    open = true;
    main.hidden = true; diagBox.style.display = "none"; memBox.hidden = true; wrap.hidden = false;
    if (v.mem && v.memOpen) { v.mem.hide(); v.memOpen = false; v.ui.memory = false; }
    root.dataset.tab = "time";
    tabs.querySelectorAll(".jv-tab").forEach((b) => b.setAttribute("aria-selected", String(b === btn)));
  };
  const boxClose = close;
  const mark = () => tabs.querySelectorAll(".jv-tab").forEach((b) => b.setAttribute("aria-selected",
    String(b !== btn && !!b.dataset.traces && b.dataset.traces.split(",").map(Number).includes(v.cur))));
  // with one trace and no memory tab, the strip has no tab back to the graph: add one
  if (!tabs.querySelector(".jv-tab")) {
    tabs.append(h("button", { className: "jv-tab jv-tab-graph", role: "tab", onclick: () => { boxClose(); mark(); } }, "graph"));
  }
  const btn = h("button", { className: "jv-tab jv-tab-time", role: "tab", onclick: show }, "time");
  tabs.append(btn);
  // another tab clicked while this one is open: close it first (its own handler runs next)
  const other = (ev) => {
    const t = ev.target instanceof Element ? ev.target.closest(".jv-tab") : null;
    if (t && t !== btn && open) {
      wrap.hidden = true; open = false;
      main.hidden = false; diagBox.style.display = "";
      root.dataset.tab = "graph";
      btn.setAttribute("aria-selected", "false");
      t.setAttribute("aria-selected", "true");
      if (!t.classList.contains("jv-tab-memory")) { resize(v); draw(v, true); }
    }
  };
  tabs.addEventListener("click", other, true);
  v.timeOff = () => tabs.removeEventListener("click", other, true);
  root.dataset.time = String((profile.lines || []).length);
}

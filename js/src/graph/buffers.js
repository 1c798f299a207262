// The memory tab's compiled-memory section: for each function's MemoryReport carried in the
// payload (payload.compiled_memory, from Trace.memory(): the compiled program simulated over
// XLA's schedule, never run), the timeline of live bytes over the schedule with its peak, the
// buffers live at the peak (largest first), each row selecting its graph node, and what
// donating each argument saves. All text goes in through textContent.

import { h } from "./panels.js";
import { fmtBytes } from "./format.js";

/**
 * Python side: jaxviz/view/compiled.py; jaxviz/schema.py declares the same shapes as
 * TypedDicts (CompiledMemoryEntry, CompiledBuffer, CompiledDonation).
 * @typedef {{name: string, bytes: number, type: string, category: string, op: string,
 *            where: string, line: number, node_ids: string[], inside: string}} CompiledBuffer
 * @typedef {{arg: string, bytes: number, donated: boolean, saves: number|null,
 *            text: string}} CompiledDonation
 * @typedef {{trace: string, index: number|null, peak_bytes: number, xla_total: number|null, steps: number,
 *            peak_step: number, timeline: number[][], buffers: CompiledBuffer[],
 *            donations: CompiledDonation[], notes: string[], text: string}} CompiledMemoryEntry
 */

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

/**
 * The timeline's geometry in a W x H box: the polyline's points (step -> x, bytes -> y, the
 * tallest point just under the top) and the peak's x.
 * @param {CompiledMemoryEntry} e
 * @returns {{points: string, peakX: string}}
 */
export function timelineGeometry(e, W = 600, H = 64) {
  const pts = e.timeline || [];
  const vmax = Math.max(1, ...pts.map((p) => p[1])) * 1.08;
  const xmax = Math.max(1, e.steps - 1);
  const x = (s) => ((s / xmax) * W).toFixed(1);
  const y = (b) => (H - 2 - (b / vmax) * (H - 6)).toFixed(1);
  return { points: pts.map((p) => `${x(p[0])},${y(p[1])}`).join(" "), peakX: x(e.peak_step) };
}

/** Live bytes over the schedule (XProf's memory viewer's picture), the peak marked. */
export function timelineChart(e) {
  const W = 600, H = 64;
  const { points, peakX } = timelineGeometry(e, W, H);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", class: "jv-mem-svg jv-buf-timeline", role: "img" });
  s.append(svg("polyline", { points, fill: "none",
    stroke: "#2f62c0", "stroke-width": 1.5, "vector-effect": "non-scaling-stroke" }));
  s.append(svg("line", { x1: peakX, x2: peakX, y1: 0, y2: H, stroke: "#c0392b",
    "stroke-dasharray": "3 3", "vector-effect": "non-scaling-stroke" }));
  return s;
}

/**
 * An entry's headline: `step: compiled, not run` and `peak 4.6 MiB at step 812 of 1242
 * (XLA: 4.9 MiB)`.
 * @param {CompiledMemoryEntry} e
 */
export function entryHeadline(e) {
  const agree = e.xla_total ? ` (XLA: ${fmtBytes(e.xla_total)})` : "";
  return { title: `${e.trace}: compiled, not run`,
    peak: `peak ${fmtBytes(e.peak_bytes)} at step ${e.peak_step + 1} of ${e.steps}${agree}` };
}

/**
 * What a buffer's row shows and selects: its cells (bytes, type, category, where, op), the
 * nodes a click selects (none: not clickable), and its tooltip.
 * @param {CompiledBuffer} b
 */
export function bufferRow(b) {
  const nodes = b.node_ids || [];
  return {
    cells: [fmtBytes(b.bytes), b.type, b.category, b.where || `${b.name} (XLA kept no source)`, b.op || ""],
    nodes, pickable: nodes.length > 0, title: b.inside ? `in ${b.inside}` : b.name,
  };
}

/**
 * The section for `entries`; `onPick(entry, buffer)` when a buffer's row is clicked (or
 * Enter pressed on it); `notes` (payload.compiled_notes): the functions not computed, and
 * how to get theirs.
 * @param {CompiledMemoryEntry[]} entries
 * @param {function(CompiledMemoryEntry, CompiledBuffer): void} onPick
 * @param {string[]} [notes]
 */
export function buffersPanel(entries, onPick, notes = []) {
  const box = h("div", { className: "jv-buffers" });
  box.dataset.entries = String(entries.length);
  for (const e of entries) {
    const sec = h("section", { className: "jv-mem-entry jv-buf-entry", dataset: { trace: e.trace } });
    const head = entryHeadline(e);
    sec.append(h("div", { className: "jv-title" }, head.title),
      h("div", { className: "jv-mem-ratio" }, head.peak),
      timelineChart(e));
    const table = h("table", { className: "jv-mem-table jv-buf-table" },
      h("thead", null, h("tr", null, ...["bytes", "type", "category", "where", "op"].map((c) => h("th", null, c)))));
    const tbody = h("tbody");
    for (const b of e.buffers || []) {
      const pick = () => onPick(e, b);
      const row = bufferRow(b);
      tbody.append(h("tr", {
        className: "jv-buf-row", tabIndex: 0, title: row.title,
        dataset: { buffer: b.name, nodes: row.nodes.join(" "), category: b.category, line: String(b.line || "") },
        style: row.pickable ? "cursor:pointer" : "",
        onclick: pick, onkeydown: (ev) => { if (ev.key === "Enter") pick(); },
      }, ...row.cells.map((c) => h("td", null, c))));
    }
    table.append(tbody);
    sec.append(h("div", { className: "jv-muted" }, "buffers live at the peak, largest first (click one to select its node):"), table);
    for (const d of e.donations || []) sec.append(h("div", { className: "jv-buf-donation" }, d.text));
    for (const n of e.notes || []) sec.append(h("div", { className: "jv-muted" }, `note: ${n}`));
    box.append(sec);
  }
  for (const n of notes) box.append(h("div", { className: "jv-muted jv-buf-note" }, `note: ${n}`));
  return box;
}

// The memory tab's compiled-memory section: for each function's MemoryReport carried in the
// payload (payload.compiled_memory, from Trace.memory(): the compiled program simulated over
// XLA's schedule, never run), the timeline of live bytes over the schedule with its peak, the
// buffers live at the peak (largest first), each row selecting its graph node, and what
// donating each argument saves. All text goes in through textContent.

import { h, withCode } from "./panels.js";
import { fmtBytes } from "./format.js";

/**
 * Python side: jaxviz/view/compiled.py; jaxviz/schema.py declares the same shapes as
 * TypedDicts (CompiledMemoryEntry, CompiledBuffer, CompiledDonation, CompiledCollective).
 * @typedef {{name: string, bytes: number, type: string, category: string, op: string,
 *            where: string, line: number, node_ids: string[], inside: string, path?: string}} CompiledBuffer
 * @typedef {{name: string, kind: string, bytes: number, axes: string[], op: string, where: string,
 *            line: number, cause: string, reason: string, cause_line: number, node_ids: string[],
 *            cause_ids: string[], times: number}} CompiledCollective
 * @typedef {{arg: string, bytes: number, donated: boolean, saves: number|null,
 *            text: string}} CompiledDonation
 * @typedef {{trace: string, index: number|null, peak_bytes: number, xla_total: number|null, steps: number,
 *            peak_step: number, timeline: number[][], buffers: CompiledBuffer[],
 *            donations: CompiledDonation[], notes: string[], text: string,
 *            summary?: {text: string, source: string}[], totals?: string[],
 *            devices?: number, mesh?: string, collectives?: CompiledCollective[], replicated?: string[],
 *            layouts?: Object<string, string>}} CompiledMemoryEntry
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

/**
 * The timeline's axes: bytes up the left (0 and the peak, at its height), schedule steps
 * along the bottom (the first, the last), and the peak's label at its step; positions in %
 * of the plot (HTML labels: the SVG stretches, text must not).
 * @param {CompiledMemoryEntry} e
 */
export function timelineAxes(e, H = 64) {
  const pts = e.timeline || [];
  const max = Math.max(1, ...pts.map((p) => p[1]));
  const vmax = max * 1.08;
  const peakY = ((H - 2 - (max / vmax) * (H - 6)) / H) * 100;
  const xmax = Math.max(1, e.steps - 1);
  return {
    y: [{ text: fmtBytes(e.peak_bytes), at: peakY }, { text: "0 B", at: 100 }],
    x: [`step 1`, "schedule step →", `step ${e.steps}`],
    peak: { text: `peak ${fmtBytes(e.peak_bytes)} at step ${e.peak_step + 1}`, at: (e.peak_step / xmax) * 100 },
  };
}

/** Live bytes over the schedule (XProf's memory viewer's picture), its axes, the peak marked. */
export function timelineChart(e) {
  const W = 600, H = 64;
  const { points, peakX } = timelineGeometry(e, W, H);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", class: "jv-mem-svg jv-buf-timeline", role: "img" });
  s.append(svg("polyline", { points, fill: "none",
    stroke: "#2f62c0", "stroke-width": 1.5, "vector-effect": "non-scaling-stroke" }));
  s.append(svg("line", { x1: peakX, x2: peakX, y1: 0, y2: H, stroke: "#c0392b",
    "stroke-dasharray": "3 3", "vector-effect": "non-scaling-stroke" }));
  const ax = timelineAxes(e, H);
  const peak = h("span", { className: "jv-buf-peak" }, ax.peak.text);
  peak.style.left = `${ax.peak.at}%`;
  if (ax.peak.at > 60) peak.style.transform = "translateX(-100%)";
  const plot = h("div", { className: "jv-buf-plot" }, s, peak);
  const yaxis = h("div", { className: "jv-buf-y jv-muted" }, ...ax.y.map((t) => {
    const l = h("span", null, t.text); l.style.top = `${t.at}%`; return l;
  }));
  const xaxis = h("div", { className: "jv-buf-x jv-muted" }, ...ax.x.map((t) => h("span", null, t)));
  return h("div", { className: "jv-buf-tl", title: "live bytes at each step of XLA's schedule of one call" },
    yaxis, plot, h("div"), xaxis);
}

/**
 * An entry's headline: `step: one call, simulated over XLA's schedule` and `peak 4.6 MiB at step 812 of 1242
 * (XLA's memory_analysis(): 4.9 MiB)`.
 * @param {CompiledMemoryEntry} e
 */
export function entryHeadline(e) {
  const agree = e.xla_total ? ` (XLA's memory_analysis(): ${fmtBytes(e.xla_total)})` : "";
  const per = e.devices > 1 ? ` per device of ${e.devices}` : "";
  return { title: `${e.trace}: one call, simulated over XLA's schedule`,
    peak: `peak ${fmtBytes(e.peak_bytes)}${per} at step ${e.peak_step + 1} of ${e.steps}${agree}` };
}

/**
 * What a buffer's row shows and selects: its cells (bytes, type, category, where, op), the
 * nodes a click selects (none: not clickable), and its tooltip.
 * @param {CompiledBuffer} b
 */
export function bufferRow(b) {
  const nodes = b.node_ids || [];
  return {
    cells: [fmtBytes(b.bytes), b.type, b.category, b.where || `${b.name} (XLA kept no source)`, b.op || "", b.path || ""],
    nodes, pickable: nodes.length > 0, title: b.inside ? `in ${b.inside}` : b.name,
  };
}

/**
 * A collective's row in the memory tab: bytes per device a call (a loop body's: each
 * iteration, times its trip count), its kind, the mesh axes it moves over, the line of the op
 * it serves, that op, and what required it; clickable where it names graph nodes (the op it
 * serves: the violet tab on the graph).
 * @param {CompiledCollective} c
 */
export function collectiveRow(c) {
  const nodes = c.node_ids || [];
  const times = c.times > 1 ? ` × ${c.times}` : "";
  return {
    cells: [fmtBytes(c.bytes) + times, c.kind, (c.axes || []).join(", ") || "?", c.where || `${c.name} (XLA kept no source)`, c.op || "", c.reason || c.cause],
    nodes, pickable: nodes.length > 0, title: `${c.name}: ${c.cause}` + (c.cause_line ? ` (line ${c.cause_line})` : ""),
  };
}

/** The collectives' heading: "mesh data=2 x model=4 (Auto): 8 collectives XLA inserted, 3.7 MiB
 * per device a call, largest first". @param {CompiledMemoryEntry} e */
export function collectivesHead(e) {
  const cs = e.collectives || [];
  const total = cs.reduce((n, c) => n + c.bytes * Math.max(c.times || 1, 1), 0);
  const n = cs.length === 1 ? "1 collective" : `${cs.length} collectives`;
  return `${e.mesh || "mesh"}: ${n} XLA inserted, ${fmtBytes(total)} per device a call, largest first (click one to select the op it serves):`;
}

/**
 * Call paths folded where they differ in one index: ["m > block[0] > mlp", "m > block[1] > mlp"]
 * -> "m > block[0..1] > mlp" (else the first, "and 3 more").
 * @param {string[]} paths
 */
export function foldPaths(paths) {
  const uniq = [...new Set(paths.filter(Boolean))];
  if (uniq.length <= 1) return uniq[0] || "";
  const parts = uniq.map((p) => /^(.*?\[)(\d+)(\].*)$/.exec(p));
  if (parts.every((m) => m && m[1] === parts[0][1] && m[3] === parts[0][3])) {
    const idx = parts.map((m) => +m[2]).sort((a, b) => a - b);
    const run = idx[idx.length - 1] - idx[0] + 1 === idx.length;
    return `${parts[0][1]}${run ? `${idx[0]}..${idx[idx.length - 1]}` : idx.join(",")}${parts[0][3]}`;
  }
  return `${uniq[0]} and ${uniq.length - 1} more`;
}

/**
 * The table's rows, largest first, buffers that one line made alike (same line, type,
 * category and op: a loop's layers) folded into one: [{buffers, fold}] where a fold has
 * its count, total and folded call paths.
 * @param {CompiledBuffer[]} buffers
 * @returns {{buffers: CompiledBuffer[], fold: null|{n: number, total: number, path: string, where: string, category: string}}[]}
 */
export function bufferGroups(buffers) {
  const by = new Map(), out = [];
  for (const b of buffers) {
    // a line's buffers (whatever XLA's category for each layer), or the leaves of one
    // argument that differ in one index (params[0..3])
    const arg = b.category.includes("argument");
    const key = !b.where ? null : arg ? `${b.category}|${b.type}|${b.where.replace(/\[\d+\]/, "[#]")}` : `${b.where}|${b.type}|${b.op}`;
    const g = key && by.get(key);
    if (g) { g.buffers.push(b); continue; }
    const row = { buffers: [b], fold: null };
    if (key) by.set(key, row);
    out.push(row);
  }
  for (const r of out) {
    if (r.buffers.length < 2) continue;
    const bs = r.buffers, arg = bs[0].category.includes("argument");
    const cats = [...new Set(bs.map((b) => b.category))];
    r.fold = { n: bs.length, total: bs.reduce((n, b) => n + b.bytes, 0),
      path: arg ? "" : foldPaths(bs.map((b) => b.path || "")),
      where: arg ? foldPaths(bs.map((b) => b.where)) : bs[0].where,
      category: cats.length > 1 ? cats.map((c) => `${c} (${bs.filter((b) => b.category === c).length})`).join(", ") : cats[0] };
  }
  return out;
}

/**
 * The memory tab's first lines: for each function, its peak, what donation saves now and
 * what donating more would save, each with where the number comes from (jaxviz's
 * memory.report.summary_lines); a run of the same function (`runs`: the tab's run summaries
 * by trace name) adds its loop's live peaks, which a step's compiled peak does not show.
 * @param {CompiledMemoryEntry[]} entries
 * @param {Object<string, any>} [runs]
 */
export function summaryBlock(entries, runs = {}) {
  const box = h("div", { className: "jv-mem-head" });
  for (const e of entries) {
    // `code` in a line (a function's or an argument's name) shown as code, as text
    const lines = (e.summary || []).map((l) => h("li", { className: "jv-mem-line" }, withCode(l.text), h("span", { className: "jv-muted" }, " (", withCode(l.source), ")")));
    const run = runs[e.trace];
    if (run && run.peak_with_donation != null && run.peak_without_donation != null) {
      lines.push(h("li", { className: "jv-mem-line" },
        `a loop of ${run.steps} steps rose ${fmtBytes(run.peak_with_donation)} above its start with donation, ${fmtBytes(run.peak_without_donation)} without`,
        h("span", { className: "jv-muted" }, " (measured live while --compare ran it: the arguments held before the loop are in its start, not in the rise; the compiled peak above counts them, for one call)")));
    }
    if (!lines.length) continue;
    box.append(h("div", { className: "jv-mem-sum-fn" }, entries.length > 1 ? h("div", { className: "jv-mem-rlabel" }, e.trace) : null,
      h("ul", { className: "jv-mem-lines" }, ...lines)));
  }
  box.hidden = !box.childNodes.length;
  return box;
}

/** A sharded program's collectives (a table, each row selecting the op it serves) and the
 * arguments held whole on several devices; nothing on one device. */
function meshParts(e, onPick) {
  const out = [];
  const cs = e.collectives || [];
  if (cs.length) {
    const tbody = h("tbody", null, ...cs.map((c) => {
      const row = collectiveRow(c);
      const pick = () => onPick(e, c);
      return h("tr", {
        className: "jv-coll-row", tabIndex: 0, title: row.title,
        dataset: { name: c.name, kind: c.kind, nodes: row.nodes.join(" "), line: String(c.line || ""), cause: c.cause, causeLine: String(c.cause_line || "") },
        style: row.pickable ? "cursor:pointer" : "",
        onclick: pick, onkeydown: (ev) => { if (ev.key === "Enter") pick(); },
      }, ...row.cells.map((x) => h("td", null, x)));
    }));
    out.push(h("div", { className: "jv-muted jv-coll-head" }, collectivesHead(e)),
      h("table", { className: "jv-mem-table jv-coll-table" },
        h("thead", null, h("tr", null, ...["moved / device", "collective", "over", "at the line of", "op", "what required it"].map((c) => h("th", null, c)))), tbody));
  }
  const rep = e.replicated || [];
  if (rep.length) {
    out.push(h("div", { className: "jv-muted jv-rep-head" }, `replicated: ${rep.length} argument${rep.length > 1 ? "s" : ""} with the same bytes on several devices`),
      h("ul", { className: "jv-rep-list" }, ...rep.map((r) => h("li", { className: "jv-rep" }, withCode(r)))));
  }
  return out;
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
    if (!e.steps) {   // an eager op's program (jaxviz.mesh.eager): its collectives, no schedule
      sec.classList.add("jv-eager-entry");
      sec.append(h("div", { className: "jv-title" }, `${e.trace}: collectives of an eager op`), ...meshParts(e, onPick));
      for (const n of e.notes || []) sec.append(h("div", { className: "jv-muted" }, "note: ", withCode(n)));
      box.append(sec);
      continue;
    }
    const head = entryHeadline(e);
    sec.append(h("div", { className: "jv-title" }, head.title),
      h("div", { className: "jv-mem-ratio" }, head.peak),
      timelineChart(e));
    if ((e.totals || []).length) sec.append(h("div", { className: "jv-muted jv-buf-totals" }, `at the peak, by category: ${e.totals.join(", ")}`));
    const table = h("table", { className: "jv-mem-table jv-buf-table" },
      h("thead", null, h("tr", null, ...["bytes", "type", "category", "where", "op", "call path"].map((c) => h("th", null, c)))));
    const tbody = h("tbody");
    const rowOf = (b, hidden) => {
      const pick = () => onPick(e, b);
      const row = bufferRow(b);
      return h("tr", {
        className: "jv-buf-row", tabIndex: 0, title: row.title, hidden,
        dataset: { buffer: b.name, nodes: row.nodes.join(" "), category: b.category, line: String(b.line || ""), path: b.path || "" },
        style: row.pickable ? "cursor:pointer" : "",
        onclick: pick, onkeydown: (ev) => { if (ev.key === "Enter") pick(); },
      }, ...row.cells.map((c) => h("td", null, c)));
    };
    for (const g of bufferGroups(e.buffers || [])) {
      if (!g.fold) { tbody.append(rowOf(g.buffers[0], false)); continue; }
      // one row for a line's buffers across a loop's layers: count and total; ▸ lists them
      const b = g.buffers[0], members = g.buffers.map((x) => rowOf(x, true));
      for (const m of members) m.classList.add("jv-buf-member");
      const toggle = h("button", { className: "jv-btn jv-buf-toggle", title: "list them", "aria-expanded": "false",
        onclick: (ev) => {
          ev.stopPropagation();
          const open = toggle.getAttribute("aria-expanded") !== "true";
          toggle.setAttribute("aria-expanded", String(open)); toggle.textContent = open ? "▾" : "▸";
          for (const m of members) m.hidden = !open;
        } }, "▸");
      const pick = () => onPick(e, b);
      const each = g.buffers.every((x) => x.bytes === b.bytes) ? fmtBytes(b.bytes) : "…";
      const cells = [h("td", null, toggle, ` ${g.fold.n} × ${each} = ${fmtBytes(g.fold.total)}`), b.type, g.fold.category, g.fold.where, b.op || "", g.fold.path];
      tbody.append(h("tr", { className: "jv-buf-fold", tabIndex: 0, title: `${g.fold.n} buffers alike: ▸ lists them, each selecting its node`,
        dataset: { n: String(g.fold.n), total: String(g.fold.total), path: g.fold.path, category: b.category },
        style: "cursor:pointer", onclick: pick, onkeydown: (ev) => { if (ev.key === "Enter") pick(); } },
        ...cells.map((c) => (c instanceof Node ? c : h("td", null, c)))), ...members);
    }
    table.append(tbody);
    sec.append(h("div", { className: "jv-muted" }, "buffers live at the peak, largest first (click one to select its node):"), table);
    for (const d of e.donations || []) sec.append(h("div", { className: "jv-buf-donation" }, withCode(d.text)));
    sec.append(...meshParts(e, onPick));
    for (const n of e.notes || []) sec.append(h("div", { className: "jv-muted" }, "note: ", withCode(n)));
    box.append(sec);
  }
  for (const n of notes) box.append(h("div", { className: "jv-muted jv-buf-note" }, `note: ${n}`));
  return box;
}

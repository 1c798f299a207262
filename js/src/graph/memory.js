// The graph view's "memory" tab: for each function %%jaxtrace --compare compiled and ran, the
// static summary of its RunReport carried in the payload (the same online and offline: saved
// notebook without a kernel, nbconvert, save_html). The live chart of a run is its own output,
// fed through its own widget comm: no output looks into another (Colab and VS Code render each
// output in its own frame). All text goes in through textContent.

import { h } from "./panels.js";
import { fmtBytes } from "./format.js";

/**
 * Python side: jaxviz/view/payload.py (memory_entries, run_summary); jaxviz/schema.py declares
 * the same shapes as TypedDicts (MemoryTabEntry, ChartLane, RunSummary, RunSummaryRun).
 * @typedef {{trace: string, live: string, note: string, summary: RunSummary|null}} MemoryEntry
 * @typedef {{id: string, label: string, source: string}} Lane
 * @typedef {{name: string, steps: number, source: string, lanes: Lane[], runs: RunSummaryRun[],
 *            peak_with_donation: number|null, peak_without_donation: number|null,
 *            donation_ratio: number|null, rss_ratio: number|null, stopped: boolean,
 *            note: string, text: string}} RunSummary
 * @typedef {{label: string, donated: string[], baseline: Object<string, number>,
 *            peak_bytes: Object<string, number>, peak_rise: Object<string, number>,
 *            xla_peak: number|null, samples: number, stopped: boolean,
 *            step_ms: {n: number, median?: number, min?: number, max?: number, total?: number},
 *            events: {t: number, kind: string, label: string}[], donations: number,
 *            chart: {lane: number, t: number[], v: number[]}[]}} RunSummaryRun
 * `live`: the token of the run's MemoryChart (its own output), "" when there is none.
 */

const ms = (x) => (x == null ? "unavailable" : `${x.toFixed(x < 10 ? 2 : 1)} ms`);

/** `a, b, c and 58 more`: a long list of donated leaves stays one short line. */
function fewNames(names, n = 3) {
  return names.length <= n + 1 ? names.join(", ") : `${names.slice(0, n).join(", ")} and ${names.length - n} more`;
}

/**
 * A long list of leaf paths folded: runs of paths that differ only in one index become one
 * range, "params['layers'][0..3]['w']"; then at most `n` groups, "and 5 more".
 * foldNames(["p[0]", "p[1]", "p[2]", "q"]) -> "4 leaves: p[0..2], q"
 */
export function foldNames(names, n = 3) {
  const groups = new Map(); // the path with its first index replaced -> indices
  const order = [];
  for (const name of names) {
    const m = /^(.*?\[)(\d+)(\].*)$/.exec(name);
    const key = m ? `${m[1]}\u0000${m[3]}` : name;
    if (!groups.has(key)) { groups.set(key, []); order.push(key); }
    if (m) groups.get(key).push(Number(m[2]));
  }
  const parts = order.map((key) => {
    const idx = groups.get(key);
    if (!idx.length) return key;
    const [pre, post] = key.split("\u0000");
    const lo = Math.min(...idx), hi = Math.max(...idx);
    const contiguous = hi - lo + 1 === idx.length;
    return `${pre}${idx.length === 1 ? lo : contiguous ? `${lo}..${hi}` : idx.join(",")}${post}`;
  });
  const head = names.length > 1 ? `${names.length} leaves: ` : "";
  return head + (parts.length <= n + 1 ? parts.join(", ") : `${parts.slice(0, n).join(", ")} and ${parts.length - n} more`);
}

/** "1.20 ms (0.90–3.10 ms, noisy)": the median with its spread, marked noisy when the spread
 * is over half the median. */
export function withSpread(st) {
  if (!st || !st.n) return "no steps";
  const noisy = st.n > 1 && st.max - st.min > 0.5 * st.median;
  return `${ms(st.median)} (${ms(st.min)}–${ms(st.max)}${noisy ? ", noisy" : ""}, ${st.n} steps)`;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

/** A small static chart of one run's downsampled samples: one polyline per lane. */
function staticChart(run, lanes, tmax) {
  const W = 600, LANE = 56;
  const rows = run.chart || [];
  const box = h("div", { className: "jv-mem-chart" });
  let points = 0;
  rows.forEach((row) => {
    const lane = lanes[row.lane] || { id: String(row.lane), label: `lane ${row.lane}`, source: "" };
    const vmax = Math.max(...row.v, 1) * 1.1;
    const s = svg("svg", { viewBox: `0 0 ${W} ${LANE}`, preserveAspectRatio: "none", class: "jv-mem-svg", role: "img" });
    const pts = row.t.map((t, i) => `${((t / tmax) * W).toFixed(1)},${(LANE - 2 - (row.v[i] / vmax) * (LANE - 6)).toFixed(1)}`);
    points += pts.length;
    s.append(svg("polyline", { points: pts.join(" "), fill: "none", "stroke-width": 1.5, "vector-effect": "non-scaling-stroke",
      stroke: lane.source === "rss" ? "#888" : "#2f62c0" }));
    const peak = row.v.length ? Math.max(...row.v) : null;
    box.append(h("div", { className: "jv-mem-lane jv-muted" }, `${lane.label}: peak ${fmtBytes(peak)}`), s);
  });
  box.dataset.points = String(points);
  return box;
}

/** The static summary of one RunReport: ratio, a table of runs, step times, charts. */
export function summaryView(sum) {
  const box = h("div", { className: "jv-mem-summary" });
  const lanes = sum.lanes || [];
  const dev = lanes.filter((l) => l.source !== "rss");
  const hasRss = lanes.some((l) => l.source === "rss");
  box.append(h("div", { className: "jv-muted" }, `${sum.steps} steps · ${sum.source}` + (sum.stopped ? " · stopped early" : "")));
  if (sum.donation_ratio != null) {
    box.append(h("div", { className: "jv-mem-ratio" },
      `donation ratio ${sum.donation_ratio.toFixed(2)}x: peak ${fmtBytes(sum.peak_without_donation)} without donation, ` +
      `${fmtBytes(sum.peak_with_donation)} with` + (sum.rss_ratio != null ? ` (RSS ratio ${sum.rss_ratio.toFixed(2)}x)` : "")));
  }
  const head = h("tr", null, h("th", null, "run"), ...dev.map((l) => h("th", null, `peak ${l.id}`)),
    hasRss ? h("th", null, "peak RSS") : null, h("th", null, "XLA estimate"), h("th", null, "step time: median (min–max)"),
    h("th", null, "samples"));
  const table = h("table", { className: "jv-mem-table" }, h("thead", null, head));
  const tbody = h("tbody");
  for (const r of sum.runs || []) {
    const rise = r.peak_rise || {};
    const st = r.step_ms || {};
    tbody.append(h("tr", { dataset: { run: r.label } },
      h("td", { title: (r.donated || []).join(", ") }, r.label + ((r.donated || []).length ? ` (donated ${foldNames(r.donated)})` : "") + (r.stopped ? " [stopped]" : "")),
      ...dev.map((l) => h("td", { className: "jv-num" }, `+${fmtBytes(rise[l.id])}`)),
      hasRss ? h("td", { className: "jv-num" }, `+${fmtBytes(rise.rss)}`) : null,
      h("td", { className: r.xla_peak == null ? "" : "jv-num" }, r.xla_peak == null ? "unavailable" : `+${fmtBytes(r.xla_peak)}`),
      h("td", null, withSpread(st)),
      h("td", { className: "jv-num" }, String(r.samples || 0))));
  }
  table.append(tbody);
  box.append(table);
  if (sum.note) box.append(h("div", { className: "jv-muted" }, `note: ${sum.note}`));
  const tmax = Math.max(1e-3, ...(sum.runs || []).flatMap((r) => (r.chart || []).map((c) => (c.t.length ? c.t[c.t.length - 1] : 0))));
  const charts = h("div", { className: "jv-mem-charts" });
  for (const r of sum.runs || []) {
    const donation = (r.events || []).filter((e) => e.kind === "donation");
    charts.append(h("div", { className: "jv-mem-run" }, h("div", { className: "jv-mem-rlabel" }, r.label),
      staticChart(r, lanes, tmax),
      // (the list of reused buffers is long: folded, its count in the summary line)
      donation.length ? h("details", { className: "jv-muted jv-mem-reused" },
        h("summary", null, `buffers reused by donation at ${r.donations ?? donation.length} steps`), h("div", { className: "jv-hint" }, donation[0].label)) : null));
  }
  box.append(charts);
  return box;
}

/**
 * The memory tab's panel for `entries` (payload.memory): each run's summary, or why there is
 * none yet. Returns {el, show(), hide(), dispose()}.
 */
export function memoryPanel(entries) {
  const el = h("div", { className: "jv-mem", hidden: true });
  const slots = entries.map((m) => {
    const sec = h("section", { className: "jv-mem-entry", dataset: { trace: m.trace } });
    const waiting = h("div", { className: "jv-muted jv-mem-wait" });
    sec.append(h("div", { className: "jv-title" }, `${m.trace}: compiled and run`), waiting);
    if (m.summary) {
      sec.append(summaryView(m.summary));
      sec.dataset.summary = "1";
    } else {
      waiting.textContent = m.note ? `no summary: ${m.note}` : m.live
        ? "running: its live chart is its own output, below this view; the summary follows when the run ends"
        : "no run summary was saved";
    }
    el.append(sec);
    return { m, sec };
  });
  el.dataset.summaries = String(slots.filter((s) => s.m.summary).length);
  return {
    el,
    show() { el.hidden = false; },
    hide() { el.hidden = true; },
    dispose() {},
  };
}

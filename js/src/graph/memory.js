// The graph view's "memory" tab: for each function %%jaxtrace compiled and ran, the live chart
// (the MemoryChart model of the same page, found by its live token, rendered by its own ESM)
// and, once the run ended, the static summary of its RunReport carried in the payload, which
// is all there is offline (saved notebook without a kernel, nbconvert, save_html).
// All text goes in through textContent.

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
 * Live registry (window.__jaxvizLive[token]), written by js/src/entries/memory.js:
 *   {model, render({model, el}) -> cleanup}
 */

const ms = (x) => (x == null ? "unavailable" : `${x.toFixed(x < 10 ? 2 : 1)} ms`);

/** `a, b, c and 58 more`: a long list of donated leaves stays one short line. */
function fewNames(names, n = 3) {
  return names.length <= n + 1 ? names.join(", ") : `${names.slice(0, n).join(", ")} and ${names.length - n} more`;
}

function liveChart(token) {
  const reg = typeof window !== "undefined" && window.__jaxvizLive;
  const e = token && reg && reg[token];
  return e && typeof e.render === "function" && e.model ? e : null;
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
    hasRss ? h("th", null, "peak RSS") : null, h("th", null, "XLA estimate"), h("th", null, "step (median)"),
    h("th", null, "step min–max"), h("th", null, "samples"));
  const table = h("table", { className: "jv-mem-table" }, h("thead", null, head));
  const tbody = h("tbody");
  for (const r of sum.runs || []) {
    const rise = r.peak_rise || {};
    const st = r.step_ms || {};
    tbody.append(h("tr", { dataset: { run: r.label } },
      h("td", { title: (r.donated || []).join(", ") }, r.label + ((r.donated || []).length ? ` (${fewNames(r.donated)})` : "") + (r.stopped ? " [stopped]" : "")),
      ...dev.map((l) => h("td", null, `+${fmtBytes(rise[l.id])}`)),
      hasRss ? h("td", null, `+${fmtBytes(rise.rss)}`) : null,
      h("td", null, r.xla_peak == null ? "unavailable" : `+${fmtBytes(r.xla_peak)}`),
      h("td", null, st.n ? ms(st.median) : "no steps"),
      h("td", null, st.n ? `${ms(st.min)} – ${ms(st.max)}` : ""),
      h("td", null, String(r.samples || 0))));
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
      donation.length ? h("div", { className: "jv-muted" }, `buffers reused by donation at ${r.donations ?? donation.length} steps: ${donation[0].label}`) : null));
  }
  box.append(charts);
  return box;
}

/**
 * The memory tab's panel for `entries` (payload.memory). Live charts mount on first show and
 * stay mounted; while an entry has neither its live model nor a summary, it keeps looking.
 * Returns {el, show(), hide(), dispose()}.
 */
export function memoryPanel(entries) {
  const el = h("div", { className: "jv-mem", hidden: true });
  const cleanups = [];
  let timer = 0;
  const slots = entries.map((m) => {
    const sec = h("section", { className: "jv-mem-entry", dataset: { trace: m.trace } });
    const live = h("div", { className: "jv-mem-live", hidden: true });
    const waiting = h("div", { className: "jv-muted jv-mem-wait" });
    sec.append(h("div", { className: "jv-title" }, `${m.trace}: compiled and run`), live, waiting);
    if (m.summary) {
      sec.append(summaryView(m.summary));
      sec.dataset.summary = "1";
    }
    el.append(sec);
    return { m, sec, live, waiting, mounted: false };
  });
  el.dataset.live = "0";
  el.dataset.summaries = String(slots.filter((s) => s.m.summary).length);

  function look() {
    timer = 0;
    let again = false;
    for (const s of slots) {
      if (s.mounted) continue;
      const e = liveChart(s.m.live);
      if (e) {
        s.mounted = true;
        s.live.hidden = false;
        s.waiting.textContent = "";
        s.sec.dataset.live = "1";
        // the static chart repeats what the live one draws: keep only the figures
        for (const c of s.sec.querySelectorAll(".jv-mem-charts")) c.hidden = true;
        const c = e.render({ model: e.model, el: s.live });
        if (typeof c === "function") cleanups.push(c);
      } else if (!s.m.summary) {
        again = !!s.m.live;
        s.waiting.textContent = s.m.note ? `no summary: ${s.m.note}` : s.m.live
          ? "waiting for the live chart (it draws while the kernel runs the function)…"
          : "no run summary was saved";
      }
    }
    el.dataset.live = String(slots.filter((s) => s.mounted).length);
    if (again && !el.hidden) timer = setTimeout(look, 250);
  }
  return {
    el,
    show() { el.hidden = false; if (!timer) look(); },
    hide() { el.hidden = true; clearTimeout(timer); timer = 0; },
    dispose() { clearTimeout(timer); for (const c of cleanups) c(); },
  };
}

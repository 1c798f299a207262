// The tab strip of a cell's traces: one tab per function, one per eager statement (the
// eager bits of one statement, split by the jitted calls it makes, are parts of one tab),
// and, past MAX_TABS, the minor ones folded under a "more" menu so the strip keeps one row.
// A library's scalar op run eagerly (jnp's `less`, `add` of an index) is always minor.

import { tabLabels } from "./model.js";

/** Tabs shown in the strip before the minor ones fold under "more". */
export const MAX_TABS = 8;

/**
 * A trace the strip counts as noise: a library function of at most two equations whose
 * outputs are all scalars (an eager index's `less` / `add`).
 * @param {import("./model.js").TracePayload} t
 */
export function isNoise(t) {
  if (t.kind === "eager" || t.user !== false || !t.graph) return false;
  const b = t.graph.bodies[t.graph.root];
  if (!b || b.n_eqns > 2) return false;
  const outs = (b.outputs || []).map((id) => b.nodes[id]).filter(Boolean);
  return outs.length > 0 && outs.every((n) => (n.out || []).every((o) => /\[\]$/.test(o)));
}

/**
 * @typedef {{traces:number[], text:string, title:string, lib:boolean, noise:boolean,
 *   findings:number, worst:string}} TabGroup
 */

const RANK = { error: 0, warning: 1, info: 2 };

/**
 * The cell's traces as tabs: an eager statement's traces (same statement) in one tab.
 * @param {import("./model.js").TracePayload[]} traces
 * @returns {TabGroup[]}
 */
export function tabGroups(traces) {
  const labels = tabLabels(traces);
  const groups = [];
  const eager = new Map();
  traces.forEach((t, i) => {
    const key = t.kind === "eager" ? String(t.name || "") : null;
    if (key != null && eager.has(key)) { eager.get(key).traces.push(i); return; }
    const g = { traces: [i], text: labels[i].text,
      title: labels[i].title, lib: labels[i].lib, noise: isNoise(t), findings: 0, worst: "" };
    if (key != null) eager.set(key, g);
    groups.push(g);
  });
  for (const g of groups) {
    for (const i of g.traces) {
      for (const d of traces[i].diagnostics || []) {
        g.findings += 1;
        if (!g.worst || (RANK[d.severity] ?? 3) < (RANK[g.worst] ?? 3)) g.worst = d.severity;
      }
    }
    if (g.traces.length > 1) g.title += ` (${g.traces.length} parts, split by the calls it makes: click again for the next)`;
  }
  return groups;
}

/**
 * Which tabs the strip shows and which fold under "more": all when there are at most
 * `max`; else the tabs with findings, then the user's functions, then the rest in order, up
 * to max - 1 (the menu takes the last place, and says the findings it holds), noise always
 * folded. Each list keeps the cell's order.
 * @param {TabGroup[]} groups
 * @param {number} [max]
 * @returns {{shown: TabGroup[], more: TabGroup[]}}
 */
export function foldTabs(groups, max = MAX_TABS) {
  const noisy = groups.filter((g) => g.noise && !g.findings);
  if (groups.length <= max && !noisy.length) return { shown: groups, more: [] };
  const rank = (g) => (g.findings ? 0 : !g.lib ? 1 : 2);
  const order = groups.filter((g) => !noisy.includes(g)).map((g, k) => ({ g, k })).sort((a, b) => rank(a.g) - rank(b.g) || a.k - b.k);
  const keep = new Set(order.filter((x, n) => n < max - 1).map((x) => x.g));
  return { shown: groups.filter((g) => keep.has(g)), more: groups.filter((g) => !keep.has(g)) };
}

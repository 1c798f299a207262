// The graph view's legend (bottom left of the canvas): what the marks on the boxes mean
// (selection, dataflow, search matches, diagnostics, constants, inputs and outputs, groups,
// `~` weak types), and, while the boxes are coloured, the colour scale with its units.
// legendScale is pure (tested in node); fillLegend writes the DOM, text as text.

import { fmt, fmtBytes } from "./format.js";
import { h } from "./panels.js";

/** What each colouring measures: its title and how a value reads. */
export const COLORINGS = {
  flops: { title: "FLOPs per box", unit: "FLOP", format: (x) => `${fmt(x)} FLOP` },
  bytes: { title: "bytes accessed per box", unit: "bytes", format: (x) => fmtBytes(x) },
  // --profile (timetab.js): each node's share of its line's measured device time, per step
  time: { title: "device time per step per box", unit: "us", format: (x) => (x >= 1e3 ? `${(x / 1e3).toFixed(2)} ms` : `${x.toFixed(1)} us`) },
};

/** The heat a value gets on the painter's scale: t in [0, 1], log scale up to `max`. */
export const heatOf = (x, max) => (max > 0 ? Math.log1p(Math.max(0, x)) / Math.log1p(max) : 0);
/** The heat overlay's opacity for t (draw.js paints boxes with it). */
export const heatAlpha = (t) => 0.08 + 0.72 * t * t;

/**
 * The legend of a colouring: its title and ticks along the scale ({t, label}: t the position
 * in [0, 1], label the value there with its unit), or null for no colouring.
 * @param {string} mode   "none" | "flops" | "bytes" | "time"
 * @param {number} max    the largest value among the boxes shown
 * @returns {{title:string, unit:string, ticks:{t:number, label:string}[]}|null}
 */
export function legendScale(mode, max) {
  const c = COLORINGS[mode];
  if (!c) return null;
  const m = Math.max(0, max || 0);
  const at = (t) => Math.expm1(t * Math.log1p(m));   // heatOf's inverse
  const ticks = m > 0 ? [0, 0.5, 1].map((t) => ({ t, label: c.format(t === 1 ? m : Math.round(at(t))) })) : [{ t: 0, label: c.format(0) }];
  return { title: `${c.title} (log scale)`, unit: c.unit, ticks };
}

/** The marks the painter puts on boxes, explained once: [swatch kind, text]. */
export const MARKS = [
  ["sel", "selected (click a node: the inspector opens beside the graph); blue lines: its dataflow"],
  ["match", "search match"],
  ["diag", "diagnostic (listed below the graph)"],
  ["konst", "constant baked into the function"],
  ["io", "input / output (pill)"],
  ["donated", "dashed ring: a donated input (donate_argnums): an output may reuse its buffer"],
  ["coll", "violet tab: XLA inserted a collective for this op (a sharded program; the memory tab lists them with their cause)"],
  ["group", "group: + opens it, − closes it"],
  ["weak", "~f32[]: weak type (a Python scalar's dtype, which takes the other operand's)"],
];

/**
 * Fills the legend element for colour mode `mode` (its scale up to `max`) in theme `th`.
 * @param {HTMLElement} el
 * @param {string} mode
 * @param {number} max
 * @param {any} th   draw.js's theme
 * @param {string} [mesh]   a sharded program's mesh, "mesh data=2 x model=4 (Auto)": its own line
 */
export function fillLegend(el, mode, max, th, mesh) {
  const sw = (kind) => {
    const s = h("span", { className: "jv-sw jv-sw-" + kind });
    const st = s.style;
    if (kind === "sel") st.borderColor = th.brand;
    else if (kind === "match") st.borderColor = th.warn;
    else if (kind === "diag") st.borderColor = th.error;
    else if (kind === "konst") st.background = th.konst;
    else if (kind === "io") { st.background = th.io; st.borderRadius = "6px"; }
    else if (kind === "group") { st.background = th.cluster; st.boxShadow = `inset 0 0 0 2px ${th.cluster}, inset 0 0 0 3px ${th.border}`; }
    else if (kind === "weak") { s.textContent = "~"; }
    else if (kind === "coll") { st.borderTop = `4px solid ${th.coll}`; }
    else if (kind === "donated") { st.background = th.io; st.borderRadius = "6px"; st.border = `2px dashed ${th.warn}`; }
    return s;
  };
  const kids = [];
  const scale = legendScale(mode, max);
  if (scale) {
    const bar = h("div", { className: "jv-scale-bar" });
    const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => `color-mix(in srgb, ${th.heat} ${Math.round(100 * heatAlpha(t))}%, ${th.node}) ${t * 100}%`);
    bar.style.background = `linear-gradient(to right, ${stops.join(", ")})`;
    const ticks = h("div", { className: "jv-scale-ticks" }, ...scale.ticks.map((k) => h("span", { className: "jv-tick" }, k.label)));
    kids.push(h("div", { className: "jv-scale", dataset: { mode } }, h("div", { className: "jv-legend-title" }, scale.title), bar, ticks));
  }
  const marks = h("details", { className: "jv-marks" }, h("summary", null, "legend"),
    ...MARKS.map(([k, text]) => h("div", { className: "jv-mark", dataset: { mark: k } }, sw(k), text)));
  if (el.querySelector(".jv-marks")) marks.open = el.querySelector(".jv-marks").open;
  if (mesh) kids.push(h("div", { className: "jv-legend-mesh" }, `${mesh}; f32[4096@x,1024]: a dimension split over mesh axis x`));
  el.replaceChildren(...kids, marks);
  el.dataset.mode = mode;
}

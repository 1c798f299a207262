// The graph view's toolbar: trace tabs, search box, match stepping, fit / expand / collapse
// buttons, the colour mode, SVG / PNG export of the whole graph (Shift: the view on screen) and
// the status line.

import { h } from "./panels.js";
import { listen, expandAllItems, collapseAllItems } from "./state.js";
import { nextMatch } from "./search.js";
import { fit, draw, graphBounds } from "./camera.js";
import { toSvg, download, fileName } from "./export.js";
import { ensureLabels, paint, LABEL_ZOOM } from "./draw.js";

/**
 * The toolbar's elements (its buttons get their actions from `bindToolbar`).
 * @returns {{bar: HTMLElement, tabs: HTMLElement, q: HTMLInputElement, count: HTMLElement,
 *   colorSel: HTMLSelectElement, status: HTMLElement, buttons: Object<string, HTMLButtonElement>}}
 */
export function toolbar() {
  const tabs = h("div", { className: "jv-tabs", role: "tablist" });
  const q = h("input", { type: "search", placeholder: "search op, var, scope, line…", className: "jv-search jv-gt", size: 24, "aria-label": "search" });
  const count = h("span", { className: "jv-count jv-muted jv-gt" });
  const colorSel = h("select", { className: "jv-color jv-gt", "aria-label": "colour by" },
    h("option", { value: "none" }, "colour: none"), h("option", { value: "flops" }, "colour: FLOPs"), h("option", { value: "bytes" }, "colour: bytes"));
  const status = h("span", { className: "jv-status" });
  // jv-gt: graph tools, hidden while the memory tab is open (they do nothing there)
  const btn = (label, cls) => h("button", { className: "jv-btn jv-gt " + cls, title: label }, label);
  const buttons = {
    prev: btn("◀", "jv-prev"), next: btn("▶", "jv-next"), fit: btn("Fit", "jv-fit"),
    expandAll: btn("Expand all", "jv-expand-all"), collapseAll: btn("Collapse all", "jv-collapse-all"),
    svg: btn("SVG", "jv-export-svg"), png: btn("PNG", "jv-export-png"),
  };
  buttons.fit.title = "show the whole graph (f)";
  buttons.svg.title = "save the whole graph as SVG (Shift + click: the view on screen)";
  buttons.png.title = "save the whole graph as PNG (Shift + click: the view on screen)";
  const bar = h("div", { className: "jv-bar" }, tabs, q, buttons.prev, buttons.next, count,
    buttons.fit, buttons.expandAll, buttons.collapseAll, colorSel, buttons.svg, buttons.png, status);
  return { bar, tabs, q, count, colorSel, status, buttons };
}

/**
 * Gives the toolbar's buttons and colour menu their actions on the view `v`.
 * @param {import("./state.js").ViewState} v
 */
export function bindToolbar(v) {
  const { buttons, colorSel, root } = v.dom;
  // plain listeners, like the ones h() adds: they go with the elements
  buttons.prev.addEventListener("click", () => nextMatch(v, -1));
  buttons.next.addEventListener("click", () => nextMatch(v, 1));
  // Fit shows the whole graph, at whatever zoom that takes (the first view stays readable)
  buttons.fit.addEventListener("click", () => { fit(v, false); draw(v); });
  buttons.expandAll.addEventListener("click", () => expandAllItems(v));
  buttons.collapseAll.addEventListener("click", () => collapseAllItems(v));
  // the whole graph as it is opened now (Shift + click: the view on screen)
  buttons.svg.addEventListener("click", (ev) => { if (v.T) download(new Blob([ev.shiftKey ? viewSvg(v) : wholeSvg(v)], { type: "image/svg+xml" }), fileName(v.T.name, "svg")); });
  buttons.png.addEventListener("click", (ev) => {
    if (!v.T) return;
    const canvas = ev.shiftKey ? (draw(v, true), v.dom.canvas) : wholeCanvas(v);
    canvas.toBlob((b) => b && download(b, fileName(v.T.name, "png")));
  });
  listen(v, colorSel, "change", () => { v.st.color = colorSel.value; root.dataset.color = v.st.color; draw(v); });
}

/**
 * The view on screen as SVG (export.js's toSvg, edge labels as the canvas shows them).
 * @param {import("./state.js").ViewState} v
 * @returns {string}
 */
export function viewSvg(v) {
  const labels = v.st.z >= LABEL_ZOOM;
  if (labels) ensureLabels(v.ctx, v.T.view, v.theme);
  return toSvg(v.T.view, v.st, v.theme, { labels });
}

/** The least margin around an exported whole graph (px). */
const EXPORT_MARGIN = 16;
/** The largest side of an exported PNG (px): a larger graph is scaled down to it. */
export const EXPORT_MAX_PX = 8192;

/**
 * The camera that shows all of a w x h graph at zoom 1 (scaled down to `maxPx` a side):
 * the whole graph's export; (x0, y0) the graph's top left (camera.js's graphBounds: edge
 * labels may lie left of the boxes).
 * @param {number} w
 * @param {number} hh
 * @param {number} [maxPx]
 * @param {number} [x0]
 * @param {number} [y0]
 */
export function wholeCamera(w, hh, maxPx = Infinity, x0 = 0, y0 = 0) {
  const m = EXPORT_MARGIN;
  const z = Math.min(1, maxPx / (w + 2 * m), maxPx / (hh + 2 * m));
  return { tx: (m - x0) * z, ty: (m - y0) * z, z, cw: Math.ceil((w + 2 * m) * z), ch: Math.ceil((hh + 2 * m) * z) };
}

/** The whole graph's export camera, its edge labels placed and inside it. */
function exportCamera(v, maxPx) {
  ensureLabels(v.ctx, v.T.view, v.theme);
  const r = graphBounds(v.T.view, v.T.size);
  return wholeCamera(r.w, r.h, maxPx, r.x, r.y);
}

/**
 * The whole graph (every box and frame as opened now, not only the part on screen) as SVG.
 * @param {import("./state.js").ViewState} v
 * @returns {string}
 */
export function wholeSvg(v) {
  return toSvg(v.T.view, exportCamera(v), v.theme, { labels: true });
}

/**
 * The whole graph painted on a canvas of its own (at most EXPORT_MAX_PX a side).
 * @param {import("./state.js").ViewState} v
 * @returns {HTMLCanvasElement}
 */
export function wholeCanvas(v) {
  const cam = exportCamera(v, EXPORT_MAX_PX);
  const c = document.createElement("canvas");
  c.width = cam.cw; c.height = cam.ch;
  const ctx = c.getContext("2d");
  paint(ctx, v.T.view, { ...v.st, ...cam, dpr: 1, sel: null, hlNodes: null, hlEdges: null, matches: null }, v.theme);
  return c;
}

/**
 * Fills the tab strip: a tab per trace when there are several (or a memory tab), else the one
 * trace's name; `pick.trace(i)` / `pick.memory()` run on a click.
 * @param {HTMLElement} tabs
 * @param {{i:number}[]} traces
 * @param {{text:string, title:string, lib:boolean}[]} labels   model.js's tabLabels
 * @param {boolean} memory   whether there is a memory tab
 * @param {{trace: function(number): void, memory: function(): void}} pick
 */
export function fillTabs(tabs, traces, labels, memory, pick) {
  tabs.replaceChildren();
  if (traces.length > 1 || memory) traces.forEach((t) => tabs.append(h("button", { className: "jv-tab" + (labels[t.i].lib ? " jv-tab-lib" : ""), role: "tab", title: labels[t.i].title, onclick: () => pick.trace(t.i) }, labels[t.i].text)));
  // one trace has no tab, but its name still says what the graph is
  else if (traces.length === 1) tabs.append(h("span", { className: "jv-name", title: labels[0].title }, labels[0].text));
  if (memory) tabs.append(h("button", { className: "jv-tab jv-tab-memory", role: "tab", onclick: () => pick.memory() }, "memory"));
}

/**
 * Marks which tab is open (aria-selected) from `isOpen(button, index)`.
 * @param {HTMLElement} tabs
 * @param {function(HTMLElement, number): boolean} isOpen
 */
export function markTabs(tabs, isOpen) {
  tabs.querySelectorAll(".jv-tab").forEach((b, k) => b.setAttribute("aria-selected", String(isOpen(b, k))));
}

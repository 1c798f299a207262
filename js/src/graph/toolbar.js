// The graph view's toolbar: trace tabs, search box, match stepping, fit / expand / collapse
// buttons, the colour mode, SVG / PNG export of the whole graph (Shift: the view on screen) and
// the status line.

import { h } from "./panels.js";
import { listen, expandAllItems, collapseAllItems } from "./state.js";
import { nextMatch } from "./search.js";
import { fit, draw, graphBounds } from "./camera.js";
import { toSvg, download, fileName } from "./export.js";
import { ensureLabels, paint, LABEL_ZOOM } from "./draw.js";
import { tabGroups, foldTabs } from "./tabs.js";

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
 * Fills the tab strip: a tab per trace group when there are several traces (or a memory
 * tab), the minor ones in a "more" menu (tabs.js's foldTabs), else the one trace's name;
 * `pick.trace(i)` / `pick.memory()` run on a click. A tab of several parts (an eager
 * statement's) opens its next part when clicked again. Each tab lists its traces in
 * `data-traces` and is marked with its count of findings.
 * @param {HTMLElement} tabs
 * @param {import("./model.js").TracePayload[]} traces
 * @param {boolean} memory   whether there is a memory tab
 * @param {{trace: function(number): void, memory: function(): void, cur: function(): number}} pick
 */
export function fillTabs(tabs, traces, memory, pick) {
  tabs.replaceChildren();
  const groups = tabGroups(traces);
  if (traces.length > 1 || memory) {
    const { shown, more } = foldTabs(groups);
    const open = (g) => {
      const k = g.traces.indexOf(pick.cur());
      pick.trace(g.traces[k >= 0 ? (k + 1) % g.traces.length : 0]);
    };
    for (const g of shown) tabs.append(groupTab(g, () => open(g)));
    if (more.length) {
      const sel = h("select", { className: "jv-tab-more", "aria-label": "more tabs", title: "the other functions and statements of the cell",
        onchange: () => { const g = more[Number(sel.value)]; if (g) open(g); } },
        h("option", { value: "" }, `${more.length} more…` + findingsOf(more.reduce((n, g) => n + g.findings, 0))),
        ...more.map((g, k) => h("option", { value: String(k), title: g.title, dataset: { traces: g.traces.join(","), findings: String(g.findings) } },
          g.text + (g.traces.length > 1 ? ` (${g.traces.length} parts)` : "") + findingsOf(g.findings))));
      tabs.append(sel);
    }
  } else if (traces.length === 1) {
    // one trace has no tab, but its name still says what the graph is
    tabs.append(h("span", { className: "jv-name", title: groups[0].title }, groups[0].text));
  }
  if (memory) tabs.append(h("button", { className: "jv-tab jv-tab-memory", role: "tab", onclick: () => pick.memory() }, "memory"));
}

/** " · 2 findings" (nothing for none): what a folded tab holds. */
const findingsOf = (n) => (n ? ` · ${n} finding${n > 1 ? "s" : ""}` : "");

/** A group's tab: its label, its part (`1/2`) when it has several, its count of findings. */
function groupTab(g, onclick) {
  const b = h("button", { className: "jv-tab" + (g.lib ? " jv-tab-lib" : ""), role: "tab", title: g.title, onclick,
    dataset: { traces: g.traces.join(","), findings: String(g.findings) } }, g.text);
  if (g.traces.length > 1) b.append(h("span", { className: "jv-tab-part" }, ` 1/${g.traces.length}`));
  if (g.findings) b.append(h("span", { className: `jv-tab-count jv-${g.worst}`, title: `${g.findings} finding${g.findings > 1 ? "s" : ""} here` }, String(g.findings)));
  return b;
}

/**
 * Marks the open tab: the memory tab when `memoryOpen`, else the tab holding trace `cur`
 * (aria-selected; a tab of parts says which part; the "more" menu shows a folded one).
 * @param {HTMLElement} tabs
 * @param {number} cur
 * @param {boolean} memoryOpen
 */
export function markTabs(tabs, cur, memoryOpen) {
  tabs.querySelectorAll(".jv-tab").forEach((b) => {
    const ids = b.dataset.traces ? b.dataset.traces.split(",").map(Number) : null;
    const on = b.classList.contains("jv-tab-memory") ? memoryOpen : !memoryOpen && !!ids && ids.includes(cur);
    b.setAttribute("aria-selected", String(on));
    const part = b.querySelector(".jv-tab-part");
    if (part && ids) part.textContent = ` ${Math.max(1, ids.indexOf(cur) + 1)}/${ids.length}`;
  });
  const sel = tabs.querySelector(".jv-tab-more");
  if (sel) {
    const k = memoryOpen ? -1 : [...sel.options].findIndex((o) => o.dataset.traces && o.dataset.traces.split(",").map(Number).includes(cur));
    sel.selectedIndex = Math.max(0, k);
    sel.classList.toggle("jv-open", k > 0);
  }
}

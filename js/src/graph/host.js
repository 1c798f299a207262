// What the page and the model tell a graph view: theme changes (JupyterLab's theme, the OS
// colour scheme), the stage's size, and the model's `payload` and `selected` traits.

import { readTheme } from "./draw.js";
import { listen, revealNode } from "./state.js";
import { load, setTrace, firstView } from "./traces.js";
import { resize, autoFit, untouched, draw } from "./camera.js";

/**
 * Follows the page's theme: the painter's colours and root.dataset.theme / .bg.
 * @param {import("./state.js").ViewState} v
 */
export function watchTheme(v) {
  const { root } = v.dom;
  const retheme = () => {
    v.theme = readTheme(root);
    if (v.T && v.T.view) v.T.view.labelsPlaced = false;   // the code font may have changed: measure again
    root.classList.toggle("jv-jp", !!getComputedStyle(v.el).getPropertyValue("--jp-layout-color0").trim());
    root.dataset.theme = v.theme.dark ? "dark" : "light";
    root.dataset.bg = v.theme.bg;
    // at the stage's size now (a theme's sheet may change it)
    const r = v.dom.stage.getBoundingClientRect();
    if (!v.dom.main.hidden && r.width && (Math.abs(r.width - v.st.cw) > 0.5 || Math.abs(r.height - v.st.ch) > 0.5)) resize(v);
    draw(v);
  };
  // JupyterLab sets the theme's attributes before its stylesheet has loaded: read it again then
  let timers = [];
  const again = () => {
    retheme();
    for (const t of timers) clearTimeout(t);
    timers = [300, 1200].map((ms) => setTimeout(retheme, ms));
  };
  v.cleanups.push(() => timers.forEach(clearTimeout));
  root.dataset.theme = v.theme.dark ? "dark" : "light";
  root.dataset.bg = v.theme.bg;
  const mo = new MutationObserver(again);
  mo.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light", "class", "style"] });
  mo.observe(document.documentElement, { attributes: true, attributeFilter: ["class", "style", "data-theme"] });
  v.cleanups.push(() => mo.disconnect());
  const mq = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  if (mq) { listen(v, mq, "change", again); }
}

/**
 * Follows the stage's size: the canvas is resized, and fitted again while the user has not
 * moved the camera since the last automatic fit.
 * @param {import("./state.js").ViewState} v
 */
export function watchSize(v) {
  const { main, stage } = v.dom;
  const ro = new ResizeObserver(() => {
    const r = stage.getBoundingClientRect();
    if (main.hidden || r.width === 0) return;   // memory tab open
    // a size the view has taken already (the inspector opened with a selection: camera.js's
    // stageMoved kept the camera), not a new one to fit again
    const done = v.sizeHandled;
    v.sizeHandled = null;
    if (done && Math.abs(r.width - done.w) < 0.5 && Math.abs(r.height - done.h) < 0.5) { draw(v); return; }
    const refit = v.st.cw <= 1 || untouched(v);
    resize(v);
    if (refit && v.T && v.T.auto) firstView(v);   // the first view chooses what fits this size
    if (refit) autoFit(v);
    draw(v);
  });
  ro.observe(stage);
  v.cleanups.push(() => ro.disconnect());
}

/**
 * Follows the model: a new `payload` reloads the view; a `selected` set from Python reveals
 * and selects that node.
 * @param {import("./state.js").ViewState} v
 */
export function watchModel(v) {
  const { model } = v;
  const onPayload = () => load(v);
  model.on("change:payload", onPayload);
  v.cleanups.push(() => model.off("change:payload", onPayload));
  // Python may set `selected` too: reveal and select that node
  const onSelected = () => {
    const s = model.get("selected") || {};
    if (s.body == null || s.node == null) return;
    const sel = v.st.sel;
    if (sel && sel.kind === "node" && sel.B === s.body && sel.s.node.id === s.node && (s.trace ?? v.cur) === v.cur) return;
    if (s.trace != null && s.trace !== v.cur && v.traces[s.trace]) setTrace(v, s.trace);
    if (v.T) revealNode(v, s.body, s.node);
  };
  model.on("change:selected", onSelected);
  v.cleanups.push(() => model.off("change:selected", onSelected));
}

/**
 * Keeps the graph's room when the findings list above it grows: the view grows by the
 * list's height (the list shows its findings whole, never in an inner scroll box). A height
 * the user dragged the view to is kept as the graph's part. (The memory and time tabs take
 * the height of what they show: dom.js's CSS.)
 * @param {import("./state.js").ViewState} v
 */
export function watchFindings(v) {
  const { root, diagBox } = v.dom;
  let base = null, set = null, lastDh = 0;
  const fitRoot = () => {
    const rh = root.offsetHeight;
    // the memory and time tabs grow with what they show (no inner scroll box): not the graph's
    if (!rh || root.dataset.tab === "memory" || root.dataset.tab === "time") return;
    const dh = diagBox.offsetHeight;   // 0 while hidden (no findings, the memory tab)
    if (set != null && Math.abs(rh - set) > 1) base = rh - lastDh;   // the user resized the view
    if (base == null) base = rh;
    set = Math.round(base + dh);
    lastDh = dh;
    if (Math.abs(rh - set) > 1) root.style.height = `${set}px`;
  };
  const ro = new ResizeObserver(fitRoot);
  ro.observe(diagBox);
  ro.observe(root);
  v.cleanups.push(() => ro.disconnect());
}

// The graph view's camera (pan, zoom, fit on the canvas) and its frame scheduling: every
// function takes the view state `v` (state.js) and changes only v.st's camera fields,
// v.fitCam, v.raf and the canvas.

import { paint, colorMax, ensureLabels, LABEL_ZOOM } from "./draw.js";
import { fillLegend } from "./legend.js";
import { drawMinimap } from "./minimap.js";

const now = () => performance.now();

/**
 * Sizes the canvas to its stage (device pixels); does nothing while the stage has no size
 * (not in the page yet, or the memory tab is open).
 * @param {import("./state.js").ViewState} v
 */
export function resize(v) {
  const { stage, canvas } = v.dom;
  const st = v.st;
  const r = stage.getBoundingClientRect();
  if (!r.width || !r.height) return;   // not in the page yet, or the memory tab is open
  st.cw = Math.max(1, r.width); st.ch = Math.max(1, r.height);
  st.dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(st.cw * st.dpr); canvas.height = Math.round(st.ch * st.dpr);
}

/**
 * The stage's size changed under the camera (the inspector, shown with a selection only,
 * opened beside or under the graph, or closed): the canvas is resized now, the camera kept,
 * moved the least that keeps the selected item `it` in view; the size observer, which would
 * fit the graph again into the new size, is told that this size is handled (v.sizeHandled).
 * @param {import("./state.js").ViewState} v
 * @param {any} it
 */
export function stageMoved(v, it) {
  const { st } = v;
  const r = v.dom.stage.getBoundingClientRect();
  if (!r.width || !r.height || st.cw <= 1) return;   // not shown yet, or the memory tab is open
  if (Math.abs(r.width - st.cw) < 0.5 && Math.abs(r.height - st.ch) < 0.5) return;
  const was = untouched(v);
  resize(v);
  v.sizeHandled = { w: st.cw, h: st.ch };
  if (it && it.w) Object.assign(st, followCamera(st, it, st.cw, st.ch, st.z));
  if (was) v.fitCam = { tx: st.tx, ty: st.ty, z: st.z };
}

/** The least zoom at all: what shows a 200k px tall graph whole in a 400 px canvas. */
export const MIN_Z = 0.002;

/** Least zoom of a fit: the painter's smallest text (11 px) is drawn at >= 11 px. */
export const READABLE_Z = 1;
const MARGIN = 20;

/**
 * The camera that shows a w x h graph in a cw x ch canvas: centred and whole when it fits at a
 * zoom in [zmin, 1.4]; else at zmin from its top, centred across when it is narrow enough,
 * else on what the top of the canvas holds (`band`), the minimap showing the rest.
 * @param {number} w
 * @param {number} hh
 * @param {number} cw
 * @param {number} ch
 * @param {number} zmin
 * @param {{x0:number, x1:number}} [band]   topBand's extent of the boxes near the top
 * @returns {{tx:number, ty:number, z:number}}
 */
export function fitCamera(w, hh, cw, ch, zmin, band) {
  const m = MARGIN;
  let z = Math.min((cw - 2 * m) / Math.max(w, 1), (ch - 2 * m) / Math.max(hh, 1));
  z = Math.max(zmin, Math.min(1.4, z));
  let tx = w * z < cw ? (cw - w * z) / 2 : m;
  // too wide: the part of the graph in the top of the canvas (`band`, world x0..x1) in view,
  // centred when it fits across, else its left end
  if (w * z >= cw && band && band.x1 > band.x0) tx = (band.x1 - band.x0) * z < cw - 2 * m ? (cw - (band.x0 + band.x1) * z) / 2 : m - band.x0 * z;
  return { z, tx, ty: hh * z < ch ? (ch - hh * z) / 2 : m };
}

/**
 * The x extent (world px) of the boxes of `view` whose top lies within `height` world px of
 * the graph's top, and of the edge labels placed there: what a camera at the top of a large
 * graph has to show.
 * @param {{boxes:{x:number, y:number, w:number}[], edges?:any[]}} view
 * @param {number} height
 * @returns {{x0:number, x1:number}}
 */
export function topBand(view, height) {
  let x0 = Infinity, x1 = -Infinity;
  for (const b of view.boxes) if (b.y < height) { x0 = Math.min(x0, b.x); x1 = Math.max(x1, b.x + b.w); }
  for (const e of view.edges || []) {
    const r = e.lr;
    if (r && r.y < height) { x0 = Math.min(x0, r.x); x1 = Math.max(x1, r.x + r.w); }
  }
  return { x0, x1 };
}

/**
 * What the view draws, in world px: the laid-out boxes and frames (0, 0, size.w, size.h), the
 * edges (a detour's lane may run left of the leftmost box) and the edge labels placed (a label
 * beside an edge into the leftmost box sits left of it). Fit and the exports show all of it.
 * @param {{edges:any[], labelsPlaced?:boolean}} view
 * @param {{w:number, h:number}} size   layout.js's size
 * @returns {{x:number, y:number, w:number, h:number}}
 */
export function graphBounds(view, size) {
  let x0 = 0, y0 = 0, x1 = size.w, y1 = size.h;
  for (const e of view.edges) {
    if (e.bb) { x0 = Math.min(x0, e.bb.x0); x1 = Math.max(x1, e.bb.x1); }
    const r = view.labelsPlaced ? e.lr : null;
    if (r) { x0 = Math.min(x0, r.x); x1 = Math.max(x1, r.x + r.w); y0 = Math.min(y0, r.y); y1 = Math.max(y1, r.y + r.h); }
  }
  return { x: x0, y: y0, w: x1 - x0, h: y1 - y0 };
}

/**
 * The camera that shows bounds `r` (graphBounds) in a cw x ch canvas: fitCamera of its size,
 * moved by its origin.
 * @param {{x:number, y:number, w:number, h:number}} r
 * @param {number} cw
 * @param {number} ch
 * @param {number} zmin
 * @param {{x0:number, x1:number}} [band]   world px
 * @returns {{tx:number, ty:number, z:number}}
 */
export function fitBounds(r, cw, ch, zmin, band) {
  const cam = fitCamera(r.w, r.h, cw, ch, zmin, band && { x0: band.x0 - r.x, x1: band.x1 - r.x });
  return { z: cam.z, tx: cam.tx - r.x * cam.z, ty: cam.ty - r.y * cam.z };
}

/**
 * The camera after a group opened into rect `r` (world px): as `cam`, moved the least that
 * puts the whole frame in the canvas; a frame larger than the canvas shows its top left
 * (its header) instead, zoomed out down to `zmin` first.
 * @param {{tx:number, ty:number, z:number}} cam
 * @param {{x:number, y:number, w:number, h:number}} r
 * @param {number} cw
 * @param {number} ch
 * @param {number} zmin
 * @returns {{tx:number, ty:number, z:number}}
 */
export function followCamera(cam, r, cw, ch, zmin) {
  const m = MARGIN;
  let { tx, ty, z } = cam;
  const zfit = Math.min((cw - 2 * m) / Math.max(r.w, 1), (ch - 2 * m) / Math.max(r.h, 1));
  if (zfit < z) {
    // zoom out around the frame's top left corner, not below zmin
    const z2 = Math.max(Math.min(z, zmin), zfit);
    const sx = r.x * z + tx, sy = r.y * z + ty;
    tx = sx - r.x * z2; ty = sy - r.y * z2; z = z2;
  }
  const axis = (t, x, w, c) => {
    const a = x * z + t, b = a + w * z;
    if (w * z > c - 2 * m) return t + (m - a);         // too big: its start in view
    if (a < m) return t + (m - a);
    if (b > c - m) return t - (b - (c - m));
    return t;
  };
  return { tx: axis(tx, r.x, r.w, cw), ty: axis(ty, r.y, r.h, ch), z };
}

/**
 * Zooms and centres the whole graph in the canvas; `readable` (the default: the first view,
 * expand all) keeps the zoom at READABLE_Z or more (a larger graph shows its top, and the
 * minimap the rest); not `readable` (Fit, `f`) shows it all, however small.
 * @param {import("./state.js").ViewState} v
 * @param {boolean} [readable]
 */
export function fit(v, readable = true) {
  const { T, st } = v;
  if (!T) return;
  const zmin = readable ? READABLE_Z : MIN_Z;
  const at = () => fitBounds(graphBounds(T.view, T.size), st.cw, st.ch, zmin, topBand(T.view, (st.ch - 2 * MARGIN) / zmin));
  let cam = at();
  // at a zoom that draws the edge labels, the bounds hold them (placed now, as the paint would)
  if (cam.z >= LABEL_ZOOM && !T.view.labelsPlaced) { ensureLabels(v.ctx, T.view, v.theme); cam = at(); }
  Object.assign(st, cam);
}

/**
 * Whether the open trace's graph, its edge labels included, fits the canvas whole at a
 * readable zoom (the zoom that draws the labels: they are placed for it).
 * @param {import("./state.js").ViewState} v
 */
export function fitsReadable(v) {
  const { T, st } = v;
  ensureLabels(v.ctx, T.view, v.theme);
  const r = graphBounds(T.view, T.size);
  return r.w * READABLE_Z <= st.cw - 2 * MARGIN && r.h * READABLE_Z <= st.ch - 2 * MARGIN;
}

/**
 * The first fit of a trace, kept while the user has not moved the camera: a canvas that
 * settles its size later (a panel filled, the output area grown) is fitted again.
 * @param {import("./state.js").ViewState} v
 */
export function autoFit(v) {
  const st = v.st;
  fit(v, true);
  v.fitCam = { tx: st.tx, ty: st.ty, z: st.z };
}

/**
 * Whether the camera is still where the last autoFit put it.
 * @param {import("./state.js").ViewState} v
 */
export function untouched(v) {
  const { fitCam, st } = v;
  return fitCam && fitCam.tx === st.tx && fitCam.ty === st.ty && fitCam.z === st.z;
}

/**
 * Moves the camera so that item `it` is in the middle (zooming in to 0.9 when far out).
 * @param {import("./state.js").ViewState} v
 * @param {{x:number, y:number, w:number, h:number}} it
 */
export function centerOn(v, it) {
  const st = v.st;
  if (st.z < READABLE_Z) st.z = READABLE_Z;
  st.tx = st.cw / 2 - (it.x + it.w / 2) * st.z;
  st.ty = st.ch / 2 - (it.y + it.h / 2) * st.z;
}

/**
 * Zooms by factor `f` around canvas point (px, py), within [MIN_Z, 4], and redraws.
 * @param {import("./state.js").ViewState} v
 * @param {number} f
 * @param {number} px
 * @param {number} py
 */
export function zoomAt(v, f, px, py) {
  const st = v.st;
  const z = Math.max(MIN_Z, Math.min(4, st.z * f));
  st.tx = px - (px - st.tx) * (z / st.z);
  st.ty = py - (py - st.ty) * (z / st.z);
  st.z = z;
  draw(v);
}

/**
 * Paints the view: now when `sync`, else on the next animation frame (once however often asked).
 * @param {import("./state.js").ViewState} v
 * @param {boolean} [sync]
 */
export function draw(v, sync) {
  if (sync) { cancelAnimationFrame(v.raf); v.raf = 0; drawNow(v); return; }
  if (!v.raf) v.raf = requestAnimationFrame(() => { v.raf = 0; drawNow(v); });
}

function drawNow(v) {
  const { T, timings, ctx } = v;
  const { canvas, root } = v.dom;
  if (!T) { ctx.setTransform(1, 0, 0, 1, 0, 0); ctx.clearRect(0, 0, canvas.width, canvas.height); return; }
  const a = now();
  root.dataset.drawn = String(paint(ctx, T.view, v.st, v.theme));
  timings.paint = now() - a;
  // the legend follows the colouring and its scale's top (what the boxes shown reach)
  const max = colorMax(T.view, v.st.color);
  // a sharded program's mesh, from its compiled memory entry (payload.compiled_memory[].mesh)
  const mesh = (((v.payload && v.payload.compiled_memory) || []).find((e) => e.index === v.cur && e.mesh) || {}).mesh || "";
  const key = `${v.st.color}:${max}:${v.theme.bg}:${mesh}`;
  if (v.legendKey !== key) { v.legendKey = key; fillLegend(v.dom.legend, v.st.color, max, v.theme, mesh); }
  drawMinimap(v);
  // who follows this view's camera (the compare view's other pane), told once per move
  if (v.onCamera) {
    const { tx, ty, z } = v.st, c = v.camSeen;
    if (!c || c.tx !== tx || c.ty !== ty || c.z !== z) { v.camSeen = { tx, ty, z }; v.onCamera(v); }
  }
  if (timings.firstPaint == null) { timings.firstPaint = now() - v.t0; timings.firstPaintAt = now(); root.dataset.painted = "1"; }
}

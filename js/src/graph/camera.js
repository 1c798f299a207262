// The graph view's camera (pan, zoom, fit on the canvas) and its frame scheduling: every
// function takes the view state `v` (state.js) and changes only v.st's camera fields,
// v.fitCam, v.raf and the canvas.

import { paint } from "./draw.js";

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
 * Zooms and centres the whole graph in the canvas; `readable` keeps the zoom at 0.6 or more.
 * @param {import("./state.js").ViewState} v
 * @param {boolean} [readable]
 */
export function fit(v, readable) {
  const { T, st } = v;
  if (!T) return;
  const { w, h: hh } = T.size;
  const m = 20;
  let z = Math.min((st.cw - 2 * m) / Math.max(w, 1), (st.ch - 2 * m) / Math.max(hh, 1));
  z = Math.max(readable ? 0.6 : 0.03, Math.min(1.4, z));
  st.z = z;
  st.tx = w * z < st.cw ? (st.cw - w * z) / 2 : m;
  st.ty = hh * z < st.ch ? (st.ch - hh * z) / 2 : m;
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
  if (st.z < 0.7) st.z = 0.9;
  st.tx = st.cw / 2 - (it.x + it.w / 2) * st.z;
  st.ty = st.ch / 2 - (it.y + it.h / 2) * st.z;
}

/**
 * Zooms by factor `f` around canvas point (px, py), within [0.03, 4], and redraws.
 * @param {import("./state.js").ViewState} v
 * @param {number} f
 * @param {number} px
 * @param {number} py
 */
export function zoomAt(v, f, px, py) {
  const st = v.st;
  const z = Math.max(0.03, Math.min(4, st.z * f));
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
  if (timings.firstPaint == null) { timings.firstPaint = now() - v.t0; timings.firstPaintAt = now(); root.dataset.painted = "1"; }
}

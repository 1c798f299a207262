// The graph view's pointer and keyboard: drag to pan, Ctrl/Cmd + wheel (or a wheel once the
// view was clicked into) to zoom (Shift or a sideways swipe pans; a plain wheel scrolls the page), hover for tooltips, click to select, the open glyph or a double-click to open;
// arrows walk the graph, Enter/Space open, +/- zoom, f fits, / searches, n steps matches;
// a click or drag on the minimap centres the camera there.

import { HEAD } from "./layout.js";
import { edgeAt, labelText, bundleShapes } from "./edges.js";
import { tooltipText, WEAK } from "./panels.js";
import { listen, select, toggle } from "./state.js";
import { nextMatch } from "./search.js";
import { fit, centerOn, zoomAt, draw } from "./camera.js";

/**
 * The item at world point (x, y) of `view`: the topmost box ("glyph" on a cluster's open
 * glyph, else "body"), else the header of the innermost frame ("glyph" at its right end,
 * else "head"); null on empty space.
 * @param {{boxes:any[], frames:any[]}} view
 * @param {number} x
 * @param {number} y
 * @returns {{it:any, part:"glyph"|"body"|"head"}|null}
 */
export function hitAt(view, x, y) {
  const bs = view.boxes;
  for (let i = bs.length - 1; i >= 0; i--) {
    const b = bs[i];
    if (x >= b.x && x <= b.x + b.w && y >= b.y && y <= b.y + b.h) return { it: b, part: x > b.x + b.w - 24 && y < b.y + 22 && b.kind !== "node" ? "glyph" : "body" };
  }
  const fs = view.frames;
  for (let i = fs.length - 1; i >= 0; i--) {
    const f = fs[i];
    if (x >= f.x && x <= f.x + f.w && y >= f.y && y <= f.y + HEAD) return { it: f, part: x > f.x + f.w - 26 ? "glyph" : "head" };
  }
  return null;
}

/**
 * Where an arrow key goes from `sel` in `view`: down/up along an edge (to the nearest in x),
 * left/right to the nearest box in the same row; with nothing selected, the first box.
 * @param {{boxes:any[], edges:any[]}} view
 * @param {any} sel
 * @param {"down"|"up"|"left"|"right"} dir
 */
export function neighbour(view, sel, dir) {
  const it = sel;
  if (!it) return view.boxes[0] || null;
  if (dir === "down" || dir === "up") {
    let best = null;
    for (const e of view.edges) {
      const c = dir === "down" ? (e.s === it ? e.t : null) : (e.t === it ? e.s : null);
      if (c && (!best || Math.abs(c.x - it.x) < Math.abs(best.x - it.x))) best = c;
    }
    return best;
  }
  let best = null, bd = Infinity;
  for (const b of view.boxes) {
    if (b === it || Math.abs(b.y - it.y) > 4) continue;
    const dx = b.x - it.x;
    if ((dir === "right" ? dx > 0 : dx < 0) && Math.abs(dx) < bd) { bd = Math.abs(dx); best = b; }
  }
  return best;
}

/**
 * Whether a wheel event over the canvas moves the graph (zoom, or pan with Shift) rather
 * than scrolling the page: with Ctrl or Cmd held (a trackpad pinch sets ctrlKey), or once
 * the view was clicked into (`engaged`).
 * @param {{ctrlKey:boolean, metaKey:boolean}} ev
 * @param {boolean} engaged
 */
export function wheelZooms(ev, engaged) {
  return !!(ev.ctrlKey || ev.metaKey || engaged);
}

/** Shows, for a moment, how the wheel zooms (a plain wheel scrolled the page instead). */
function wheelHint(v) {
  const hint = v.dom.wheelHint;
  if (!hint) return;
  hint.hidden = false;
  clearTimeout(v.wheelTimer);
  v.wheelTimer = setTimeout(() => { hint.hidden = true; }, 1200);
}

/** A pointer event in canvas px (px, py) and world coordinates (x, y). */
function toWorld(v, ev) {
  const st = v.st;
  const r = v.dom.canvas.getBoundingClientRect();
  const px = ev.clientX - r.left, py = ev.clientY - r.top;
  return { px, py, x: (px - st.tx) / st.z, y: (py - st.ty) / st.z };
}

const hit = (v, x, y) => (v.T ? hitAt(v.T.view, x, y) : null);

function edgeTip(e) {
  const shapes = e.n > 1 ? "\n" + bundleShapes(e).slice(0, 8).join("\n") + (e.types && e.types.size > 8 ? `\n… ${e.types.size - 8} more shapes` : "") : "";
  const weak = (e.types ? [...e.types.keys()] : [e.type]).some((t) => String(t).startsWith("~")) ? "\n" + WEAK : "";
  return `${labelText(e)}\n${e.s.lines[0]} → ${e.t.lines[0]}${shapes}${weak}`;
}

/**
 * The canvas's pointer: pan, hover tooltips, click, double-click, wheel.
 * @param {import("./state.js").ViewState} v
 */
export function bindPointer(v) {
  const { canvas, stage, tip } = v.dom;
  const st = v.st;
  listen(v, canvas, "pointerdown", (ev) => {
    stage.focus({ preventScroll: true });
    v.engaged = true;
    v.drag = { x: ev.clientX, y: ev.clientY, tx: st.tx, ty: st.ty, moved: false };
    canvas.setPointerCapture(ev.pointerId);
  });
  listen(v, canvas, "pointermove", (ev) => {
    const drag = v.drag;
    if (drag) {
      const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) { st.tx = drag.tx + dx; st.ty = drag.ty + dy; tip.hidden = true; draw(v); }
      return;
    }
    const { T } = v;
    const w = toWorld(v, ev);
    const hh = hit(v, w.x, w.y);
    // off the boxes, an edge says its aval (the only place for a label that had no room)
    const e = !hh && T ? edgeAt(T.view, w.x, w.y, 5 / st.z) : null;
    const text = hh && hh.part !== "glyph" ? tooltipText(hh.it, T.graph) : e ? edgeTip(e) : "";
    if (text) {
      tip.textContent = text;
      tip.hidden = false;
      tip.style.left = Math.min(w.px + 14, st.cw - 200) + "px";
      tip.style.top = (w.py + 14) + "px";
    } else tip.hidden = true;
    canvas.style.cursor = hh ? "pointer" : "grab";
  });
  listen(v, canvas, "pointerleave", () => { tip.hidden = true; });
  listen(v, canvas, "pointerup", (ev) => {
    const d = v.drag;
    v.drag = null;
    if (!d || d.moved) return;
    const w = toWorld(v, ev);
    const hh = hit(v, w.x, w.y);
    if (!hh) { select(v, null); return; }
    if (hh.part === "glyph") toggle(v, hh.it);
    else select(v, hh.it);
  });
  listen(v, canvas, "dblclick", (ev) => {
    const w = toWorld(v, ev);
    const hh = hit(v, w.x, w.y);
    if (hh && hh.part !== "glyph" && (hh.it.open || hh.it.kind !== "node" || (hh.it.s.node.subs || []).length)) toggle(v, hh.it);
  });
  // the wheel scrolls the page (a notebook scrolls past the view) unless Ctrl/Cmd is held (a
  // trackpad's pinch too) or the view was clicked into first (until the pointer leaves it),
  // as maps embedded in pages do; a plain wheel says how to zoom
  listen(v, canvas, "pointerleave", () => { v.engaged = false; });
  listen(v, canvas, "wheel", (ev) => {
    if (!wheelZooms(ev, !!v.engaged)) { wheelHint(v); return; }
    ev.preventDefault();
    const w = toWorld(v, ev);
    if (ev.shiftKey && !ev.ctrlKey) { st.tx -= ev.deltaY || ev.deltaX; draw(v); return; }
    if (!ev.ctrlKey && Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) { st.tx -= ev.deltaX; draw(v); return; }
    zoomAt(v, Math.exp(-ev.deltaY * (ev.ctrlKey || ev.metaKey ? 0.01 : 0.0015)), w.px, w.py);
  }, { passive: false });
}

/**
 * The stage's keys (when it has the focus).
 * @param {import("./state.js").ViewState} v
 */
export function bindKeyboard(v) {
  const st = v.st;
  listen(v, v.dom.stage, "keydown", (ev) => {
    if (!v.T) return;
    const k = ev.key;
    const dirs = { ArrowDown: "down", ArrowUp: "up", ArrowLeft: "left", ArrowRight: "right" };
    if (dirs[k]) {
      const n = neighbour(v.T.view, st.sel, dirs[k]);
      if (n) { select(v, n); if (n.x * st.z + st.tx < 0 || n.x * st.z + st.tx > st.cw - 40 || n.y * st.z + st.ty < 0 || n.y * st.z + st.ty > st.ch - 30) centerOn(v, n); draw(v); }
    } else if (k === "Enter" || k === " ") toggle(v, st.sel);
    else if (k === "+" || k === "=") zoomAt(v, 1.25, st.cw / 2, st.ch / 2);
    else if (k === "-") zoomAt(v, 0.8, st.cw / 2, st.ch / 2);
    else if (k === "f" || k === "0") { fit(v, false); draw(v); }
    else if (k === "/") { v.dom.q.focus(); }
    else if (k === "Escape") select(v, null);
    else if (k === "n") nextMatch(v, ev.shiftKey ? -1 : 1);
    else return;
    ev.preventDefault();
  });
}

/**
 * A click (or drag) on the minimap centres the camera on that spot of the graph.
 * @param {import("./state.js").ViewState} v
 */
export function bindMinimap(v) {
  const mm = v.dom.minimap;
  const go = (ev) => {
    if (!v.mini) return;
    const r = mm.getBoundingClientRect();
    const x = (ev.clientX - r.left) / v.mini.s, y = (ev.clientY - r.top) / v.mini.s;
    v.st.tx = v.st.cw / 2 - x * v.st.z;
    v.st.ty = v.st.ch / 2 - y * v.st.z;
    draw(v);
  };
  listen(v, mm, "pointerdown", (ev) => { ev.stopPropagation(); mm.setPointerCapture(ev.pointerId); go(ev); });
  listen(v, mm, "pointermove", (ev) => { if (ev.buttons & 1) go(ev); });
}

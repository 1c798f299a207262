// Test and benchmark hooks of a graph view (root.jaxviz): read-only views of its state, plus
// the actions a user has. The browser tests (tests/browser) and benchmarks use them.

import { ensureLabels, isDonated, LABEL_ZOOM } from "./draw.js";
import { labelText, pointAt } from "./edges.js";
import { toggle, expandAllItems, collapseAllItems } from "./state.js";
import { setTrace, showMemory } from "./traces.js";
import { centerOn, draw, graphBounds } from "./camera.js";
import { viewSvg, wholeSvg, wholeCanvas } from "./toolbar.js";

const now = () => performance.now();

/**
 * Sets `v.dom.root.jaxviz`.
 * @param {import("./state.js").ViewState} v
 */
export function installHooks(v) {
  const { st, timings, ctx } = v;
  const { canvas, root } = v.dom;
  root.jaxviz = {
    timings,
    boxes: () => {
      const { T } = v;
      const r = canvas.getBoundingClientRect();
      return (T ? T.view.boxes : []).map((b) => ({ key: b.key, kind: b.kind, label: b.lines[0], sub: b.lines[1],
        op: b.kind === "node" ? b.s.node.op : null, nodeKind: b.kind === "node" ? b.s.node.kind : null,
        donated: !!(st.donated && isDonated(b, st.donated)), coll: !!(st.coll && st.coll.has(b)),
        cx: r.left + st.tx + (b.x + b.w / 2) * st.z, cy: r.top + st.ty + (b.y + b.h / 2) * st.z, w: b.w * st.z, h: b.h * st.z,
        onScreen: (b.x + b.w) * st.z + st.tx > 0 && b.x * st.z + st.tx < st.cw && (b.y + b.h) * st.z + st.ty > 0 && b.y * st.z + st.ty < st.ch }));
    },
    frames: () => (v.T ? v.T.view.frames.map((f) => f.key) : []),
    // open clusters with their header text and whether any of them is in the canvas
    frameBoxes: () => (v.T ? v.T.view.frames.map((f) => ({ key: f.key, kind: f.kind, label: f.lines[0],
      onScreen: (f.x + f.w) * st.z + st.tx > 0 && f.x * st.z + st.tx < st.cw && (f.y + f.h) * st.z + st.ty > 0 && f.y * st.z + st.ty < st.ch })) : []),
    // edges with their drawn label (null: no room, or not drawn at this zoom), in page px
    edges: () => {
      const { T } = v;
      if (!T) return [];
      const r = canvas.getBoundingClientRect();
      const shown = st.z >= LABEL_ZOOM;
      if (shown) ensureLabels(ctx, T.view, v.theme);
      const px = (x, y) => ({ x: r.left + st.tx + x * st.z, y: r.top + st.ty + y * st.z });
      return T.view.edges.map((e) => {
        const lr = shown && e.lr ? { ...px(e.lr.x, e.lr.y), w: e.lr.w * st.z, h: e.lr.h * st.z } : null;
        const m = pointAt(e, 0.5);
        const mp = px(m.x, m.y);
        return { s: e.s.key, t: e.t.key, type: e.type, label: lr ? labelText(e) : null, rect: lr,
          x0: px(e.x0, e.y0).x, x1: px(e.x1, e.y1).x, y1: px(e.x1, e.y1).y, mx: mp.x, my: mp.y };
      });
    },
    // the items the selection's dataflow lights (keys), empty when nothing is lit
    flow: () => (st.hlNodes ? [...st.hlNodes].map((it) => it.key) : []),
    toggle: (key) => toggle(v, v.T.view.items.get(key)),
    center: (key) => { const it = v.T.view.items.get(key); if (it) { centerOn(v, it); draw(v, true); } },
    expandAll: () => { const a = now(); expandAllItems(v); return now() - a; },
    collapseAll: () => { const a = now(); collapseAllItems(v); return now() - a; },
    setTrace: (i) => { showMemory(v, false); setTrace(v, i); },
    showMemory: (on = true) => showMemory(v, on),
    theme: () => ({ ...v.theme }),
    // the text on screen: each font the last paint used, its px size times the zoom
    textPx: () => [...(st.fonts || [])].map((f) => ({ font: f, px: +/(\d+(?:\.\d+)?)px/.exec(f)[1] * st.z })),
    camera: () => ({ tx: st.tx, ty: st.ty, z: st.z, cw: st.cw, ch: st.ch }),
    // the laid-out graph (w, h) and what the view draws of it, edge labels placed so far included
    size: () => (v.T && v.T.size ? { ...v.T.size, bounds: graphBounds(v.T.view, v.T.size) } : null),
    // the minimap (null: hidden, the canvas shows everything) and its on-screen mark, map px
    minimap: () => (v.dom.minimap.hidden || !v.mini ? null : { w: v.mini.W, h: v.mini.H, rect: { ...v.mini.rect } }),
    legend: () => ({ mode: v.dom.legend.dataset.mode || "", title: v.dom.legend.querySelector(".jv-legend-title")?.textContent || "",
      ticks: [...v.dom.legend.querySelectorAll(".jv-tick")].map((t) => t.textContent),
      marks: [...v.dom.legend.querySelectorAll(".jv-mark")].map((m) => m.textContent) }),
    frameRects: () => {
      const r = canvas.getBoundingClientRect();
      return v.T ? v.T.view.frames.map((f) => ({ key: f.key, label: f.lines[0], x: r.left + st.tx + f.x * st.z, y: r.top + st.ty + f.y * st.z,
        w: f.w * st.z, h: f.h * st.z })) : [];
    },
    exportSvg: () => (v.T ? viewSvg(v) : ""),
    exportWholeSvg: () => (v.T ? wholeSvg(v) : ""),
    exportWholePng: () => (v.T ? wholeCanvas(v).toDataURL("image/png") : ""),
    exportPng: () => { draw(v, true); return canvas.toDataURL("image/png"); },
    canvasRect: () => { const r = canvas.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; },
  };
}

// Canvas painting of the laid-out view, with culling to the viewport, and the theme read
// from JupyterLab's CSS variables (--jp-*) with light/dark fallbacks.

import { avalBytes } from "./model.js";
import { HEAD } from "./layout.js";
import { placeLabels, labelText, tracePath, LABEL_H } from "./edges.js";
import { heatOf, heatAlpha } from "./legend.js";

const LIGHT = {
  bg: "#ffffff", fg: "#1f2328", fg2: "#57606a", border: "#c9ced6", node: "#f6f8fa", io: "#e7f0ff",
  konst: "#fff4e0", frame: "rgba(120,130,150,0.07)", frameHead: "rgba(120,130,150,0.16)",
  cluster: "#eef1f5", edge: "#8a94a3", brand: "#1976d2", warn: "#f57c00", error: "#d32f2f", coll: "#8e24aa",
  heat: "#e4572e", font: "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
  mono: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
};
const DARK = {
  ...LIGHT, bg: "#1e1e1e", fg: "#e6e6e6", fg2: "#a8b0ba", border: "#4a4f57", node: "#2a2d33",
  io: "#213047", konst: "#3a3020", frame: "rgba(160,170,190,0.07)", frameHead: "rgba(160,170,190,0.16)",
  cluster: "#30343b", edge: "#7d8794", brand: "#64b5f6", warn: "#ffb74d", error: "#ef5350", coll: "#ce93d8", heat: "#ff7043",
};

function luminance(color) {
  const m = /rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)/.exec(color || "");
  if (!m) return 1;
  return (0.2126 * m[1] + 0.7152 * m[2] + 0.0722 * m[3]) / 255;
}

/** Colours for the canvas, from --jp-* variables when present (JupyterLab), else fallbacks. */
export function readTheme(el) {
  const cs = getComputedStyle(el);
  const v = (name) => cs.getPropertyValue(name).trim();
  const jpBg = v("--jp-layout-color0");
  let dark;
  if (jpBg) {
    const probe = document.createElement("div");
    probe.style.color = jpBg;
    el.appendChild(probe);
    dark = luminance(getComputedStyle(probe).color) < 0.5;
    probe.remove();
  } else dark = !!(window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches);
  const base = dark ? DARK : LIGHT;
  const pick = (name, fb) => v(name) || fb;
  return {
    ...base, dark,
    bg: pick("--jp-layout-color0", base.bg), fg: pick("--jp-ui-font-color0", base.fg),
    fg2: pick("--jp-ui-font-color2", base.fg2), border: pick("--jp-border-color1", base.border),
    node: pick("--jp-layout-color1", base.node), cluster: pick("--jp-layout-color2", base.cluster),
    brand: pick("--jp-brand-color1", base.brand), warn: pick("--jp-warn-color0", base.warn),
    error: pick("--jp-error-color0", base.error), font: pick("--jp-ui-font-family", base.font),
    mono: pick("--jp-code-font-family", base.mono),
  };
}

function roundRect(ctx, x, y, w, h, r) {
  ctx.beginPath();
  ctx.moveTo(x + r, y);
  ctx.arcTo(x + w, y, x + w, y + h, r);
  ctx.arcTo(x + w, y + h, x, y + h, r);
  ctx.arcTo(x, y + h, x, y, r);
  ctx.arcTo(x, y, x + w, y, r);
  ctx.closePath();
}

function clip(ctx, text, maxW) {
  if (ctx.measureText(text).width <= maxW) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(text.slice(0, mid) + "…").width <= maxW) lo = mid; else hi = mid - 1;
  }
  return text.slice(0, lo) + "…";
}

/** Edge labels' font size (px at zoom 1); every text the painter draws is 11 px or more. */
export const LABEL_PX = 11;

/** Least zoom at which edge labels are drawn (below it they are too small to read). */
export const LABEL_ZOOM = 0.9;

/** Places the edge labels of `view` once (on the first paint that shows them), in the label font. */
export function ensureLabels(ctx, view, th) {
  if (view.labelsPlaced) return;
  ctx.save();
  ctx.font = `${LABEL_PX}px ${th.mono}`;
  placeLabels(view, (t) => ctx.measureText(t).width);
  ctx.restore();
}

/**
 * Paints the view. `st` holds the transform (tx, ty, z), the canvas size in CSS px (cw, ch),
 * highlight sets and the colour mode.
 */
export function paint(ctx, view, st, th) {
  const dpr = st.dpr;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = th.bg;
  ctx.fillRect(0, 0, st.cw, st.ch);
  ctx.setTransform(dpr * st.z, 0, 0, dpr * st.z, dpr * st.tx, dpr * st.ty);
  const x0 = -st.tx / st.z, y0 = -st.ty / st.z, x1 = x0 + st.cw / st.z, y1 = y0 + st.ch / st.z;
  const vis = (it) => it.x < x1 && it.x + it.w > x0 && it.y < y1 && it.y + it.h > y0;
  const text = st.z * 11 >= 5;
  const lw = 1 / st.z;
  // the fonts this paint used (st.fonts): the tests read the text size on screen from them
  const used = st.fonts = new Set();
  const font = (f) => { ctx.font = f; used.add(f); };
  let drawn = 0;

  // frames, outer first (the map is filled parents before children)
  for (const f of view.frames) {
    if (!vis(f)) continue;
    roundRect(ctx, f.x, f.y, f.w, f.h, 6);
    ctx.fillStyle = th.frame;
    ctx.fill();
    const ft = st.tint ? st.tint(f) : null;   // the compare view's colour of a difference
    ctx.lineWidth = (st.sel === f ? 2.5 : ft ? 2 : 1) * lw;
    ctx.strokeStyle = st.sel === f ? th.brand : ft || th.border;
    ctx.stroke();
    ctx.fillStyle = th.frameHead;
    ctx.fillRect(f.x + 1, f.y + 1, f.w - 2, HEAD - 2);
    if (text) {
      ctx.fillStyle = th.fg;
      font(`600 11px ${th.font}`);
      ctx.textBaseline = "middle";
      ctx.fillText(clip(ctx, f.lines[0], f.w - 34), f.x + 8, f.y + HEAD / 2);
      if (f.kind !== "branch") ctx.fillText("−", f.x + f.w - 16, f.y + HEAD / 2);
    }
  }

  // edges
  const mode = st.color;
  let maxB = 1;
  if (mode === "bytes") for (const e of view.edges) maxB = Math.max(maxB, avalBytes(e.type));
  const labels = st.z >= LABEL_ZOOM;
  if (labels) ensureLabels(ctx, view, th);
  const hlE = st.hlEdges;
  for (const pass of [0, 1]) {
    for (const e of view.edges) {
      const hot = hlE && hlE.has(e);
      if ((pass === 1) !== !!hot) continue;
      const bb = e.bb, tx = e.x1, ty = e.y1;
      if (bb.x1 < x0 || bb.x0 > x1 || bb.y1 < y0 || bb.y0 > y1) continue;
      let w = 1.1;
      if (mode === "bytes") w = 0.8 + 4 * Math.log1p(avalBytes(e.type)) / Math.log1p(maxB);
      ctx.lineWidth = (hot ? Math.max(2.2, w) : w) * (st.z < 1 ? lw : 1);
      ctx.strokeStyle = hot ? th.brand : th.edge;
      // edges that cross cluster borders are drawn faint, so local structure reads first
      ctx.globalAlpha = hot || e.s.parent === e.t.parent ? 1 : 0.35;
      ctx.beginPath();
      tracePath(ctx, e);
      ctx.stroke();
      // arrow head
      ctx.beginPath();
      ctx.moveTo(tx, ty); ctx.lineTo(tx - 3.5, ty - 6); ctx.lineTo(tx + 3.5, ty - 6); ctx.closePath();
      ctx.fillStyle = hot ? th.brand : th.edge;
      ctx.fill();
      if (labels && e.lr) {
        font(`${LABEL_PX}px ${th.mono}`);
        ctx.fillStyle = hot ? th.brand : th.fg2;
        ctx.textBaseline = "middle";
        ctx.fillText(labelText(e), e.lr.x, e.lr.y + LABEL_H / 2);
      }
      ctx.globalAlpha = 1;
    }
  }

  // boxes
  const maxV = colorMax(view, mode);
  for (const b of view.boxes) {
    if (!vis(b)) continue;
    drawn++;
    const cluster = b.kind !== "node" || (b.s.node.subs || []).length > 0;
    const n = b.kind === "node" ? b.s.node : null;
    const io = b.kind === "io";
    let fill = io ? th.io : cluster ? th.cluster : n.kind === "eqn" ? th.node : n.kind === "const" ? th.konst : th.io;
    const round = (n && n.kind !== "eqn") || io;   // inputs and outputs (and their clusters) are pills
    roundRect(ctx, b.x, b.y, b.w, b.h, round ? b.h / 2 : 5);
    ctx.fillStyle = fill;
    ctx.fill();
    if (mode !== "none") {
      ctx.globalAlpha = heatAlpha(heatOf(costOf(b, mode), maxV));
      ctx.fillStyle = th.heat;
      ctx.fill();
      ctx.globalAlpha = 1;
    }
    const tint = st.tint ? st.tint(b) : null;   // the compare view's colour of a difference
    if (tint) {
      ctx.globalAlpha = 0.3;
      ctx.fillStyle = tint;
      ctx.fill();
      ctx.globalAlpha = 1;
    }
    const sel = st.sel === b, match = st.matches && st.matches.has(b), diag = st.diag && st.diag.has(b);
    const flow = st.hlNodes && st.hlNodes.has(b);
    ctx.lineWidth = (sel ? 3 : match || diag || flow || tint ? 2.2 : cluster ? 1.6 : 1) * (st.z < 1 ? lw : 1);
    ctx.strokeStyle = sel ? th.brand : match ? th.warn : diag ? th.error : flow ? th.brand : tint || th.border;
    ctx.stroke();
    if (cluster) {
      ctx.lineWidth = lw;
      ctx.strokeStyle = th.border;
      roundRect(ctx, b.x + 3, b.y + 3, b.w - 6, b.h - 6, round ? (b.h - 6) / 2 : 4);
      ctx.stroke();
    }
    if (st.donated && isDonated(b, st.donated)) {   // a donated input: a dashed orange ring
      ctx.save();
      ctx.setLineDash([4, 3]);
      ctx.lineWidth = 2 * (st.z < 1 ? lw : 1);
      ctx.strokeStyle = th.warn;
      roundRect(ctx, b.x - 3, b.y - 3, b.w + 6, b.h + 6, round ? (b.h + 6) / 2 : 7);
      ctx.stroke();
      ctx.restore();
    }
    if (st.coll && st.coll.has(b)) {   // a collective XLA inserted for this op: a violet corner tab
      ctx.fillStyle = th.coll;
      roundRect(ctx, b.x + b.w - 14, b.y - 5, 14, 10, 3);
      ctx.fill();
    }
    if (!text) continue;
    ctx.textBaseline = "middle";
    ctx.fillStyle = th.fg;
    font(`${cluster ? "600 " : ""}11px ${cluster ? th.font : th.mono}`);
    const pad = cluster ? 24 : 10;
    ctx.fillText(clip(ctx, b.lines[0], b.w - pad - 6), b.x + 8, b.y + (b.lines[1] ? b.h * 0.34 : b.h / 2));
    if (b.lines[1]) {
      font(`11px ${th.mono}`);
      ctx.fillStyle = th.fg2;
      ctx.fillText(clip(ctx, b.lines[1], b.w - 14), b.x + 8, b.y + b.h * 0.7);
    }
    if (cluster) {
      font(`600 13px ${th.font}`);
      ctx.fillStyle = th.brand;
      ctx.fillText("+", b.x + b.w - 16, b.y + b.h * 0.34);
    }
  }
  return drawn;
}

/** The largest value of colouring `mode` among the boxes of `view` (at least 1): the scale's top. */
/**
 * Whether box `b` stands for a donated input: an input node in `donated` (node ids), or a
 * bundle of inputs holding one.
 * @param {any} b
 * @param {Set<number>} donated
 */
export function isDonated(b, donated) {
  if (b.kind === "node") return b.s.node.kind === "in" && donated.has(b.s.node.id);
  if (b.kind === "io" && b.s.dir === "in") {
    for (const id of donated) if (id >= b.s.lo && id <= b.s.hi) return true;
  }
  return false;
}

export function colorMax(view, mode) {
  let m = 1;
  if (mode !== "none") for (const b of view.boxes) m = Math.max(m, costOf(b, mode));
  return m;
}

export function costOf(b, mode) {
  const v = b.kind === "node" ? b.s.node : b.s;
  if (!v) return 0;
  return (mode === "bytes" ? v.bytes : mode === "time" ? v.time_us : v.flops) || 0;
}

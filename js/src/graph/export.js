// Export of what the graph view shows, for a paper or an issue report: SVG (boxes, frames,
// edges and their labels, as drawn, in the camera's frame) and PNG (the canvas itself).
// toSvg is pure (tested in node); every text from the payload is escaped.

import { HEAD } from "./layout.js";
import { labelText, pull, LABEL_H } from "./edges.js";
import { LABEL_PX } from "./draw.js";

/** Text escaped for XML (element content and attribute values). */
export const xmlEscape = (s) => String(s).replace(/[<>&"']/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", "\"": "&quot;", "'": "&#39;" })[c]);

/** `text` cut to about `w` px of 11 px text, with an ellipsis. */
function clipTo(text, w) {
  const n = Math.max(1, Math.floor(w / 6.6));
  return text.length <= n ? text : text.slice(0, n - 1) + "…";
}

/** The SVG path data of an edge (edges.js's tracePath, as `d`). */
export function pathData(e) {
  const p = e.pts;
  let d = `M${p[0].x.toFixed(1)} ${p[0].y.toFixed(1)}`;
  for (let i = 0; i + 1 < p.length; i++) {
    const k = pull(e, i);
    d += ` C${p[i].x.toFixed(1)} ${(p[i].y + k).toFixed(1)} ${p[i + 1].x.toFixed(1)} ${(p[i + 1].y - k).toFixed(1)} ${p[i + 1].x.toFixed(1)} ${p[i + 1].y.toFixed(1)}`;
  }
  return d;
}

/**
 * The view as the canvas shows it now, as an SVG document: what is inside the cw x ch canvas
 * at camera (tx, ty, z), in theme `th`.
 * @param {{boxes:any[], frames:any[], edges:any[]}} view   laid out and routed
 * @param {{tx:number, ty:number, z:number, cw:number, ch:number}} st
 * @param {any} th   draw.js's theme
 * @param {{labels?:boolean}} [opts]   labels: whether edge labels are drawn (placed already)
 * @returns {string}
 */
export function toSvg(view, st, th, opts = {}) {
  const x0 = -st.tx / st.z, y0 = -st.ty / st.z, x1 = x0 + st.cw / st.z, y1 = y0 + st.ch / st.z;
  const vis = (it) => it.x < x1 && it.x + it.w > x0 && it.y < y1 && it.y + it.h > y0;
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${Math.round(st.cw)}" height="${Math.round(st.ch)}" viewBox="0 0 ${Math.round(st.cw)} ${Math.round(st.ch)}">`);
  out.push(`<rect width="100%" height="100%" fill="${xmlEscape(th.bg)}"/>`);
  out.push(`<g transform="translate(${st.tx.toFixed(2)} ${st.ty.toFixed(2)}) scale(${st.z.toFixed(4)})" font-family="${xmlEscape(th.font)}" font-size="11">`);
  for (const f of view.frames) {
    if (!vis(f)) continue;
    out.push(`<g class="frame"><rect x="${f.x}" y="${f.y}" width="${f.w}" height="${f.h}" rx="6" fill="${xmlEscape(th.frame)}" stroke="${xmlEscape(th.border)}"/>` +
      `<rect x="${f.x + 1}" y="${f.y + 1}" width="${f.w - 2}" height="${HEAD - 2}" fill="${xmlEscape(th.frameHead)}"/>` +
      `<text x="${f.x + 8}" y="${f.y + HEAD / 2}" dominant-baseline="middle" font-weight="600" fill="${xmlEscape(th.fg)}">${xmlEscape(clipTo(f.lines[0], f.w - 34))}</text></g>`);
  }
  for (const e of view.edges) {
    const bb = e.bb;
    if (bb.x1 < x0 || bb.x0 > x1 || bb.y1 < y0 || bb.y0 > y1) continue;
    out.push(`<path class="edge" d="${pathData(e)}" fill="none" stroke="${xmlEscape(th.edge)}" stroke-width="1.1"/>` +
      `<path d="M${e.x1} ${e.y1} l-3.5 -6 l7 0 z" fill="${xmlEscape(th.edge)}"/>`);
    if (opts.labels && e.lr) out.push(`<text class="edge-label" x="${e.lr.x}" y="${e.lr.y + LABEL_H / 2}" dominant-baseline="middle" font-family="${xmlEscape(th.mono)}" font-size="${LABEL_PX}" fill="${xmlEscape(th.fg2)}">${xmlEscape(labelText(e))}</text>`);
  }
  for (const b of view.boxes) {
    if (!vis(b)) continue;
    const n = b.kind === "node" ? b.s.node : null;
    const cluster = !n || (n.subs || []).length > 0;
    const round = (n && n.kind !== "eqn") || b.kind === "io";
    const fill = b.kind === "io" ? th.io : cluster ? th.cluster : n.kind === "eqn" ? th.node : n.kind === "const" ? th.konst : th.io;
    const y = b.lines[1] ? b.y + b.h * 0.34 : b.y + b.h / 2;
    out.push(`<g class="box"><rect x="${b.x}" y="${b.y}" width="${b.w}" height="${b.h}" rx="${round ? b.h / 2 : 5}" fill="${xmlEscape(fill)}" stroke="${xmlEscape(th.border)}"/>` +
      `<text x="${b.x + 8}" y="${y}" dominant-baseline="middle" fill="${xmlEscape(th.fg)}"${cluster ? ' font-weight="600"' : ` font-family="${xmlEscape(th.mono)}"`}>${xmlEscape(clipTo(b.lines[0], b.w - (cluster ? 30 : 16)))}</text>` +
      (b.lines[1] ? `<text x="${b.x + 8}" y="${b.y + b.h * 0.7}" dominant-baseline="middle" font-family="${xmlEscape(th.mono)}" fill="${xmlEscape(th.fg2)}">${xmlEscape(clipTo(b.lines[1], b.w - 14))}</text>` : "") +
      "</g>");
  }
  out.push("</g></svg>");
  return out.join("\n");
}

/** Offers `blob` as a download named `name` (a link clicked, then let go). */
export function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url; a.download = name; a.style.display = "none";
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A file name from the trace's name: "train_step.svg". */
export const fileName = (name, ext) => (String(name || "graph").replace(/[^\w.-]+/g, "_").slice(0, 60) || "graph") + "." + ext;

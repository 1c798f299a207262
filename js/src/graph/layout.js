// A linear-time layered layout of the visible graph, one cluster at a time, bottom up:
// each open cluster lays out its children (boxes, or open clusters already sized) in rows
// by longest path over the edges lifted to that level, orders each row by the barycentre
// of its predecessors, and packs it left to right. Edges that cross cluster borders are
// drawn between final positions (edges.js routes every edge once all positions are known).
// Cost: O(visible items + visible edges x depth).

import { fmt, fmtBytes } from "./format.js";

export const PAD = 10;       // inside a frame
export const HEAD = 22;      // frame header height
const GAP_X = 14;
const GAP_Y = 30;
const CHAR = 6.6;            // px per character at the box font

/** Lines of text a box shows: [title, subtitle]. */
export function boxText(it, graph) {
  const s = it.s;
  if (it.kind === "node") {
    const n = s.node;
    const out = n.layout || (n.out || []).join(", ");   // a sharded program's: as compiled
    if ((n.subs || []).length) {
      const k = n.subs.reduce((a, sb) => a + (graph.bodies[sb.body].n_eqns || 0), 0);
      return [subsTitle(n, graph), `${fmt(k)} eqns · ${fmt(n.flops || 0)} FLOP`];
    }
    if (n.kind === "eqn") return [n.op || "?", out];
    if (n.kind === "const") return ["const " + (n.op || ""), out];
    return [(n.kind === "in" ? "in " : "out ") + (n.op || ""), out];
  }
  if (it.kind === "branch") return [it.sub.role + ": " + graph.bodies[it.sub.body].label, ""];
  if (it.kind === "io") return [s.label, ioText(s)];
  return [s.label, `${fmt(s.n)} eqns · ${fmt(s.flops)} FLOP`];
}

/** What a cluster of inputs / outputs holds: "37 arrays · 144.5 KiB". */
export function ioText(s) {
  return `${s.count} arrays` + (s.nbytes ? ` · ${fmtBytes(s.nbytes)}` : "");
}

/** Title of an equation with sub-jaxprs: "pjit: jit(mlp)", "scan x16: scan body", "cond: 2 branches". */
export function subsTitle(n, graph) {
  const subs = n.subs;
  if (subs.length > 1) return `${n.op}: ${subs.length} ${subs[0].role.startsWith("branch") ? "branches" : "bodies"}`;
  const t = subs[0].times > 1 ? ` x${subs[0].times}` : "";
  return `${n.op}${t}: ${graph.bodies[subs[0].body].label}`;
}

function sizeBox(it, graph) {
  const [a, b] = boxText(it, graph);
  const len = Math.max(a.length, Math.min(b.length, 28));   // both lines in 11 px
  it.lines = [a, b];
  it.w = Math.max(64, Math.min(230, 18 + len * CHAR));
  // a bold title beside the open glyph (groups, folds, argument paths) needs more room
  if (it.kind === "io") it.w = Math.min(260, it.w + 24);
  else if (it.kind !== "node") it.w = Math.min(260, it.w + 30);
  it.h = it.kind === "node" && !(it.s.node.subs || []).length ? 34 : 40;
}

/** Lays out the whole visible tree; sets x, y, w, h (absolute) on every item. */
export function layout(view, graph) {
  // lift each edge to the level where its endpoints' ancestors are siblings
  for (const it of view.items.values()) it.ledges = null;
  view.root.ledges = null;
  for (const e of view.edges) {
    let a = e.s, b = e.t;
    while (a.depth > b.depth) a = a.parent;
    while (b.depth > a.depth) b = b.parent;
    while (a.parent !== b.parent) { a = a.parent; b = b.parent; }
    if (a === b) continue;
    const c = a.parent;
    (c.ledges || (c.ledges = [])).push(a, b);
  }
  place(view.root, graph);
  view.root.x = 0; view.root.y = 0;
  absolute(view.root);
  return { w: view.root.w, h: view.root.h };
}

function place(c, graph) {
  const ch = c.children;
  for (const x of ch) {
    if (x.open) place(x, graph);
    else sizeBox(x, graph);
  }
  const n = ch.length;
  for (let i = 0; i < n; i++) ch[i]._i = i;
  const preds = Array.from({ length: n }, () => []);
  const le = c.ledges || [];
  for (let k = 0; k < le.length; k += 2) {
    const a = le[k]._i, b = le[k + 1]._i;
    if (a < b) preds[b].push(a);
  }
  const rank = new Int32Array(n);
  let maxRank = 0;
  for (let i = 0; i < n; i++) {
    let r = 0;
    for (const p of preds[i]) if (rank[p] + 1 > r) r = rank[p] + 1;
    rank[i] = r;
    if (r > maxRank) maxRank = r;
  }
  const rows = Array.from({ length: maxRank + 1 }, () => []);
  for (let i = 0; i < n; i++) rows[rank[i]].push(i);
  const cx = new Float64Array(n);
  let y = 0, right = 0, left = Infinity;
  for (const row of rows) {
    // desired centre: mean of predecessor centres; rows keep jaxpr order among equals
    const want = row.map((i) => {
      const ps = preds[i];
      if (!ps.length) return NaN;
      let s = 0;
      for (const p of ps) s += cx[p];
      return s / ps.length;
    });
    const order = row.map((i, k) => k);
    let last = 0;
    for (const k of order) if (!Number.isNaN(want[k])) last = want[k]; else want[k] = last + 1e-3 * k;
    order.sort((p, q) => want[p] - want[q] || p - q);
    let prevRight = -Infinity, h = 0;
    for (const k of order) {
      const it = ch[row[k]];
      let x0 = want[k] - it.w / 2;
      if (!Number.isFinite(x0)) x0 = 0;
      if (x0 < prevRight + GAP_X) x0 = prevRight + GAP_X;
      it.rx = x0; it.ry = y;
      cx[row[k]] = x0 + it.w / 2;
      prevRight = x0 + it.w;
      if (it.h > h) h = it.h;
      if (x0 < left) left = x0;
    }
    // pull the row back left so it is centred on its wanted span, without overlaps
    if (prevRight > right) right = prevRight;
    y += h + GAP_Y;
  }
  if (!n) left = right = 0;
  const top = c.kind === "root" ? 0 : HEAD;
  const pad = c.kind === "root" ? 0 : PAD;
  for (const x of ch) { x.rx += pad - left; x.ry += top; }
  c.w = Math.max(right - left + 2 * pad, c.kind === "root" ? 0 : 160);
  c.h = top + Math.max(0, y - GAP_Y) + pad;
  if (c.kind !== "root") {
    c.lines = boxTextFrame(c, graph);
    c.w = Math.max(c.w, 40 + c.lines[0].length * 7.4);
  }
}

function boxTextFrame(c, graph) {
  const [a, b] = boxText(c, graph);
  return [b ? `${a}${c.kind === "io" ? " · " : " — "}${b}` : a, ""];
}

function absolute(c) {
  for (const x of c.children) {
    x.x = c.x + x.rx;
    x.y = c.y + x.ry;
    if (x.open) absolute(x);
  }
}

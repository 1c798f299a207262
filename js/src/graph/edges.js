// Edge geometry, shared by the painter and the pointer: the path of each edge, where its aval
// label sits, and which edge is under the pointer.
//
// A node's inputs arrive side by side along its top (ordered by where they come from, so they
// do not cross) instead of at one point. An edge that would run under a box on its way down
// (it skips rows) goes around it through a free vertical lane. Each label sits on its own
// path, never over a box, a frame header or another label; a label with no room is left out
// of the drawing, and the edge's tooltip still says it.

import { HEAD } from "./layout.js";
import { fmtBytes } from "./format.js";

export const LABEL_H = 13;   // px of one 11 px label line
const CELL = 64;             // spatial grid cell (world px) for the collision tests
const GAP = 4;               // between a path and its label
const LANE = 8;              // free space either side of a lane
const TURN = 14;             // below a source / above a target, where a detour turns

const mid = (it) => it.x + it.w / 2;

function push(map, k, v) {
  const l = map.get(k);
  if (l) l.push(v); else map.set(k, [v]);
}

/** Rectangles (with the item they stand for, if any) bucketed by grid cell. */
class Grid {
  constructor() { this.cells = new Map(); }
  _each(r, fn) {
    const i0 = Math.floor(r.x / CELL), i1 = Math.floor((r.x + r.w) / CELL);
    const j0 = Math.floor(r.y / CELL), j1 = Math.floor((r.y + r.h) / CELL);
    // numeric keys (no strings to collect): cells within ±2M px of the origin
    for (let i = i0; i <= i1; i++) for (let j = j0; j <= j1; j++) if (fn((i + 32768) * 65536 + j + 32768)) return true;
    return false;
  }
  add(r) { this._each(r, (k) => { push(this.cells, k, r); return false; }); }
  /** Does `r` overlap a rectangle for which `skip` is not true? */
  hits(r, skip) {
    return this._each(r, (k) => (this.cells.get(k) || []).some((o) => !(skip && skip(o.it)) &&
      r.x < o.x + o.w && o.x < r.x + r.w && r.y < o.y + o.h && o.y < r.y + r.h));
  }
}

/** Spreads the ends of `es` over the middle of `it`'s side, in the order of `key(e)`. */
function spread(it, es, key, set) {
  es.sort((a, b) => key(a) - key(b));
  const n = es.length;
  const step = n > 1 ? Math.max(0, Math.min(40, (it.w - 20) / (n - 1))) : 0;
  es.forEach((e, k) => set(e, mid(it) + (k - (n - 1) / 2) * step));
}

function spreadAll(view, fromKey, toKey) {
  const ins = new Map(), outs = new Map();
  for (const e of view.edges) { push(ins, e.t, e); push(outs, e.s, e); }
  for (const [t, es] of ins) spread(t, es, fromKey, (e, x) => { e.x1 = x; });
  for (const [s, es] of outs) spread(s, es, toKey, (e, x) => { e.x0 = x; });
}

const isAnc = (a, it) => { for (let p = it.parent; p; p = p.parent) if (p === a) return true; return false; };

/**
 * Sets each edge's path `pts` (bottom of its source to top of its target; a detour adds two
 * turns on a lane) and its bounding box `bb`.
 */
export function routeEdges(view) {
  // boxes block a curve (a frame's empty space does not); a lane keeps out of frames too
  const grid = new Grid();
  for (const o of view.boxes) grid.add({ x: o.x, y: o.y, w: o.w, h: o.h, it: o });
  const byY = view.boxes.slice().sort((a, b) => a.y - b.y);
  const tallest = byY.reduce((m, b) => Math.max(m, b.h), 0);
  // first the straight curves, ends spread by where the other end is
  spreadAll(view, (e) => mid(e.s), (e) => mid(e.t));
  for (const e of view.edges) {
    e.y0 = e.s.y + e.s.h; e.y1 = e.t.y;
    e.pts = [{ x: e.x0, y: e.y0 }, { x: e.x1, y: e.y1 }];
    const skip = (o) => o === e.s || o === e.t || isAnc(o, e.s) || isAnc(o, e.t);
    if (e.y1 - e.y0 > 4 * TURN && blocked(e, grid, skip)) {
      const x = lane(e, byY, tallest, view.frames, skip);
      e.pts.splice(1, 0, { x, y: e.y0 + TURN }, { x, y: e.y1 - TURN });
    }
  }
  // then the ends again, ordered by where each path turns, so a detour does not cross its neighbours
  spreadAll(view, (e) => e.pts[e.pts.length - 2].x, (e) => e.pts[1].x);
  for (const e of view.edges) {
    e.pts[0].x = e.x0; e.pts[e.pts.length - 1].x = e.x1;
    let x0 = Infinity, x1 = -Infinity;
    for (const p of e.pts) { x0 = Math.min(x0, p.x); x1 = Math.max(x1, p.x); }
    const dy = pull(e, 0);
    e.bb = { x0, x1, y0: Math.min(e.y0, e.y1) - dy, y1: Math.max(e.y0, e.y1) + dy };
  }
}

/** Does the plain curve of `e` run under an item that is not one of its ends or their frames? */
function blocked(e, grid, skip) {
  for (let k = 1; k < 16; k++) {
    const p = pointAt(e, k / 16);
    if (grid.hits({ x: p.x, y: p.y, w: 0, h: 0 }, skip)) return true;
  }
  return false;
}

/** The x nearest the edge's middle where a vertical line between its turns meets no item. */
function lane(e, byY, tallest, frames, skip) {
  const ya = e.y0 + TURN, yb = e.y1 - TURN;
  const spans = [];
  const take = (o) => { if (o.y < yb && o.y + o.h > ya && !skip(o)) spans.push([o.x - LANE, o.x + o.w + LANE]); };
  // the boxes from the first that may reach down to ya (binary search on y), and every frame
  let lo = 0, hi = byY.length;
  while (lo < hi) { const m = (lo + hi) >> 1; if (byY[m].y < ya - tallest) lo = m + 1; else hi = m; }
  for (let k = lo; k < byY.length && byY[k].y < yb; k++) take(byY[k]);
  for (const f of frames) take(f);
  spans.sort((p, q) => p[0] - q[0]);
  const want = (e.x0 + e.x1) / 2;
  // merge the overlapping spans; the one around `want` (if any) gives the two nearest free x
  let a = -Infinity, b = -Infinity;
  for (const [lo, hi] of spans) {
    if (lo > b) {
      if (a <= want && want <= b) break;
      a = lo; b = hi;
    } else b = Math.max(b, hi);
  }
  if (!(a < want && want < b)) return want;
  return want - a <= b - want ? a : b;
}

/** Vertical pull of the Bézier control points of segment `i` (the painter draws the same). */
export function pull(e, i) {
  const a = e.pts[i], b = e.pts[i + 1];
  const h = Math.abs(b.y - a.y);
  return e.pts.length === 2 ? Math.max(20, h / 2) : h / 2;
}

/** Traces the edge's path on a canvas context (after beginPath). */
export function tracePath(ctx, e) {
  const p = e.pts;
  ctx.moveTo(p[0].x, p[0].y);
  for (let i = 0; i + 1 < p.length; i++) {
    const d = pull(e, i);
    ctx.bezierCurveTo(p[i].x, p[i].y + d, p[i + 1].x, p[i + 1].y - d, p[i + 1].x, p[i + 1].y);
  }
}

/** The point at `t` in [0, 1] along the edge's path (each segment an equal share of t). */
export function pointAt(e, t) {
  const n = e.pts.length - 1;
  const i = Math.min(n - 1, Math.floor(t * n));
  const s = t * n - i;
  const a = e.pts[i], z = e.pts[i + 1], dy = pull(e, i);
  const u = 1 - s;
  const ca = u * u * u, cb = 3 * u * u * s, cc = 3 * u * s * s, cd = s * s * s;
  return { x: (ca + cb) * a.x + (cc + cd) * z.x, y: ca * a.y + cb * (a.y + dy) + cc * (z.y - dy) + cd * z.y };
}

/**
 * An edge's label: its aval, or for a bundle of several arrays how many, their total bytes and
 * their shape (or how many distinct shapes): "45 arrays · 3.4 MiB · 3 shapes".
 * @param {{type:string, n:number, bytes?:number, types?:Map<string,number>|null}} e
 */
export function labelText(e) {
  if (!(e.n > 1)) return e.type;
  const k = e.types ? e.types.size : 1;
  return `${e.n} arrays · ${fmtBytes(e.bytes || 0)} · ${k === 1 ? e.type : k + " shapes"}`;
}

/**
 * The shapes of a bundle, most common first, for its tooltip: ["f32[64,64] ×24", "f32[64] ×18"].
 * @param {{type:string, n:number, types?:Map<string,number>|null}} e
 * @returns {string[]}
 */
export function bundleShapes(e) {
  const types = e.types || new Map([[e.type, e.n || 1]]);
  return [...types].sort((a, b) => b[1] - a[1]).map(([t, c]) => (c > 1 ? `${t} ×${c}` : t));
}

/** Where along its path a label may go: the middle first, then outwards; more on longer edges. */
function tries(e) {
  const n = Math.max(2, Math.min(24, Math.round(Math.abs(e.y1 - e.y0) / 10)));
  const ts = [0.5];
  for (let k = 1; k <= n; k++) ts.push(0.5 + (0.4 * k) / n, 0.5 - (0.4 * k) / n);
  return ts;
}

/**
 * Sets `e.lr` ({x, y, w, h}, world px) on every labelled edge that has room, else null.
 * `measure(text)` gives a label's width. Short edges go first: they have the fewest places.
 */
export function placeLabels(view, measure) {
  const grid = new Grid();
  for (const b of view.boxes) grid.add({ x: b.x - 2, y: b.y - 2, w: b.w + 4, h: b.h + 4 });
  for (const f of view.frames) grid.add({ x: f.x, y: f.y, w: f.w, h: HEAD });
  const widths = new Map();
  const order = view.edges.filter((e) => e.type).sort((a, b) => (a.y1 - a.y0) - (b.y1 - b.y0));
  for (const e of view.edges) e.lr = null;
  for (const e of order) {
    const text = labelText(e);
    if (!widths.has(text)) widths.set(text, measure(text));
    const w = widths.get(text);
    for (const t of tries(e)) {
      const p = pointAt(e, t);
      const right = { x: p.x + GAP, y: p.y - LABEL_H / 2, w, h: LABEL_H };
      const left = { x: p.x - GAP - w, y: right.y, w, h: LABEL_H };
      // an input arriving left of its target's middle keeps its label on the outer (left) side,
      // clear of the inputs next to it
      const [a, b] = e.x1 < mid(e.t) - 1 ? [left, right] : [right, left];
      const r = !grid.hits(a) ? a : !grid.hits(b) ? b : null;
      if (r) { e.lr = r; grid.add(r); break; }
    }
  }
  view.labelsPlaced = true;
}

/** Squared distance from (x, y) to the segment a-b. */
function segDist2(x, y, a, b) {
  const dx = b.x - a.x, dy = b.y - a.y, l2 = dx * dx + dy * dy;
  const t = l2 ? Math.max(0, Math.min(1, ((x - a.x) * dx + (y - a.y) * dy) / l2)) : 0;
  return (a.x + t * dx - x) ** 2 + (a.y + t * dy - y) ** 2;
}

/** The edge whose path passes within `tol` world px of (x, y), or null. */
export function edgeAt(view, x, y, tol) {
  let best = null, bd = tol * tol;
  for (const e of view.edges) {
    const bb = e.bb;
    if (x < bb.x0 - tol || x > bb.x1 + tol || y < bb.y0 - tol || y > bb.y1 + tol) continue;
    const n = 12 * (e.pts.length - 1);
    let a = e.pts[0];
    for (let k = 1; k <= n; k++) {
      const b = pointAt(e, k / n);
      const d = segDist2(x, y, a, b);
      if (d <= bd) { bd = d; best = e; }
      a = b;
    }
  }
  return best;
}

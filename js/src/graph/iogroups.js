// The clusters a body's many inputs and outputs fold into (model.js's staticTree calls
// groupIO on the root of a body with more than IO_MAX of them): inputs by argument path
// (`params`, inside it `params['layers']`, ...), outputs by their names when the caller named
// them, else as runs with the avals of an input cluster (`outputs 0-36`, like `params`), else
// by position; long lists nest in balanced chunks. Pure, linear in the inputs and outputs.

/** Most children one level shows before they are split into chunks. */
export const MAX_CHILDREN = 64;

/** A body with more inputs (or outputs) than this shows them as collapsed clusters. */
export const IO_MAX = 12;
/** At most this many input (output) items stand side by side at the top of a body. */
const IO_TOP = 6;

/** Segments of an argument path: "params['layers'][3].w" -> ["params", "['layers']", "[3]", ".w"]. */
export function pathSegments(op) {
  return (op || "").match(/^[^[.]+|\[(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\]]*)\]|\.[^[.]+/g) || [];
}

/**
 * Replaces the root's many input (output) leaves by collapsed "io" clusters: inputs by their
 * argument path (`params`, inside it `params['layers']`, ...), outputs by the runs that have
 * the avals of an input cluster (`outputs 0-36`, like `params`), else by position.
 */
export function groupIO(root, body) {
  const many = (ids) => (ids || []).length > IO_MAX;
  const take = (dir) => {
    const leaves = [], rest = [];
    for (const c of root.children) (c.kind === "node" && c.node.kind === dir ? leaves : rest).push(c);
    return { leaves, rest };
  };
  const pos = new Map();
  for (const dir of ["in", "out"]) {
    const ids = dir === "in" ? body.inputs : body.outputs;
    if (many(ids) || (ids || []).length <= IO_TOP) continue;
    ids.forEach((id, i) => pos.set(id, i));
    const { leaves, rest } = take(dir);
    const grouped = softClusters(leaves, dir, pos);
    if (grouped.length < leaves.length) root.children = rest.concat(grouped);
  }
  if (!many(body.inputs) && !many(body.outputs)) return;
  let inTop = [];
  if (many(body.inputs)) {
    body.inputs.forEach((id, i) => pos.set(id, i));
    const { leaves, rest } = take("in");
    if (leaves.length > IO_MAX) {
      const items = leaves.map((leaf) => ({ leaf, segs: pathSegments(leaf.node.op) }));
      // each top-level argument with several arrays is one cluster, the rest stay as they are
      inTop = tidyTop(byKey(items, 0, "in", pos).map((x) => x.s || x), "in", pos);
      root.children = rest.concat(inTop);
    }
  }
  if (many(body.outputs)) {
    body.outputs.forEach((id, i) => pos.set(id, i));
    const { leaves, rest } = take("out");
    // outputs named by the caller (`params['w']` from `loss, params = step(...)`) group by
    // path as inputs do; unnamed ones (or bare result paths) by the avals of an input cluster
    const named = leaves.every((l) => l.node.op && !/^result\b/.test(l.node.op));
    const grouped = named ? byKey(leaves.map((leaf) => ({ leaf, segs: pathSegments(leaf.node.op) })), 0, "out", pos).map((x) => x.s || x)
      : matchOutputs(leaves, inTop, pos);
    if (leaves.length > IO_MAX) root.children = rest.concat(tidyTop(grouped, "out", pos));
  }
}

/**
 * A body's few inputs (outputs) with one argument's arrays in "soft" clusters (`params`, 6
 * arrays): the view shows their arrays side by side (model.js's buildView with flatIO), and
 * the clusters only where the arrays side by side do not fit a readable first view.
 */
function softClusters(leaves, dir, pos) {
  const key = (leaf) => {
    const segs = pathSegments(leaf.node.op);
    const d = segs[0] === "result" ? 2 : 1;   // a function's unnamed outputs: result[0]'s arrays
    return segs.length > d ? segs.slice(0, d).join("") : null;
  };
  const groups = new Map(), out = [];
  for (const leaf of leaves) {
    const k = key(leaf);
    if (k === null) { out.push(leaf); continue; }
    let g = groups.get(k);
    if (!g) { g = { k, items: [] }; groups.set(k, g); out.push(g); }
    g.items.push(leaf);
  }
  return out.map((g) => !g.items ? g : g.items.length === 1 ? g.items[0]
    : Object.assign(ioCluster(dir, g.items, pos, `${dir} ${g.k}`, "path"), { soft: true }));
}

const ioLeaves = (s, out = []) => {
  if (s.kind === "node") out.push(s.node);
  else for (const c of s.children) ioLeaves(c, out);
  return out;
};

/** An io cluster over `children` (static items); `label` defaults to the position range. */
function ioCluster(dir, children, pos, label, how, like) {
  // totals from the children (a nested cluster has them already): linear in the tree
  let count = 0, nbytes = 0, lo = Infinity, hi = -1;
  for (const c of children) {
    if (c.kind === "node") {
      count++;
      for (const t of c.node.out || []) nbytes += avalBytes(t);
      lo = Math.min(lo, c.node.id); hi = Math.max(hi, c.node.id);
    } else {
      count += c.count; nbytes += c.nbytes;
      lo = Math.min(lo, c.lo); hi = Math.max(hi, c.hi);
    }
  }
  const range = `${dir === "in" ? "inputs" : "outputs"} ${pos.get(lo)}-${pos.get(hi)}`;
  return { lk: (how === "path" ? "p" : "q") + lo + "_" + hi, kind: "io", dir, how, label: label || range,
    range, like: like || "", count, nbytes, lo, hi, children, first: Infinity };
}

/**
 * Groups `items` ({leaf, segs}) by their path up to segment `depth`: a group of several is a
 * cluster (split further by `inner`), a lone or unnamed item stays a leaf. Returns the items
 * in order, each {s} (a cluster) or a leaf.
 */
function byKey(items, depth, dir, pos) {
  const groups = new Map(), out = [];
  for (const x of items) {
    const k = x.segs.length > depth ? x.segs.slice(0, depth + 1).join("") : null;
    if (k === null) { out.push(x.leaf); continue; }
    let g = groups.get(k);
    if (!g) { g = { key: k, items: [] }; groups.set(k, g); out.push(g); }
    g.items.push(x);
  }
  return out.map((g) => {
    if (!g.items) return g;
    if (g.items.length === 1) return g.items[0].leaf;
    return { s: ioCluster(dir, inner(g.items, depth + 1, dir, pos), pos, g.key, "path") };
  });
}

/** The children of a path cluster: split by the next segment where the paths part, when that helps. */
function inner(items, depth, dir, pos) {
  const leaves = () => items.map((x) => x.leaf);
  if (items.length <= IO_MAX) return leaves();
  // skip the segments every item shares (`state['params']`)
  for (;;) {
    const k0 = items[0].segs[depth];
    if (k0 === undefined || !items.every((x) => x.segs[depth] === k0 && x.segs.length > depth + 1)) break;
    depth++;
  }
  const split = byKey(items, depth, dir, pos);
  const got = split.length < items.length ? split.map((x) => x.s || x) : leaves();
  return countChunks(got, dir, pos, MAX_CHILDREN);
}

/**
 * At most `target` items: consecutive runs as position-range clusters, nested when long
 * (below the top, balanced as `chunk` does: 100 arrays are 10 runs of 10, not 50 of 2).
 */
function countChunks(list, dir, pos, target) {
  const n = list.length;
  if (n <= target) return list;
  let size = Math.ceil(n / target);
  if (target >= MAX_CHILDREN) {
    let L = 1;
    while (target ** L < n) L++;
    size = Math.ceil(n ** (1 / L)) ** (L - 1);
  }
  const out = [];
  for (let i = 0; i < list.length; i += size) {
    const part = list.slice(i, i + size);
    out.push(part.length === 1 ? part[0] : ioCluster(dir, countChunks(part, dir, pos, MAX_CHILDREN), pos, "", "count"));
  }
  return out;
}

/** A few items on top: runs of lone leaves become one cluster each, then ranges if still many. */
function tidyTop(items, dir, pos) {
  if (items.length <= IO_TOP) return items;
  const out = [];
  let run = [];
  const flush = () => {
    if (run.length > 1) out.push(ioCluster(dir, countChunks(run, dir, pos, MAX_CHILDREN), pos, "", "count"));
    else out.push(...run);
    run = [];
  };
  for (const x of items) {
    if (x.kind === "node") run.push(x);
    else { flush(); out.push(x); }
  }
  flush();
  return out.length > IO_MAX ? countChunks(out, dir, pos, IO_TOP) : out;
}

/** Outputs: a run with the avals of an input cluster (new params from params) is one cluster. */
function matchOutputs(leaves, inTop, pos) {
  // only clusters of named arrays: equal avals by position alone say little
  const sigs = inTop.filter((s) => s.kind === "io" && s.how === "path").map((s) => ({ s, avals: ioLeaves(s).map((n) => (n.out || []).join()) }))
    .sort((a, b) => b.avals.length - a.avals.length);
  const avals = leaves.map((l) => (l.node.out || []).join());
  const out = [];
  for (let i = 0; i < leaves.length;) {
    const hit = sigs.find(({ avals: a }) => i + a.length <= leaves.length && a.every((t, k) => avals[i + k] === t));
    if (!hit) { out.push(leaves[i++]); continue; }
    const part = leaves.slice(i, i + hit.avals.length);
    out.push(ioCluster("out", countChunks(part, "out", pos, MAX_CHILDREN), pos, "", "like", hit.s.label));
    i += hit.avals.length;
  }
  return out;
}

/** Bytes of an aval string such as "f32[8,128]" (0 when unknown). */
export function avalBytes(t) {
  const m = /^([a-z]+)(\d*)\[([\d,\s]*)\]/.exec(t || "");
  if (!m) return 0;
  const bits = m[2] ? +m[2] : m[1] === "bool" ? 8 : 32;
  const dims = m[3].split(",").filter((s) => s.trim()).map(Number);
  return dims.reduce((a, d) => a * d, 1) * Math.max(1, bits / 8);
}

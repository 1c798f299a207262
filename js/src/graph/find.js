// The graph view's search, pure: every text a box, a frame or the inspector shows (an
// equation's primitive, a call's title `pjit: jit(log_softmax)` and its body's label, a call
// path group's label and function name, input and output names, avals, name-stack scopes,
// `file:line`, `%id`) plus the source line a node came from, ranked: exact labels first,
// then groups, then the rest, then source text. A group that matches is one match (the group),
// not every equation inside it.

import { pathOf, staticTree } from "./model.js";

/** The ranks of a match, best first: `define` is the equation that makes a variable of
 * the query's name (the last one of a line `logp = log_softmax(x)`, per body). */
export const TIER = { exact: 0, define: 1, group: 2, label: 3, other: 4, source: 5 };

const ESC = /[.*+?^${}()|[\]\\]/g;

/**
 * Whether source line `text` assigns the variable `q` (lower case): `q = ...`, `a, q = ...`,
 * `q += ...`, `q: T = ...`; not `x[q] = ...`, `f(q=1)`, `q == 1`.
 * @param {string} text
 * @param {string} q
 */
export function assigns(text, q) {
  const m = /^\s*([A-Za-z_][\w\s,()*]*?)\s*(?::[^=]*)?(?:[-+*/@%|&^]|\/\/|\*\*|>>|<<)?=(?!=)/.exec(text);
  if (!m || /^\s*(def|class|if|elif|while|for|return|with|lambda|assert)\b/.test(text) || /\w\s*\(/.test(m[1])) return false;
  return new RegExp(`(^|[^\\w])${q.replace(ESC, "\\$&")}($|[^\\w])`).test(m[1].toLowerCase());
}

/** Titles an equation's box shows: `pjit: jit(relu)`, the body labels `jit(relu)`. */
function callLabels(graph, n) {
  const subs = n.subs || [];
  if (!subs.length) return [];
  const labels = subs.map((sb) => String((graph.bodies[sb.body] || {}).label || ""));
  const t = subs.length === 1 && subs[0].times > 1 ? ` x${subs[0].times}` : "";
  return [`${n.op}${t}: ${labels[0]}`, ...labels];
}

/** The label a box shows for node `n` (model.js's boxText title, without the graph's help). */
function nodeLabels(graph, n) {
  if (n.kind === "eqn") return [n.op || "", ...callLabels(graph, n)];
  const name = n.op || "";
  return [name, `${n.kind} ${name}`.trim()];
}

/**
 * The best rank at which node `n` (of body `b`) matches the lower-cased query `q`, or -1.
 * @param {any} graph
 * @param {any} b
 * @param {any} n
 * @param {string} q
 * @param {Object<string,Object<string,string>>|null} sources
 */
function rankNode(graph, b, n, q, sources) {
  const labels = nodeLabels(graph, n).map((s) => s.toLowerCase());
  if (labels.some((s) => s === q)) return TIER.exact;
  if (labels.some((s) => s.includes(q))) return TIER.label;
  if ((n.out || []).some((o) => o.toLowerCase().includes(q)) || ("%" + n.id) === q ||
    (!!n.loc && `${n.loc[0]}:${n.loc[1]}`.toLowerCase().includes(q)) ||
    (n.ns || "").toLowerCase().split("/").some((s) => s === q)) return TIER.other;
  const text = sourceOf(n, sources);
  if (text && text.toLowerCase().includes(q)) return TIER.source;
  return -1;
}

/** The source text of node `n`'s line, or null. */
function sourceOf(n, sources) {
  return n.loc && sources && sources[n.loc[0]] ? sources[n.loc[0]][String(n.loc[1])] ?? null : null;
}

/** How deep each body sits under the graph's root (0), through its nodes' sub-bodies. */
function bodyDepths(graph) {
  const depth = [];
  depth[graph.root ?? 0] = 0;
  const queue = [graph.root ?? 0];
  while (queue.length) {
    const B = queue.shift();
    for (const n of (graph.bodies[B] || { nodes: [] }).nodes) {
      for (const sb of n.subs || []) if (depth[sb.body] == null) { depth[sb.body] = depth[B] + 1; queue.push(sb.body); }
    }
  }
  return depth;
}

/** The first node (in body order) under a static cluster, or -1. */
function firstLeaf(s) {
  if (s.kind === "node") return s.node.id;
  for (const c of s.children) {
    const id = firstLeaf(c);
    if (id >= 0) return id;
  }
  return -1;
}

/**
 * Every match of `query` in the graph, best first: {B, nid, tier, grp?, where}. A node match
 * names its node; a group match (`grp`: the group's id) names the group's first node, which
 * is where its trail goes. `where` is the call path the match sits in (for the group count).
 * A query that is a number (`12`, `line 12`, `:12`) matches the nodes of that source line.
 * @param {any} graph   a prepared graph (model.js's prepareGraph)
 * @param {string} query
 * @param {{limit?:number, sources?:Object<string,Object<string,string>>|null}} [opts]
 * @returns {{B:number, nid:number, tier:number, grp?:number, where:string}[]}
 */
export function search(graph, query, opts = {}) {
  const limit = opts.limit ?? 2000;
  const sources = opts.sources || null;
  const q = query.trim().toLowerCase();
  if (!q) return [];
  const m = /^(?:line\s*|:)?(\d+)$/.exec(q);
  const line = m ? +m[1] : null;
  const out = [], defs = [];
  graph.bodies.forEach((b, B) => {
    for (const n of b.nodes) {
      if (n.kind === "lit") continue;
      if (line !== null) {
        if ((!!n.loc && n.loc[1] === line) || ("%" + n.id) === q) out.push({ B, nid: n.id, tier: TIER.exact, where: pathOf(b, n) });
        continue;
      }
      const t = rankNode(graph, b, n, q, sources);
      if (t >= 0) out.push({ B, nid: n.id, tier: t, where: pathOf(b, n) });
    }
    // the equation that defines the variable `q`: on a line assigning it, the last of the
    // first run of its body's equations from that line (a backward pass's come later)
    if (line === null && sources && /^[a-z_]\w*$/.test(q)) {
      const mine = new Map();
      for (const r of out) if (r.B === B && r.tier === TIER.source) mine.set(r.nid, r);
      const ends = new Map(), closed = new Set();
      let prev = null;
      for (const n of b.nodes) {
        if (n.kind !== "eqn") continue;
        const key = n.loc ? `${n.loc[0]}:${n.loc[1]}` : null;
        if (prev && key !== prev) closed.add(prev);
        prev = key;
        if (!key || closed.has(key) || !mine.has(n.id)) continue;
        const text = sourceOf(n, sources);
        if (text && assigns(text, q)) ends.set(key, mine.get(n.id));
      }
      for (const r of ends.values()) defs.push({ r, B });
    }
    if (line !== null) return;
    const groups = b.groups || [];
    if (!groups.length) return;
    const st = staticTree(b, graph.bodies);
    for (const g of groups) {
      const label = String(g.label || "").toLowerCase(), fn = String(g.fn || "").toLowerCase();
      if (!label.includes(q) && !fn.includes(q)) continue;
      const s = st.groupItems[g.id];
      const nid = s ? firstLeaf(s) : -1;
      if (nid < 0) continue;
      const exact = label === q || fn === q;
      const up = g.parent >= 0 && groups[g.parent] ? pathOf(b, { group: g.parent }) : b.path || "";
      out.push({ B, nid, grp: g.id, tier: exact ? TIER.exact : TIER.group, where: up });
    }
  });
  // the defining equations of the outermost bodies (the call `log_softmax`, not its insides)
  if (defs.length) {
    const depth = bodyDepths(graph);
    const top = Math.min(...defs.map((d) => depth[d.B] ?? Infinity));
    for (const d of defs) if ((depth[d.B] ?? Infinity) === top) d.r.tier = TIER.define;
  }
  // stable: within a rank, bodies and nodes keep their order
  out.sort((a, b) => a.tier - b.tier);
  return out.slice(0, limit);
}

/**
 * "12 matches in 3 groups" (the groups: distinct call paths the matches sit in).
 * @param {{where:string}[]} matches
 * @returns {string}
 */
export function matchSummary(matches) {
  const n = matches.length;
  if (!n) return "0 matches";
  const where = new Set(matches.map((r) => r.where));
  return `${n} match${n === 1 ? "" : "es"} in ${where.size} group${where.size === 1 ? "" : "s"}`;
}

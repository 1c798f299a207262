// The graph payload (jaxviz/graph/model.py's Graph.to_dict; jaxviz/schema.py declares the same
// shapes as TypedDicts, docs/graph-json.md field by field) and what the view derives from it:
// a per-body "static tree" of clusters (call-path groups, folded repeats, chunks) and the
// visible graph for a set of expanded cluster keys. Everything here is linear in what is
// instantiated: a collapsed sub-jaxpr is never walked.

import { MAX_CHILDREN, IO_MAX, pathSegments, avalBytes, groupIO } from "./iogroups.js";

/**
 * @typedef {[string, number, number, string]} Loc          [file, line, col, fn]
 * @typedef {{body:number, role:string, in_map:number[], out_map:number[], times?:number}} Sub
 * @typedef {{id:number, kind?:string, op?:string, params?:string[], out?:string[], loc?:Loc,
 *   ns?:string, path?:string, group?:number, flops?:number, bytes?:number, nbytes?:number,
 *   value?:string, subs?:Sub[]}} Node
 * @typedef {{id:number, parent:number, label:string, fn:string, loc:Loc|null, n_eqns:number,
 *   repeat_of?:number, repeats?:number}} Group
 * @typedef {{id:number, label:string, path:string, n_eqns:number, flops:number, bytes:number,
 *   inputs:number[], outputs:number[], nodes:Node[], edges:[number,number,string,number,number][],
 *   groups:Group[]}} Body
 * @typedef {{version:number, name:string, root:number, files?:string[], bodies:Body[], cut?:number}} Graph
 *   (in the JSON a Loc's file is an index into Graph.files; prepareGraph turns it into the name;
 *   a node's call path is Body.path joined with the labels of its group chain; cut: equations
 *   left out past jaxviz.options.max_eqns, not shown by the view)
 * @typedef {{rule:string, severity:string, message:string, filename:string, line:number|null,
 *   node_ids:string[], related:[string,number,string][], hint:string, trace:string, code:string,
 *   compare?:number[]|null}} Diagnostic   (compare: a recompile's [earlier, later] trace indices)
 * @typedef {{name:string, kind?:string, user?:boolean, graph:Graph, calls?:any, call_sites?:any,
 *   diagnostics?:Diagnostic[], donated?:number[], calls_more?:boolean}} TracePayload      (kind: "jit" | "eager" | "trace" | "shard_map")
 * @typedef {{traces:TracePayload[], diagnostics?:Diagnostic[], sources?:Object<string,Object<string,string>>,
 *   memory?:import("./memory.js").MemoryEntry[], compares?:CompareEntry[], cost?:CellCost}} Payload
 * @typedef {{cell_seconds:number, capture_seconds:number, analysis_seconds:number, text:string}} CellCost
 *   (what jaxviz added to the cell's time: the status line states it)
 * @typedef {{a:number, b:number, names:string[], diff:import("./compare.js").Diff, text:string}} CompareEntry
 *   (a recompile's two traces compared: a, b index Payload.traces)
 */

/** Resolves file indices in locs to names and fills `kind: "eqn"` (left out of the JSON),
 * once per graph (in place). */
export function prepareGraph(graph) {
  if (graph._prepared) return graph;
  const files = graph.files || [];
  const fix = (loc) => { if (loc && typeof loc[0] === "number") loc[0] = files[loc[0]] ?? "?"; };
  for (const b of graph.bodies) {
    for (const n of b.nodes) { fix(n.loc); if (!n.kind) n.kind = "eqn"; }
    for (const g of b.groups || []) fix(g.loc);
  }
  graph._prepared = true;
  return graph;
}

/** The user call path of a node: "train_step > model > block[3] > attn". */
export function pathOf(body, n) {
  if (n.path) return n.path;
  const groups = body.groups || [];
  const gp = (gid) => {
    const g = groups[gid];
    if (!g) return body.path || "";
    if (g._path == null) {
      const up = g.parent >= 0 ? gp(g.parent) : body.path || "";
      g._path = up ? `${up} > ${g.label}` : g.label;
    }
    return g._path;
  };
  return n.group != null && n.group >= 0 ? gp(n.group) : body.path || "";
}

export { MAX_CHILDREN, IO_MAX, pathSegments, avalBytes };

/** A cluster key for a node `nid` inside the body instance with prefix `P`. */
export const nodeKey = (P, nid) => P + "n" + nid;
/** The prefix of sub-body `i` of the (expanded) equation with key `k`. */
export const subPrefix = (k, i) => k + "." + i + "/";

/** Static cluster tree of one body (cached on the body): groups, folds, chunks, leaves. */
export function staticTree(body, bodies) {
  if (body._st) return body._st;
  const groups = body.groups || [];
  const root = { lk: "", kind: "body", children: [], first: -1, anc: [] };
  const gs = groups.map((g) => ({ lk: "g" + g.id, kind: "group", label: g.label, g, children: [], first: Infinity }));
  const leafParent = new Array(body.nodes.length);
  // name-stack scopes ("layer1/attn", "transpose(jvp(loss))") group what no call path groups
  const scopes = new Map();
  const scope = (path) => {
    let s = scopes.get(path);
    if (s) return s;
    const cut = path.lastIndexOf("/");
    const parent = cut > 0 ? scope(path.slice(0, cut)) : root;
    s = { lk: "s" + path, kind: "ns", label: path.slice(cut + 1), path, children: [], first: Infinity };
    scopes.set(path, s);
    parent.children.push(s);
    return s;
  };
  for (let i = 0; i < body.nodes.length; i++) {
    const n = body.nodes[i];
    if (n.kind === "lit") continue;
    const grouped = n.group != null && n.group >= 0 && gs[n.group];
    const p = grouped ? gs[n.group] : n.ns && n.kind === "eqn" ? scope(n.ns) : root;
    p.children.push({ lk: "n" + n.id, kind: "node", node: n, first: i });
    leafParent[n.id] = p;
  }
  groupIO(root, body);
  for (const s of gs) ((s.g.parent >= 0 && gs[s.g.parent]) || root).children.push(s);
  // a scope whose only child is a scope is one level: "a/b"
  const merge = (s) => {
    s.children = s.children.map((c) => {
      if (c.kind !== "ns") return c;
      while (c.children.length === 1 && c.children[0].kind === "ns") {
        const only = c.children[0];
        only.label = c.label + "/" + only.label;
        c = only;
      }
      merge(c);
      return c.children.length === 1 ? c.children[0] : c; // a scope around one node is noise
    });
  };
  if (scopes.size) merge(root);
  const firstOf = (s) => {
    if (s.kind === "node") return s.first;
    let f = Infinity;
    for (const c of s.children) f = Math.min(f, firstOf(c));
    s.first = f;
    return f;
  };
  firstOf(root);
  const finish = (s) => {
    s.children.sort((a, b) => a.first - b.first);
    // fold runs of identical siblings: block[0] (repeats=12) + block[1..11] (repeat_of=0)
    const out = [];
    const folds = new Map();
    for (const c of s.children) {
      if (s.kind === "fold") out.push(c);
      else if (c.kind === "group" && c.g.repeats > 1) {
        const f = { lk: "f" + c.g.id, kind: "fold", label: `${c.g.fn || c.g.label} x${c.g.repeats}`, head: c, children: [c], first: c.first };
        folds.set(c.g.id, f);
        out.push(f);
      } else if (c.kind === "group" && c.g.repeat_of >= 0 && folds.has(c.g.repeat_of)) {
        folds.get(c.g.repeat_of).children.push(c);
      } else out.push(c);
    }
    s.children = chunk(out);
    for (const c of s.children) if (c.children) finish(c);
  };
  finish(root);
  const annotate = (s, anc) => {
    s.anc = anc;
    let n = 0, flops = 0, bytes = 0, time = 0;   // time: --profile's device time (timetab.js)
    for (const c of s.children) {
      if (c.kind === "node") {
        leafParent[c.node.id] = s;
        const nd = c.node;
        if (nd.kind === "eqn") n += 1 + (nd.subs || []).reduce((a, sb) => a + (bodies[sb.body].n_eqns || 0), 0);
        flops += nd.flops || 0;
        bytes += nd.bytes || 0;
        time += nd.time_us || 0;
      } else {
        annotate(c, anc.concat([c]));
        n += c.n; flops += c.flops; bytes += c.bytes; time += c.time_us;
      }
    }
    s.n = s.kind === "group" && s.g.n_eqns ? s.g.n_eqns : n;
    s.flops = flops; s.bytes = bytes; s.time_us = time;
  };
  annotate(root, []);
  // groupItems: each call-path group's static item, by group id (search reveals a group)
  body._st = { root, leafParent, groupItems: gs };
  return body._st;
}

/** Splits a long child list into nested chunks of at most MAX_CHILDREN (jaxpr order kept). */
function chunk(list) {
  if (list.length <= MAX_CHILDREN) return list;
  // a balanced tree: L levels of branching b, with b^L >= n
  let L = 1;
  while (MAX_CHILDREN ** L < list.length) L++;
  const b = Math.ceil(list.length ** (1 / L));
  const size = b ** (L - 1);
  const out = [];
  for (let i = 0; i < list.length; i += size) {
    const part = list.slice(i, i + size);
    const nodes = part.filter((c) => c.kind === "node");
    const a = part[0], b = part[part.length - 1];
    const label = `${labelOfStatic(a)} … ${labelOfStatic(b)}`;
    out.push({ lk: `c${a.first}_${b.first}`, kind: "chunk", label, children: part.length > MAX_CHILDREN ? chunk(part) : part, first: a.first, nleaf: nodes.length });
  }
  return out;
}

function labelOfStatic(s) {
  if (s.kind === "node") return s.node.op || s.node.kind;
  return s.label;
}

/** For each body: the first (parent body, eqn, sub index) that references it, breadth first. */
export function firstRefs(graph) {
  const refs = new Array(graph.bodies.length).fill(null);
  const seen = new Set([graph.root]);
  const queue = [graph.root];
  while (queue.length) {
    const B = queue.shift();
    for (const n of graph.bodies[B].nodes) {
      (n.subs || []).forEach((s, i) => {
        if (seen.has(s.body)) return;
        seen.add(s.body);
        refs[s.body] = { B, nid: n.id, i };
        queue.push(s.body);
      });
    }
  }
  return refs;
}

/** The chain of (prefix, body, node) from the root to node `nid` of body `B`, or null. */
export function trailTo(graph, refs, B, nid) {
  const up = [];
  let b = B;
  while (b !== graph.root) {
    const r = refs[b];
    if (!r) return null;
    up.push(r);
    b = r.B;
  }
  up.reverse();
  const trail = [];
  let P = "";
  for (const r of up) {
    trail.push({ P, B: r.B, nid: r.nid });
    P = subPrefix(nodeKey(P, r.nid), r.i);
  }
  trail.push({ P, B, nid });
  return trail;
}

/** Adds to `expanded` every cluster around the trail's node so that it becomes visible. */
export function revealTrail(graph, trail, expanded) {
  trail.forEach((t, k) => {
    const st = staticTree(graph.bodies[t.B], graph.bodies);
    const p = st.leafParent[t.nid];
    if (p) for (const s of p.anc) expanded.add(t.P + s.lk);
    if (k < trail.length - 1) expanded.add(nodeKey(t.P, t.nid));
  });
}

/** The visible item standing for the trail's node: itself, or the collapsed cluster around it. */
export function repOfTrail(view, graph, trail) {
  let it = null;
  for (let k = 0; k < trail.length; k++) {
    const t = trail[k];
    it = leafRep(view, graph, t.P, t.B, t.nid);
    if (!it) return null;
    if (!(it.open && it.key === nodeKey(t.P, t.nid))) return it;
  }
  return it;
}

function leafRep(view, graph, P, B, nid) {
  const st = staticTree(graph.bodies[B], graph.bodies);
  const p = st.leafParent[nid];
  if (!p) return null;
  for (const s of p.anc) {
    if (s.soft && view.flatIO) continue;   // its arrays stand side by side (buildView)
    const it = view.items.get(P + s.lk);
    if (!it) return null;
    if (!it.open) return it;
  }
  return view.items.get(nodeKey(P, nid)) || null;
}

/**
 * The visible graph for a set of expanded keys: a tree of items (open clusters are frames,
 * everything else a box) and aggregated edges between boxes. `flatIO`: the soft clusters
 * of a body's few inputs and outputs (iogroups.js) show their arrays side by side.
 */
export function buildView(graph, expanded, flatIO = true) {
  const bodies = graph.bodies;
  const items = new Map();
  const boxes = [];
  const frames = [];
  const insts = [];
  const root = { key: "", kind: "root", open: true, children: [], depth: 0, parent: null };
  const mk = (key, kind, parent, extra) => {
    const it = { key, kind, parent, depth: parent.depth + 1, children: [], open: false, ...extra };
    items.set(key, it);
    parent.children.push(it);
    return it;
  };
  const instBody = (P, B, container) => {
    const st = staticTree(bodies[B], bodies);
    insts.push({ P, B });
    for (const s of st.root.children) addItem(P, B, s, container);
  };
  const addItem = (P, B, s, parent) => {
    if (flatIO && s.soft) { for (const c of s.children) addItem(P, B, c, parent); return; }
    const key = P + s.lk;
    const it = mk(key, s.kind, parent, { s, P, B });
    const subs = s.kind === "node" ? s.node.subs || [] : null;
    if (subs === null) {
      if (expanded.has(key)) {
        it.open = true;
        for (const c of s.children) addItem(P, B, c, it);
      }
    } else if (subs.length && expanded.has(key)) {
      it.open = true;
      if (subs.length === 1) instBody(subPrefix(key, 0), subs[0].body, it);
      else subs.forEach((sb, i) => {
        const br = mk(key + "." + i, "branch", it, { open: true, sub: sb, P, B });
        frames.push(br);
        instBody(subPrefix(key, i), sb.body, br);
      });
    }
    (it.open ? frames : boxes).push(it);
  };
  instBody("", graph.root, root);

  const resolve = (P, B, nid, dir, port, out) => {
    const body = bodies[B];
    const n = body.nodes[nid];
    if (!n || n.kind === "lit") return;
    const it = leafRep({ items, flatIO }, graph, P, B, nid);
    if (!it) return;
    if (!it.open) { out.push(it); return; }
    (n.subs || []).forEach((sb, i) => {
      const b2 = bodies[sb.body];
      const map = dir === "out" ? sb.out_map : sb.in_map;
      const ids = dir === "out" ? b2.outputs : b2.inputs;
      for (let j = 0; j < map.length; j++) if (map[j] === port) resolve(subPrefix(it.key, i), sb.body, ids[j], dir, 0, out);
    });
    // an operand no body reads (cond's branch index) ends at the open frame itself, as it
    // ends at the box when collapsed; likewise a result no body makes starts there
    if (!(n.subs || []).some((sb) => (dir === "out" ? sb.out_map : sb.in_map).includes(port))) out.push(it);
  };
  const emap = new Map();
  const src = [], dst = [];
  for (const { P, B } of insts) {
    for (const e of bodies[B].edges) {
      src.length = 0; dst.length = 0;
      resolve(P, B, e[0], "out", e[4] || 0, src);
      if (!src.length) continue;
      resolve(P, B, e[1], "in", e[3] || 0, dst);
      // a bundle counts arrays, not uses: one array read by four equations of a shut group is one
      const aid = P + e[0] + ":" + (e[4] || 0);
      for (const s of src) for (const t of dst) {
        if (s === t) continue;
        const k = s.key + "\u0001" + t.key;
        const x = emap.get(k);
        if (!x) { emap.set(k, { s, t, type: e[2], n: 1, bytes: avalBytes(e[2]), types: null, _a: aid, _set: null }); continue; }
        if (aid === x._a || (x._set && x._set.has(aid))) continue;
        if (!x._set) { x._set = new Set([x._a]); x.types = new Map([[x.type, 1]]); }
        x._set.add(aid);
        x.n++;
        x.bytes += avalBytes(e[2]);
        x.types.set(e[2], (x.types.get(e[2]) || 0) + 1);
      }
    }
  }
  const edges = [...emap.values()];
  frames.sort((a, b) => a.depth - b.depth);
  return { root, items, boxes, frames, edges, flatIO };
}

/** How many boxes expanding item `s` (static node, in body B) adds in place of one. */
function openCost(bodies, s) {
  if (s.kind === "node") {
    return (s.node.subs || []).reduce((a, sb) => a + staticTree(bodies[sb.body], bodies).root.children.length, 0) - 1;
  }
  return s.children.length - 1;
}

/**
 * Expanded keys for a readable first overview: level by level, a whole level opens when it
 * fits in `budget` boxes; past that only clusters that add at most one box (a group around a
 * fold) open, so the picture stays balanced instead of one deep column.
 */
// custom_jvp / custom_vjp bodies (jax.nn.relu, gelu, softmax's) are a library's rule,
// rarely what a first look is after: they stay shut too
const USER_ROLES = new Set(["jit", "scan", "cond", "body", "remat", "shard_map", "pmap", "call"]);
/** A body the user wrote (a jitted function, a loop or branch body), not a primitive's helper. */
const userRole = (role) => USER_ROLES.has(role) || String(role).startsWith("branch");

export function initialExpanded(graph, budget = 90, flatIO = true) {
  const bodies = graph.bodies;
  const expanded = new Set();
  const top = staticTree(bodies[graph.root], bodies).root.children;
  let visible = top.reduce((a, s) => a + (flatIO && s.soft ? s.children.length : 1), 0);
  let level = top.map((s) => ({ P: "", s }));
  let full = true;
  while (level.length) {
    // folds, the clusters of many inputs / outputs, and JAX's own helper bodies (a scatter's
    // update_jaxpr, a reduce's computation) stay shut: they open on demand
    const cand = level.filter(({ s }) => s.kind !== "fold" && s.kind !== "io"
      && !(s.kind === "node" && !(s.node.subs || []).some((sb) => userRole(sb.role))));
    const costs = cand.map(({ s }) => openCost(bodies, s));
    const total = costs.reduce((a, c) => a + c, 0);
    if (full && visible + total > budget) full = false;
    const next = [];
    cand.forEach(({ P, s }, k) => {
      if (!full && (costs[k] > 1 || visible + costs[k] > budget)) return;
      const key = P + s.lk;
      expanded.add(key);
      visible += costs[k];
      if (s.kind === "node") {
        s.node.subs.forEach((sb, i) => {
          for (const c of staticTree(bodies[sb.body], bodies).root.children) next.push({ P: subPrefix(key, i), s: c });
        });
      } else for (const c of s.children) next.push({ P, s: c });
    });
    level = next;
  }
  return expanded;
}

/** Expands everything under `fromKeys` (or everything), breadth first, up to `cap` boxes. */
export function expandAll(graph, expanded, view, cap = 3000) {
  const bodies = graph.bodies;
  let visible = view.boxes.length;
  const queue = view.boxes.map((it) => ({ P: it.P, s: it.s })).filter((x) => x.s);
  let capped = false;
  while (queue.length) {
    const { P, s } = queue.shift();
    if (s.kind === "node" && !(s.node.subs || []).length) continue;
    const cost = openCost(bodies, s);
    if (visible + cost > cap) { capped = true; continue; }
    const key = P + s.lk;
    expanded.add(key);
    visible += cost;
    if (s.kind === "node") {
      s.node.subs.forEach((sb, i) => {
        for (const c of staticTree(bodies[sb.body], bodies).root.children) queue.push({ P: subPrefix(key, i), s: c });
      });
    } else for (const c of s.children) queue.push({ P, s: c });
  }
  return capped;
}

/** Inputs of node `nid` in body `b`: [{port, src node, type}] (index cached on the body). */
export function inEdges(b, nid) {
  if (!b._in) {
    b._in = new Map();
    b._out = new Map();
    for (const e of b.edges) {
      if (!b._in.has(e[1])) b._in.set(e[1], []);
      b._in.get(e[1]).push(e);
      if (!b._out.has(e[0])) b._out.set(e[0], []);
      b._out.get(e[0]).push(e);
    }
  }
  return (b._in.get(nid) || []).slice().sort((x, y) => x[3] - y[3]);
}

/**
 * Short tab labels for a cell's traces: a function's name; for eager statements `line 13`
 * (the statement itself goes in the tooltip); repeated labels numbered `line 13 (2)`.
 * @param {TracePayload[]} traces
 * @returns {{text:string, title:string, lib:boolean}[]}
 */
export function tabLabels(traces) {
  const seen = new Map();
  return traces.map((t) => {
    const name = String(t.name || "");
    const eager = t.kind === "eager";
    const m = eager ? /^line (\d+)/.exec(name) : null;
    let text = m ? `line ${m[1]}` : name;
    if (text.length > 40) text = text.slice(0, 39) + "…";
    const n = (seen.get(text) || 0) + 1;
    seen.set(text, n);
    if (n > 1) text += ` (${n})`;
    const more = t.calls_more ? "+" : ""; // later calls ran unwatched: at least this many
    const calls = typeof t.calls === "number" && (t.calls > 1 || more) ? ` · ${t.calls}${more} calls` : "";
    const what = eager ? "eager ops at " : (t.user === false ? "library function " : "");
    return { text, title: what + name + calls, lib: eager || t.user === false };
  });
}

/**
 * The trace a view opens on: the first of the user's own functions with equations, before
 * the user's eager statements, before anything with equations (a library function); never a
 * 0-equation conversion when there is a choice.
 * @param {TracePayload[]} traces
 * @returns {number}
 */
export function openingTrace(traces) {
  const eqns = (t) => ((t.graph && t.graph.bodies[t.graph.root]) || {}).n_eqns > 0;
  // a cell of the user's functions opens on the first; one without opens on the first tab
  // with findings (never a folded one: foldTabs shows those first), then the user's eager lines
  const found = (t) => (t.diagnostics || []).length > 0;
  const tests = [(t) => t.user !== false && t.kind !== "eager" && eqns(t), (t) => found(t) && eqns(t), (t) => t.user !== false && eqns(t), eqns];
  for (const ok of tests) {
    const i = traces.findIndex(ok);
    if (i >= 0) return i;
  }
  return 0;
}

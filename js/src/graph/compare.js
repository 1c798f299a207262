// The compare view's logic, free of the DOM: which status an item of either pane has (the
// payload's marks), the colours they are drawn in, and the translation of a pane's item key
// into the other pane's (so opening, closing and selecting follow each other). Keys are
// model.js's: P + lk, where P is a chain of "n<id>.<sub>/" (the node whose body is open) and
// lk is "n<id>" (a node), "g<id>" (a call-path group), "f<id>" (a fold of groups), or a key
// that holds no id ("s<name scope>", chunks, io clusters), kept as it is.

/**
 * The differences of a ComparePayload (jaxviz.view.compare; schema.py's DiffEntry).
 * @typedef {{status:string, path:string, op:string, a:number[]|null, b:number[]|null,
 *   line_a:number|null, line_b:number|null, file_a?:string, file_b?:string, ins_a:string[], ins_b:string[], out_a:string[],
 *   out_b:string[], params_a:string[], params_b:string[], flops_a:number, flops_b:number,
 *   bytes_a:number, bytes_b:number}} NodeDiff
 * @typedef {{path:string, status:string, flops_a:number, flops_b:number, bytes_a:number,
 *   bytes_b:number, eqns_a:number, eqns_b:number, changed:number, added:number,
 *   removed:number}} GroupDiff
 * @typedef {{nodes:NodeDiff[], groups:GroupDiff[], pairs:number[][], gpairs:number[][],
 *   same:number, marks:Object<string,string>[]}} Diff
 * @typedef {{kind:"compare", names:string[], a:any, b:any, diff:Diff, text:string}} ComparePayload
 */

/**
 * Where an equation that differs is: "line 3", "line 3 → 5", or, when its two sides are in
 * different files (a function copied to another cell), each line with its cell:
 * "cell [3] line 27, cell [5] line 6" (not a move within one cell).
 * @param {NodeDiff} n
 * @returns {string}
 */
export function lineText(n) {
  const fa = n.file_a || "", fb = n.file_b || "";
  if (n.line_a && n.line_b && fa && fb && fa !== fb) return `${fa} line ${n.line_a}, ${fb} line ${n.line_b}`;
  if (n.line_a && n.line_b && n.line_a !== n.line_b) return `line ${n.line_a} → ${n.line_b}`;
  return `line ${n.line_a || n.line_b || "?"}`;
}

/**
 * The compare view's summary: "1 equation differs: …", "3 equations differ: …".
 * @param {Diff} diff
 * @returns {string}
 */
export function summaryText(diff) {
  const n = diff.nodes.length;
  if (!n) return `the same graph (${diff.same} equations)`;
  const count = (s) => diff.nodes.filter((x) => x.status === s).length;
  return `${n} ${n === 1 ? "equation differs" : "equations differ"}: ${count("changed")} changed, ${count("added")} added, ${count("removed")} removed; ${diff.same} the same`;
}

/** Colours of the statuses (light and dark themes alike read on both). */
export const STATUS_COLORS = { changed: "#e69500", added: "#2e9d44", removed: "#d83b3b" };

/**
 * The status of item `it` of a pane ("same" when the marks do not name it).
 * @param {Object<string,string>} marks   "body:id" / "body:g<group>" -> status
 * @param {any} it                        a view item (model.js buildView)
 * @returns {string}
 */
export function statusOf(marks, it) {
  if (!it || !marks) return "same";
  const s = it.s;
  let key = null;
  if (it.kind === "node") key = `${it.B}:${s.node.id}`;
  else if (it.kind === "group") key = `${it.B}:g${s.g.id}`;
  else if (it.kind === "fold") key = `${it.B}:g${s.head.g.id}`;
  return (key && marks[key]) || "same";
}

/**
 * The painter's tint for a pane: a colour for an item that differs, else null.
 * @param {Object<string,string>} marks
 * @returns {function(any): (string|null)}
 */
export function tinter(marks) {
  return (it) => STATUS_COLORS[statusOf(marks, it)] || null;
}

/**
 * Both ways of the matches: side -> "body:id" -> [body, id] on the other side, for nodes
 * (pairs) and groups (gpairs); `graphs` are the two panes' graphs.
 * @param {Diff} diff
 * @param {any[]} graphs
 */
export function matchMaps(diff, graphs) {
  const nodes = [new Map(), new Map()], groups = [new Map(), new Map()];
  for (const [ba, na, bb, nb] of diff.pairs || []) {
    nodes[0].set(`${ba}:${na}`, [bb, nb]);
    nodes[1].set(`${bb}:${nb}`, [ba, na]);
  }
  for (const [ba, ga, bb, gb] of diff.gpairs || []) {
    groups[0].set(`${ba}:${ga}`, [bb, gb]);
    groups[1].set(`${bb}:${gb}`, [ba, ga]);
  }
  return { nodes, groups, graphs };
}

/**
 * Item key `key` of pane `side` (0: a, 1: b) as the other pane's key, or null when a part of
 * it has no match there.
 * @param {string} key
 * @param {number} side
 * @param {any} graph       the graph of pane `side` (its bodies, subs)
 * @param {{nodes:Map<string,number[]>[], groups:Map<string,number[]>[], graphs:any[]}} maps  matchMaps
 * @param {number} rootA    root body of pane `side`
 * @param {number} rootB    root body of the other pane
 * @returns {string|null}
 */
export function translateKey(key, side, graph, maps, rootA, rootB) {
  let B = rootA, Bo = rootB, out = "", i = 0;
  const seg = /^n(\d+)\.(\d+)\//;
  for (;;) {
    const m = seg.exec(key.slice(i));
    if (!m) break;
    const nid = +m[1], sub = +m[2];
    const got = maps.nodes[side].get(`${B}:${nid}`);
    if (!got || got[0] !== Bo) return null;
    const node = graph.bodies[B].nodes.find((n) => n.id === nid);
    const subs = (node && node.subs) || [];
    if (!subs[sub]) return null;
    out += `n${got[1]}.${sub}/`;
    B = subs[sub].body;
    Bo = otherSub(maps, side, got, sub);   // what the matched node's sub opens there
    if (Bo == null) return null;
    i += m[0].length;
  }
  const lk = key.slice(i);
  const m = /^([ngf])(\d+)(.*)$/.exec(lk);
  if (!m) return out + lk;
  const map = m[1] === "n" ? maps.nodes[side] : maps.groups[side];
  const got = map.get(`${B}:${m[2]}`);
  if (!got || got[0] !== Bo) return null;
  return out + m[1] + got[1] + m[3];
}

// the body that sub `sub` of the matched node `got` ([body, id], other side) opens
function otherSub(maps, side, got, sub) {
  const g = maps.graphs && maps.graphs[1 - side];
  if (!g) return null;
  const node = g.bodies[got[0]].nodes.find((n) => n.id === got[1]);
  const s = node && node.subs && node.subs[sub];
  return s ? s.body : null;
}

/**
 * A signed delta, "+1.3k" / "-512", with `fmt` for the magnitude.
 * @param {number} a
 * @param {number} b
 * @param {function(number): string} fmt
 */
export function delta(a, b, fmt) {
  if (a === b) return "=";
  return (b > a ? "+" : "-") + fmt(Math.abs(b - a));
}

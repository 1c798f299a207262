// DOM side panels: inspector, tooltip text, diagnostics list, and where a diagnostic points
// in the graph. All user-derived text goes in through textContent (never innerHTML).

import { inEdges, pathOf, trailTo, repOfTrail } from "./model.js";
import { search } from "./find.js";
import { fmt, fmtBytes } from "./format.js";
import { subsTitle, ioText } from "./layout.js";

/** `h("div", {className: "x"}, "text", child)`: a DOM element, text as text nodes. */
export function h(tag, props, ...kids) {
  const e = document.createElement(tag);
  if (props) for (const [k, v] of Object.entries(props)) {
    if (k === "dataset") Object.assign(e.dataset, v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k in e) e[k] = v;
    else e.setAttribute(k, v);
  }
  for (const c of kids) if (c != null && c !== false) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

/** Device time in us as the time tab says it (timetab.js's fmtUs, kept here: no import cycle). */
const fmtUsShort = (us) => (us >= 1e6 ? `${(us / 1e6).toFixed(2)} s` : us >= 1e3 ? `${(us / 1e3).toFixed(2)} ms` : `${us.toFixed(1)} us`);
const row = (label, ...value) => h("div", { className: "jv-row" }, h("span", { className: "jv-k" }, label), h("span", { className: "jv-v" }, ...value));

/** Source lines around `line` of `file` from the payload's sources map, as a <pre>. */
function sourceBlock(sources, file, line) {
  const lines = sources && sources[file];
  if (!lines) return null;
  const pre = h("pre", { className: "jv-src" });
  for (let l = line - 2; l <= line + 2; l++) {
    const t = lines[String(l)];
    if (t == null) continue;
    const ln = h("div", { className: l === line ? "jv-src-hit" : "" }, h("span", { className: "jv-ln" }, String(l).padStart(4) + "  "), t);
    pre.append(ln);
  }
  return pre.childNodes.length ? pre : null;
}

function locText(loc) {
  if (!loc) return "(no user frame)";
  return `${loc[0]}:${loc[1]}` + (loc[3] ? ` in ${loc[3]}` : "");
}

/** A jaxpr-like text line for an equation: `%5:f32[8] = add[...] %3 %4`. */
export function eqnText(body, n) {
  const ins = inEdges(body, n.id).map((e) => {
    const src = body.nodes[e[0]];
    return src && src.kind === "lit" ? (src.value || "lit") : "%" + e[0];
  });
  const outs = (n.out || []).map((o, i) => `%${n.id}${n.out.length > 1 ? "." + i : ""}:${o}`);
  const params = (n.params || []).length ? `[${n.params.join(", ")}]` : "";
  return `${outs.join(" ") || "_"} = ${n.op}${params} ${ins.join(" ")}`.trim();
}

/** Fills the inspector for a box or frame item; `act` has toggle(item) and select(trail). */
export function fillInspector(panel, it, graph, sources, act) {
  panel.replaceChildren();
  if (!it) {
    panel.append(h("div", { className: "jv-muted" }, "Click a node to inspect it. Double-click a group to open it; search with /."));
    return;
  }
  if (it.kind === "node") {
    const n = it.s.node, body = graph.bodies[it.B];
    panel.append(h("div", { className: "jv-title" }, n.kind === "eqn" ? n.op : `${n.kind} ${n.op || ""}`));
    panel.append(row("source", h("span", { className: "jv-loc" }, locText(n.loc))));
    if (n.loc) {
      const src = sourceBlock(sources, n.loc[0], n.loc[1]);
      if (src) panel.append(src);
    }
    const path = pathOf(body, n);
    if (path) panel.append(row("call path", path));
    if (n.ns) panel.append(row("name stack", n.ns));
    if (n.kind === "eqn") {
      const ins = inEdges(body, n.id);
      const inList = h("div", { className: "jv-list" });
      for (const e of ins) {
        const src = body.nodes[e[0]];
        const what = !src ? "?" : src.kind === "lit" ? `literal ${src.value || ""}` : src.kind === "eqn" ? `%${src.id} (${src.op})` : `${src.kind} ${src.op || ""}`;
        inList.append(h("div", null, `${e[3]}: ${e[2]}  ← ${what}`));
      }
      panel.append(row("inputs", inList));
    }
    if ((n.out || []).length) panel.append(row("outputs", (n.out || []).join(", ")));
    if (n.layout) panel.append(row("on the mesh", `${n.layout} (as XLA compiled it; @axis: split over that mesh axis)`));
    if ((n.params || []).length) {
      const pl = h("div", { className: "jv-list jv-mono" });
      for (const p of n.params) pl.append(h("div", null, p));
      panel.append(row("params", pl));
    }
    if (n.kind === "eqn") panel.append(row("cost", `${fmt(n.flops || 0)} FLOP · ${fmtBytes(n.bytes || 0)}`));
    if (n.time_us != null) panel.append(row("device", `${fmtUsShort(n.time_us)} per step (--profile; its line's time, split)`));
    if (n.nbytes) panel.append(row("size", fmtBytes(n.nbytes)));
    if (n.value) panel.append(row("value", n.value));
    if ((n.subs || []).length) {
      panel.append(row("body", subsTitle(n, graph)));
      panel.append(h("button", { className: "jv-btn", onclick: () => act.toggle(it) }, it.open ? "Collapse" : "Expand"));
    }
    if (n.kind === "eqn") panel.append(h("pre", { className: "jv-eqn" }, eqnText(body, n)));
    return;
  }
  const s = it.s;
  if (it.kind === "branch") {
    panel.append(h("div", { className: "jv-title" }, `${it.sub.role}: ${graph.bodies[it.sub.body].label}`));
    return;
  }
  if (it.kind === "io") {
    fillIO(panel, it, act);
    return;
  }
  const title = s.label;
  panel.append(h("div", { className: "jv-title" }, title));
  panel.append(row("kind", it.kind === "fold" ? `${s.children.length} calls that made the same ops, folded` : it.kind === "chunk" ? "consecutive equations" : it.kind === "ns" ? `name scope ${s.path}` : "call-path group"));
  panel.append(row("size", `${fmt(s.n)} eqns`));
  panel.append(row("cost", `${fmt(s.flops)} FLOP · ${fmtBytes(s.bytes)}`));
  if (s.time_us) panel.append(row("device", `${fmtUsShort(s.time_us)} per step (--profile)`));
  const g = it.kind === "group" ? s.g : it.kind === "fold" ? s.head.g : null;
  if (g && g.loc) {
    panel.append(row("called at", h("span", { className: "jv-loc" }, locText(g.loc))));
    const src = sourceBlock(sources, g.loc[0], g.loc[1]);
    if (src) panel.append(src);
  }
  panel.append(h("button", { className: "jv-btn", onclick: () => act.toggle(it) }, it.open ? "Collapse" : "Expand"));
}

/** Leaves (input / output nodes) under an io cluster, in order. */
function ioNodes(s, out = []) {
  for (const c of s.children) if (c.kind === "node") out.push(c.node); else ioNodes(c, out);
  return out;
}

const ioKind = (s) => (s.dir === "in" ? "function inputs" : "function outputs") +
  (s.how === "path" ? " under one argument path" : s.like ? `, same shapes as ${s.like}` : ", by position");

/** The inspector of a cluster of inputs or outputs: what it holds, its first arrays. */
function fillIO(panel, it, act) {
  const s = it.s;
  panel.append(h("div", { className: "jv-title" }, s.label));
  panel.append(row("kind", ioKind(s)));
  if (s.label !== s.range) panel.append(row("positions", s.range));
  panel.append(row("size", ioText(s)));
  const nodes = ioNodes(s);
  const list = h("div", { className: "jv-list jv-mono" });
  for (const n of nodes.slice(0, 24)) list.append(h("div", null, `${n.op || (n.kind === "in" ? "in" : "out")}: ${(n.out || []).join(", ")}`));
  if (nodes.length > 24) list.append(h("div", { className: "jv-muted" }, `… ${nodes.length - 24} more`));
  panel.append(row("arrays", list));
  panel.append(h("button", { className: "jv-btn", onclick: () => act.toggle(it) }, it.open ? "Collapse" : "Expand"));
}

/** What `~` before an aval means, said where one is shown. */
export const WEAK = "~ weak type: the dtype of a Python scalar, which takes the other operand's dtype";

/** Tooltip lines for a hovered item. */
export function tooltipText(it, graph) {
  if (it.kind === "node") {
    const n = it.s.node;
    const path = pathOf(graph.bodies[it.B], n);
    const head = n.kind === "eqn" ? ((n.subs || []).length ? subsTitle(n, graph) : n.op) : `${n.kind} ${n.op || ""}`;
    const lines = [head + ((n.out || []).length ? " → " + n.out.join(", ") : "")];
    if (n.loc) lines.push(locText(n.loc));
    if (path) lines.push(path);
    if (n.kind === "eqn") lines.push(`${fmt(n.flops || 0)} FLOP · ${fmtBytes(n.bytes || 0)}`);
    if ((n.out || []).some((o) => o.startsWith("~"))) lines.push(WEAK);
    if ((n.subs || []).length) lines.push(it.open ? "click − to collapse" : "double-click to open");
    return lines.join("\n");
  }
  if (it.kind === "branch") return it.sub.role;
  if (it.kind === "io") return `${it.s.label}\n${ioKind(it.s)}\n${ioText(it.s)}\n${it.open ? "click − to collapse" : "double-click to open"}`;
  return `${it.s.label}\n${fmt(it.s.n)} eqns · ${fmt(it.s.flops)} FLOP\n${it.open ? "click − to collapse" : "double-click to open"}`;
}

/** Findings shown before the rest fold under "N more". */
export const FINDINGS_SHOWN = 6;

/**
 * Text with `code` spans as [text, isCode] pieces (a lone backtick stays text).
 * @param {string} text
 * @returns {[string, boolean][]}
 */
export function codeSpans(text) {
  const out = [];
  const re = /`([^`\n]+)`/g;
  let at = 0, m;
  const s = String(text || "");
  while ((m = re.exec(s))) {
    if (m.index > at) out.push([s.slice(at, m.index), false]);
    out.push([m[1], true]);
    at = m.index + m[0].length;
  }
  if (at < s.length) out.push([s.slice(at), false]);
  return out;
}

/** Text whose `code` spans are <code> elements; all of it as text nodes (escaped). */
export function withCode(text) {
  const f = document.createDocumentFragment();
  for (const [t, code] of codeSpans(text)) f.append(code ? h("code", { className: "jv-code" }, t) : document.createTextNode(t));
  return f;
}

/**
 * The findings in the order the list shows them: by line (each file in the order it first
 * comes, a finding without a line last), kept in order within a line.
 * @param {{filename?:string, line?:number|null}[]} diags
 */
export function orderFindings(diags) {
  const files = new Map();
  for (const d of diags) if (!files.has(d.filename || "")) files.set(d.filename || "", files.size);
  return diags.map((d, i) => ({ d, i })).sort((a, b) =>
    (files.get(a.d.filename || "") - files.get(b.d.filename || "")) ||
    ((a.d.line ?? Infinity) - (b.d.line ?? Infinity)) || (a.i - b.i)).map((x) => x.d);
}

/**
 * The diagnostics list, in line order; `onPick(diag)` when one is clicked; a recompile
 * (d.compare) gets a "compare" button, which calls `onCompare(diag)`; `onLine(diag)`, when
 * given, makes each finding's `cell [3]:7` a link (the notebook's editor goes there). After
 * FINDINGS_SHOWN findings, the rest fold under "N more".
 */
export function fillDiagnostics(box, diags, onPick, onCompare, onLine) {
  box.replaceChildren();
  if (!diags.length) { box.hidden = true; return; }
  box.hidden = false;
  box.append(h("div", { className: "jv-diag-head" }, findingsHead(diags),
    diags.length > 1 ? h("span", { className: "jv-diag-order" }, " · by line") : null));
  const ordered = orderFindings(diags);
  const items = ordered.map((d, i) => diagItem(d, i, onPick, onCompare, onLine));
  box.append(...items);
  const hidden = items.slice(FINDINGS_SHOWN);
  if (!hidden.length) return;
  for (const it of hidden) it.hidden = true;
  const more = h("button", { className: "jv-btn jv-diag-more", onclick: () => {
    const open = hidden[0].hidden;
    for (const it of hidden) it.hidden = !open;
    more.textContent = open ? "show fewer" : `${hidden.length} more`;
  } }, `${hidden.length} more`);
  box.append(more);
}

/** One finding of the list: the fix first, then where, the rule and what happened. */
function diagItem(d, i, onPick, onCompare, onLine) {
  // the fix first: the hint's first line says what to change; its bad -> good example
  // (the lines after it, kept as written) follows the finding and its code
  const [fix, ...example] = (d.hint || "").split("\n");
  const where = `${d.filename || ""}${d.line != null ? ":" + d.line : ""}`;
  const go = onLine && d.line != null ? (ev) => { ev.stopPropagation(); onLine(d); } : null;
  const place = go ? h("a", { className: "jv-diag-line", href: "#", title: "put the cursor on this line in the editor",
    onclick: (ev) => { ev.preventDefault(); go(ev); }, onkeydown: (ev) => { if (ev.key === "Enter") { ev.preventDefault(); go(ev); } } }, where) : where;
  return h("div", { className: `jv-diag jv-${d.severity}`, tabIndex: 0, dataset: { index: String(i), line: String(d.line ?? "") },
    onclick: () => onPick(d), onkeydown: (ev) => { if (ev.key === "Enter") onPick(d); } },
    fix ? h("div", { className: "jv-fix" }, withCode(fix)) : null,
    h("div", { className: "jv-diag-msg" }, h("b", null, place, ` ${d.severity}: ${d.rule}`),
      d.tab ? h("span", { className: "jv-diag-where" }, ` (in ${d.tab})`) : null, "  ", withCode(d.message)),
    d.code ? h("pre", { className: "jv-src" }, d.code) : null,
    example.length ? h("div", { className: "jv-muted jv-hint" }, example.join("\n")) : null,
    d.compare && onCompare ? h("button", { className: "jv-btn jv-compare", title: "the two traces side by side",
      onclick: (ev) => { ev.stopPropagation(); onCompare(d); } }, "compare") : null);
}

/**
 * The findings list's head: "5 findings: 2 errors, 3 warnings".
 * @param {{severity:string}[]} diags
 * @returns {string}
 */
export function findingsHead(diags) {
  const n = diags.length;
  const by = {};
  for (const d of diags) by[d.severity] = (by[d.severity] || 0) + 1;
  const parts = ["error", "warning", "info"].filter((s) => by[s]).map((s) => `${by[s]} ${s === "info" ? "note" : s}${by[s] > 1 ? "s" : ""}`);
  return `${n} finding${n === 1 ? "" : "s"}` + (parts.length > 1 ? `: ${parts.join(", ")}` : "");
}

/** The "body:id" node ids of a diagnostic as [body, node] numbers. */
const diagNodes = (d) => (d.node_ids || []).map((id) => String(id).split(":").map(Number));

/**
 * The trail (model.js's trailTo) to the node a diagnostic is about: its first node id that
 * the graph reaches, else the first node at its line; null when neither is in the graph.
 * @param {import("./model.js").Graph} graph
 * @param {any[]} refs    firstRefs(graph)
 * @param {import("./model.js").Diagnostic} d
 */
export function diagTrail(graph, refs, d) {
  for (const [b, n] of diagNodes(d)) {
    const tr = trailTo(graph, refs, b, n);
    if (tr) return tr;
  }
  if (d.line != null) {
    const hit = search(graph, String(d.line), { limit: 1 })[0];
    if (hit) return trailTo(graph, refs, hit.B, hit.nid);
  }
  return null;
}

/**
 * The visible items of `view` standing for the nodes of `diags` (a node, or the collapsed
 * cluster around it), which the painter marks.
 * @param {import("./model.js").Graph} graph
 * @param {any[]} refs    firstRefs(graph)
 * @param {any} view      buildView's result
 * @param {import("./model.js").Diagnostic[]} diags
 * @returns {Set<any>}
 */
export function diagnosticItems(graph, refs, view, diags) {
  const s = new Set();
  for (const d of diags) {
    for (const [b, n] of diagNodes(d)) {
      const tr = trailTo(graph, refs, b, n);
      const it = tr && repOfTrail(view, graph, tr);
      if (it) s.add(it);
    }
  }
  return s;
}

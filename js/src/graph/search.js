// The graph view's search: the search box, the match count, and stepping through the matches
// (each step opens the clusters around the match and selects it).

import { search, trailTo } from "./model.js";
import { listen, remapMatches, revealNode } from "./state.js";
import { draw } from "./camera.js";

/**
 * Searches the open trace for the box's query; with `move`, goes to the first match.
 * @param {import("./state.js").ViewState} v
 * @param {boolean} move
 */
export function runSearch(v, move) {
  const { T } = v;
  const { q, count, root } = v.dom;
  const res = search(T.graph, q.value);
  T.matches = res.map((r) => trailTo(T.graph, T.refs, r.B, r.nid)).filter(Boolean);
  T.mi = -1;
  remapMatches(v);
  count.textContent = q.value.trim() ? `${T.matches.length} match${T.matches.length === 1 ? "" : "es"}` : "";
  root.dataset.matches = String(T.matches.length);
  if (move && T.matches.length) nextMatch(v, 1);
  draw(v);
}

/**
 * Goes to the next (d = 1) or previous (d = -1) match, round the list.
 * @param {import("./state.js").ViewState} v
 * @param {number} d
 */
export function nextMatch(v, d) {
  const { T } = v;
  if (!T || !T.matches.length) return;
  T.mi = (T.mi + d + T.matches.length) % T.matches.length;
  const tr = T.matches[T.mi];
  const last = tr[tr.length - 1];
  revealNode(v, last.B, last.nid);
  v.dom.count.textContent = `${T.mi + 1} of ${T.matches.length}`;
}

/**
 * The search box's keys: typing searches (debounced), Enter steps (Shift+Enter back),
 * Escape clears and returns to the graph.
 * @param {import("./state.js").ViewState} v
 */
export function bindSearch(v) {
  const { q, stage } = v.dom;
  listen(v, q, "input", () => { clearTimeout(v.searchTimer); v.searchTimer = setTimeout(() => runSearch(v, true), 120); });
  listen(v, q, "keydown", (ev) => {
    if (ev.key === "Enter") { ev.preventDefault(); clearTimeout(v.searchTimer); if (!v.T.matches.length || v.T.mi < 0) runSearch(v, true); else nextMatch(v, ev.shiftKey ? -1 : 1); }
    if (ev.key === "Escape") { q.value = ""; runSearch(v, false); stage.focus(); }
  });
}

// The graph view's search: the search box, the match count, and stepping through the matches
// (each step opens the clusters around the match and selects it; a group match opens what
// is around the group and selects the group). find.js ranks the matches.

import { trailTo } from "./model.js";
import { search, matchSummary } from "./find.js";
import { listen, remapMatches, revealMatch } from "./state.js";
import { draw } from "./camera.js";

/**
 * Searches the open trace for the box's query; with `move`, goes to the first match.
 * @param {import("./state.js").ViewState} v
 * @param {boolean} move
 */
export function runSearch(v, move) {
  const { T } = v;
  const { q, count, root } = v.dom;
  const res = search(T.graph, q.value, { sources: v.payload.sources || null });
  T.matches = [];
  for (const r of res) {
    const trail = trailTo(T.graph, T.refs, r.B, r.nid);
    if (trail) T.matches.push({ trail, grp: r.grp, where: r.where, tier: r.tier });
  }
  T.mi = -1;
  remapMatches(v);
  T.summary = q.value.trim() ? matchSummary(T.matches) : "";
  count.textContent = T.summary;
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
  revealMatch(v, T.matches[T.mi]);
  v.dom.count.textContent = `${T.mi + 1} of ${T.summary}`;
}

/**
 * The search box's keys: typing searches (debounced), Enter steps (Shift+Enter back),
 * Escape clears and returns to the graph.
 * @param {import("./state.js").ViewState} v
 */
export function bindSearch(v) {
  const { q, stage } = v.dom;
  // typed but not searched yet: Enter searches the new text, it does not step the old matches
  let dirty = false;
  listen(v, q, "input", () => { dirty = true; clearTimeout(v.searchTimer); v.searchTimer = setTimeout(() => { dirty = false; runSearch(v, true); }, 120); });
  listen(v, q, "keydown", (ev) => {
    if (ev.key === "Enter") {
      ev.preventDefault(); clearTimeout(v.searchTimer);
      if (dirty || !v.T.matches.length || v.T.mi < 0) { dirty = false; runSearch(v, true); } else nextMatch(v, ev.shiftKey ? -1 : 1);
    }
    if (ev.key === "Escape") { q.value = ""; runSearch(v, false); stage.focus(); }
  });
}

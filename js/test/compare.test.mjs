import test from "node:test";
import assert from "node:assert/strict";

import { statusOf, tinter, matchMaps, translateKey, delta, STATUS_COLORS, lineText, summaryText } from "../src/graph/compare.js";
import { smallGraph } from "./fixtures.mjs";

// a: smallGraph; b: the same graph; matches move node 2 of a to node 4 of b (and back)
function maps() {
  const diff = {
    pairs: [[0, 2, 0, 4], [0, 4, 0, 2], [0, 5, 0, 5], [1, 1, 1, 1]],
    gpairs: [[0, 0, 0, 0]],
  };
  return matchMaps(diff, [smallGraph(), smallGraph()]);
}

test("translateKey maps node and group ids through the matches, inside open bodies too", () => {
  const m = maps(), g = m.graphs[0];
  assert.equal(translateKey("n2", 0, g, m, 0, 0), "n4");
  assert.equal(translateKey("n4", 1, m.graphs[1], m, 0, 0), "n2");
  assert.equal(translateKey("g0", 0, g, m, 0, 0), "g0");
  assert.equal(translateKey("f0", 0, g, m, 0, 0), "f0");
  assert.equal(translateKey("n5.0/n1", 0, g, m, 0, 0), "n5.0/n1");
  // keys without ids are kept; unmatched nodes and subs that do not exist give null
  assert.equal(translateKey("slayer/attn", 0, g, m, 0, 0), "slayer/attn");
  assert.equal(translateKey("n6", 0, g, m, 0, 0), null);
  assert.equal(translateKey("n5.1/n1", 0, g, m, 0, 0), null);
  assert.equal(translateKey("n5.0/n0", 0, g, m, 0, 0), null);
});

test("statusOf reads the marks of nodes, groups and folds; tinter colours what differs", () => {
  const marks = { "0:2": "changed", "0:g1": "added", "1:1": "removed" };
  assert.equal(statusOf(marks, { kind: "node", B: 0, s: { node: { id: 2 } } }), "changed");
  assert.equal(statusOf(marks, { kind: "node", B: 1, s: { node: { id: 1 } } }), "removed");
  assert.equal(statusOf(marks, { kind: "node", B: 0, s: { node: { id: 3 } } }), "same");
  assert.equal(statusOf(marks, { kind: "group", B: 0, s: { g: { id: 1 } } }), "added");
  assert.equal(statusOf(marks, { kind: "fold", B: 0, s: { head: { g: { id: 1 } } } }), "added");
  assert.equal(statusOf(marks, { kind: "io", B: 0, s: {} }), "same");
  const tint = tinter(marks);
  assert.equal(tint({ kind: "node", B: 0, s: { node: { id: 2 } } }), STATUS_COLORS.changed);
  assert.equal(tint({ kind: "node", B: 0, s: { node: { id: 3 } } }), null);
});

test("delta is signed, = when equal", () => {
  const f = (x) => String(x);
  assert.equal(delta(2, 5, f), "+3");
  assert.equal(delta(5, 2, f), "-3");
  assert.equal(delta(4, 4, f), "=");
});

test("lineText says each side's cell when the two versions live in different cells", () => {
  assert.equal(lineText({ line_a: 27, line_b: 6, file_a: "cell [3]", file_b: "cell [5]" }), "cell [3] line 27, cell [5] line 6");
  assert.equal(lineText({ line_a: 27, line_b: 6, file_a: "cell [3]", file_b: "cell [3]" }), "line 27 → 6");
  assert.equal(lineText({ line_a: 4, line_b: 4, file_a: "f.py", file_b: "f.py" }), "line 4");
  assert.equal(lineText({ line_a: null, line_b: 6, file_a: "", file_b: "cell [5]" }), "line 6");
});

test("summaryText counts in the singular for one equation", () => {
  const one = { nodes: [{ status: "changed" }], same: 8 };
  assert.equal(summaryText(one), "1 equation differs: 1 changed, 0 added, 0 removed; 8 the same");
  assert.match(summaryText({ nodes: [{ status: "added" }, { status: "removed" }], same: 0 }), /^2 equations differ: /);
  assert.equal(summaryText({ nodes: [], same: 5 }), "the same graph (5 equations)");
});

import test from "node:test";
import assert from "node:assert/strict";

import { prepareGraph, buildView, firstRefs } from "../src/graph/model.js";
import { layout } from "../src/graph/layout.js";
import { diagTrail, diagnosticItems, eqnText, tooltipText, WEAK } from "../src/graph/panels.js";
import { smallGraph } from "./fixtures.mjs";

function setup(expanded = []) {
  const g = prepareGraph(smallGraph());
  const view = buildView(g, new Set(expanded));
  layout(view, g);
  return { g, refs: firstRefs(g), view };
}

const last = (trail) => trail && trail[trail.length - 1];

test("diagTrail leads to a diagnostic's first reachable node, else to its line", () => {
  const { g, refs } = setup();
  assert.deepEqual(last(diagTrail(g, refs, { node_ids: ["1:1"] })), { P: "n5.0/", B: 1, nid: 1 });
  assert.deepEqual(last(diagTrail(g, refs, { node_ids: ["7:1", "0:4"] })), { P: "", B: 0, nid: 4 });
  assert.deepEqual(last(diagTrail(g, refs, { node_ids: [], line: 12 })), { P: "", B: 0, nid: 4 });
  assert.deepEqual(last(diagTrail(g, refs, { line: 20 })), { P: "n5.0/", B: 1, nid: 1 });
  assert.equal(diagTrail(g, refs, { node_ids: ["7:1"], line: 99 }), null);
  assert.equal(diagTrail(g, refs, { line: null }), null);
});

test("diagnosticItems marks the visible item standing for each diagnostic's nodes", () => {
  const diags = [{ node_ids: ["1:1"] }, { node_ids: ["0:2", "0:4"] }, { node_ids: ["7:1"] }, {}];
  const shut = setup();
  assert.deepEqual([...diagnosticItems(shut.g, shut.refs, shut.view, diags)].map((it) => it.key).sort(), ["g0", "n5"]);
  const open = setup(["g0", "n5"]);
  assert.deepEqual([...diagnosticItems(open.g, open.refs, open.view, diags)].map((it) => it.key).sort(), ["n2", "n4", "n5.0/n1"]);
  assert.equal(diagnosticItems(open.g, open.refs, open.view, []).size, 0);
});

test("eqnText writes an equation as a jaxpr line, literals inline", () => {
  const { g } = setup();
  const b = g.bodies[0];
  assert.equal(eqnText(b, b.nodes[4]), "%4:f32[8,2] = mul %2 2.0");
  assert.equal(eqnText(b, b.nodes[2]), "%2:f32[8,2] = dot_general[precision=None] %0 %1");
  const multi = { id: 9, op: "split", out: ["f32[2]", "f32[2]"] };
  assert.equal(eqnText({ nodes: [], edges: [] }, multi), "%9.0:f32[2] %9.1:f32[2] = split");
});

test("tooltipText: an equation's op, avals, source, call path and cost; a cluster's totals", () => {
  const { g, view } = setup(["g0"]);
  assert.equal(tooltipText(view.items.get("n2"), g),
    "dot_general → f32[8,2]\n/home/me/model.py:11 in layer\nlayer\n128 FLOP · 256 B");
  assert.equal(tooltipText(view.items.get("n5"), g),
    "pjit: jit(relu) → f32[8,2]\n/home/me/model.py:5 in f\n16 FLOP · 64 B\ndouble-click to open");
  // the same call, opened: the tooltip says how to close it, never "double-click to open"
  const open = setup(["n5"]);
  assert.equal(tooltipText(open.view.items.get("n5"), open.g).split("\n").pop(), "click − to collapse");
  // a weak type is explained where it shows
  const weak = { kind: "node", B: 0, s: { node: { id: 7, kind: "eqn", op: "mul", out: ["~f32[]"] } } };
  assert.equal(tooltipText(weak, g).split("\n").pop(), WEAK);
  assert.equal(tooltipText(view.items.get("n0"), g), "in x → f32[8,4]\n/home/me/model.py:3 in f");
  const shut = setup();
  assert.equal(tooltipText(shut.view.items.get("g0"), shut.g), "layer\n2 eqns · 144 FLOP\ndouble-click to open");
  assert.equal(tooltipText(view.items.get("g0"), g), "layer\n2 eqns · 144 FLOP\nclick − to collapse");
});

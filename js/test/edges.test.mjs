import test from "node:test";
import assert from "node:assert/strict";

import { prepareGraph, buildView } from "../src/graph/model.js";
import { layout, HEAD } from "../src/graph/layout.js";
import { routeEdges, pointAt, pull, labelText, bundleShapes, placeLabels, edgeAt, LABEL_H } from "../src/graph/edges.js";
import { smallGraph, oneBody } from "./fixtures.mjs";

function routed(graph, expanded = []) {
  const g = prepareGraph(graph);
  const view = buildView(g, new Set(expanded));
  layout(view, g);
  routeEdges(view);
  return view;
}

const edge = (view, s, t) => view.edges.find((e) => e.s.key === s && e.t.key === t);
const overlap = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/** x -> sin -> add, and x -> add straight past sin: one column, so that edge must go round. */
function skipGraph() {
  return oneBody(
    [{ id: 0, kind: "in", op: "x", out: ["f32[2]"] }, { id: 1, op: "sin", out: ["f32[2]"] }, { id: 2, op: "add", out: ["f32[2]"] }],
    [[0, 1, "f32[2]", 0, 0], [1, 2, "f32[2]", 1, 0], [0, 2, "f32[2]", 0, 0]]);
}

test("routeEdges runs each edge from the bottom of its source to the top of its target", () => {
  const view = routed(smallGraph(), ["g0", "n5"]);
  assert.ok(view.edges.length > 0);
  for (const e of view.edges) {
    const a = e.pts[0], z = e.pts[e.pts.length - 1];
    assert.deepEqual(a, { x: e.x0, y: e.s.y + e.s.h });
    assert.deepEqual(z, { x: e.x1, y: e.t.y });
    assert.ok(e.x0 >= e.s.x && e.x0 <= e.s.x + e.s.w, `${e.s.key}: start off its source`);
    assert.ok(e.x1 >= e.t.x && e.x1 <= e.t.x + e.t.w, `${e.t.key}: end off its target`);
    for (const p of e.pts) assert.ok(p.x >= e.bb.x0 && p.x <= e.bb.x1 && p.y >= e.bb.y0 && p.y <= e.bb.y1);
  }
});

test("routeEdges spreads a node's inputs along its top, in the order of their sources", () => {
  const view = routed(smallGraph(), ["g0"]);
  const fromX = edge(view, "n0", "n2"), fromW = edge(view, "n1", "n2");
  assert.ok(view.items.get("n0").x < view.items.get("n1").x);
  assert.ok(fromX.x1 < fromW.x1);
});

test("routeEdges takes an edge that would cross a box round it through a free lane", () => {
  const view = routed(skipGraph());
  const sin = view.items.get("n1");
  const straight = edge(view, "n0", "n1"), round = edge(view, "n0", "n2");
  assert.equal(straight.pts.length, 2);
  assert.equal(round.pts.length, 4);
  const laneX = round.pts[1].x;
  assert.equal(round.pts[2].x, laneX);
  assert.ok(laneX <= sin.x - 8 || laneX >= sin.x + sin.w + 8, `lane ${laneX} runs through sin`);
  // the detour turns between the source's bottom and the target's top
  assert.ok(round.pts[1].y > round.pts[0].y && round.pts[2].y < round.pts[3].y);
});

test("pointAt follows the path from its first point to its last", () => {
  const view = routed(skipGraph());
  for (const e of view.edges) {
    assert.deepEqual(pointAt(e, 0), e.pts[0]);
    const end = pointAt(e, 1), z = e.pts[e.pts.length - 1];
    assert.ok(Math.abs(end.x - z.x) < 1e-9 && Math.abs(end.y - z.y) < 1e-9);
  }
  // a vertical two-point edge stays on its x and is halfway down at t = 0.5
  const e = { pts: [{ x: 5, y: 0 }, { x: 5, y: 100 }] };
  assert.deepEqual(pointAt(e, 0.5), { x: 5, y: 50 });
  assert.equal(pull(e, 0), 50);
  assert.equal(pull({ pts: [{ x: 0, y: 0 }, { x: 0, y: 10 }] }, 0), 20);   // short curves still bend
  assert.equal(pull({ pts: [{ x: 0, y: 0 }, { x: 0, y: 10 }, { x: 0, y: 90 }] }, 1), 40);
});

test("labelText is the aval, with a count when the edge stands for several values", () => {
  assert.equal(labelText({ type: "f32[8]", n: 1 }), "f32[8]");
  assert.equal(labelText({ type: "f32[8]", n: 3, bytes: 96, types: null }), "3 arrays · 96 B · f32[8]");
  const mixed = { type: "f32[512,128]", n: 45, bytes: 3.4 * 2 ** 20, types: new Map([["f32[512,128]", 40], ["f32[128]", 4], ["f32[]", 1]]) };
  assert.equal(labelText(mixed), "45 arrays · 3.4 MiB · 3 shapes");
  assert.deepEqual(bundleShapes(mixed), ["f32[512,128] ×40", "f32[128] ×4", "f32[]"]);
  assert.deepEqual(bundleShapes({ type: "f32[8]", n: 1 }), ["f32[8]"]);
});

test("edgeAt finds the edge under a point, within the tolerance", () => {
  const view = routed(skipGraph());
  for (const e of view.edges) {
    const m = pointAt(e, 0.5);
    assert.equal(edgeAt(view, m.x, m.y, 2), e, `${e.s.key} -> ${e.t.key}`);
    assert.equal(edgeAt(view, m.x + 1.5, m.y, 2), e);
  }
  const round = edge(view, "n0", "n2");
  const m = pointAt(round, 0.5);
  assert.equal(edgeAt(view, m.x + 30, m.y, 5), null);
  assert.equal(edgeAt(view, view.root.w + 500, 0, 5), null);
});

test("placeLabels puts labels clear of boxes, frame headers and each other, or leaves them out", () => {
  const view = routed(smallGraph(), ["g0", "n5"]);
  const measure = (text) => text.length * 5;
  placeLabels(view, measure);
  assert.equal(view.labelsPlaced, true);
  const placed = view.edges.filter((e) => e.lr);
  assert.ok(placed.length > 0);
  for (const e of placed) {
    assert.equal(e.lr.h, LABEL_H);
    assert.equal(e.lr.w, measure(labelText(e)));
    for (const b of view.boxes) assert.ok(!overlap(e.lr, b), `${labelText(e)} over ${b.key}`);
    for (const f of view.frames) assert.ok(!overlap(e.lr, { x: f.x, y: f.y, w: f.w, h: HEAD }), `${labelText(e)} over ${f.key}'s header`);
    for (const o of placed) if (o !== e) assert.ok(!overlap(e.lr, o.lr), "labels overlap");
  }
  // an edge without an aval gets no label
  view.edges[0].type = "";
  placeLabels(view, measure);
  assert.equal(view.edges[0].lr, null);
});

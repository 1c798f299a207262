import test from "node:test";
import assert from "node:assert/strict";

import { prepareGraph, buildView } from "../src/graph/model.js";
import { layout, HEAD } from "../src/graph/layout.js";
import { hitAt, neighbour } from "../src/graph/input.js";
import { smallGraph } from "./fixtures.mjs";

function laidOut(expanded = []) {
  const g = prepareGraph(smallGraph());
  const view = buildView(g, new Set(expanded));
  layout(view, g);
  return view;
}

test("hitAt: a box's body, a cluster's open glyph, a frame's header, or nothing", () => {
  const view = laidOut(["n5"]);
  const at = (x, y) => { const h = hitAt(view, x, y); return h && `${h.it.key} ${h.part}`; };
  const n0 = view.items.get("n0"), g0 = view.items.get("g0"), n5 = view.items.get("n5");
  assert.equal(at(n0.x + n0.w / 2, n0.y + n0.h / 2), "n0 body");
  assert.equal(at(n0.x + n0.w - 3, n0.y + 3), "n0 body");            // an equation has no glyph
  assert.equal(at(g0.x + g0.w - 3, g0.y + 3), "g0 glyph");
  assert.equal(at(g0.x + 3, g0.y + g0.h - 3), "g0 body");
  assert.equal(at(n5.x + 3, n5.y + HEAD / 2), "n5 head");
  assert.equal(at(n5.x + n5.w - 3, n5.y + HEAD / 2), "n5 glyph");
  const inner = view.items.get("n5.0/n1");
  assert.equal(at(inner.x + 2, inner.y + 2), "n5.0/n1 body");       // the box, not the frame around it
  assert.equal(at(-50, -50), null);
});

test("neighbour: arrows follow the edges down and up, and the row left and right", () => {
  const view = laidOut();
  const key = (it) => it && it.key;
  const [n0, n1, g0, n5] = ["n0", "n1", "g0", "n5"].map((k) => view.items.get(k));
  assert.equal(key(neighbour(view, null, "down")), view.boxes[0].key);
  assert.equal(key(neighbour(view, n0, "down")), "g0");
  assert.equal(key(neighbour(view, g0, "down")), "n5");
  assert.equal(key(neighbour(view, n5, "up")), "g0");
  const up = key(neighbour(view, g0, "up"));
  const nearer = Math.abs(n0.x - g0.x) <= Math.abs(n1.x - g0.x) ? "n0" : "n1";
  assert.equal(up, nearer);
  assert.equal(key(neighbour(view, n0, "right")), "n1");
  assert.equal(key(neighbour(view, n1, "left")), "n0");
  assert.equal(neighbour(view, n0, "left"), null);
  assert.equal(neighbour(view, view.items.get("n6"), "down"), null);
});

import test from "node:test";
import assert from "node:assert/strict";

import { prepareGraph, buildView, staticTree } from "../src/graph/model.js";
import { layout, boxText, ioText, subsTitle, HEAD } from "../src/graph/layout.js";
import { smallGraph, oneBody, manyInputsGraph } from "./fixtures.mjs";

function laidOut(graph, expanded) {
  const g = prepareGraph(graph);
  const view = buildView(g, new Set(expanded));
  const size = layout(view, g);
  return { g, view, size };
}

const overlap = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

test("subsTitle names the sub-jaxprs of an equation", () => {
  const g = { bodies: [{ label: "jit(relu)" }, { label: "scan body" }, { label: "branch 0" }, { label: "branch 1" }] };
  assert.equal(subsTitle({ op: "pjit", subs: [{ body: 0, role: "jit" }] }, g), "pjit: jit(relu)");
  assert.equal(subsTitle({ op: "scan", subs: [{ body: 1, role: "scan", times: 16 }] }, g), "scan x16: scan body");
  assert.equal(subsTitle({ op: "scan", subs: [{ body: 1, role: "scan", times: 1 }] }, g), "scan: scan body");
  assert.equal(subsTitle({ op: "cond", subs: [{ body: 2, role: "branch 0" }, { body: 3, role: "branch 1" }] }, g), "cond: 2 branches");
  assert.equal(subsTitle({ op: "while", subs: [{ body: 0, role: "cond" }, { body: 1, role: "body" }] }, g), "while: 2 bodies");
});

test("boxText: title and subtitle of each kind of box", () => {
  const { g, view } = laidOut(smallGraph(), []);
  const text = (key) => boxText(view.items.get(key), g);
  assert.deepEqual(text("n0"), ["in x", "f32[8,4]"]);
  assert.equal(text("n6")[0].trim(), "out");
  assert.equal(text("n6")[1], "f32[8,2]");
  assert.deepEqual(text("g0"), ["layer", "2 eqns · 144 FLOP"]);
  assert.deepEqual(text("n5"), ["pjit: jit(relu)", "1 eqns · 16 FLOP"]);
  const open = laidOut(smallGraph(), ["g0"]);
  assert.deepEqual(boxText(open.view.items.get("n2"), open.g), ["dot_general", "f32[8,2]"]);
  const c = oneBody([{ id: 0, kind: "const", op: "table", out: ["f32[1000]"], nbytes: 4000 }]);
  const cv = laidOut(c, []);
  assert.deepEqual(boxText(cv.view.items.get("n0"), cv.g), ["const table", "f32[1000]"]);
});

test("ioText: how many arrays a cluster of inputs holds and their size", () => {
  assert.equal(ioText({ count: 37, nbytes: 148000 }), "37 arrays · 144.5 KiB");
  assert.equal(ioText({ count: 3, nbytes: 0 }), "3 arrays");
  const g = prepareGraph(manyInputsGraph());
  const params = staticTree(g.bodies[0], g.bodies).root.children.find((s) => s.kind === "io" && s.dir === "in");
  assert.equal(ioText(params), "15 arrays · 240 B");
});

test("layout puts every edge's target below its source", () => {
  for (const expanded of [[], ["g0"], ["g0", "n5"]]) {
    const { view } = laidOut(smallGraph(), expanded);
    for (const e of view.edges) assert.ok(e.t.y >= e.s.y + e.s.h, `${e.s.key} -> ${e.t.key} goes up (${expanded})`);
  }
});

test("layout keeps children inside their frames and siblings apart", () => {
  const { view, size } = laidOut(smallGraph(), ["g0", "n5"]);
  const all = [...view.items.values()];
  for (const it of all) {
    assert.ok([it.x, it.y, it.w, it.h].every(Number.isFinite), it.key);
    assert.ok(it.w > 0 && it.h > 0, it.key);
    assert.ok(it.x >= 0 && it.y >= 0 && it.x + it.w <= size.w && it.y + it.h <= size.h, `${it.key} outside the graph`);
    const p = it.parent;
    if (p.kind !== "root") {
      assert.ok(it.x >= p.x && it.x + it.w <= p.x + p.w, `${it.key} sticks out of ${p.key}`);
      assert.ok(it.y >= p.y + HEAD && it.y + it.h <= p.y + p.h, `${it.key} sticks out of ${p.key}`);
    }
  }
  for (const c of [view.root, ...view.frames]) {
    const kids = c.children;
    for (let i = 0; i < kids.length; i++) for (let j = i + 1; j < kids.length; j++) {
      assert.ok(!overlap(kids[i], kids[j]), `${kids[i].key} overlaps ${kids[j].key}`);
    }
  }
  assert.deepEqual(size, { w: view.root.w, h: view.root.h });
});

test("layout gives an open frame a header line with its cluster's summary", () => {
  const { view } = laidOut(smallGraph(), ["g0", "n5"]);
  assert.deepEqual(view.items.get("g0").lines, ["layer — 2 eqns · 144 FLOP", ""]);
  assert.deepEqual(view.items.get("n5").lines, ["pjit: jit(relu) — 1 eqns · 16 FLOP", ""]);
  // a box's lines are what boxText says
  assert.deepEqual(view.items.get("n2").lines, ["dot_general", "f32[8,2]"]);
});

test("layout places the nodes of one row side by side, in jaxpr order when nothing else decides", () => {
  // three independent inputs feeding one op: one row of three, then the op below their middle
  const g = oneBody(
    [{ id: 0, kind: "in", op: "a", out: ["f32[2]"] }, { id: 1, kind: "in", op: "b", out: ["f32[2]"] },
      { id: 2, kind: "in", op: "c", out: ["f32[2]"] }, { id: 3, op: "add3", out: ["f32[2]"] }],
    [[0, 3, "f32[2]", 0, 0], [1, 3, "f32[2]", 1, 0], [2, 3, "f32[2]", 2, 0]]);
  const { view } = laidOut(g, []);
  const [a, b, c, op] = ["n0", "n1", "n2", "n3"].map((k) => view.items.get(k));
  assert.ok(a.y === b.y && b.y === c.y);
  assert.ok(a.x + a.w <= b.x && b.x + b.w <= c.x);
  const mid = (it) => it.x + it.w / 2;
  assert.ok(Math.abs(mid(op) - (mid(a) + mid(b) + mid(c)) / 3) < 1);
});

import test from "node:test";
import assert from "node:assert/strict";

import { prepareGraph, buildView } from "../src/graph/model.js";
import { layout } from "../src/graph/layout.js";
import { routeEdges, placeLabels } from "../src/graph/edges.js";
import { legendScale, heatOf, MARKS } from "../src/graph/legend.js";
import { fitCamera, followCamera, topBand, graphBounds, fitBounds, READABLE_Z } from "../src/graph/camera.js";
import { miniScale, showsAll } from "../src/graph/minimap.js";
import { toSvg, xmlEscape, fileName } from "../src/graph/export.js";
import { smallGraph } from "./fixtures.mjs";

test("legendScale: each colouring's title, units and ticks along its log scale", () => {
  assert.equal(legendScale("none", 100), null);
  const f = legendScale("flops", 1e6);
  assert.equal(f.title, "FLOPs per box (log scale)");
  assert.deepEqual(f.ticks.map((t) => t.t), [0, 0.5, 1]);
  assert.deepEqual(f.ticks.map((t) => t.label), ["0 FLOP", "999 FLOP", "1.0M FLOP"]);
  // the middle tick is the value the painter's heat puts at the middle
  assert.ok(Math.abs(heatOf(1000, 1e6) - 0.5) < 0.01);
  const b = legendScale("bytes", 3 * 2 ** 20);
  assert.equal(b.unit, "bytes");
  assert.equal(b.ticks[2].label, "3.0 MiB");
  assert.deepEqual(legendScale("bytes", 0).ticks.map((t) => t.label), ["0 B"]);
  // every mark the painter uses is explained
  assert.deepEqual(MARKS.map((m) => m[0]), ["sel", "match", "diag", "konst", "io", "donated", "coll", "group", "weak"]);
});

test("fitCamera fits a small graph whole and keeps a large one readable, top left in view", () => {
  const small = fitCamera(400, 300, 1000, 800, READABLE_Z);
  assert.equal(small.z, 1.4);
  assert.ok(small.tx > 0 && small.tx + 400 * small.z <= 1000);
  const big = fitCamera(5000, 3000, 1000, 800, READABLE_Z);
  assert.equal(big.z, READABLE_Z);
  assert.deepEqual([big.tx, big.ty], [20, 20]);
  assert.ok(fitCamera(5000, 3000, 1000, 800, 0.03).z < 0.2);   // unreadable only when asked for
  // a wide graph whose top holds boxes at x 2000..2400 shows those, centred
  const band = fitCamera(5000, 3000, 1000, 800, READABLE_Z, { x0: 2000, x1: 2400 });
  assert.equal(band.tx + 2200 * band.z, 500);
  // a top band wider than the canvas shows its left end
  assert.equal(fitCamera(5000, 3000, 1000, 800, READABLE_Z, { x0: 100, x1: 4000 }).tx, 20 - 100);
  assert.deepEqual(topBand({ boxes: [{ x: 5, y: 0, w: 10 }, { x: 50, y: 10, w: 10 }, { x: 900, y: 5000, w: 10 }] }, 100), { x0: 5, x1: 60 });
});

test("followCamera brings an opened frame into the canvas, or its header when it is larger", () => {
  // a frame that grew to the right past the canvas: moved left, whole, zoom kept
  const c = followCamera({ tx: 0, ty: 0, z: 1 }, { x: 700, y: 100, w: 500, h: 200 }, 1000, 800, 1);
  assert.equal(c.z, 1);
  assert.ok(700 + c.tx >= 20 && 1200 + c.tx <= 980, JSON.stringify(c));
  assert.equal(c.ty, 0);
  // already in view: nothing moves
  assert.deepEqual(followCamera({ tx: 5, ty: 5, z: 1 }, { x: 100, y: 100, w: 100, h: 100 }, 1000, 800, 1), { tx: 5, ty: 5, z: 1 });
  // zoomed in past readable: zooms out to fit, not below readable
  const z = followCamera({ tx: 0, ty: 0, z: 1.4 }, { x: 0, y: 0, w: 900, h: 300 }, 1000, 800, 1);
  assert.ok(z.z < 1.4 && z.z >= 1);
  // larger than the canvas at readable zoom: its top left corner (the header) in view
  const big = followCamera({ tx: 0, ty: 0, z: 1 }, { x: 600, y: 500, w: 3000, h: 2000 }, 1000, 800, 1);
  assert.deepEqual([600 * big.z + big.tx, 500 * big.z + big.ty], [20, 20]);
});

test("the minimap shows while the graph does not fit the canvas, in at most 160 px", () => {
  assert.equal(showsAll({ tx: 10, ty: 10, z: 1, cw: 500, ch: 500 }, 400, 400), true);
  assert.equal(showsAll({ tx: 10, ty: 10, z: 1, cw: 500, ch: 500 }, 600, 400), false);
  const m = miniScale(4000, 1000);
  assert.equal(m.W, 160);
  assert.equal(m.H, 40);
});

test("toSvg draws the boxes, frames and edges in view, text escaped", () => {
  const g = prepareGraph(smallGraph());
  g.bodies[0].groups[0].label = "<script>alert(1)</script>";
  const view = buildView(g, new Set(["g0"]));
  layout(view, g);
  routeEdges(view);
  placeLabels(view, (t) => t.length * 6.6);
  const th = { bg: "#fff", fg: "#000", fg2: "#555", border: "#ccc", node: "#eee", io: "#def", konst: "#fed", frame: "#f0f0f0",
    frameHead: "#e0e0e0", cluster: "#eef", edge: "#888", font: "sans-serif", mono: "monospace" };
  const svg = toSvg(view, { tx: 0, ty: 0, z: 1, cw: 2000, ch: 2000 }, th, { labels: true });
  assert.ok(svg.startsWith("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  assert.equal((svg.match(/class="box"/g) || []).length, view.boxes.length);
  assert.equal((svg.match(/class="frame"/g) || []).length, 1);
  assert.equal((svg.match(/class="edge"/g) || []).length, view.edges.length);
  assert.ok(svg.includes("&lt;script&gt;") && !svg.includes("<script>"));
  assert.ok(svg.includes(">dot_general<"));
  // a camera that shows nothing of the graph exports no boxes
  assert.equal((toSvg(view, { tx: -5000, ty: 0, z: 1, cw: 100, ch: 100 }, th).match(/class="box"/g) || []).length, 0);
  assert.equal(xmlEscape(`a<b>&"'`), "a&lt;b&gt;&amp;&quot;&#39;");
  assert.equal(fileName("jit(f) / g", "svg"), "jit_f_g.svg");
});

test("isDonated: a donated input's pill, or a bundle of inputs holding one, and nothing else", async () => {
  const { isDonated } = await import("../src/graph/draw.js");
  const donated = new Set([3]);
  const node = (kind, id) => ({ kind: "node", s: { node: { kind, id } } });
  assert.equal(isDonated(node("in", 3), donated), true);
  assert.equal(isDonated(node("in", 2), donated), false);
  assert.equal(isDonated(node("eqn", 3), donated), false);
  assert.equal(isDonated({ kind: "io", s: { dir: "in", lo: 1, hi: 4 } }, donated), true);
  assert.equal(isDonated({ kind: "io", s: { dir: "in", lo: 4, hi: 9 } }, donated), false);
  assert.equal(isDonated({ kind: "io", s: { dir: "out", lo: 1, hi: 4 } }, donated), false);
});

test("graphBounds holds the edge labels and lanes left of the boxes; fitBounds and the export camera show them", () => {
  const view = {
    labelsPlaced: true,
    edges: [{ bb: { x0: -8, x1: 40, y0: 0, y1: 90 }, lr: { x: -110, y: 40, w: 100, h: 13 } },
      { bb: { x0: 10, x1: 60, y0: 0, y1: 90 }, lr: null }],
  };
  const r = graphBounds(view, { w: 300, h: 200 });
  assert.deepEqual(r, { x: -110, y: 0, w: 410, h: 200 });
  assert.deepEqual(graphBounds({ ...view, labelsPlaced: false }, { w: 300, h: 200 }), { x: -8, y: 0, w: 308, h: 200 });
  // fitted in a 1000 x 800 canvas: the label's left end is on screen, the whole centred
  const cam = fitBounds(r, 1000, 800, READABLE_Z);
  assert.ok(-110 * cam.z + cam.tx >= 20 - 1e-9 && (300 * cam.z + cam.tx) <= 980 + 1e-9, JSON.stringify(cam));
  assert.ok(Math.abs((-110 * cam.z + cam.tx) - (1000 - (300 * cam.z + cam.tx))) < 1e-6);
});

test("the export camera starts at the bounds' origin", async () => {
  const { wholeCamera } = await import("../src/graph/toolbar.js");
  assert.deepEqual(wholeCamera(410, 200, Infinity, -110, 0), { tx: 126, ty: 16, z: 1, cw: 442, ch: 232 });
});

import test from "node:test";
import assert from "node:assert/strict";

import { bufferRow, collectiveRow, collectivesHead, entryHeadline, timelineGeometry, timelineAxes, bufferGroups, foldPaths } from "../src/graph/buffers.js";

// the shape of jaxviz/view/compiled.py's entries (jaxviz.schema.CompiledMemoryEntry)
function entry() {
  return {
    trace: "step", index: 0, peak_bytes: 3 * 1024 * 1024, xla_total: 3 * 1024 * 1024 + 512, steps: 5, peak_step: 2,
    timeline: [[0, 1024], [1, 2048], [2, 3 * 1024 * 1024], [3, 4096], [4, 1024]],
    buffers: [
      { name: "dot.3", bytes: 2 * 1024 * 1024, type: "f32[512,1024]", category: "temporary", op: "dot_general",
        where: "cell [3]:5 (step)", line: 5, node_ids: ["0:4", "0:5"], inside: "" },
      { name: "param.1", bytes: 1024 * 1024, type: "f32[512,512]", category: "argument", op: "",
        where: "w", line: 0, node_ids: ["0:0"], inside: "" },
      { name: "fusion.7", bytes: 256, type: "f32[64]", category: "temporary", op: "",
        where: "", line: 0, node_ids: [], inside: "while body region_0.4" },
    ],
    donations: [], notes: [], text: "",
  };
}

test("entryHeadline: the function, its peak, the step and XLA's figure", () => {
  const e = entry();
  assert.deepEqual(entryHeadline(e), { title: "step: one call, simulated over XLA's schedule",
    peak: "peak 3.0 MiB at step 3 of 5 (XLA's memory_analysis(): 3.0 MiB)" });
  e.xla_total = null;  // XLA without figures: no comparison shown
  assert.equal(entryHeadline(e).peak, "peak 3.0 MiB at step 3 of 5");
  // a sharded program's figures are one device's
  assert.equal(entryHeadline({ ...e, devices: 8 }).peak, "peak 3.0 MiB per device of 8 at step 3 of 5");
});

test("bufferRow: cells in the table's order; a row with nodes selects them, one without is not clickable", () => {
  const [dot, arg, inner] = entry().buffers.map(bufferRow);
  assert.deepEqual(dot.cells, ["2.0 MiB", "f32[512,1024]", "temporary", "cell [3]:5 (step)", "dot_general", ""]);
  assert.deepEqual(dot.nodes, ["0:4", "0:5"]);
  assert.equal(dot.pickable, true);
  assert.equal(dot.title, "dot.3");
  assert.deepEqual(arg.cells.slice(2), ["argument", "w", "", ""]);
  assert.equal(inner.pickable, false);
  assert.equal(inner.cells[3], "fusion.7 (XLA kept no source)");  // named by XLA, never guessed
  assert.equal(inner.title, "in while body region_0.4");
});

test("timelineGeometry: steps across the width, the peak highest and marked at its step", () => {
  const { points, peakX } = timelineGeometry(entry(), 400, 100);
  const xy = points.split(" ").map((p) => p.split(",").map(Number));
  assert.equal(xy.length, 5);
  assert.deepEqual(xy.map((p) => p[0]), [0, 100, 200, 300, 400]);
  const ys = xy.map((p) => p[1]);
  assert.equal(Math.min(...ys), ys[2]);                 // SVG y grows downwards: the peak is on top
  assert.ok(ys[2] > 0 && ys[2] < 100 && ys[0] > ys[3]);  // inside the box; 1 KiB below 4 KiB
  assert.equal(peakX, "200.0");
  assert.deepEqual(timelineGeometry({ steps: 0, peak_step: 0, timeline: [] }), { points: "", peakX: "0.0" });
});

test("a line's buffers across a loop's layers fold into one row: count, total, call paths", () => {
  const MiB = 1024 * 1024;
  const layer = (k) => ({ name: `dot.${k}`, bytes: 2 * MiB, type: "f32[512,1024]", category: "activation", op: "dot_general",
    where: "cell [1]:43 (mlp)", line: 43, node_ids: [`3:${k}`], inside: "", path: `model > block[${k}] > mlp` });
  const arg = { name: "p.0", bytes: 3 * MiB, type: "f32[1024,768]", category: "argument", op: "", where: "w", line: 0, node_ids: ["0:0"], inside: "" };
  const groups = bufferGroups([arg, layer(0), layer(1), layer(2), layer(3)]);
  assert.equal(groups.length, 2);
  assert.equal(groups[0].fold, null);
  assert.deepEqual(groups[1].fold, { n: 4, total: 8 * MiB, path: "model > block[0..3] > mlp", where: "cell [1]:43 (mlp)", category: "activation" });
  // XLA calls one layer's an activation, another's a temporary: still one row, both said
  const mixed = bufferGroups([layer(0), { ...layer(1), category: "temporary" }]);
  assert.equal(mixed[0].fold.category, "activation (1), temporary (1)");
  // one argument's leaves that differ in one index fold too: params[0..1]
  const leaf = (k) => ({ ...arg, name: `p.${k}`, where: `params[${k}]['w']` });
  assert.equal(bufferGroups([leaf(0), leaf(1)])[0].fold.where, "params[0..1]['w']");
  assert.deepEqual(groups[1].buffers.map((b) => b.node_ids[0]), ["3:0", "3:1", "3:2", "3:3"]);
  assert.equal(foldPaths(["a > b[0]", "a > b[2]"]), "a > b[0,2]");
  assert.equal(foldPaths(["a", "c", "d"]), "a and 2 more");
  assert.equal(bufferRow(layer(2)).cells[5], "model > block[2] > mlp");
});

test("timelineAxes: bytes up the side, steps along the bottom, the peak labelled at its step", () => {
  const ax = timelineAxes(entry());
  assert.deepEqual(ax.y.map((t) => t.text), ["3.0 MiB", "0 B"]);
  assert.ok(ax.y[0].at > 0 && ax.y[0].at < 20 && ax.y[1].at === 100);
  assert.deepEqual(ax.x, ["step 1", "schedule step →", "step 5"]);
  assert.deepEqual(ax.peak, { text: "peak 3.0 MiB at step 3", at: 50 });
});

test("a sharded program's collectives: each row's bytes, axes, line, op and cause; the heading's total", () => {
  const c = { name: "all-gather.1", kind: "all-gather", bytes: 256 * 1024, axes: ["model"], op: "mul",
    where: "cell [2]:3 (block)", line: 3, cause: "constraint", reason: "with_sharding_constraint to P('data') at line 4",
    cause_line: 4, node_ids: ["0:7"], cause_ids: ["0:9"], times: 1 };
  const row = collectiveRow(c);
  assert.deepEqual(row.cells, ["256.0 KiB", "all-gather", "model", "cell [2]:3 (block)", "mul", "with_sharding_constraint to P('data') at line 4"]);
  assert.deepEqual([row.nodes, row.pickable, row.title], [["0:7"], true, "all-gather.1: constraint (line 4)"]);
  // a loop body's, run each iteration; one XLA kept no source for, over axes not known
  const loop = collectiveRow({ ...c, times: 10, axes: [], where: "", node_ids: [], cause_line: 0 });
  assert.deepEqual([loop.cells[0], loop.cells[2], loop.cells[3], loop.pickable], ["256.0 KiB × 10", "?", "all-gather.1 (XLA kept no source)", false]);
  const e = { ...entry(), mesh: "mesh data=2 x model=4 (Auto)", collectives: [{ ...c, bytes: 1024 * 1024 }, c, { ...c, times: 2 }] };
  assert.equal(collectivesHead(e), "mesh data=2 x model=4 (Auto): 3 collectives XLA inserted, 1.8 MiB per device a call, largest first (click one to select the op it serves):");
});

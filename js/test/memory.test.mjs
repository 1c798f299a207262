import test from "node:test";
import assert from "node:assert/strict";

import { createStore, aliveAt, markBefore, marksNear, niceTicks, byteTicks, where, computingSpans } from "../src/entries/memory.js";
import { foldNames, withSpread } from "../src/graph/memory.js";

const MiB = 1024 ** 2;

function cellStore() {
  const s = createStore();
  s.samples(0, new Float64Array([0, 0, 0, 0.5, 0, 4 * MiB, 1.0, 0, 8 * MiB]));
  s.addMarks(0, [{ t: 0.1, name: "init", line: 2, file: "" }, { t: 0.6, name: "step", line: 5, file: "" },
    { t: 0.9, name: "step", line: 5, file: "/lib/util.py" }]);
  s.addArrays({ born: [{ id: 0, born: 0.2, type: "float32[1024,1024]", nbytes: 4 * MiB, gone: null, deleted: false },
    { id: 1, born: 0.7, type: "float32[1024,1024]", nbytes: 4 * MiB, gone: null, deleted: false },
    { id: 2, born: 0.7, type: "int32[]", nbytes: 4, gone: null, deleted: false }], gone: [], dropped: 0 });
  // array 0 is donated at 0.9 s; array 2 freed at 0.8 s
  s.addArrays({ born: [], gone: [{ id: 0, born: 0.2, type: "float32[1024,1024]", nbytes: 4 * MiB, gone: 0.9, deleted: true },
    { id: 2, born: 0.7, type: "int32[]", nbytes: 4, gone: 0.8, deleted: false }], dropped: 3 });
  return s;
}

test("store: marks stretch the time axis; gone arrays keep their birth and get their end", () => {
  const s = cellStore();
  assert.equal(s.marks.length, 3);
  assert.equal(s.runs[0].tmax, 1.0);
  assert.deepEqual([...s.arrays.values()].map((a) => [a.id, a.gone, a.deleted]), [[0, 0.9, true], [1, null, false], [2, 0.8, false]]);
  assert.equal(s.dropped, 3);
});

test("aliveAt: born by t and not gone yet, largest first", () => {
  const s = cellStore();
  assert.deepEqual(aliveAt(s.arrays, 0.1).map((a) => a.id), []);
  assert.deepEqual(aliveAt(s.arrays, 0.5).map((a) => a.id), [0]);
  assert.deepEqual(aliveAt(s.arrays, 0.75).map((a) => a.id), [0, 1, 2]);
  assert.deepEqual(aliveAt(s.arrays, 0.85).map((a) => a.id), [0, 1]);
  assert.deepEqual(aliveAt(s.arrays, 0.95).map((a) => a.id), [1]);   // 0 was donated at 0.9
});

test("markBefore / marksNear / where: the call an array came after, the calls under the pointer", () => {
  const s = cellStore();
  assert.equal(markBefore(s.marks, 0.05), null);
  assert.equal(markBefore(s.marks, 0.7).t, 0.6);
  assert.equal(markBefore(s.marks, 0.6).name, "step");
  assert.equal(marksNear(s.marks, 0.3, 0.01), null);
  const near = marksNear(s.marks, 0.62, 0.01);
  assert.equal(near.nearest.t, 0.6);
  assert.deepEqual(near.counts, { step: 1 });
  assert.deepEqual(marksNear(s.marks, 0.75, 0.1).counts, { step: 2 });
  assert.equal(where(s.marks[1]), "line 5");
  assert.equal(where(s.marks[2]), "util.py:5");
});

test("axis ticks: round steps from 0 covering the range", () => {
  assert.deepEqual(niceTicks(1.0, 5), [0, 0.2, 0.4, 0.6000000000000001, 0.8, 1]);
  assert.deepEqual(niceTicks(0), [0]);
  assert.deepEqual(byteTicks(300 * MiB, 3).map((v) => v / MiB), [0, 100, 200, 300]);
  assert.deepEqual(byteTicks(5 * 1024 ** 3).map((v) => v / 1024 ** 3), [0, 2, 4]);
});

test("foldNames: index runs fold into ranges, long lists are cut with a count", () => {
  const leaves = [0, 1, 2, 3].flatMap((i) => [`params['layers'][${i}]['w']`, `params['layers'][${i}]['b']`]);
  assert.equal(foldNames(leaves), "8 leaves: params['layers'][0..3]['w'], params['layers'][0..3]['b']");
  assert.equal(foldNames(["x"]), "x");
  assert.equal(foldNames(["p[0]", "p[2]", "q"]), "3 leaves: p[0,2], q");
  assert.equal(foldNames(["a", "b", "c", "d", "e", "f"]), "6 leaves: a, b, c and 3 more");
});

test("withSpread: the median with min-max, noisy when the spread is over half the median", () => {
  assert.equal(withSpread({ n: 0 }), "no steps");
  assert.equal(withSpread({ n: 5, median: 1.0, min: 0.9, max: 1.2 }), "1.00 ms (0.90 ms–1.20 ms, 5 steps)");
  assert.equal(withSpread({ n: 5, median: 1.0, min: 0.9, max: 3.1 }), "1.00 ms (0.90 ms–3.10 ms, noisy, 5 steps)");
});

test("donations: donated arrays grouped at the call before they were seen gone", async () => {
  const { donations } = await import("../src/entries/memory.js");
  const s = cellStore();                 // array 0 (4 MiB) donated, seen gone at 0.9 s
  const d = donations(s);
  assert.equal(d.length, 1);
  assert.equal(d[0].t, 0.9);             // the call at 0.9 s is the last one at or before it
  assert.equal(d[0].n, 1);
  assert.equal(d[0].bytes, 4 * MiB);
  s.addArrays({ born: [{ id: 9, born: 0.1, type: "f32[2]", nbytes: 8, gone: null, deleted: false }], gone: [], dropped: 0 });
  s.addArrays({ born: [], gone: [{ id: 9, born: 0.1, type: "f32[2]", nbytes: 8, gone: 0.95, deleted: true }], dropped: 0 });
  assert.deepEqual(donations(s).map((x) => [x.t, x.n, x.bytes]), [[0.9, 2, 4 * MiB + 8]]);
});

test("aliveGroups: named arrays by their global, the others by the call that made them, largest first", async () => {
  const { aliveGroups, typesOf, GROUPS_SHOWN } = await import("../src/entries/memory.js");
  const A = (id, nbytes, type, born, name = "") => ({ id, nbytes, type, born, gone: null, deleted: false, name });
  const marks = [{ t: 0.1, name: "init", line: 3, file: "" }, { t: 0.5, name: "step", line: 9, file: "" }];
  const alive = [
    A(1, 4096, "float32[32,32]", 0.2, "params['blocks'][0]['w1']"), A(2, 4096, "float32[32,32]", 0.2, "params['blocks'][1]['w1']"),
    A(3, 128, "float32[32]", 0.2, "params['b']"), A(4, 100000, "float32[25000]", 0.6), A(5, 8, "float32[2]", 0.6),
    A(6, 64, "float32[16]", 0.05), A(7, 999, "int32[3]", 0.3, "x"),
  ];
  const g = aliveGroups(alive, marks);
  assert.deepEqual(g.map((x) => [x.label, x.arrays.length, x.bytes]), [
    ["made by step (line 9)", 2, 100008], ["params", 3, 8320], ["x", 1, 999], ["before the first call", 1, 64]]);
  assert.equal(typesOf(g[1].arrays), "float32[32,32] ×2, float32[32]");
  assert.ok(GROUPS_SHOWN >= 10);
});

test("donations: none in a cell whose calls donate nothing (issue 57, item 7)", async () => {
  const { donations } = await import("../src/entries/memory.js");
  const s = cellStore();                 // an array deleted while referenced, seen gone at 0.9 s
  assert.equal(donations(s).length, 1);  // marks that do not say (a chart saved before): counted
  for (const m of s.marks) m.donates = false;
  assert.deepEqual(donations(s), []);    // no call of the cell donates: no donation marked
  s.marks[0].donates = true;
  assert.equal(donations(s).length, 1);
});

test("computingSpans: the spans the device was still computing the calls' outputs", () => {
  const s = createStore();
  s.addComputing(0, [[0.5, 1], [2.5, 0]]);
  s.addComputing(0, [[3.0, 1]]);            // still computing when the changes end
  assert.deepEqual(computingSpans(s.computing, s.runs[0].tmax), [[0.5, 2.5], [3.0, 3.0]]);
  assert.deepEqual(computingSpans(s.computing, 4.0), [[0.5, 2.5], [3.0, 4.0]]);
  assert.equal(s.runs[0].tmax, 3.0);         // the changes extend the time axis
  assert.deepEqual(computingSpans([], 1), []);
  assert.deepEqual(computingSpans([[1, 0], [2, 1], [2, 1], [3, 0]], 5), [[2, 3]]);
});

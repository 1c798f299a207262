// What a newcomer sees first (issue 46), the pure parts: the findings list and its head, the
// wheel's choice, the minimap's on-screen mark, idle device lanes and byte ticks.
import test from "node:test";
import assert from "node:assert/strict";

import { allFindings } from "../src/graph/traces.js";
import { findingsHead } from "../src/graph/panels.js";
import { wheelZooms } from "../src/graph/input.js";
import { screenRect, miniScale } from "../src/graph/minimap.js";
import { splitLanes, idleText, byteTicks, groupLabel, foldedText, devicesText } from "../src/entries/memory.js";
import { fmtBytes } from "../src/graph/format.js";

test("allFindings: every trace's findings, tagged with their tab, then the cell's", () => {
  const traces = [{ i: 0, diags: [] }, { i: 1, diags: [{ rule: "out-of-bounds", severity: "warning" }] },
    { i: 2, diags: [{ rule: "tracer-bool", severity: "error" }, { rule: "nan", severity: "info" }] }];
  const labels = [{ text: "put" }, { text: "line 13 (3)" }, { text: "step" }];
  const all = allFindings(traces, [{ rule: "key-reuse", severity: "warning" }], labels);
  assert.deepEqual(all.map((d) => [d.rule, d.ti, d.tab]), [["out-of-bounds", 1, "line 13 (3)"], ["tracer-bool", 2, "step"],
    ["nan", 2, "step"], ["key-reuse", undefined, undefined]]);
  // one trace: no tab to name
  assert.equal(allFindings([traces[1]], [], [{ text: "f" }])[0].tab, "");
  assert.equal(findingsHead(all), "4 findings: 1 error, 2 warnings, 1 note");
  assert.equal(findingsHead([all[0]]), "1 finding");
  assert.equal(findingsHead([all[0], all[3]]), "2 findings");
});

test("the wheel zooms only with Ctrl/Cmd held or once the view was clicked into", () => {
  assert.equal(wheelZooms({ ctrlKey: false, metaKey: false }, false), false);
  assert.equal(wheelZooms({ ctrlKey: true, metaKey: false }, false), true);
  assert.equal(wheelZooms({ ctrlKey: false, metaKey: true }, false), true);
  assert.equal(wheelZooms({ ctrlKey: false, metaKey: false }, true), true);
});

test("the minimap marks what is on screen, clipped to the map", () => {
  const { s, W, H } = miniScale(1000, 4000);   // a tall graph: 40 x 160 map
  // a canvas wider than the graph at zoom 1, showing its top 800 px
  const r = screenRect({ tx: 300, ty: 0, z: 1, cw: 1600, ch: 800 }, s, W, H);
  assert.deepEqual(r, { x: 0, y: 0, w: W, h: 800 * s });
  // zoomed in on the middle: a small mark inside the map
  const m = screenRect({ tx: -400, ty: -1800, z: 1, cw: 200, ch: 400 }, s, W, H);
  assert.ok(m.x > 0 && m.y > 0 && m.x + m.w < W && m.y + m.h < H);
  assert.equal(m.h, 400 * s);
  assert.equal(m.w, 8);   // (200 world px are 8 map px: the least side, centred)
  assert.ok(Math.abs(m.x + m.w / 2 - 500 * s) < 1e-9);
  // a dot near the map's edge grows inwards
  const e = screenRect({ tx: -990, ty: 0, z: 1, cw: 10, ch: 10 }, s, W, H);
  assert.deepEqual([e.x + e.w, e.y, e.w, e.h], [W, 0, 8, 8]);
});

test("devices that held nothing fold into one line; RSS and used devices stay", () => {
  const lanes = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ id: `cpu:${i}`, label: `cpu:${i} live JAX arrays`, source: "live_arrays" }))
    .concat([{ id: "rss", label: "RSS", source: "rss" }]);
  const run = { lanes: new Map(lanes.map((_, li) => [li, { v: li === 0 ? [0, 80] : li === 8 ? [5, 9] : [0, 0] }])) };
  const { shown, idle } = splitLanes(lanes, [run]);
  assert.deepEqual(shown, [0, 8]);
  assert.equal(idleText(idle), "7 more devices: no arrays (cpu:1 … cpu:7)");
  assert.equal(idleText(["cpu:1"]), "1 more device: no arrays (cpu:1)");
  // nothing arrived yet: the first device's lane and the RSS (not 8 lanes before the readings
  // fold them), and a device lane still waiting for its first reading is not drawn apart
  assert.deepEqual(splitLanes(lanes, []).shown, [0, 8]);
  const first = { lanes: new Map([[0, { v: [0, 80] }], [8, { v: [5] }]]) };
  assert.deepEqual(splitLanes(lanes, [first]).shown, [0, 8]);
  // nothing anywhere (no RSS lane): the first lane stays
  const flat = { lanes: new Map([[0, { v: [0] }], [1, { v: [0] }]]) };
  assert.deepEqual(splitLanes(lanes.slice(0, 2), [flat]), { shown: [0], idle: ["cpu:1"], groups: new Map() });
});

test("devices that read the same bytes throughout fold into one lane; one that differs keeps its own", () => {
  const lanes = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ id: `cpu:${i}`, label: `cpu:${i} live JAX arrays`, source: "live_arrays" }))
    .concat([{ id: "rss", label: "process resident memory (RSS, all devices and host)", source: "rss" }]);
  const same = [0, 4096, 4096, 8192];
  // a data-parallel step: every device holds the same bytes at every reading, the RSS its own
  const dp = { lanes: new Map(lanes.map((_, li) => [li, { v: li === 8 ? [9, 9, 12, 14] : same.slice() }])) };
  const all = splitLanes(lanes, [dp]);
  assert.deepEqual(all.shown, [0, 8]);
  assert.deepEqual(all.idle, []);
  assert.deepEqual(all.groups.get(0), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.equal(groupLabel(lanes, all.groups.get(0)), "cpu:0-7 live JAX arrays, each");
  assert.equal(foldedText(lanes, all), "cpu:0-7: one lane for 8 devices that held the same bytes throughout (each device's own, to within 0.5% of its peak)");
  // cpu:0 held a whole array once (made there before device_put): it differs, the rest fold
  const setup = { lanes: new Map(lanes.map((_, li) => [li, { v: li === 0 ? [0, 65536, 4096, 8192] : same.slice() }])) };
  const split = splitLanes(lanes, [dp, setup]);
  assert.deepEqual(split.shown, [0, 1, 8]);
  assert.deepEqual(split.groups.get(1), [1, 2, 3, 4, 5, 6, 7]);
  assert.equal(split.groups.has(0), false);
  assert.equal(groupLabel(lanes, split.groups.get(1)), "cpu:1-7 live JAX arrays, each");
  assert.equal(foldedText(lanes, split),
    "cpu:1-7: one lane for 7 devices that held the same bytes throughout (each device's own, to within 0.5% of its peak); cpu:0 differs: a lane of its own");
  // the default device's few scalars more (a session's 4-byte leftovers) are no difference
  const scalars = { lanes: new Map(lanes.map((_, li) => [li, { v: li === 0 ? same.map((x) => x + 8) : same.slice() }])) };
  assert.deepEqual(splitLanes(lanes, [scalars]).shown, [0, 8]);
  // a lane one reading behind (a message ending between lanes) folds on what both have
  const behind = { lanes: new Map(lanes.map((_, li) => [li, { v: li === 3 ? same.slice(0, 3) : same.slice() }])) };
  assert.deepEqual(splitLanes(lanes, [behind]).shown, [0, 8]);
  // two groups apart: the devices of each named
  const two = { lanes: new Map(lanes.map((_, li) => [li, { v: li === 8 ? [1] : li % 2 ? [0, 5] : [0, 7] }])) };
  const s2 = splitLanes(lanes, [two]);
  assert.deepEqual(s2.shown, [0, 1, 8]);
  assert.equal(groupLabel(lanes, s2.groups.get(0)), "cpu:0 … cpu:6 (4 devices) live JAX arrays, each");
  assert.equal(devicesText(["cpu:0", "cpu:2", "cpu:4", "cpu:6"]), "cpu:0 … cpu:6 (4 devices)");
  assert.equal(devicesText(["cpu:1", "cpu:3"]), "cpu:1, cpu:3");
  assert.equal(devicesText(["cpu:1", "cpu:2"]), "cpu:1, cpu:2");
  // idle devices still fold into their line, apart from the lanes that fold by their bytes
  const idle = { lanes: new Map(lanes.map((_, li) => [li, { v: li < 4 ? same.slice() : li === 8 ? [3] : [0, 0, 0, 0] }])) };
  const s3 = splitLanes(lanes, [idle]);
  assert.deepEqual([s3.shown, s3.groups.get(0), idleText(s3.idle)], [[0, 8], [0, 1, 2, 3], "4 more devices: no arrays (cpu:4 … cpu:7)"]);
  // one device: nothing folds
  const one = splitLanes(lanes.slice(0, 1).concat(lanes.slice(8)), [{ lanes: new Map([[0, { v: [0, 5] }], [1, { v: [2] }]]) }]);
  assert.deepEqual([one.shown, one.groups.size, foldedText(lanes, one)], [[0, 1], 0, ""]);
});

test("no byte axis repeats a label", () => {
  for (const vmax of [0.5, 1, 1.05, 2, 3, 7, 1000, 1500, 1024 ** 2 * 1.05]) {
    const labels = byteTicks(vmax).map(fmtBytes);
    assert.equal(new Set(labels).size, labels.length, `${vmax}: ${labels}`);
  }
  assert.deepEqual(byteTicks(1.05).map(fmtBytes), ["0 B", "1 B"]);
});

test("the whole graph's export camera: all of it at zoom 1, scaled down past the largest side", async () => {
  const { wholeCamera, EXPORT_MAX_PX } = await import("../src/graph/toolbar.js");
  assert.deepEqual(wholeCamera(1000, 500), { tx: 16, ty: 16, z: 1, cw: 1032, ch: 532 });
  const big = wholeCamera(12000, 38000, EXPORT_MAX_PX);
  assert.equal(big.ch, EXPORT_MAX_PX);
  assert.ok(Math.abs(big.z - EXPORT_MAX_PX / 38032) < 1e-12 && big.cw < EXPORT_MAX_PX);
});

// What a newcomer sees first (issue 46), the pure parts: the findings list and its head, the
// wheel's choice, the minimap's on-screen mark, idle device lanes and byte ticks.
import test from "node:test";
import assert from "node:assert/strict";

import { allFindings } from "../src/graph/traces.js";
import { findingsHead } from "../src/graph/panels.js";
import { wheelZooms } from "../src/graph/input.js";
import { screenRect, miniScale } from "../src/graph/minimap.js";
import { splitLanes, idleText, byteTicks } from "../src/entries/memory.js";
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
  // nothing arrived yet: every lane is drawn
  assert.deepEqual(splitLanes(lanes, []).shown, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  // nothing anywhere (no RSS lane): the first lane stays
  const flat = { lanes: new Map([[0, { v: [0] }], [1, { v: [0] }]]) };
  assert.deepEqual(splitLanes(lanes.slice(0, 2), [flat]), { shown: [0], idle: ["cpu:1"] });
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

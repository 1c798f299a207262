import test from "node:test";
import assert from "node:assert/strict";

import { legendScale } from "../src/graph/legend.js";
import { fmtUs, fmtRate, headline, timeRows, collectiveCells, hasCollectives, kernelRows, rateLines, nodeTimes, compileLine, kernelNodes, spanRects, ownLine, stripLabel } from "../src/graph/timetab.js";

// the shape of jaxviz/view/timetab.py's entry (jaxviz.schema.ProfileEntry)
function entry() {
  return {
    name: "cell [3]", platform: "tpu", device: "TPU v5 lite", total_us: 3000, steps: 3,
    attributed_share: 0.998, events: 120, rest_us: 0, notes: [], text: "",
    lines: [
      { label: "cell [3]:5 (step)", file: "<ipython-input-3>", line: 5, fn: "step", text: "    y = big @ big\n",
        us: 2400, per_step_us: 800, share: 0.8, estimated: true, kernels: ["fusion.2"], prims: ["dot_general"],
        trace: "step", node_ids: ["b0:4"], category: false },
      { label: "copy / layout change", file: "", line: 0, fn: "", text: "", us: 600, per_step_us: 200, share: 0.2,
        estimated: false, kernels: ["copy.1"], prims: [], trace: "", node_ids: [], category: true },
    ],
    kernels: [
      { name: "fusion.2", module: "jit_step", kind: "convolution fusion", us: 2400, calls: 3, share: 0.8,
        lines: [["cell [3]:5", 0.9], ["cell [3]:6", 0.1]], prims: ["dot_general", "reduce_sum"], flops: 1e9, bytes: 0 },
    ],
    modules: [{ name: "jit_step", trace: "step", calls: 3, us: 3000, flops_per_call: 2e9, flops_per_s: 165.2e12, peak_flops_per_s: 197e12 }],
    compiles: [{ name: "step", where: "cell [3]:9", tracing_s: 0.01, lowering_s: 0.02, compile_s: 1.5, total_s: 1.53 }],
    timeline: { calls: 3, span_us: 3100, busy_us: 3000, idle_share: 0.03, host_per_step_us: 1033, verdict: "device-bound", message: "..." },
  };
}

test("fmtUs and fmtRate read as the text twin's", () => {
  assert.equal(fmtUs(12.34), "12.3 us");
  assert.equal(fmtUs(4560), "4.56 ms");
  assert.equal(fmtUs(1.23e6), "1.23 s");
  assert.equal(fmtRate(165.2e12), "165.2 TFLOP/s");
  assert.equal(fmtRate(26.2e9), "26.2 GFLOP/s");
});

test("headline: device time, steps, events, attribution", () => {
  assert.equal(headline(entry()), "cell [3]: device time 3.00 ms on TPU v5 lite, 3 steps (120 op events; 99.8% to a line or a named category)");
});

test("timeRows: per-step time (~ when estimated), share, line, code, ops; categories pick nothing", () => {
  const [a, b] = timeRows(entry());
  assert.deepEqual(a.cells, ["~800.0 us", "80.0%", "cell [3]:5 (step)", "y = big @ big", "dot_general"]);
  assert.deepEqual(a.nodes, ["b0:4"]);
  assert.equal(a.trace, "step");
  assert.equal(b.category, true);
  assert.deepEqual(b.nodes, []);
  assert.equal(b.cells[0], "200.0 us");
});

test("timeRows: a collective's row gives its bytes a call and the bandwidth it achieved; other profiles no such columns", () => {
  const p = entry();
  assert.equal(hasCollectives(p), false);
  assert.equal(timeRows(p)[0].cells.length, 5);  // a program on one device: no empty columns
  // a sharded step's all-reduce: 3 calls on each of 8 devices, 32 KiB each, 240 us in all
  p.lines.push({ label: "all-reduce at <step>:7", file: "<step>", line: 7, fn: "step", text: "", us: 240,
    per_step_us: 80, share: 0.07, estimated: false, kernels: ["all-reduce.1"], prims: ["all-reduce"],
    trace: "step", node_ids: ["0:6"], category: false, bytes: 24 * 32768, calls: 24 });
  assert.equal(hasCollectives(p), true);
  const rows = timeRows(p);
  assert.deepEqual(rows[2].cells.slice(4), ["all-reduce", "32.0 KiB", "3.28 GB/s"]);
  assert.deepEqual(rows[0].cells.slice(5), ["", ""]);
  assert.deepEqual(collectiveCells({ bytes: 0, calls: 0, us: 5 }), ["", ""]);
});

test("kernelRows: the lines each kernel fused, with their estimated split", () => {
  assert.deepEqual(kernelRows(entry())[0], ["fusion.2", "convolution fusion", "cell [3]:5 (~90%), cell [3]:6 (~10%)",
    "dot_general, reduce_sum", "800.0 us", "3", "80.0%"]);
});

test("rateLines: achieved FLOP/s against the peak where known", () => {
  assert.deepEqual(rateLines(entry()), ["step: 165.2 TFLOP/s achieved of a 197.0 TFLOP/s peak (84%)"]);
  const e = entry();
  e.modules[0].peak_flops_per_s = null;
  assert.deepEqual(rateLines(e), ["step: 165.2 TFLOP/s achieved"]);
});

test("nodeTimes: sets each named node's time per step on its trace's graph", () => {
  const graph = { bodies: [{ id: 0, nodes: [{ id: 0 }, { id: 1 }, { id: 2 }] }, { id: 1, nodes: [{ id: 0 }] }] };
  const n = nodeTimes([{ name: "step", graph }, { name: "other", graph: { bodies: [] } }],
    { step: { "0:2": 800, "1:0": 5, "3:1": 9 } });
  assert.equal(n, 2);
  assert.equal(graph.bodies[0].nodes[2].time_us, 800);
  assert.equal(graph.bodies[1].nodes[0].time_us, 5);
  assert.equal(graph.bodies[0].nodes[0].time_us, undefined);
});

test("legendScale: the device-time colouring's title and its ticks in us / ms", () => {
  const s = legendScale("time", 2500);
  assert.equal(s.title, "device time per step per box (log scale)");
  assert.equal(s.ticks[2].label, "2.50 ms");
  assert.equal(legendScale("time", 0).ticks[0].label, "0.0 us");
});

test("compileLine: the block's compile time and the function that took most of it, with its line", () => {
  const e = entry();
  e.compiles.push({ name: "sin", where: "", tracing_s: 0, lowering_s: 0.01, compile_s: 0.02, total_s: 0.03 });
  assert.equal(compileLine(e), "compiling took 1.56 s; most of it step at cell [3]:9 (1.53 s)");
  assert.equal(compileLine({ compiles: [] }), "");
});

test("ownLine: jaxviz's NaN check said apart from the user's time, as the text twin says it", () => {
  const e = entry();
  assert.equal(ownLine(e), "");
  Object.assign(e, { nan_check_us: 31.3, nan_check_calls: 5, nan_check_compile_s: 0.07 });
  assert.equal(ownLine(e), "jaxviz's NaN check: 31.3 us on the device (5 calls), 0.07 s compiling: in none of the times above");
  assert.equal(ownLine({ nan_check_us: 0, nan_check_calls: 0, nan_check_compile_s: 1.48 }),
    "jaxviz's NaN check: 0.0 us on the device, 1.48 s compiling: in none of the times above");
});

test("kernelNodes: the nodes of the lines a kernel fused, in their trace", () => {
  const e = entry();
  assert.deepEqual(kernelNodes(e, e.kernels[0]), { trace: "step", node_ids: ["b0:4"] });
  assert.deepEqual(kernelNodes(e, { lines: [["copy / layout change", 1]] }), { trace: "", node_ids: [] });
});

test("spanRects: each call along the span, at least half a pixel wide", () => {
  const rects = spanRects({ span_us: 1000, spans: [[0, 100], [500, 0.01]] }, 600);
  assert.deepEqual(rects[0], [0, 60]);
  assert.equal(rects[1][0], 300);
  assert.equal(rects[1][1], 0.5);
});

test("stripLabel: the verdict's calls, the last ones of the step's when the first were left out", () => {
  const tl = entry().timeline;
  assert.equal(stripLabel(tl), "the step's 3 calls on the device over 3.10 ms: filled busy, blank idle");
  assert.equal(stripLabel({ ...tl, calls: 24, skipped: 16, steps: 40 }),
    "the last 24 of the step's 40 calls on the device over 3.10 ms: filled busy, blank idle");
});

import test from "node:test";
import assert from "node:assert/strict";

import {
  prepareGraph, pathOf, staticTree, buildView, initialExpanded, expandAll, firstRefs,
  trailTo, revealTrail, repOfTrail, inEdges, tabLabels, openingTrace, avalBytes, pathSegments,
  nodeKey, subPrefix, MAX_CHILDREN,
} from "../src/graph/model.js";
import { smallGraph, oneBody, chainGraph, manyInputsGraph } from "./fixtures.mjs";

const keys = (items) => items.map((it) => it.key);
const edgeList = (view) => view.edges.map((e) => `${e.s.key}->${e.t.key} ${e.type}${e.n > 1 ? " x" + e.n : ""}`).sort();

test("prepareGraph resolves file indices, fills kind eqn, and runs once", () => {
  const g = smallGraph();
  g.bodies[0].nodes[0].loc[0] = 7;   // an index past the files table
  assert.equal(prepareGraph(g), g);
  const [n0, , n2, n3] = g.bodies[0].nodes;
  assert.equal(n0.loc[0], "?");
  assert.deepEqual(n2.loc, ["/home/me/model.py", 11, 4, "layer"]);
  assert.equal(g.bodies[0].groups[0].loc[0], "/home/me/model.py");
  assert.equal(n2.kind, "eqn");
  assert.equal(n3.kind, "lit");        // a kind that is there stays
  assert.equal(g.bodies[1].nodes[1].kind, "eqn");
  g.files = ["elsewhere.py"];
  g.bodies[0].nodes[2].loc[0] = 0;
  prepareGraph(g);                     // prepared already: nothing is resolved again
  assert.equal(g.bodies[0].nodes[2].loc[0], 0);
});

test("pathOf joins the body's path with the labels of the node's group chain", () => {
  const body = {
    path: "train_step", nodes: [],
    groups: [
      { id: 0, parent: -1, label: "model" },
      { id: 1, parent: 0, label: "block[3]" },
      { id: 2, parent: 1, label: "attn" },
    ],
  };
  assert.equal(pathOf(body, { id: 0, group: 2 }), "train_step > model > block[3] > attn");
  assert.equal(pathOf(body, { id: 1, group: 0 }), "train_step > model");
  assert.equal(pathOf(body, { id: 2 }), "train_step");
  assert.equal(pathOf(body, { id: 3, group: -1 }), "train_step");
  assert.equal(pathOf(body, { id: 4, group: 1, path: "given" }), "given");
  assert.equal(pathOf({ nodes: [], groups: [{ id: 0, parent: -1, label: "layer" }] }, { id: 0, group: 0 }), "layer");
  assert.equal(pathOf({ nodes: [] }, { id: 0 }), "");
});

test("staticTree groups a body's nodes by call-path group, leaves literals out, and sums costs", () => {
  const g = prepareGraph(smallGraph());
  const st = staticTree(g.bodies[0], g.bodies);
  assert.equal(staticTree(g.bodies[0], g.bodies), st);   // cached on the body
  assert.deepEqual(st.root.children.map((s) => s.lk), ["n0", "n1", "g0", "n5", "n6"]);
  const layer = st.root.children[2];
  assert.equal(layer.kind, "group");
  assert.equal(layer.label, "layer");
  assert.deepEqual(layer.children.map((s) => s.lk), ["n2", "n4"]);
  assert.equal(layer.n, 2);
  assert.equal(layer.flops, 144);
  assert.equal(layer.bytes, 384);
  assert.deepEqual(layer.anc, [layer]);
  // every eqn counted, the pjit with the equations of its body
  assert.equal(st.root.n, 4);
  assert.equal(st.root.flops, 160);
  assert.equal(st.leafParent[2], layer);
  assert.equal(st.leafParent[5], st.root);
  assert.equal(st.leafParent[3], undefined);   // the literal is not a leaf
});

test("staticTree makes name scopes, merges single-child scopes and drops scopes around one node", () => {
  const g = oneBody([
    { id: 0, op: "dot", ns: "enc/attn" },
    { id: 1, op: "add", ns: "enc/attn" },
    { id: 2, op: "tanh", ns: "enc/mlp" },
    { id: 3, op: "mul", ns: "dec/x/y" },
    { id: 4, op: "sub", ns: "dec/x/y" },
  ]);
  prepareGraph(g);
  const { root } = staticTree(g.bodies[0], g.bodies);
  const [enc, dec] = root.children;
  assert.equal(root.children.length, 2);
  assert.equal(enc.kind, "ns");
  assert.equal(enc.label, "enc");
  assert.deepEqual(enc.children.map((s) => s.label || s.lk), ["attn", "n2"]);
  assert.deepEqual(enc.children[0].children.map((s) => s.lk), ["n0", "n1"]);
  assert.equal(dec.kind, "ns");
  assert.equal(dec.label, "dec/x/y");
  assert.equal(dec.path, "dec/x/y");
  assert.deepEqual(dec.children.map((s) => s.lk), ["n3", "n4"]);
});

test("staticTree folds a run of repeated calls into one cluster", () => {
  const g = oneBody(
    [{ id: 0, op: "sin", group: 0 }, { id: 1, op: "sin", group: 1 }, { id: 2, op: "sin", group: 2 }, { id: 3, op: "cos" }],
    [],
    { groups: [
      { id: 0, parent: -1, label: "block[0]", fn: "block", loc: null, n_eqns: 1, repeats: 3 },
      { id: 1, parent: -1, label: "block[1]", fn: "block", loc: null, n_eqns: 1, repeat_of: 0 },
      { id: 2, parent: -1, label: "block[2]", fn: "block", loc: null, n_eqns: 1, repeat_of: 0 },
    ] });
  prepareGraph(g);
  const { root, leafParent } = staticTree(g.bodies[0], g.bodies);
  assert.deepEqual(root.children.map((s) => s.lk), ["f0", "n3"]);
  const fold = root.children[0];
  assert.equal(fold.kind, "fold");
  assert.equal(fold.label, "block x3");
  assert.deepEqual(fold.children.map((s) => s.label), ["block[0]", "block[1]", "block[2]"]);
  assert.equal(fold.n, 3);
  assert.deepEqual(leafParent[1].anc.map((s) => s.lk), ["f0", "g1"]);
});

test("staticTree splits a long level into chunks of at most MAX_CHILDREN, in order", () => {
  const g = prepareGraph(chainGraph(70));
  const { root } = staticTree(g.bodies[0], g.bodies);
  assert.ok(root.children.length <= MAX_CHILDREN);
  assert.ok(root.children.every((c) => c.kind === "chunk" && c.children.length <= MAX_CHILDREN));
  const leaves = root.children.flatMap((c) => c.children.map((s) => s.node.op));
  assert.deepEqual(leaves, Array.from({ length: 70 }, (_, i) => `op${i}`));
  const first = root.children[0];
  assert.equal(first.label, `op0 … ${first.children[first.children.length - 1].node.op}`);
  assert.equal(root.n, 70);
  // 64 or fewer stay as they are
  const small = prepareGraph(chainGraph(MAX_CHILDREN));
  assert.ok(staticTree(small.bodies[0], small.bodies).root.children.every((c) => c.kind === "node"));
});

test("staticTree clusters many inputs by argument path and outputs by matching avals", () => {
  const g = prepareGraph(manyInputsGraph());
  const { root } = staticTree(g.bodies[0], g.bodies);
  const io = root.children.filter((s) => s.kind === "io");
  assert.equal(io.length, 2);
  const [params, outs] = io;
  assert.equal(params.dir, "in");
  assert.equal(params.how, "path");
  assert.equal(params.label, "params");
  assert.equal(params.range, "inputs 0-14");
  assert.equal(params.count, 15);
  assert.equal(params.nbytes, 15 * 16);
  assert.equal(outs.dir, "out");
  assert.equal(outs.how, "like");
  assert.equal(outs.like, "params");
  assert.equal(outs.label, "outputs 0-14");
  assert.equal(outs.count, 15);
  assert.equal(outs.nbytes, params.nbytes);
  // x, y, the loss and the equation stay leaves
  const leaves = root.children.filter((s) => s.kind === "node").map((s) => s.node.op || s.node.kind);
  assert.deepEqual(leaves.sort(), ["out", "sub", "x", "y"]);
});

test("firstRefs finds, breadth first, the first equation that references each body", () => {
  const g = prepareGraph(smallGraph());
  assert.deepEqual(firstRefs(g), [null, { B: 0, nid: 5, i: 0 }]);
  // a body used twice: the first use wins; a body nobody uses has no ref
  g.bodies[0].nodes[4].subs = [{ body: 1, role: "jit", in_map: [0], out_map: [0] }];
  g.bodies.push({ ...g.bodies[1], id: 2 });
  assert.deepEqual(firstRefs(g), [null, { B: 0, nid: 4, i: 0 }, null]);
});

test("firstRefs goes level by level: a body reached from two bodies keeps the earlier one's ref", () => {
  const call = (id, body) => ({ id, op: "pjit", kind: "eqn", subs: [{ body, role: "jit", in_map: [], out_map: [] }] });
  const body = (id, nodes) => ({ id, label: `b${id}`, n_eqns: nodes.length, inputs: [], outputs: [], nodes, edges: [], groups: [] });
  // root calls 1 and 3; 1 and 3 both call 2
  const g = { version: 1, name: "g", root: 0, bodies: [
    body(0, [call(0, 1), call(1, 3)]), body(1, [call(0, 2)]), body(2, [{ id: 0, op: "sin", kind: "eqn" }]), body(3, [call(0, 2)]),
  ] };
  assert.deepEqual(firstRefs(g), [null, { B: 0, nid: 0, i: 0 }, { B: 1, nid: 0, i: 0 }, { B: 0, nid: 1, i: 0 }]);
  assert.deepEqual(trailTo(g, firstRefs(g), 2, 0).map((t) => t.P), ["", "n0.0/", "n0.0/n0.0/"]);
});

test("trailTo walks from the root down to a node; revealTrail opens what hides it", () => {
  const g = prepareGraph(smallGraph());
  const refs = firstRefs(g);
  assert.deepEqual(trailTo(g, refs, 0, 2), [{ P: "", B: 0, nid: 2 }]);
  const deep = trailTo(g, refs, 1, 1);
  assert.deepEqual(deep, [{ P: "", B: 0, nid: 5 }, { P: "n5.0/", B: 1, nid: 1 }]);
  assert.equal(nodeKey(deep[1].P, 1), "n5.0/n1");
  assert.equal(subPrefix("n5", 0), "n5.0/");
  g.bodies.push({ ...g.bodies[1], id: 2, nodes: g.bodies[1].nodes.map((n) => ({ ...n })) });
  assert.equal(trailTo(g, firstRefs(g), 2, 1), null);   // unreachable body

  const shut = new Set();
  revealTrail(g, trailTo(g, refs, 0, 4), shut);
  assert.deepEqual([...shut], ["g0"]);
  const open = new Set();
  revealTrail(g, deep, open);
  assert.deepEqual([...open], ["n5"]);
  const view = buildView(g, open);
  assert.ok(view.items.has("n5.0/n1"));
});

test("buildView shows collapsed clusters as boxes and aggregates edges onto them", () => {
  const g = prepareGraph(smallGraph());
  const view = buildView(g, new Set());
  assert.deepEqual(keys(view.boxes), ["n0", "n1", "g0", "n5", "n6"]);
  assert.deepEqual(view.frames, []);
  assert.equal(view.items.get("g0").open, false);
  // dot -> mul is inside the collapsed group; the literal has no edge
  assert.deepEqual(edgeList(view), [
    "g0->n5 f32[8,2]", "n0->g0 f32[8,4]", "n1->g0 f32[4,2]", "n5->n6 f32[8,2]",
  ]);
});

test("buildView opens expanded clusters as frames and routes edges into sub-bodies", () => {
  const g = prepareGraph(smallGraph());
  const view = buildView(g, new Set(["g0", "n5"]));
  assert.deepEqual(keys(view.frames), ["g0", "n5"]);
  assert.deepEqual(keys(view.boxes).sort(), ["n0", "n1", "n2", "n4", "n5.0/n0", "n5.0/n1", "n5.0/n2", "n6"]);
  const inner = view.items.get("n5.0/n1");
  assert.equal(inner.parent, view.items.get("n5"));
  assert.equal(inner.depth, 2);
  assert.deepEqual(edgeList(view), [
    "n0->n2 f32[8,4]", "n1->n2 f32[4,2]", "n2->n4 f32[8,2]", "n4->n5.0/n0 f32[8,2]",
    "n5.0/n0->n5.0/n1 f32[8,2]", "n5.0/n1->n5.0/n2 f32[8,2]", "n5.0/n2->n6 f32[8,2]",
  ]);
});

test("buildView counts the values that one aggregated edge stands for", () => {
  const g = oneBody(
    [{ id: 0, kind: "in", op: "x", out: ["f32[2]"] }, { id: 1, op: "sin", group: 0 }, { id: 2, op: "cos", group: 0 }],
    [[0, 1, "f32[2]", 0, 0], [0, 2, "f32[2]", 0, 0]],
    { groups: [{ id: 0, parent: -1, label: "trig", fn: "trig", loc: null, n_eqns: 2 }] });
  prepareGraph(g);
  const shut = buildView(g, new Set());
  assert.equal(shut.edges.length, 1);
  // one array read twice inside the shut group is one array
  assert.equal(shut.edges[0].n, 1);
  assert.deepEqual(edgeList(buildView(g, new Set(["g0"]))), ["n0->n1 f32[2]", "n0->n2 f32[2]"]);
  // two arrays of different shapes into the group: two arrays, their bytes, both shapes
  const g2 = oneBody(
    [{ id: 0, kind: "in", op: "x", out: ["f32[2]"] }, { id: 1, kind: "in", op: "w", out: ["f32[4,4]"] },
      { id: 2, op: "sin", group: 0 }, { id: 3, op: "cos", group: 0 }],
    [[0, 2, "f32[2]", 0, 0], [0, 3, "f32[2]", 0, 0], [1, 3, "f32[4,4]", 1, 0]],
    { groups: [{ id: 0, parent: -1, label: "trig", fn: "trig", loc: null, n_eqns: 2 }] });
  prepareGraph(g2);
  const inputs = buildView(g2, new Set()).edges;
  assert.deepEqual(inputs.map((e) => [e.s.key, e.n, e.bytes]).sort(), [["n0", 1, 8], ["n1", 1, 64]]);
});

test("repOfTrail is the node when visible, else the collapsed cluster around it", () => {
  const g = prepareGraph(smallGraph());
  const refs = firstRefs(g);
  const trail = trailTo(g, refs, 1, 1);
  assert.equal(repOfTrail(buildView(g, new Set()), g, trail).key, "n5");
  assert.equal(repOfTrail(buildView(g, new Set(["n5"])), g, trail).key, "n5.0/n1");
  assert.equal(repOfTrail(buildView(g, new Set()), g, trailTo(g, refs, 0, 4)).key, "g0");
  assert.equal(repOfTrail(buildView(g, new Set(["g0"])), g, trailTo(g, refs, 0, 4)).key, "n4");
});

test("initialExpanded opens user clusters within the budget, level by level", () => {
  const g = prepareGraph(smallGraph());
  assert.deepEqual([...initialExpanded(g)].sort(), ["g0", "n5"]);
  // 5 boxes shown; opening both adds 3 > budget 6: only what adds at most one box opens
  assert.deepEqual([...initialExpanded(g, 6)], ["g0"]);
  assert.deepEqual([...initialExpanded(g, 5)], []);
});

test("initialExpanded leaves folds and JAX's helper bodies shut", () => {
  const g = prepareGraph(smallGraph());
  g.bodies[0].nodes[5].subs[0].role = "update_jaxpr";   // a scatter's helper, not user code
  assert.deepEqual([...initialExpanded(g)], ["g0"]);
  const folded = oneBody(
    [{ id: 0, op: "sin", group: 0 }, { id: 1, op: "sin", group: 1 }],
    [],
    { groups: [
      { id: 0, parent: -1, label: "block[0]", fn: "block", loc: null, n_eqns: 1, repeats: 2 },
      { id: 1, parent: -1, label: "block[1]", fn: "block", loc: null, n_eqns: 1, repeat_of: 0 },
    ] });
  assert.deepEqual([...initialExpanded(prepareGraph(folded))], []);
});

test("expandAll opens everything under the view up to the cap", () => {
  const g = prepareGraph(smallGraph());
  const expanded = new Set();
  assert.equal(expandAll(g, expanded, buildView(g, expanded)), false);
  assert.deepEqual([...expanded].sort(), ["g0", "n5"]);
  assert.equal(buildView(g, expanded).boxes.length, 8);
  const capped = new Set();
  assert.equal(expandAll(g, capped, buildView(g, capped), 6), true);
  assert.deepEqual([...capped], ["g0"]);
});

test("inEdges lists a node's inputs in port order", () => {
  const g = prepareGraph(smallGraph());
  const b = g.bodies[0];
  assert.deepEqual(inEdges(b, 4), [[2, 4, "f32[8,2]", 0, 0], [3, 4, "f32[]", 1, 0]]);
  assert.deepEqual(inEdges(b, 2).map((e) => e[0]), [0, 1]);
  assert.deepEqual(inEdges(b, 0), []);
  inEdges(b, 4).pop();                 // a copy: the index is not changed
  assert.equal(inEdges(b, 4).length, 2);
});

test("tabLabels: function names, eager lines, numbered repeats, library functions", () => {
  const long = "a_function_with_a_name_much_longer_than_forty_chars";
  const labels = tabLabels([
    { name: "train_step", kind: "jit", calls: 1 },
    { name: "line 13: y = x + 1", kind: "eager" },
    { name: "line 13: z = y * 2", kind: "eager" },
    { name: "helper", kind: "jit", user: false, calls: 3 },
    { name: long },
    { name: "step", kind: "jit", calls: 16, calls_more: true },
  ]);
  assert.deepEqual(labels[0], { text: "train_step", title: "train_step", lib: false });
  assert.deepEqual(labels[1], { text: "line 13", title: "eager ops at line 13: y = x + 1", lib: true });
  assert.deepEqual(labels[2], { text: "line 13 (2)", title: "eager ops at line 13: z = y * 2", lib: true });
  assert.deepEqual(labels[3], { text: "helper", title: "library function helper · 3 calls", lib: true });

  assert.equal(labels[4].text, long.slice(0, 39) + "…");
  assert.equal(labels[4].title, long);
  assert.equal(labels[5].title, "step · 16+ calls"); // later calls ran unwatched
});

test("openingTrace prefers the user's functions with equations, then eager, then any", () => {
  const tr = (n_eqns, extra) => ({ name: "t", graph: { root: 0, bodies: [{ n_eqns }] }, ...extra });
  const lib = tr(5, { user: false }), eager = tr(3, { kind: "eager" }), empty = tr(0, { kind: "jit" }), fn = tr(2, { kind: "jit" });
  assert.equal(openingTrace([lib, eager, empty, fn]), 3);
  assert.equal(openingTrace([lib, eager, empty]), 1);
  assert.equal(openingTrace([empty, lib]), 1);
  assert.equal(openingTrace([empty]), 0);
  assert.equal(openingTrace([]), 0);
  // no function of the user's: the first tab with findings, not the eager line before it (an
  // 8-key-reuse cell opened on `line 2`, a tab folded under "more", issue 57's check)
  const sampler = tr(4, { user: false, kind: "jit", diagnostics: [{ rule: "key-reuse" }] });
  assert.equal(openingTrace([eager, lib, sampler]), 2);
  assert.equal(openingTrace([eager, sampler, fn]), 2);
});

test("avalBytes: elements times the dtype's size", () => {
  assert.equal(avalBytes("f32[8,128]"), 8 * 128 * 4);
  assert.equal(avalBytes("bf16[10]"), 20);
  assert.equal(avalBytes("bool[4]"), 4);
  assert.equal(avalBytes("i8[3, 3]"), 9);
  assert.equal(avalBytes("f32[]"), 4);
  assert.equal(avalBytes("f64[2,2]"), 32);
  assert.equal(avalBytes("token"), 0);
  assert.equal(avalBytes(""), 0);
  assert.equal(avalBytes(undefined), 0);
});

test("pathSegments splits an argument path at keys, indices and attributes", () => {
  assert.deepEqual(pathSegments("params['layers'][3].w"), ["params", "['layers']", "[3]", ".w"]);
  assert.deepEqual(pathSegments('x["a.b"]'), ["x", '["a.b"]']);
  assert.deepEqual(pathSegments("state.opt.mu"), ["state", ".opt", ".mu"]);
  assert.deepEqual(pathSegments("x"), ["x"]);
  assert.deepEqual(pathSegments(""), []);
  assert.deepEqual(pathSegments(undefined), []);
});

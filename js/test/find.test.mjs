import test from "node:test";
import assert from "node:assert/strict";

import { prepareGraph } from "../src/graph/model.js";
import { search, matchSummary, TIER, assigns } from "../src/graph/find.js";
import { smallGraph, oneBody } from "./fixtures.mjs";

const hits = (g, q, opts) => search(g, q, opts).map((r) => `${r.B}:${r.nid}${r.grp != null ? "g" + r.grp : ""}`);

test("search matches op, aval, file:line, line number and %id, never literals", () => {
  const g = prepareGraph(smallGraph());
  assert.deepEqual(hits(g, "DOT"), ["0:2"]);
  assert.deepEqual(hits(g, "f32[4,2]"), ["0:1"]);
  assert.deepEqual(hits(g, "model.py:12"), ["0:4"]);
  assert.deepEqual(hits(g, "20"), ["1:1"]);
  assert.deepEqual(hits(g, "line 5"), ["0:5"]);
  assert.deepEqual(hits(g, ":11"), ["0:2"]);
  assert.deepEqual(hits(g, "%1"), ["0:1", "1:1"]);
  assert.deepEqual(hits(g, "2.0"), []);
  assert.deepEqual(hits(g, "   "), []);
  assert.deepEqual(hits(g, "nothing like it"), []);
  assert.equal(hits(g, "f32").length, 9);
  assert.deepEqual(hits(g, "f32", { limit: 2 }), ["0:0", "0:1"]);
});

test("a call's body label and title match (jit(relu), relu), the call not the ops inside", () => {
  const g = prepareGraph(smallGraph());
  assert.deepEqual(hits(g, "jit(relu)"), ["0:5"]);
  assert.equal(search(g, "jit(relu)")[0].tier, TIER.exact);
  assert.deepEqual(hits(g, "relu"), ["0:5"]);
  assert.deepEqual(hits(g, "pjit: jit(relu)"), ["0:5"]);
});

test("a group matches once, as the group (not every equation in it), by label or function", () => {
  const g = prepareGraph(smallGraph());
  const r = search(g, "layer");
  assert.equal(r.length, 1);
  assert.deepEqual({ ...r[0] }, { B: 0, nid: 2, grp: 0, tier: TIER.exact, where: "" });
  assert.deepEqual(hits(g, "lay"), ["0:2g0"]);
  assert.equal(search(g, "lay")[0].tier, TIER.group);
});

test("input and output names match; source text matches the nodes of its line, ranked last", () => {
  const g = prepareGraph(oneBody([
    { id: 0, kind: "in", op: "params['w']", out: ["f32[4]"], loc: [0, 1, 0, "f"] },
    { id: 1, op: "log", out: ["f32[4]"], loc: [0, 2, 4, "f"] },
    { id: 2, op: "neg", out: ["f32[4]"], loc: [0, 3, 4, "f"] },
    { id: 3, kind: "out", op: "nll", out: ["f32[4]"], loc: [0, 4, 4, "f"] },
  ], [[0, 1, "f32[4]", 0, 0], [1, 2, "f32[4]", 0, 0], [2, 3, "f32[4]", 0, 0]]));
  g.files = ["cell"];
  for (const n of g.bodies[0].nodes) n.loc[0] = "cell";
  const sources = { cell: { 2: "  logp = jnp.log(p)", 3: "  nll = -logp" } };
  assert.deepEqual(hits(g, "w"), ["0:0"]);
  assert.deepEqual(hits(g, "params['w']"), ["0:0"]);
  // the output named nll first (its label), then the equation that defines it, `nll = ...`
  assert.deepEqual(hits(g, "nll", { sources }), ["0:3", "0:2"]);
  assert.deepEqual(search(g, "nll", { sources }).map((r) => r.tier), [TIER.exact, TIER.define]);
  assert.deepEqual(hits(g, "logp", { sources }), ["0:1", "0:2"]);
  assert.deepEqual(hits(g, "logp"), []);   // no sources: no source text
  // exact label before a label that only contains the query
  assert.deepEqual(hits(g, "log"), ["0:1"]);
});

test("matchSummary counts matches and the call paths they sit in", () => {
  assert.equal(matchSummary([]), "0 matches");
  assert.equal(matchSummary([{ where: "" }]), "1 match in 1 group");
  assert.equal(matchSummary([{ where: "a" }, { where: "a > b" }, { where: "a" }]), "3 matches in 2 groups");
  const g = prepareGraph(smallGraph());
  assert.equal(matchSummary(search(g, "f32")), "9 matches in 3 groups");
});

test("the equation that defines a variable ranks before the lines that only use it", () => {
  // `logp` is used on line 2 (a broadcast of targets, first in the body) and defined on line 3
  const g = prepareGraph(oneBody([
    { id: 0, kind: "in", op: "targets", out: ["i32[8]"], loc: [0, 1, 0, "f"] },
    { id: 1, op: "broadcast_in_dim", out: ["i32[8,1]"], loc: [0, 2, 4, "f"] },
    { id: 2, op: "reduce_max", out: ["f32[8]"], loc: [0, 3, 4, "f"] },
    { id: 3, op: "pjit", out: ["f32[8,10]"], loc: [0, 3, 4, "f"] },
    { id: 4, op: "mul", out: ["f32[8,10]"], loc: [0, 2, 4, "f"] },
  ], [[0, 1, "i32[8]", 0, 0], [2, 3, "f32[8]", 0, 0], [3, 4, "f32[8,10]", 0, 0], [1, 4, "i32[8,1]", 0, 1]]));
  g.files = ["cell"];
  for (const n of g.bodies[0].nodes) n.loc[0] = "cell";
  const sources = { cell: { 1: "def loss(logits, targets):", 2: "  nll = -(logp * onehot(targets[:, None])).sum()",
    3: "  logp = jax.nn.log_softmax(logits)" } };
  const r = search(g, "logp", { sources });
  assert.deepEqual(r.map((x) => `${x.B}:${x.nid}`), ["0:3", "0:1", "0:2", "0:4"]);
  assert.equal(r[0].tier, TIER.define);
  // `x[logp] = ...`, keyword arguments and comparisons do not define it
  assert.equal(assigns("  y[logp] = 1", "logp"), false);
  assert.equal(assigns("  f(logp=1)", "logp"), false);
  assert.equal(assigns("  logp == 1", "logp"), false);
  assert.equal(assigns("  a, logp = f(x)", "logp"), true);
  assert.equal(assigns("  logp += 1", "logp"), true);
  assert.equal(assigns("  logp2 = 1", "logp"), false);
});

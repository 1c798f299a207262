import test from "node:test";
import assert from "node:assert/strict";

import { tabGroups, foldTabs, isNoise, MAX_TABS } from "../src/graph/tabs.js";

// a trace as the payload has it: its root body's equation count and output avals
const tr = (name, kind, { user = true, eqns = 3, outs = ["f32[4]"], diags = 0 } = {}) => ({
  name, kind, user, diagnostics: Array.from({ length: diags }, () => ({ severity: "warning" })),
  graph: { root: 0, bodies: [{ n_eqns: eqns, outputs: outs.map((_, k) => k), nodes: outs.map((o) => ({ out: [o] })) }] },
});

// the 17 traces of issue 57's cell: functions, an eager statement split in two by the jitted
// `less` and `add` of its index, a statement of a loop run three times
const CELL = [
  tr("put", "jit"), tr("f", "jit", { diags: 2 }), tr("<lambda>", "jit"), tr("<lambda>", "jit"), tr("<lambda>", "jit", { diags: 1 }),
  tr("line 11: key = jax.random.key(0)", "eager"), tr("_normal", "jit", { user: false, diags: 1 }),
  tr("line 14: y = put(jnp.zeros(4), 9)", "eager"), tr("line 15: v = jnp.zeros(4)", "eager"), tr("line 16: w = v[10]", "eager"),
  tr("less", "jit", { user: false, eqns: 1, outs: ["~bool[]"] }), tr("add", "jit", { user: false, eqns: 2, outs: ["i32[]"] }),
  tr("line 16: w = v[10]", "eager", { diags: 1 }), tr("line 17: n = f(jnp.zeros(3))", "eager"),
  tr("line 19: g = jax.jit(lambda z: z * 2)(jnp.ones(i + 1))", "eager"), tr("line 19: g = jax.jit(lambda z: z * 2)(jnp.ones(i + 1))", "eager"),
  tr("line 19: g = jax.jit(lambda z: z * 2)(jnp.ones(i + 1))", "eager"),
];

test("tabGroups: one tab per eager statement, its parts together; findings counted per tab", () => {
  const g = tabGroups(CELL);
  assert.deepEqual(g.map((x) => x.text), ["put", "f", "<lambda>", "<lambda> (2)", "<lambda> (3)", "line 11", "_normal",
    "line 14", "line 15", "line 16", "less", "add", "line 17", "line 19"]);
  const line16 = g.find((x) => x.text === "line 16");
  assert.deepEqual([line16.traces, line16.findings, line16.worst], [[9, 12], 1, "warning"]);
  assert.equal(g.find((x) => x.text === "line 19").traces.length, 3);
  assert.deepEqual(g.filter((x) => x.noise).map((x) => x.text), ["less", "add"]);
  assert.ok(!isNoise(CELL[6]) && !isNoise(CELL[0]));
});

test("foldTabs: one row of tabs; those with findings, then the user's functions, stay out", () => {
  const { shown, more } = foldTabs(tabGroups(CELL));
  assert.equal(shown.length, MAX_TABS - 1);   // the "more" menu takes the last place
  assert.deepEqual(shown.map((x) => x.text), ["put", "f", "<lambda>", "<lambda> (2)", "<lambda> (3)", "_normal", "line 16"]);
  assert.ok(more.some((x) => x.text === "less") && more.some((x) => x.text === "line 19"));
  // few tabs: all shown, but noise still folds
  const few = foldTabs(tabGroups([CELL[0], CELL[9], CELL[10], CELL[12]]));
  assert.deepEqual([few.shown.map((x) => x.text), few.more.map((x) => x.text)], [["put", "line 16"], ["less"]]);
  // tabs with findings fold too past the row (the menu says what they hold)
  const many = foldTabs(tabGroups(Array.from({ length: 10 }, (_, i) => tr(`_uniform`, "jit", { user: false, diags: 1 }))));
  assert.deepEqual([many.shown.length, many.more.length], [MAX_TABS - 1, 10 - MAX_TABS + 1]);
  const plain = foldTabs(tabGroups(CELL.slice(0, 3)));
  assert.deepEqual([plain.shown.length, plain.more.length], [3, 0]);
});

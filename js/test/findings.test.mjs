import test from "node:test";
import assert from "node:assert/strict";

import { orderFindings, codeSpans, FINDINGS_SHOWN } from "../src/graph/panels.js";
import { cellNumber } from "../src/graph/editor.js";

test("orderFindings: by line, each file in the order it first comes, no line last", () => {
  // the order a cell's findings came in (issue 57: lines 8, 17, 4, 6, 13)
  const f = (line, filename = "cell [2]") => ({ filename, line, rule: `r${line}` });
  const got = orderFindings([f(8), f(17), f(4), f(null), f(6), f(3, "cell [1]"), f(13)]);
  assert.deepEqual(got.map((d) => d.line), [4, 6, 8, 13, 17, null, 3]);
  // two findings of one line keep their order
  const two = orderFindings([{ line: 5, rule: "a" }, { line: 2 }, { line: 5, rule: "b" }]);
  assert.deepEqual(two.map((d) => d.rule || ""), ["", "a", "b"]);
  assert.ok(FINDINGS_SHOWN >= 5);
});

test("codeSpans: backticked code as code pieces, the rest as text", () => {
  assert.deepEqual(codeSpans("NaN from `log` of `x - 1`."), [["NaN from ", false], ["log", true], [" of ", false], ["x - 1", true], [".", false]]);
  assert.deepEqual(codeSpans("a lone ` tick"), [["a lone ` tick", false]]);
  assert.deepEqual(codeSpans("`<b>x</b>`"), [["<b>x</b>", true]]);   // text, rendered through textContent
  assert.deepEqual(codeSpans(""), []);
});

test("cellNumber: the cell a finding's file label names", () => {
  assert.equal(cellNumber("cell [12]"), 12);
  assert.equal(cellNumber("<cell 3>"), null);
  assert.equal(cellNumber("model.py"), null);
});

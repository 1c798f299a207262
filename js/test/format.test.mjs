import test from "node:test";
import assert from "node:assert/strict";

import { fmt, fmtBytes } from "../src/graph/format.js";

test("fmtBytes: whole bytes below 1024, then one decimal in binary units", () => {
  assert.equal(fmtBytes(0), "0 B");
  assert.equal(fmtBytes(512), "512 B");
  assert.equal(fmtBytes(1023), "1023 B");
  assert.equal(fmtBytes(1024), "1.0 KiB");
  assert.equal(fmtBytes(1536), "1.5 KiB");
  assert.equal(fmtBytes(148000), "144.5 KiB");
  assert.equal(fmtBytes(3.8 * 1024 ** 2), "3.8 MiB");
  assert.equal(fmtBytes(5 * 1024 ** 3), "5.0 GiB");
  assert.equal(fmtBytes(2 * 1024 ** 4), "2.0 TiB");
  assert.equal(fmtBytes(2048 * 1024 ** 4), "2048.0 TiB");   // TiB is the largest unit
  assert.equal(fmtBytes(-2048), "-2.0 KiB");
});

test("fmtBytes says unavailable for a missing or non-finite value, never 0", () => {
  assert.equal(fmtBytes(null), "unavailable");
  assert.equal(fmtBytes(undefined), "unavailable");
  assert.equal(fmtBytes(NaN), "unavailable");
  assert.equal(fmtBytes(Infinity), "unavailable");
});

test("fmt: compact numbers in steps of 1000", () => {
  assert.equal(fmt(0), "0");
  assert.equal(fmt(undefined), "0");
  assert.equal(fmt(2.25), "2.3");
  assert.equal(fmt(999), "999");
  assert.equal(fmt(1234), "1.2k");
  assert.equal(fmt(12345), "12k");
  assert.equal(fmt(1.5e6), "1.5M");
  assert.equal(fmt(2e9), "2.0G");
  assert.equal(fmt(3e12), "3.0T");
  assert.equal(fmt(4e18), "4000P");
});

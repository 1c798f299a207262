// The view's module layout, checked as tests/test_layout.py checks the Python package's: every
// import in src/ names a file that exists, and no set of modules imports itself round (a
// circle makes the order in which ES modules run depend on which one a bundle enters first).
// JSDoc's `import("./x.js").T` is a type only, inside a comment: it is not counted.

import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src");

/** Every .js file under `dir`, as paths relative to SRC ("graph/camera.js"). */
function sources(dir = SRC) {
  const out = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (e.name.endsWith(".js")) out.push(path.relative(SRC, p));
  }
  return out.sort();
}

/** The specifiers a module's text imports: static `import`/`export ... from`, bare
 * `import "x"`, and dynamic `import("x")` (a lazy import is still a dependency). */
function specifiers(text) {
  const code = text
    .replace(/\/\*[\s\S]*?\*\//g, "")      // block and JSDoc comments
    .replace(/^\s*\/\/.*$/gm, "");          // whole-line comments
  const found = [];
  const patterns = [
    /^\s*(?:import|export)\b[^;"'`]*?\bfrom\s*["']([^"']+)["']/gm,
    /^\s*import\s*["']([^"']+)["']/gm,
    /\bimport\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const re of patterns) for (const m of code.matchAll(re)) found.push(m[1]);
  return found;
}

/** {module: [modules it imports]}, for the relative imports of every file in src/. */
function importGraph() {
  const graph = {};
  for (const rel of sources()) {
    const text = fs.readFileSync(path.join(SRC, rel), "utf8");
    graph[rel] = specifiers(text)
      .filter((s) => s.startsWith("."))
      .map((s) => path.relative(SRC, path.resolve(SRC, path.dirname(rel), s)));
  }
  return graph;
}

/** The first import circle in `graph` as a list of modules (first repeated last), or null. */
function findCycle(graph) {
  const state = new Map();   // 1: on the current path, 2: done
  const stack = [];
  const visit = (m) => {
    state.set(m, 1);
    stack.push(m);
    for (const dep of [...(graph[m] || [])].sort()) {
      if (state.get(dep) === 1) return [...stack.slice(stack.indexOf(dep)), dep];
      if (!state.has(dep)) {
        const c = visit(dep);
        if (c) return c;
      }
    }
    stack.pop();
    state.set(m, 2);
    return null;
  };
  for (const m of Object.keys(graph).sort()) {
    if (!state.has(m)) {
      const c = visit(m);
      if (c) return c;
    }
  }
  return null;
}

const GRAPH = importGraph();

test("the walker reads the view's imports", () => {
  assert.ok(Object.keys(GRAPH).length > 10, "src/ holds the view's modules");
  assert.ok(GRAPH["graph/state.js"].includes("graph/camera.js"), "state.js imports camera.js");
  assert.ok(GRAPH["entries/graph.js"].length > 3, "an entry imports the view's modules");
  assert.deepEqual(
    specifiers(`/** @param {import("./state.js").ViewState} v */\n// import { x } from "./no.js";\n` +
               `import {\n  a,\n  b,\n} from "./a.js";\nimport "./side.js";\nexport { c } from "./c.js";\n` +
               `const d = () => import("./d.js");\n`),
    ["./a.js", "./c.js", "./side.js", "./d.js"]);
});

test("every relative import names a file in src/", () => {
  const missing = [];
  for (const [m, deps] of Object.entries(GRAPH))
    for (const d of deps) if (!(d in GRAPH)) missing.push(`${m} -> ${d}`);
  assert.deepEqual(missing, []);
});

test("no set of the view's modules imports itself round", () => {
  const cycle = findCycle(GRAPH);
  assert.equal(cycle, null, cycle && `import circle: ${cycle.join(" -> ")}`);
});

test("the check sees a circle, direct or through a third module", () => {
  assert.deepEqual(findCycle({ "a.js": ["b.js"], "b.js": ["a.js"] }), ["a.js", "b.js", "a.js"]);
  assert.deepEqual(findCycle({ "a.js": ["b.js"], "b.js": ["c.js"], "c.js": ["a.js"] }),
                   ["a.js", "b.js", "c.js", "a.js"]);
  assert.equal(findCycle({ "a.js": ["b.js", "c.js"], "b.js": ["c.js"], "c.js": [] }), null);
  // the view's own graph with one import added back up: camera.js -> state.js -> camera.js
  const fake = { ...GRAPH, "graph/camera.js": [...GRAPH["graph/camera.js"], "graph/state.js"] };
  assert.ok(findCycle(fake));
});

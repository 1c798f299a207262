// Hand-built graph payloads in the shape of docs/graph-json.md (model.js's typedefs). Each
// builder returns a fresh object: prepareGraph, staticTree and inEdges cache on what they get.

/**
 * `f(x, w)`: `layer` (a call-path group) makes dot_general and mul (times a literal 2.0),
 * then `pjit` calls `relu`, a body of its own:
 *
 *   body 0 (root)          in x (0), in w (1) -> [layer: dot_general (2), mul (4) <- lit 2.0 (3)]
 *                          -> pjit (5) -> out (6)
 *   body 1 (jit(relu))     in (0) -> max (1) -> out (2)
 */
export function smallGraph() {
  return {
    version: 1,
    name: "f",
    root: 0,
    files: ["/home/me/model.py"],
    bodies: [
      {
        id: 0, label: "f", n_eqns: 4, flops: 160, bytes: 448,
        inputs: [0, 1], outputs: [6],
        nodes: [
          { id: 0, kind: "in", op: "x", out: ["f32[8,4]"], loc: [0, 3, 0, "f"] },
          { id: 1, kind: "in", op: "w", out: ["f32[4,2]"], loc: [0, 3, 0, "f"] },
          { id: 2, op: "dot_general", params: ["precision=None"], out: ["f32[8,2]"], loc: [0, 11, 4, "layer"], group: 0, flops: 128, bytes: 256 },
          { id: 3, kind: "lit", op: "2.0", value: "2.0", out: ["f32[]"] },
          { id: 4, op: "mul", out: ["f32[8,2]"], loc: [0, 12, 4, "layer"], group: 0, flops: 16, bytes: 128 },
          { id: 5, op: "pjit", out: ["f32[8,2]"], loc: [0, 5, 4, "f"], flops: 16, bytes: 64,
            subs: [{ body: 1, role: "jit", in_map: [0], out_map: [0] }] },
          { id: 6, kind: "out", out: ["f32[8,2]"], loc: [0, 6, 2, "f"] },
        ],
        // not in port order on purpose: inEdges sorts
        edges: [
          [0, 2, "f32[8,4]", 0, 0], [1, 2, "f32[4,2]", 1, 0], [3, 4, "f32[]", 1, 0], [2, 4, "f32[8,2]", 0, 0],
          [4, 5, "f32[8,2]", 0, 0], [5, 6, "f32[8,2]", 0, 0],
        ],
        groups: [{ id: 0, parent: -1, label: "layer", fn: "layer", loc: [0, 4, 8, "f"], n_eqns: 2 }],
      },
      {
        id: 1, label: "jit(relu)", path: "f", n_eqns: 1, flops: 16, bytes: 64,
        inputs: [0], outputs: [2],
        nodes: [
          { id: 0, kind: "in", out: ["f32[8,2]"] },
          { id: 1, op: "max", out: ["f32[8,2]"], loc: [0, 20, 4, "relu"], flops: 16, bytes: 64 },
          { id: 2, kind: "out", out: ["f32[8,2]"] },
        ],
        edges: [[0, 1, "f32[8,2]", 0, 0], [1, 2, "f32[8,2]", 0, 0]],
        groups: [],
      },
    ],
  };
}

/** A graph of one body made of `nodes` and `edges` (`groups` optional), ids in order. */
export function oneBody(nodes, edges = [], extra = {}) {
  const n_eqns = nodes.filter((n) => !n.kind || n.kind === "eqn").length;
  return {
    version: 1, name: "g", root: 0, files: [],
    bodies: [{
      id: 0, label: "g", n_eqns, flops: 0, bytes: 0,
      inputs: nodes.filter((n) => n.kind === "in").map((n) => n.id),
      outputs: nodes.filter((n) => n.kind === "out").map((n) => n.id),
      nodes, edges, groups: [], ...extra,
    }],
  };
}

/** `count` equations in a chain: op0 -> op1 -> ... (no groups). */
export function chainGraph(count) {
  const nodes = Array.from({ length: count }, (_, i) => ({ id: i, op: `op${i}`, out: ["f32[2]"] }));
  const edges = nodes.slice(1).map((n) => [n.id - 1, n.id, "f32[2]", 0, 0]);
  return oneBody(nodes, edges);
}

/**
 * A train step's many inputs: 15 arrays under `params['w'][i]` plus `x` and `y`, and 15
 * outputs with the same avals as the params (new params) plus a loss.
 */
export function manyInputsGraph() {
  const nodes = [];
  for (let i = 0; i < 15; i++) nodes.push({ id: nodes.length, kind: "in", op: `params['w'][${i}]`, out: ["f32[4]"] });
  nodes.push({ id: nodes.length, kind: "in", op: "x", out: ["f32[8]"] });
  nodes.push({ id: nodes.length, kind: "in", op: "y", out: ["f32[8]"] });
  const eqn = nodes.length;
  nodes.push({ id: eqn, op: "sub", out: ["f32[8]"] });
  const edges = [[15, eqn, "f32[8]", 0, 0], [16, eqn, "f32[8]", 1, 0]];
  for (let i = 0; i < 15; i++) {
    const id = nodes.length;
    nodes.push({ id, kind: "out", out: ["f32[4]"] });
    edges.push([i, id, "f32[4]", 0, 0]);
  }
  const loss = nodes.length;
  nodes.push({ id: loss, kind: "out", out: ["f32[8]"] });
  edges.push([eqn, loss, "f32[8]", 0, 0]);
  return oneBody(nodes, edges);
}

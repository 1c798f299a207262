"""Call-path groups' labels and folds: same-named sibling calls numbered (`block[0]`,
`block[1]`), or named by the pytree leaf each reads (`adam_update['blocks'][3]['w1']`), and
runs of siblings that made the same ops marked as repeats (the view folds them).
"""

from __future__ import annotations

import re

from jaxviz.graph.model import Body, Group


def _leaf_labels(
    body: Body,
    siblings: list[Group],
    members: list[list[int]],
    counts: dict[str, int],
    src: dict[int, list[int]],
) -> dict[int, str]:
    """A call per pytree leaf (`jax.tree.map(adam_update, params, ...)`) is labelled by the
    leaf it reads, `adam_update['blocks'][3]['w1']`, not by its place among 400 calls: the
    path (less the argument's name) of the first named input each call reads, when every
    call of that function has one and they differ. A loop over `ps[k]` reads `[k]` as before.
    `src`: each node's sources (`_sources`)."""
    by_fn: dict[str, list[tuple[int, str]]] = {}
    for g in siblings:
        if counts[g.fn] < 2 or g.fn.endswith(" backward"):
            continue
        leaf = ""
        for i in members[g.id]:
            named = [body.nodes[j].op for j in src.get(i, ()) if body.nodes[j].kind == "in"]
            leaf = next((q for q in (_LEAF.sub("", n, count=1) for n in named) if q[:1] == "["), "")
            if leaf:
                break
        by_fn.setdefault(g.fn, []).append((g.id, leaf))
    out: dict[int, str] = {}
    for calls in by_fn.values():
        if not all(p for _, p in calls):
            continue
        # a call per layer reads each layer's leaves (`['blocks'][2]['w']`): the layer is `[2]`
        parts = [_KEY.findall(p) for _, p in calls]
        while all(len(x) > 1 for x in parts) and len({x[-1] for x in parts}) == 1:
            parts = [x[:-1] for x in parts]
        while all(len(x) > 1 for x in parts) and len({x[0] for x in parts}) == 1:
            parts = [x[1:] for x in parts]
        paths = ["".join(x) for x in parts]
        if len(set(paths)) == len(paths):
            out.update((gid, path) for (gid, _), path in zip(calls, paths))
    return out


def _sources(body: Body) -> dict[int, list[int]]:
    """Each node's source nodes, by the body's edges (made once per body: a transformer's
    step has ~50 parents of groups, and its edges were walked again for each, ~0.1 s)."""
    src: dict[int, list[int]] = {}
    for e in body.edges:
        src.setdefault(e.dst, []).append(e.src)
    return src


_LEAF = re.compile(r"^[A-Za-z_]\w*")  # the argument's name before a leaf's path
_KEY = re.compile(r"\[[^\]]*\]")  # one step of a leaf's path, `[2]` or `['w']`


def number_and_fold(body: Body, groups: list[Group], members: list[list[int]]) -> None:
    """Labels same-named siblings `block[0]`, `block[1]`...; marks runs of siblings that
    made the same ops (shapes aside) as repeats."""
    by_parent: dict[int, list[Group]] = {}
    for g in groups:
        g.n_eqns = len(members[g.id])
        by_parent.setdefault(g.parent, []).append(g)

    def signature(g: Group) -> tuple:
        # the same ops in the same order; shapes may differ (an MLP's layers of several
        # widths, a tree_map's update of every parameter leaf)
        return tuple(body.nodes[i].op for i in members[g.id])

    src: dict[int, list[int]] | None = None
    for siblings in by_parent.values():
        counts: dict[str, int] = {}
        for g in siblings:
            counts[g.fn] = counts.get(g.fn, 0) + 1
        seen: dict[str, int] = {}
        leaves: dict[int, str] = {}
        if any(n > 1 for n in counts.values()):
            if src is None:
                src = _sources(body)
            leaves = _leaf_labels(body, siblings, members, counts, src)
        for g in siblings:
            if counts[g.fn] > 1:
                k = seen.get(g.fn, 0)
                seen[g.fn] = k + 1
                fwd = g.fn[: -len(" backward")] if g.fn.endswith(" backward") else None
                if fwd is not None and counts.get(fwd) == counts[g.fn]:
                    # as many backward calls as forward ones: they run in reverse order
                    g.label = f"{fwd}[{counts[g.fn] - 1 - k}] backward"
                else:
                    g.label = g.fn + leaves.get(g.id, f"[{k}]")
        run_start, run_sig = None, None
        for g in siblings:
            sig = (g.fn, signature(g))
            if run_start is not None and sig == run_sig:
                g.repeat_of = run_start.id
                run_start.repeats += 1
            else:
                run_start, run_sig = g, sig

"""A function's program as a small signature, and the first difference of two.

Processes of one `jax.distributed` run must trace the same program for each function whose
arrays span them: a process that traced another shape waits forever in the program's
collectives (the classic multi-host hang). `signature(...)` is what each process publishes
at a function's first call; `first_difference(a, b)` says where two differ, at the user's
line: an argument's type (the line of the call), or the first equation whose result differs
(its line).

    >>> a = {"name": "step", "inputs": ["x: f32[8,8]"], "site": ["t.py", 20], "eqns": []}
    >>> b = dict(a, inputs=["x: f32[12,8]"])
    >>> first_difference(a, b, ("process 0", "process 1")).what
    'argument x is f32[8,8] on process 0, f32[12,8] on process 1'
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

from jaxviz import _compat
from jaxviz.graph.files import place

MAX_EQNS = 300  # equations a signature lists (its hash covers them all)


def signature(
    name: str, jaxpr: Any, arg_names: tuple[str, ...], site: tuple | None, spans: bool, n: int
) -> dict:
    """What one process publishes of its n-th program of function `name` (a few KB at most):
    its inputs' types, its top-level equations (primitive, result types, line) and a hash of
    them all; `spans`: its arguments span several processes' devices (a program every
    process must run alike)."""
    j = _compat.open_jaxpr(jaxpr)
    names = list(arg_names) if len(arg_names) == len(j.invars) else []
    inputs = [
        (f"{names[i]}: " if names else "") + _compat.short_type(v.aval)
        for i, v in enumerate(j.invars)
    ]
    h = hashlib.sha1("|".join(inputs).encode())
    eqns: list[list] = []
    for e in j.eqns:
        outs = ",".join(_compat.short_type(v.aval) for v in e.outvars)
        h.update(f"{e.primitive.name}:{outs};".encode())
        if len(eqns) < MAX_EQNS:
            frames = _compat.user_frames(e)
            f = frames[-1] if frames else None
            eqns.append([e.primitive.name, outs, f.file if f else "", f.line if f else 0])
    return {
        "name": name,
        "n": n,
        "inputs": inputs,
        "site": list(site[:2]) if site else ["", 0],
        "eqns": eqns,
        "n_eqns": len(j.eqns),
        "hash": h.hexdigest()[:16],
        "spans": spans,
    }


@dataclasses.dataclass(frozen=True)
class Difference:
    """Where two processes' programs of one function first differ."""

    what: str  # "argument x is f32[8,8] on process 0, f32[12,8] on process 1"
    file: str  # the line that made them differ: the call's, or the equation's
    line: int
    mine: str  # process 0's side, "f32[8,8]"
    theirs: str  # the other's


def first_difference(a: dict, b: dict, who: tuple[str, str]) -> Difference | None:
    """The first place two signatures of one function differ (None: the same program);
    `who` names their processes, ("process 0", "process 1")."""
    pa, pb = who
    if a.get("hash") is not None and a.get("hash") == b.get("hash"):
        return None
    site = a.get("site") or ["", 0]
    ia, ib = a.get("inputs", []), b.get("inputs", [])
    if len(ia) != len(ib):
        return Difference(
            f"it takes {len(ia)} arguments on {pa}, {len(ib)} on {pb}",
            site[0],
            site[1],
            str(len(ia)),
            str(len(ib)),
        )
    for x, y in zip(ia, ib):
        if x != y:
            arg, _, tx = x.rpartition(": ")
            ty = y.rpartition(": ")[2]
            named = f"argument {arg}" if arg else "an argument"
            return Difference(f"{named} is {tx} on {pa}, {ty} on {pb}", site[0], site[1], tx, ty)
    for x, y in zip(a.get("eqns", []), b.get("eqns", [])):
        if x[:2] != y[:2]:
            f, line = (y[2], y[3]) if y[3] else (x[2], x[3])
            what = (
                f"{x[0]} makes {x[1]} on {pa}, {y[0]} makes {y[1]} on {pb}"
                if x[0] != y[0]
                else f"{x[0]} makes {x[1]} on {pa}, {y[1]} on {pb}"
            )
            return Difference(what, f, line, x[1], y[1])
    na, nb = a.get("n_eqns", 0), b.get("n_eqns", 0)
    if na != nb:
        return Difference(
            f"{na} equations on {pa}, {nb} on {pb}", site[0], site[1], str(na), str(nb)
        )
    return Difference(
        f"{pa} and {pb} differ after their first {MAX_EQNS} equations", site[0], site[1], "", ""
    )


def short_place(file: str, line: int) -> str:
    """`train.py:20` (the file's base name: processes may run from different folders);
    a notebook cell as the user knows it, `cell [3]:10`."""
    if file.startswith("<"):
        return place(file, line or None)
    return f"{os.path.basename(file) or '?'}:{line}" if line else (os.path.basename(file) or "?")

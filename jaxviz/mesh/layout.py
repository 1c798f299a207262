"""The mesh and a value's layout on it, in the user's names.

>>> m = Mesh(("data", "model"), (2, 4), ("Auto", "Auto"))
>>> m.legend
'mesh data=2 x model=4 (Auto)'
>>> sharded_type("f32[4096,1024]", (("data",), ()))
'f32[4096@data,1024]'
>>> m.shard_type("f32[4096,1024]", (("data",), ("model",)))
'f32[2048,256]'
>>> m.axes_of([[0, 4], [1, 5], [2, 6], [3, 7]])
('data',)
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from typing import Any

from jaxviz import _compat

Axes = tuple[tuple[str, ...], ...]  # mesh axes per dimension: (("x",), ())


@dataclasses.dataclass(frozen=True)
class Mesh:
    """The device mesh a compiled program runs on (axis names, sizes, JAX's axis types)."""

    axes: tuple[str, ...]  # ("data", "model")
    sizes: tuple[int, ...]  # (2, 4)
    types: tuple[str, ...]  # ("Auto", "Auto"): Auto (GSPMD / Shardy), Explicit, Manual

    @property
    def size(self) -> int:
        return math.prod(self.sizes)

    @property
    def legend(self) -> str:
        """'mesh data=2 x model=4 (Auto)': the axes and their sizes, and JAX's axis types."""
        axes = " x ".join(f"{a}={k}" for a, k in zip(self.axes, self.sizes))
        kinds = sorted(set(self.types))
        return f"mesh {axes} ({', '.join(kinds)})"

    def size_of(self, axes: Iterable[str]) -> int:
        """Devices along `axes` (1 for none; an axis not of this mesh counts 1)."""
        sizes = dict(zip(self.axes, self.sizes))
        return math.prod(sizes.get(a, 1) for a in axes)

    def shard_type(self, typ: str, axes: Axes) -> str:
        """One device's part of `typ` ("f32[4096,1024]") sharded as `axes`."""
        m = _TYPE.fullmatch(typ)
        if m is None or not any(axes):
            return typ
        dims = [int(d) for d in m.group(2).split(",") if d]
        parts = [
            str(-(-d // self.size_of(axes[i])) if i < len(axes) else d) for i, d in enumerate(dims)
        ]
        return f"{m.group(1)}[{','.join(parts)}]"

    def axes_of(self, groups: list[list[int]] | None) -> tuple[str, ...]:
        """The mesh axes along which a collective's groups of partitions lie (partition p is
        the mesh's p-th device in its flat order): the axes whose coordinate varies within a
        group. () when unknown (groups not read, ids beyond the mesh)."""
        if not groups:
            return ()
        varies = [False] * len(self.axes)
        n = self.size
        for g in groups:
            coords = [self._coords(p) for p in g if 0 <= p < n]
            if len(coords) != len(g):
                return ()
            for i in range(len(self.axes)):
                if len({c[i] for c in coords}) > 1:
                    varies[i] = True
        return tuple(a for a, v in zip(self.axes, varies) if v)

    def _coords(self, p: int) -> tuple[int, ...]:
        out = []
        for k in reversed(self.sizes):
            out.append(p % k)
            p //= k
        return tuple(reversed(out))


_TYPE = re.compile(r"(~?[a-z][a-z0-9]*)\[([0-9,]*)\]")


def mesh_of(shardings: Iterable[Any]) -> Mesh | None:
    """The mesh of the first of `shardings` that has one of more than one device (None for a
    program on one device: nothing of the mesh is shown for it)."""
    for s in shardings:
        m = _compat.mesh_axes(s)
        if m is not None and math.prod(m.sizes) > 1:
            return Mesh(m.names, m.sizes, m.types)
    return None


sharded_type = _compat.sharded_type  # `f32[4096@x,1024]`


def axes_text(axes: tuple[str, ...]) -> str:
    """ "`x`", "`data` and `model`"; "the mesh's devices" when unknown."""
    if not axes:
        return "the mesh's devices"
    names = [f"`{a}`" for a in axes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def spec_text(axes: Axes) -> str:
    """P('x', None) as the user writes it (trailing None dropped)."""
    parts = [
        "None" if not a else repr(a[0]) if len(a) == 1 else "(" + ", ".join(map(repr, a)) + ")"
        for a in axes
    ]
    while parts and parts[-1] == "None":
        parts.pop()
    return f"P({', '.join(parts)})"

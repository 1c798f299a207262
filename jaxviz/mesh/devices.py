"""Memory per device on a mesh: which arguments every device holds whole (replicated), what
sharding them would take, and each buffer as one device's part of its global array.

An SPMD program is one program run on every device of the mesh: its compiled peak is the same
on each (a dimension the mesh does not divide evenly is padded to equal parts, and the padding
is in the figures), so the per-device figures of jaxviz.memory hold for every device.

    >>> from jaxviz.mesh.layout import Mesh
    >>> m = Mesh(("x",), (8,), ("Auto",))
    >>> (r,) = replicated(m, [("w", "f32[4096,4096]", "P()")])
    >>> r.sentence().split("; ")[1]
    'sharded over `x` it would take 8.0 MiB each'
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from collections.abc import Sequence

from jaxviz.format import fmt_bytes
from jaxviz.mesh.layout import Axes, Mesh, axes_text

_TYPE = re.compile(r"~?([a-z][a-z0-9]*)\[([0-9,]*)\]")
_ITEMSIZE = {"bool": 1, "pred": 1, "i8": 1, "u8": 1, "f16": 2, "bf16": 2, "i16": 2, "u16": 2,
             "f64": 8, "i64": 8, "u64": 8, "c64": 8, "c128": 16}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Replicated:
    """An argument whose bytes several devices hold the same of: whole on each device, or
    each of its shards on the devices of the mesh axes it is not sharded over."""

    path: str  # "params['w']"
    type: str  # "f32[4096,4096]": the global array
    bytes: int  # 67108864: on each device
    copies: int  # 8: devices holding the same bytes
    axes: tuple[str, ...]  # ("x",): the mesh axes it is replicated over
    sharded: int  # 8388608: on each device, sharded over `over` (0: no dimension divides)
    over: tuple[str, ...]  # ("x",): the axes the suggestion shards it over
    whole: bool = True  # each device holds the whole array (False: a shard, repeated)
    devices: int = 0  # 8: the mesh's devices (0: copies)
    global_bytes: int = 0  # 67108864: the array's own bytes (0: bytes)

    @property
    def total(self) -> int:
        """Its bytes on all the mesh's devices together."""
        return self.bytes * (self.devices or self.copies)

    @property
    def spare(self) -> int:
        """What the copies take: its bytes on all devices less the array's own."""
        return self.total - (self.global_bytes or self.bytes)

    def sentence(self) -> str:
        if self.whole:
            s = (f"`{self.path}`: {fmt_bytes(self.bytes)} on each of {self.copies} devices "
                 f"({fmt_bytes(self.total)} in all)")  # fmt: skip
        else:
            s = (f"`{self.path}`: each {fmt_bytes(self.bytes)} shard on {self.copies} devices "
                 f"(replicated over {axes_text(self.axes)}: {fmt_bytes(self.spare)} of copies "
                 f"on the {self.devices} devices)")  # fmt: skip
        if self.sharded:
            too = "" if self.whole else " too"
            over = axes_text(self.over)
            s += f"; sharded over {over}{too} it would take {fmt_bytes(self.sharded)} each"
        return s


def spec_axes_of_text(text: str, ndim: int) -> Axes | None:
    """Axes per dimension of a PartitionSpec's text ("P('x', None)", "PartitionSpec(('a',
    'b'),)"); None when it is not one (a device name, "")."""
    m = re.fullmatch(r"(?:P|PartitionSpec)\((.*)\)", text.strip(), re.S)
    if m is None:
        return None
    try:
        inner = m.group(1).strip().rstrip(",")
        entries = ast.literal_eval("(" + inner + ",)") if inner else ()
    except (ValueError, SyntaxError):
        return None
    out: list[tuple[str, ...]] = []
    for e in tuple(entries)[:ndim]:
        out.append(() if e is None else tuple(e) if isinstance(e, (tuple, list)) else (str(e),))
    return tuple(out) + ((),) * (ndim - len(out))


def dims_of(typ: str) -> tuple[str, list[int]] | None:
    m = _TYPE.fullmatch(typ)
    if m is None:
        return None
    return m.group(1), [int(d) for d in m.group(2).split(",") if d]


def _nbytes(dtype: str, dims: list[int]) -> int:
    return math.prod(dims) * _ITEMSIZE.get(dtype, 4)


def replicated(mesh: Mesh, args: Sequence[tuple[str, str, str]]) -> tuple[Replicated, ...]:
    """The arguments (path, global type, sharding text) that several devices hold the same
    bytes of, largest total first."""
    out = []
    for path, typ, sharding in args:
        d = dims_of(typ)
        axes = spec_axes_of_text(sharding, len(d[1])) if d is not None else None
        if d is None or axes is None:
            continue
        used = {a for dim in axes for a in dim}
        free = tuple(a for a in mesh.axes if a not in used and mesh.size_of((a,)) > 1)
        copies = mesh.size_of(free)
        if copies < 2:
            continue
        dtype, dims = d
        each = [-(-n // mesh.size_of(axes[i])) for i, n in enumerate(dims)]
        nbytes = _nbytes(dtype, each)
        over, sharded = _suggest(mesh, free, axes, dims, dtype)
        whole = not used
        out.append(Replicated(path, typ, nbytes, copies, free, sharded, over, whole,
                              mesh.size, _nbytes(dtype, dims)))  # fmt: skip
    return tuple(sorted(out, key=lambda r: (-r.spare, r.path)))


def _suggest(mesh: Mesh, free: tuple[str, ...], axes: Axes, dims: list[int], dtype: str
             ) -> tuple[tuple[str, ...], int]:  # fmt: skip
    """Shard a dimension over the free axes (all of them, else the largest one) where it
    divides evenly: (axes, bytes on each device then); ((), 0) when none does."""
    for over in (free, *sorted(((a,) for a in free), key=lambda a: -mesh.size_of(a))):
        k = mesh.size_of(over)
        for i, n in enumerate(dims):
            now = mesh.size_of(axes[i])
            if n % (now * k) == 0:
                each = [-(-m // mesh.size_of(axes[j])) for j, m in enumerate(dims)]
                each[i] = n // (now * k)
                return over, _nbytes(dtype, each)
    return (), 0


def part_of(mesh: Mesh, local: str, whole: str, axes: Axes | None = None) -> str:
    """ "1/8 on `x`": which part of `whole` (the global type) `local` (one device's) is; ""
    when it is the whole array or the two do not match. `axes`: the sharding, when known
    (else each split dimension's factor names the mesh axis of that size)."""
    lo, gl = dims_of(local), dims_of(whole)
    if lo is None or gl is None or len(lo[1]) != len(gl[1]) or lo[1] == gl[1]:
        return ""
    factor, names = 1, []
    for i, (a, b) in enumerate(zip(lo[1], gl[1])):
        if a == b:
            continue
        if a <= 0 or a > b:
            return ""
        k = -(-b // a)
        factor *= k
        if axes is not None and i < len(axes) and axes[i]:
            names += list(axes[i])
        else:
            named = [x for x, s in zip(mesh.axes, mesh.sizes) if s == k]
            names += named[:1] or ["?"]
    on = " and ".join(f"`{n}`" for n in names)
    return f"1/{factor} on {on}"

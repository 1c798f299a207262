"""Numbers as jaxviz prints them: one byte formatter, one scale formatter, one for seconds.

The JS view formats bytes the same way (js/src/graph/format.js): binary units, whole bytes
below 1 KiB, one decimal above.

    >>> fmt_bytes(3 * 2**20), fmt_bytes(512), fmt_bytes(None)
    ('3.0 MiB', '512 B', 'unavailable')
    >>> human(1234567, "FLOP")
    '1.2 MFLOP'
    >>> fmt_seconds(0.042), fmt_seconds(1.5)
    ('42 ms', '1.50 s')
    >>> fold_avals(["~f32[3,5]"] * 400 + ["f32[2,3]"])
    '400 x ~f32[3,5], f32[2,3]'
"""

from __future__ import annotations

from collections.abc import Sequence

_BYTE_UNITS = ("KiB", "MiB", "GiB", "TiB")


def fmt_bytes(n: float | None) -> str:
    """`3.8 MiB`, `512 B`; `unavailable` for None (never 0)."""
    if n is None:
        return "unavailable"
    n = float(n)
    if abs(n) < 1024:
        return f"{n:.0f} B"
    for unit in _BYTE_UNITS:
        n /= 1024
        if abs(n) < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


def human(n: float, unit: str) -> str:
    """A count with a decimal prefix: 1234567 -> '1.2 M' + unit."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {prefix}{unit}"
    return f"{n:.0f} {unit}"


def fmt_seconds(s: float) -> str:
    """`42 ms` below a second, `1.50 s` above."""
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.2f} s"


FOLD_AT = 8  # a signature of more arguments than this is folded by aval


def fold_avals(avals: Sequence[str], names: Sequence[str] = (), at: int = FOLD_AT) -> str:
    """A signature as one short line: `x: f32[8], w: f32[8,4]` (`names`, when given) while it
    has at most `at` arguments, else its avals counted, in the order first seen:
    `400 x ~f32[3,5], f32[2,3]`."""
    if len(avals) <= at:
        named = list(names) or [""] * len(avals)
        return ", ".join(f"{n}: {a}" if n else a for n, a in zip(named, avals))
    counts: dict[str, int] = {}
    for a in avals:
        counts[a] = counts.get(a, 0) + 1
    return ", ".join(f"{k} x {a}" if k > 1 else a for a, k in counts.items())

"""key-reuse: where a reuse belongs, the line the user must change, from the two
consumptions' user frames (the static and the runtime findings both ask).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from jaxviz import _compat
from jaxviz.capture.places import is_library, is_user_file, library_label


def chain_frames(chain: tuple) -> list:
    """The user frames of the innermost equation of a chain that has any, outermost first."""
    for eqn in reversed(chain):
        frames = _compat.user_frames(eqn)
        if frames:
            return frames
    return []


class ReusePlace(NamedTuple):
    """Where the user must change something for one reuse, from the two consumptions'
    user frames (outermost first)."""

    where: tuple[str, int]  # the line to change
    first: tuple[str, int] | None  # the first consumption's line there (None in a loop)
    loop: bool  # the same code consumed the key again: a Python loop ran it once more
    sampler: tuple[str, int, str] | None  # (file, line, function) of the consuming call, when
    # it is not `where` (inside the helper or library the user's line called)
    frame: Any = None  # in a loop: the frame (_compat.UserFrame) whose loop ran the call again
    # the installed package that consumed the key twice within one call of the user's line
    # (every user frame the same, not in a loop; the stacks part inside the library's code):
    # numpyro's MCMC.run tracing the model with a key, then drawing initial values from it
    library: str | None = None


def _same_frame(a: Any, b: Any) -> bool:
    return a.code_id == b.code_id and a.lasti == b.lasti


def _in_loop(f: Any) -> bool:
    return any(a <= f.lasti <= b for a, b in _compat.loop_ranges(f.code_id))


def reuse_place(
    first: Sequence[Any], second: Sequence[Any], top: str | None = None
) -> ReusePlace | None:
    """The line to change for a key consumed at `first` and again at `second` (user frames,
    `_compat.UserFrame`, outermost first; None without frames).

    Two calls of one helper (`a = noise(key); b = noise(key)`) differ first in the caller:
    the line to change is the second call there, not the sampler inside the helper. When
    every frame is the same, one piece of code ran twice: the innermost frame inside a loop
    (`for p in layers: x = dropout(x, key)`) is where a fresh key must be split. A library's
    frames are passed by, outwards, to the user's line that called it.
    """
    if not second:
        return None
    k = 0
    while k < len(first) and k < len(second) and _same_frame(first[k], second[k]):
        k += 1
    loop = False
    if k == len(first) == len(second):
        at = next((i for i in range(len(second) - 1, -1, -1) if _in_loop(second[i])), None)
        loop = at is not None
        idx = at if at is not None else len(second) - 1
    else:
        idx = min(k, len(second) - 1)
    j = idx
    while j > 0 and not is_user_file(second[j].file, top):
        j -= 1
    if not is_user_file(second[j].file, top):
        j = idx
    w = second[j]
    one = None
    if not loop and j >= k and first:
        f = first[min(j, len(first) - 1)]
        one = (f.file, f.line)
    inner = second[-1]
    sampler = (
        (inner.file, inner.line, inner.fn.rsplit(".", 1)[-1])
        if (inner.file, inner.line) != (w.file, w.line)
        else None
    )
    library = None
    if (
        not loop
        and k < min(len(first), len(second))
        and is_library(first[k].file)
        and is_library(second[k].file)
        and (
            (j < k and is_user_file(w.file, top) and not _in_loop(w))  # one call of the user's
            or not any(is_user_file(f.file, top) for f in second)  # a library's own jaxpr
        )
    ):
        library = library_label(second[k].file)
    return ReusePlace((w.file, w.line), one, loop, sampler, second[idx] if loop else None, library)

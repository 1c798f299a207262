"""Out of memory, said before the run: a program XLA has just compiled for a watched cell
whose compiled peak exceeds its device's memory gets one line on stderr, before JAX runs it.

On CPU the run then fails late (the result holds "Out of memory allocating ..." until it is
read) or, where the peak is near the machine's RAM, the kernel may be killed before any
finding is shown; on a GPU it fails at the run. The line says it first, at the cell's line:

    jaxviz: line 3: jit(step) needs 596.0 GiB at its compiled peak, more than this
    machine's RAM (23.0 GiB): its run will fail (or the process be killed)

After the cell, the `out-of-memory` finding (jaxviz.memory.oom) explains the peak, buffer by
buffer. The check reads XLA's compiled memory statistics of the executable JAX made anyway
(`_compat.watching_compiles`): nothing is compiled for it, no array is read, and the device's
size is asked once per platform and cell.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from jaxviz import _compat
from jaxviz.format import fmt_bytes
from jaxviz.memory.live import device_memory


class PreRunCheck:
    """An observer of the Recorder (`on_compiled`): each freshly compiled program's compiled
    peak against its device's memory; over it, a line on stderr (sys.stderr as it is then:
    a cell's redirection holds it too)."""

    def __init__(self, filename: str | None = None) -> None:
        # a cell's lines by number, a script's by its name and number
        self._file = "" if not filename or filename.startswith("<") else os.path.basename(filename)
        self._limits: dict[str, tuple[int, str] | None] = {}

    def on_compiled(self, name: str, executable: Any, line: int) -> None:
        got = _compat.compiled_peak(executable)
        if got is None:
            return
        peak, platform = got
        if platform not in self._limits:
            self._limits[platform] = device_memory(platform)
        limit = self._limits[platform]
        if limit is None or peak <= limit[0]:
            return
        total, what = limit
        where = "" if not line else f"{self._file}:{line}: " if self._file else f"line {line}: "
        out = sys.stderr
        out.write(
            f"jaxviz: {where}{name} needs {fmt_bytes(peak)} at its compiled peak, more than "
            f"{what} ({fmt_bytes(total)}): its run will fail (or the process be killed)\n"
        )
        out.flush()

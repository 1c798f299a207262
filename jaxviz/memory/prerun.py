"""Out of memory, said before the run: a program XLA has just compiled for a watched cell
whose compiled peak exceeds its device's memory gets one line on stderr, before JAX runs it.

On CPU the run then fails late (the result holds "Out of memory allocating ..." until it is
read) or, where the peak is near the machine's RAM, the kernel may be killed before any
finding is shown; on a GPU it fails at the run. The line says it first, at the cell's line:

    jaxviz: cell [4]:3: jit(step) needs 596.0 GiB at its compiled peak, more than this
    machine's RAM (23.0 GiB): its run will fail (or the process be killed)

(a notebook's cell as its tracebacks and findings name it, a script by its name, `line 3`
for a source of no file). The peak counts the program's arguments, which the caller holds
already. Arguments that alone exceed the device's memory were never allocated (an array that
holds an error: the call that made it ran out of memory, and that call got the line), so such
a program is judged by what it allocates itself, its outputs and temporaries: `y[0, :3]` of
that 596 GiB result is no second program over the machine's memory.

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
from jaxviz.graph.files import file_label, place
from jaxviz.memory.live import device_memory


class PreRunCheck:
    """An observer of the Recorder (`on_compiled`): each freshly compiled program's compiled
    peak against its device's memory; over it, a line on stderr (sys.stderr as it is then:
    a cell's redirection holds it too)."""

    def __init__(self, filename: str | None = None) -> None:
        self._file = filename or ""
        self._limits: dict[str, tuple[int, str] | None] = {}

    def on_compiled(self, name: str, executable: Any, line: int) -> None:
        got = _compat.compiled_peak(executable)
        if got is None:
            return
        peak, args, platform = got
        if platform not in self._limits:
            self._limits[platform] = device_memory(platform)
        limit = self._limits[platform]
        if limit is None or peak <= limit[0] or (args > limit[0] and peak - args <= limit[0]):
            return
        total, what = limit
        out = sys.stderr
        out.write(
            f"jaxviz: {self._where(line)}{name} needs {fmt_bytes(peak)} at its compiled peak, more "
            f"than {what} ({fmt_bytes(total)}): its run will fail (or the process be killed)\n"
        )
        out.flush()

    def _where(self, line: int) -> str:
        """`cell [4]:3: ` in a notebook (the label %%jaxtrace gave the cell's file), `big.py:3: `
        for a script, `line 3: ` for a source of no file (trace_cell's own `<cell 1>`)."""
        if not line:
            return ""
        label = file_label(self._file) if self._file else ""
        if label != self._file and not label.startswith("<"):
            return f"{place(self._file, line)}: "
        if not self._file or self._file.startswith("<"):
            return f"line {line}: "
        return f"{os.path.basename(self._file)}:{line}: "

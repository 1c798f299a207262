"""XLA's own buffer assignment, read from a dump: the reference jaxviz's simulated peak is
checked against (bench/accel_memory_check.py, tests/test_buffers_tpu.py).

`lowered.compile(compiler_options={"xla_dump_to": DIR})` writes, per module,
`*after_optimizations-buffer-assignment.txt`: every allocation XLA makes, with its size, its
memory space (`color N`; 0 is the device's main memory, HBM on a TPU) and its kind:

    allocation 25: size 65536, parameter 6, shape |f32[256,64]| at ShapeIndex {}:
    allocation 1: size 65536, maybe-live-out:
    allocation 877: size 3195392, preallocated-temp:
    allocation 878: size 5317120, color 1, preallocated-temp:
    allocation 0: size 512, thread-local:

XLA's program needs, in main memory, its parameters, its outputs (an output written into
a donated parameter shares the parameter's allocation: `parameter N, ... maybe-live-out`),
its constants and its temporaries. The temporaries are packed by XLA's heap simulator into
allocations that hold everything live at once, so their size is XLA's peak of temporaries,
fragmentation included. Thread-local allocations hold a called computation's scalars on
the core that runs it (a reduction's accumulator) and are listed apart.

Reading a dump costs a compile with the dump option: a check script may do that, jaxviz
itself never compiles a user's program a second time for it.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re

_ALLOC = re.compile(r"^allocation (\d+): size (\d+), (.*)$")


@dataclasses.dataclass
class Assignment:
    """Bytes of XLA's allocations in one memory space, by kind."""

    parameter: int = 0  # parameters (a donated one holds its output too)
    output: int = 0  # outputs not written into a parameter
    temp: int = 0  # temporaries (the heap simulator's packed allocations)
    constant: int = 0
    thread_local: int = 0
    count: int = 0  # allocations

    @property
    def total(self) -> int:
        """Parameters + outputs + temporaries + constants: what the program holds at its
        peak in this memory space (XLA's temporaries are allocated for the whole run)."""
        return self.parameter + self.output + self.temp + self.constant

    @property
    def report_total(self) -> int:
        """The memory-usage report's "Total bytes": every allocation, thread-local too."""
        return self.total + self.thread_local


def read_assignment(text: str) -> dict[int, Assignment]:
    """{memory space: Assignment} of a `*-buffer-assignment.txt` dump."""
    out: dict[int, Assignment] = {}
    for line in text.splitlines():
        m = _ALLOC.match(line)
        if m is None:
            continue
        size, rest = int(m.group(2)), m.group(3)
        color = re.search(r"\bcolor (\d+)", rest)
        a = out.setdefault(int(color.group(1)) if color else 0, Assignment())
        a.count += 1
        if re.search(r"\bparameter \d+", rest):
            a.parameter += size
        elif "constant" in rest:
            a.constant += size
        elif "thread-local" in rest:
            a.thread_local += size
        elif "maybe-live-out" in rest or "output shape" in rest:
            a.output += size
        else:
            a.temp += size
    return out


def find_dump(directory: str, module: str = "") -> str | None:
    """The buffer-assignment file of the largest module in `directory` (a jitted step's
    dump holds small helper modules too); module: a part of its file name to prefer."""
    pattern = os.path.join(directory, "**", "*after_optimizations-buffer-assignment.txt")
    files = [f for f in glob.glob(pattern, recursive=True) if module in os.path.basename(f)]
    if not files:
        return None
    return max(files, key=os.path.getsize)


def optimized_hlo(assignment_file: str) -> str:
    """The module's optimised HLO text written beside its buffer assignment."""
    base = assignment_file.replace("-buffer-assignment.txt", ".txt")
    with open(base) as f:
        return f.read()

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

Reading a dump costs a compile with the dump option: a check script may do that; jaxviz
itself reads one only of a compile that failed (a TPU out of memory at compile time, no
executable to ask: jaxviz.memory.oom), and the reader is its own (jaxviz._compat.xla).
"""

from __future__ import annotations

import glob
import os

from jaxviz._compat.xla import Assignment as Assignment  # the reader is the product's
from jaxviz._compat.xla import read_assignment as read_assignment


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

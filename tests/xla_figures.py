"""XLA's own memory figures for the device the suite runs on: what the memory tests compare
jaxviz's with. On CPU that is `compiled.memory_analysis()` (the tests assert its figures as
they always did). On a TPU it is not: memory_analysis() counts 0 B of temporaries for
programs that XLA's buffer assignment gives MiBs of (shared/ACCELERATOR.md), so the
reference there is the buffer assignment itself, read from an `xla_dump_to` dump of the same
lowering (tools/xla_dump.py, as bench/accel_memory_check.py does); and sizes there are the
compiled layouts' (a TPU pads f32[1000,1000] to 1000x1024 elements).
"""
from __future__ import annotations

import re
import tempfile

import jax
import pytest

from jaxviz._compat import entry_parameters, hlo_leaves
from tools.xla_dump import find_dump, read_assignment

PLATFORM = jax.default_backend()  # "cpu", "tpu", "gpu"
ON_CPU = PLATFORM == "cpu"


def _kernel_grants_any_allocation() -> bool:
    """vm.overcommit_memory=1: Linux maps any size asked for and kills a process only when
    it touches more pages than the host has."""
    try:
        with open("/proc/sys/vm/overcommit_memory") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


# The CPU out-of-memory tests ask XLA for 640 GB and 1 TiB buffers and expect its "Out of
# memory allocating ..." error. On a host whose kernel grants any allocation, XLA gets the
# memory, the sort writes into it, and the host's OOM killer ends the whole run. (Linux's
# default, 0, refuses one allocation larger than the host's memory: so do this machine and
# the TPU host.)
refused_allocation = pytest.mark.skipif(
    ON_CPU and _kernel_grants_any_allocation(),
    reason="this host's kernel grants any allocation (vm.overcommit_memory=1): XLA's CPU "
           "out-of-memory error would be the kernel's OOM killer, which ends the run")

# The first words of XLA's out-of-memory status on each platform (seen on a TPU v5e,
# jax 0.10.2: raised at compile time; on CPU at run time)
OOM_WORDS = {
    "cpu": "RESOURCE_EXHAUSTED: Out of memory",
    "tpu": "RESOURCE_EXHAUSTED: Ran out of memory on HBM",
}


def assignment_total(jitted, *args, **kwargs) -> int:
    """Bytes XLA's buffer assignment allocates in the device's main memory for
    `jitted(*args)` (parameters, outputs, temporaries, constants), from a dump of one more
    compile of its lowering; also for a lowering whose compile runs out of memory (XLA
    writes the dump before it fails)."""
    lowered = jitted.lower(*args, **kwargs)
    with tempfile.TemporaryDirectory(prefix="jaxviz-test-xla-") as d:
        try:
            lowered.compile(compiler_options={"xla_dump_to": d})
        except Exception as e:
            if "RESOURCE_EXHAUSTED" not in str(e):
                raise
        dump = find_dump(d)
        assert dump is not None, f"XLA wrote no buffer assignment under {d}"
        with open(dump) as fh:
            return read_assignment(fh.read())[0].total


def reference_peak(report, jitted, *args) -> int:
    """XLA's peak for a MemoryReport of `jitted(*args)`: memory_analysis()'s total on CPU,
    the buffer assignment's elsewhere."""
    if ON_CPU:
        return report.xla_total
    return assignment_total(jitted, *args)


def off_reference(report, jitted, *args) -> float:
    """report.peak_bytes / XLA's peak - 1 (on CPU exactly report.reconciled)."""
    if ON_CPU:
        return report.reconciled
    return report.peak_bytes / reference_peak(report, jitted, *args) - 1


def parameter_bytes(hlo: str) -> list[int]:
    """Bytes of each parameter of a compiled module as laid out on its device."""
    return [sum(leaf.bytes for leaf in hlo_leaves(p)) for p in entry_parameters(hlo)]


def compiled_parameter_bytes(jitted, *args) -> list[int]:
    """The same for `jitted(*args)`, from its compiled program's text."""
    return parameter_bytes(jitted.lower(*args).compile().as_text())


def oom_words(error: BaseException | str) -> str:
    """The words of XLA's out-of-memory status this platform raised, as a test expects them
    in the cell's output: its own table row, else the status's first clause."""
    words = OOM_WORDS.get(PLATFORM)
    if words:
        return words
    m = re.search(r"RESOURCE_EXHAUSTED: [^,.(]*", str(error))
    return m.group(0).strip() if m else "RESOURCE_EXHAUSTED"

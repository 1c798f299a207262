"""Many processes, one view: real `jax.distributed` runs of 2 and 4 CPU processes on
localhost (gloo collectives), each under `python -m jaxviz`, merged on process 0 through
JAX's coordination service (jaxviz.distributed, docs/multiprocess.md).

Every wait is bounded; every process a test starts is killed when it ends. Where this
machine allows no sockets (the TPU machine), the tests skip and say so.
"""
from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

SCRIPT = pathlib.Path(__file__).parent / "data" / "multiprocess" / "data_parallel.py"
RUN_S = 240  # bound on a whole run (2 cores shared: JAX's start and compiles are slow)
HANG_S = 120  # bound on the mismatch finding's arrival while the processes hang


def _free_port() -> int:
    try:
        with socket.socket() as s:
            s.bind(("localhost", 0))
            return s.getsockname()[1]
    except OSError as e:  # the TPU machine: no sockets at all
        pytest.skip(f"no sockets on this machine ({e}): jax.distributed cannot run here")


@pytest.fixture(scope="module", autouse=True)
def sockets():
    """The file's tests run one after another on one worker (tests/scheduling.py: each starts
    2 to 4 JAX processes on a shared machine), and skip where the machine has no sockets."""
    _free_port()


class Run:
    """N processes of `python -m jaxviz data_parallel.py I N PORT MODE`, their output in
    files; `kill()` ends them all."""

    def __init__(self, tmp: pathlib.Path, n: int, mode: str = "", devices: int = 1,
                 jaxviz_args: tuple[str, ...] = (), script: pathlib.Path | None = None):
        port = _free_port()
        env = dict(os.environ, PYTHONUNBUFFERED="1", JAX_PLATFORMS="cpu",
                   XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
        self.out = [tmp / f"out{i}.txt" for i in range(n)]
        self.err = [tmp / f"err{i}.txt" for i in range(n)]
        self.procs = []
        for i in range(n):
            cmd = ([sys.executable, str(script), str(i), str(n), str(port)] if script else
                   [sys.executable, "-m", "jaxviz", *jaxviz_args, str(SCRIPT), str(i), str(n),
                    str(port), mode])
            with open(self.out[i], "w") as o, open(self.err[i], "w") as e:
                self.procs.append(subprocess.Popen(cmd, stdout=o, stderr=e, env=env, cwd=tmp))

    def wait(self, timeout: float = RUN_S) -> None:
        deadline = time.monotonic() + timeout
        for p in self.procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))

    def wait_for(self, text: str, files: list[pathlib.Path], timeout: float) -> str:
        """Waits (bounded) until `text` is in one of `files`; that file's text."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for f in files:
                got = f.read_text()
                if text in got:
                    return got
            time.sleep(0.2)
        raise AssertionError(f"{text!r} not printed in {timeout} s:\n" + self.dump())

    def dump(self) -> str:
        return "\n".join(f"--- {f.name}\n{f.read_text()[-3000:]}" for f in self.out + self.err)

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait(timeout=30)


@pytest.fixture
def runs():
    started: list[Run] = []
    yield started
    for r in started:
        r.kill()


def test_two_processes_of_two_devices_merge_into_one_report_on_process_0(tmp_path, runs):
    run = Run(tmp_path, 2, devices=2, jaxviz_args=("--html", "report.html"))
    runs.append(run)
    run.wait()
    out0, out1 = run.out[0].read_text(), run.out[1].read_text()
    page = (tmp_path / "report.html").read_text()  # process 0's: the others write none
    assert '<details open class="jaxviz-processes">' in page
    assert "step: the same program on 2 of 2 processes" in page
    assert run.procs[0].returncode == 0, run.dump()
    assert "jaxviz: 2 processes, merged on process 0" in out0, run.dump()
    assert "process 0  cpu:0, cpu:1" in out0 and "process 1  cpu:" in out0
    assert "step: the same program on 2 of 2 processes" in out0
    assert "on each process's own devices (not compared): _normal, _bernoulli" in out0
    # a finding every process made: once, with "on 2 of 2 processes"
    assert out0.count("key-reuse") == 1, out0
    assert "key-reuse" in out0 and "[on 2 of 2 processes]" in out0
    assert "memory (per device):" in out0 and "compiled peak" in out0
    # process 1 prints its own output and one line: no second report
    assert "process 1: loss" in out1
    assert "went to process 0, which prints the merged report" in out1
    assert "key-reuse" not in out1
    size = out1.split("its summary (")[1].split(",")[0]
    assert f"summaries: process 1 {size}" in out0  # the bytes it sent, said on both sides


def test_four_processes_one_report_and_each_finding_once(tmp_path, runs):
    run = Run(tmp_path, 4)
    runs.append(run)
    run.wait()
    out0 = run.out[0].read_text()
    assert "jaxviz: 4 processes, merged on process 0" in out0, run.dump()
    for i in range(4):
        assert f"  process {i}  cpu:" in out0
    assert "step: the same program on 4 of 4 processes" in out0
    assert out0.count("key-reuse") == 1 and "[on 4 of 4 processes]" in out0
    assert "STRAGGLER" not in out0  # no process sleeps: none named
    for i in range(1, 4):
        assert "key-reuse" not in run.out[i].read_text()


def test_a_shape_difference_is_named_while_the_processes_hang(tmp_path, runs):
    run = Run(tmp_path, 2, mode="shape")
    runs.append(run)
    err0 = run.wait_for("program-mismatch", [run.err[0]], HANG_S)
    assert all(p.poll() is None for p in run.procs), "the processes were meant to hang"
    line = next(x for x in err0.splitlines() if "program-mismatch" in x)
    call = next(i for i, x in enumerate(SCRIPT.read_text().splitlines(), 1)
                if "= step(w, batch)" in x)
    assert line.startswith(f"jaxviz: data_parallel.py:{call}: error: program-mismatch: "), line
    assert "argument batch is f32[8,8] on process 0, f32[12,8] on process 1" in line
    assert "step" in line
    assert "program-mismatch" not in run.err[1].read_text()  # process 0 tells it, once


def test_a_program_one_process_alone_traced_anew_is_named_while_they_hang(tmp_path, runs):
    """Process 1 alone recompiles step (a bigger batch at its 4th call): process 0 never
    traces that program. JAX 0.12.1 hangs in it: after GRACE seconds the watchdog names it,
    against process 0's last program of step. JAX 0.10.2 runs on, the two programs
    exchanging mismatched shards: the merged report names it at the end."""
    run = Run(tmp_path, 2, mode="recompile")
    runs.append(run)
    got = run.wait_for("program-mismatch", [run.err[0], run.out[0]], HANG_S)
    line = next(x for x in got.splitlines() if "program-mismatch" in x)
    assert "process 1 traced a new program of step (its 3rd) that process 0 " in line
    assert "argument batch is f32[8,8] on process 0, f32[48,8] on process 1" in line


def test_a_killed_process_is_named_missing(tmp_path, runs):
    run = Run(tmp_path, 2, mode="die", jaxviz_args=("--process-wait", "5"))
    runs.append(run)
    out0 = run.wait_for("MISSING", [run.out[0]], RUN_S)
    assert "process 1  MISSING: sent nothing in 5 s" in out0
    assert "process 0  cpu:0" in out0
    assert "[on process 0 (of 2)]" in out0  # the findings of the one that reported


def test_a_process_sleeping_in_its_loop_is_named_the_straggler(tmp_path, runs):
    run = Run(tmp_path, 4, mode="slow")
    runs.append(run)
    run.wait()
    out0 = run.out[0].read_text()
    assert "straggler: process 1 starts each call of step" in out0, run.dump()
    stragglers = [x for x in out0.splitlines() if "<- STRAGGLER" in x]
    assert len(stragglers) == 1 and stragglers[0].startswith("  process 1  "), out0


NOTEBOOK = SCRIPT.parent / "notebook_cells.py"


def test_a_jaxtrace_cell_of_process_0_shows_the_merged_view(tmp_path, runs):
    """One IPython shell per process runs the same notebook's cells: process 0's %%jaxtrace
    cell shows the processes merged (each finding once); process 1's shows its own cell."""
    run = Run(tmp_path, 2, script=NOTEBOOK)
    runs.append(run)
    run.wait()
    out0, out1 = run.out[0].read_text(), run.out[1].read_text()
    assert "jaxviz: 2 processes, merged on process 0" in out0, run.dump()
    assert "<lambda>: the same program on 2 of 2 processes" in out0
    merged = out0.split("merged on process 0", 1)[1]
    assert "key-reuse" in merged and "[on 2 of 2 processes]" in merged
    assert "merged on process 0" not in out1 and "process 1 done" in out1


def test_profile_of_a_multi_process_script_starts_after_its_initialize(tmp_path, runs):
    """--profile starts JAX's profiler at the script's first JAX work, after its
    jax.distributed.initialize (which must come before JAX's backends start): each
    process's device and collective time are side by side."""
    run = Run(tmp_path, 2, jaxviz_args=("--profile",))
    runs.append(run)
    run.wait()
    out0 = run.out[0].read_text()
    assert "must be called before" not in run.err[0].read_text() + run.err[1].read_text()
    assert run.procs[0].returncode == 0, run.dump()
    for p in (0, 1):
        line = next(x for x in out0.splitlines() if x.startswith(f"  process {p}  step: "))
        assert "; device " in line and ", collectives " in line, line

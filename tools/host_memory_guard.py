"""Keeps `make test-device` from running the accelerator host out of memory.

On the TPU v5e host (13 cores, 46 GiB, of which the lending tool allows 40), the suite's two
halves run together: the files that need the chip in one process, the rest beside it as
CPU-only pytest-xdist workers. Three such runs were killed whole by the host's memory limit
(December 2026), leaving no log to say which test took the memory; the device half alone,
file group by file group, never took more than 7 GiB of the host's memory.

This guard watches the host's headroom (MemAvailable, and the cgroup's memory.max -
memory.current where one is set) ten times a second. Below `--warn`, it logs the largest
processes; below `--kill`, it kills the largest Python process that is not the device's (its
command line holds `--on-device`) nor itself. pytest-xdist then names the test its worker
was running ("worker 'gw1' crashed while running 'tests/...::test_x'"), and the run goes on.

    python tools/host_memory_guard.py LOG [--warn MiB] [--kill MiB] [--running DIR]

With --running DIR (where tests/conftest.py writes, per process, the test it runs: the
environment's JAXVIZ_TEST_RUNNING_DIR), the log names the test of each process it kills.

It runs until killed; LOG ends with the lowest headroom it saw.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def _cgroup_headroom_mib() -> int | None:
    try:
        rel = open("/proc/self/cgroup").read().strip().splitlines()[0].split("::")[-1]
        base = "/sys/fs/cgroup" + rel
        limit = open(base + "/memory.max").read().strip()
        if not limit.isdigit():
            return None
        return (int(limit) - int(open(base + "/memory.current").read())) >> 20
    except (OSError, IndexError, ValueError):
        return None


def _headroom_mib() -> int:
    with open("/proc/meminfo") as f:
        avail = int(f.read().split("MemAvailable:")[1].split()[0]) >> 10
    cg = _cgroup_headroom_mib()
    return avail if cg is None else min(avail, cg)


def _processes() -> list[tuple[int, int, str]]:
    """(rss MiB, pid, command line) of every process, largest first."""
    rows = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/statm") as f:
                rss = int(f.read().split()[1]) * PAGE_KIB >> 10
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").replace(b"\n", b" ").decode(errors="replace").strip()
        except (OSError, IndexError, ValueError):
            continue
        rows.append((rss, int(pid), cmd))
    return sorted(rows, reverse=True)


def _running(folder: str, pid: int) -> str:
    try:
        with open(os.path.join(folder, str(pid))) as f:
            return f"\n  it was running {f.read().strip()}"
    except OSError:
        return ""


def _gone(pid: int, limit: float = 10.0) -> None:
    """Until `pid` has exited and its memory is back (at most `limit` seconds)."""
    end = time.monotonic() + limit
    while time.monotonic() < end and os.path.exists(f"/proc/{pid}/statm"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    time.sleep(0.2)  # (a zombie holds no memory)
                    return
        except OSError:
            return
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--warn", type=int, default=12_000, help="MiB of headroom: log")
    ap.add_argument("--kill", type=int, default=6_000, help="MiB of headroom: kill")
    ap.add_argument("--running", default="", help="folder of each process's running test")
    a = ap.parse_args()
    low, last_log = 1 << 40, 0.0
    with open(a.log, "a", buffering=1) as log:
        log.write(f"guarding from {time.strftime('%T')}: headroom {_headroom_mib()} MiB\n")
        try:
            while True:
                room = _headroom_mib()
                low = min(low, room)
                now = time.monotonic()
                if room < a.warn and now - last_log > 3:
                    last_log = now
                    log.write(f"{time.strftime('%T')} headroom {room} MiB; largest:\n")
                    log.writelines(f"  {r} MiB {p} {c[:200]}\n" for r, p, c in _processes()[:5])
                if room < a.kill:
                    for rss, pid, cmd in _processes():
                        # (a Python process of the run: a worker or a test's child; never the
                        # device's, nor anything else of the machine's)
                        if "python" not in cmd or "--on-device" in cmd or "host_memory_guard" in cmd:
                            continue
                        os.kill(pid, signal.SIGKILL)
                        log.write(f"{time.strftime('%T')} headroom {room} MiB: killed {pid} "
                                  f"({rss} MiB) {cmd[:200]}{_running(a.running, pid)}\n")
                        _gone(pid)  # (its memory back before another is judged)
                        break
                time.sleep(0.1)
        finally:
            log.write(f"lowest headroom {low} MiB\n")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # (the log's last line, then out)
    main()

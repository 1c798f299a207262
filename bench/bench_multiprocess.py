"""A jax.distributed run under jaxviz (docs/multiprocess.md): what the one exchange at the
end costs with 4 processes (goal: under 200 ms on process 0), and what the multi-process
observers add to each step of a loop (goal: 0).

1. Four `python -m jaxviz tests/data/multiprocess/data_parallel.py` processes on localhost
   (gloo), three times: process 0's end (its summary, reading the others' from JAX's
   coordination service, the merge), its wait for the others left out and said apart; the
   other processes' end (summary and publishing it). Skipped without sockets.
2. One process: a loop of 3,000 calls of a tiny jitted function under the capture, with and
   without the observers (the programs' watch, the step clock), alternating, best of 15.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._timing import best_alternating  # noqa: E402

SCRIPT = "tests/data/multiprocess/data_parallel.py"


def _port() -> int | None:
    try:
        with socket.socket() as s:
            s.bind(("localhost", 0))
            return s.getsockname()[1]
    except OSError:
        return None


def end_cost(n: int = 4) -> tuple[float, float, float] | None:
    """(process 0's end in ms, of which waiting, the slowest other process's end in ms)."""
    port = _port()
    if port is None:
        return None
    env = dict(os.environ, PYTHONUNBUFFERED="1", JAX_PLATFORMS="cpu")
    procs = [subprocess.Popen([sys.executable, "-m", "jaxviz", SCRIPT, str(i), str(n), str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
             for i in range(n)]
    outs = []
    try:
        outs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    m = re.search(r"merged on process 0 in ([\d.]+) (ms|s) \(waiting ([\d.]+) (ms|s)", outs[0])
    others = [float(x) for o in outs[1:] for x in re.findall(r"in ([\d.]+) ms\) went to", o)]
    if m is None or len(others) != n - 1:
        print("  (the run did not report as expected)\n" + outs[0][-2000:])
        return None
    total = float(m[1]) * (1000 if m[2] == "s" else 1)
    waited = float(m[3]) * (1000 if m[4] == "s" else 1)
    return total, waited, max(others)


def step_cost() -> tuple[float, float]:
    import jax
    import jax.numpy as jnp

    from jaxviz.api import recorder
    from jaxviz.capture.cell import capture
    from jaxviz.distributed.session import Processes

    f = jax.jit(lambda x: x + 1)
    x = jnp.ones(4)
    f(x).block_until_ready()

    def loop() -> None:
        for _ in range(3000):
            f(x)

    def run(observers: bool):
        def go() -> None:
            rec, _obs = recorder(__file__, observers=Processes().observers if observers else ())
            capture(loop, rec)
        return go

    plain, ours = best_alternating([run(False), run(True)], repeat=15)
    return plain / 3000 * 1e6, ours / 3000 * 1e6


if __name__ == "__main__":
    t0 = time.perf_counter()
    results = [r for r in (end_cost() for _ in range(3)) if r is not None]
    if not results:
        print("end of a 4-process run: skipped (no sockets here, or the run failed)")
    else:
        total, waited, other = min(results, key=lambda r: r[0])
        print(f"{'end of a 4-process run, process 0, all told':58s} {total:7.1f} ms "
              f"(target: < 200 ms; of which waiting for the others {waited:.1f} ms)")
        print(f"{'end of a 4-process run, slowest other process':58s} {other:7.1f} ms")
    plain, ours = step_cost()
    print(f"{'a step under the capture, observers / none':58s} {ours:7.3f} us / {plain:7.3f} us"
          f" = {ours / plain:5.2f}x (target: 1.00x within noise)")

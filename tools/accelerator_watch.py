"""Checks the default %%jaxtrace cell's live memory watch on whatever JAX runs on (TPU, GPU or
CPU), in-process IPython (no sockets needed: runs on the TPU machine). Issues 44 (item 8) and
45 (items 1, 2).

    python tools/accelerator_watch.py [N_LIVE]      # N_LIVE live arrays for check 5 (150000)

Each check prints PASS, FAIL or SKIP with its figures; the exit status is 1 if any failed.

1. The watch initialises no JAX backend: a traced cell without JAX work leaves the backends
   uninitialised, and a traced config cell (`jax_num_cpu_devices`, set before any backend
   starts) works and prints the CPU device count it asked for.
2. The device lanes: `memory_stats` on an accelerator (`<platform>:0 bytes_in_use`), live
   JAX arrays on CPU; a cell holding 256 MiB reads at least that much.
3. The RSS lane: left out by default where memory_stats exists (on a TPU host it reads
   13-15 GiB of runtime mappings), shown with `jaxviz.options.rss_lane = True`; on CPU shown.
4. A donated 4-layer training loop (1.5 s): the device lane's lowest reading during the loop
   is at least the bytes of params + opt_state.
5. Cost per cell with N_LIVE live arrays, against the same cell plain in the same run: a
   trivial cell (`lr = 0.01`, target <= +20 ms) and, for information, a cell touching a device.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tools import memory_models  # noqa: E402  (the checkout's tools/, on the path above)

N_LIVE = int(sys.argv[1]) if len(sys.argv) > 1 else 150_000
TARGET_MS = 20.0
failed: list[str] = []


def verdict(name: str, ok: bool | None, detail: str) -> None:
    word = "SKIP" if ok is None else ("PASS" if ok else "FAIL")
    if ok is False:
        failed.append(name)
    print(f"{word} {name}: {detail}", flush=True)


def main() -> int:
    from IPython.testing.globalipapp import start_ipython

    from jaxviz import _compat

    ip = start_ipython()
    ip.run_cell("%load_ext jaxviz")

    def run(src: str, quiet: bool = True) -> object:
        out = io.StringIO()
        with contextlib.redirect_stdout(out) if quiet else contextlib.nullcontext():
            r = ip.run_cell(src)
        if not r.success:
            raise RuntimeError(f"cell failed: {r.error_in_exec or r.error_before_exec}\n{src}")
        return out.getvalue()

    def cell_memory(name: str = "ct") -> object:
        (mem,) = [m.cell for m in ip.user_ns[name].memory if m.cell is not None]
        return mem

    # 1. no backend initialised by the watch ---------------------------------------------
    before = _compat.backends_ready()
    run("%%jaxtrace -o ct\nimport jax\nlr = 0.01\n")
    untouched = _compat.backends_ready()
    if before:
        verdict("1a trivial cell leaves backends alone", None, "JAX was initialised before")
    else:
        verdict("1a trivial cell leaves backends alone", not untouched,
                f"backends initialised after the cell: {untouched}")  # fmt: skip
    if before or untouched:
        verdict("1b config cell", None, "JAX's backends were already initialised")
    else:
        out = run(
            "%%jaxtrace\nimport jax\njax.config.update('jax_num_cpu_devices', 2)\n"
            "print('cpu devices:', len(jax.devices('cpu')), '| default:', jax.devices()[0])\n"
        )
        line = next((ln for ln in out.splitlines() if ln.startswith("cpu devices:")), out[-300:])
        verdict("1b config cell", "cpu devices: 2" in out, line)

    import jax

    has_stats = jax.devices()[0].memory_stats() is not None
    print(f"   jax {jax.__version__}, python {sys.version.split()[0]}, {jax.devices()[0]}")

    # 2. device lanes ------------------------------------------------------------------------
    run("import jax.numpy as jnp\n")
    run("%%jaxtrace -o ct\nbig = jnp.ones((64, 1024, 1024))\n_ = big.block_until_ready()\n")
    mem = cell_memory()
    want = "memory_stats" if has_stats else "live_arrays"
    dev = [i for i, ln in enumerate(mem.lanes) if ln.source == want]
    peak = max((v for _t, k, v in mem.samples if k in dev), default=0.0)
    labels = [ln.label for ln in mem.lanes]
    verdict("2 device lane", bool(dev) and peak >= 256 << 20,
            f"lanes {labels}; peak {peak / 2**20:.0f} MiB (>= 256)")  # fmt: skip
    run("del big, _\n")

    # 3. the RSS lane --------------------------------------------------------------------------
    shown = any(ln.source == "rss" for ln in mem.lanes)
    run("import jaxviz\njaxviz.options.rss_lane = True\n")
    run("%%jaxtrace -o ct\ny = jnp.ones(4) + 1\n")
    forced = any(ln.source == "rss" for ln in cell_memory().lanes)
    run("jaxviz.options.rss_lane = None\n")
    verdict("3 RSS lane", shown is (not has_stats) and forced,
            f"shown by default: {shown} (expected {not has_stats}); with options.rss_lane=True: "
            f"{forced}")  # fmt: skip

    # 4. a donated loop's lowest reading --------------------------------------------------------
    run(memory_models.DONATED_SETUP)
    run(
        "%%jaxtrace -o ct\nimport time\nt0 = time.time()\nn = 0\n"
        "while time.time() - t0 < 1.5:\n"
        "    params, opt_state, l = step(params, opt_state, x)\n    n += 1\n"
        "jax.block_until_ready(params)\n"
    )
    mem, held = cell_memory(), ip.user_ns["held"]
    d0 = jax.devices()[0]  # where the params live
    dev = [i for i, ln in enumerate(mem.lanes) if ln.id == f"{d0.platform}:{d0.id}"]
    readings = [v for _t, k, v in mem.samples if k in dev]
    low = min(readings, default=0.0)
    verdict("4 donated loop", bool(readings) and low >= held,
            f"{ip.user_ns['n']} steps, {len(readings)} readings, lowest {low / 2**20:.2f} MiB vs "
            f"params+opt_state {held / 2**20:.2f} MiB ({low / held:.2f}x); "
            f"{mem.calls_note()}")  # fmt: skip

    # 5. per-cell cost with many live arrays ----------------------------------------------------
    run(f"import numpy as np\nmetrics = [jax.device_put(np.float32(i)) for i in range({N_LIVE})]\n")
    n_live = len(jax.live_arrays())

    def timed(src: str) -> float:
        t0 = time.perf_counter()
        run(src)
        return time.perf_counter() - t0

    first = timed("%%jaxtrace\ny = x + 1\n")
    for name, body, target in [("trivial `lr = 0.01`", "lr = 0.01\n", TARGET_MS),
                               ("touching a device `y = x + 1`", "y = x + 1\n", None)]:  # fmt: skip
        for src in (body, "%%jaxtrace\n" + body):
            timed(src)
        diffs = []
        for _ in range(15):
            plain = timed(body)
            diffs.append(timed("%%jaxtrace\n" + body) - plain)
        ms = statistics.median(diffs) * 1e3
        verdict(f"5 cost, {name}", None if target is None else ms <= target,
                f"+{ms:.1f} ms over plain (median of 15 pairs), {n_live:,} live arrays"
                + ("" if target is None else f" (target <= +{target:g} ms)"))  # fmt: skip
    print(f"   the first traced cell after making them: {first * 1e3:.0f} ms")
    print("FAILED: " + ", ".join(failed) if failed else "ALL PASSED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

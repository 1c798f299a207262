"""A long session's kernel does not grow: what a kept CellTrace holds, and a soak in a kernel.

Two cells, both a 24-layer MLP train step (~800 equations) called 3 times: "rerun" calls the
step defined once before (its jaxpr is JAX's cached one), "redefine" re-runs the step's
definition in the cell too (a notebook's edit-and-rerun: each cell stages and compiles anew);
and "jit-per-iteration", a loop that makes a new jitted function at each of 50 iterations.

(a) MB per kept CellTrace: the cell traced N_KEPT times with jaxviz.trace_cell, every
    CellTrace kept in a list, against the same cell run plainly N_KEPT times: RSS after gc and
    malloc_trim, which returns the pages malloc keeps from freed memory (C++ too:
    compiled executables) and tracemalloc (Python objects, with the top allocating lines and
    the jaxviz frames they came from), after gc. Target <= 3 MB.
(b) A soak in real Jupyter kernels: N_SOAK cells of that step under `%%jaxtrace --no-run`
    (the default display: the kernel's display path makes the widget models) in one fresh
    kernel, the same N_SOAK cells plain in another; each kernel's RSS (VmRSS) before/after.
    Target: traced growth <= plain growth + 150 MB.

`python bench/bench_soak.py [a|b] [KIND]` runs one part (both by default), for the cells whose
name starts with KIND (all by default: rerun, redefine, jit-per-iteration); printed, never
asserted.
About 3 minutes on 2 cores, most of it compiling the "redefine" cells.
"""

import ctypes
import gc
import os
import sys
import time
import tracemalloc

sys.path.insert(0, ".")

N_KEPT = 10  # CellTraces kept in (a)
N_SOAK = 40  # cells per kernel in (b) (>= 40)
TARGET_MB = 3.0  # per kept CellTrace
SOAK_SLACK_MB = 150.0  # traced kernel growth over plain

SETUP = """
import jax, jax.numpy as jnp

LAYERS, D = 24, 32

def init(key):
    ks = jax.random.split(key, LAYERS)
    return [(jax.random.normal(k, (D, D)) / D**0.5, jnp.zeros(D)) for k in ks]

def mlp(params, x):
    for w, b in params:
        x = jax.nn.gelu(x @ w + b)
    return x

def loss(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)

@jax.jit
def train_step(params, x, y):
    l, g = jax.value_and_grad(loss)(params, x, y)
    return jax.tree.map(lambda p, d: p - 0.01 * d, params, g), l

params = init(jax.random.key(0))
x = jnp.ones((16, D)); y = jnp.zeros((16, D))
params, l = train_step(params, x, y)
_ = l.block_until_ready()
"""

STEP = """
@jax.jit
def train_step(params, x, y):
    l, g = jax.value_and_grad(loss)(params, x, y)
    return jax.tree.map(lambda p, d: p - 0.01 * d, params, g), l
"""

# the same step, its definition re-run in the cell (a notebook's edit-and-rerun): every
# cell stages, compiles and keeps its own jaxpr
CELLS = {
    "rerun": """
for _ in range(3):
    params, l = train_step(params, x, y)
_ = l.block_until_ready()
""",
}
CELLS["redefine"] = STEP + CELLS["rerun"]
# a jitted function made anew at each iteration (issue 45, item 5: 323 traces in one cell left
# a kernel +176 to +706 MB): each cell traces and compiles 50 look-alike functions
CELLS["jit-per-iteration"] = """
for i in range(50):
    f = jax.jit(lambda v: jnp.tanh(v @ v.T) * i)
    z = f(x)
_ = z.block_until_ready()
"""


def _verdict(mb_per_cell: float) -> str:
    return "ok" if mb_per_cell <= TARGET_MB else f"OVER target {TARGET_MB} MB"


def _mb(n: float) -> float:
    return n / 2**20


def part_a(kind: str) -> None:
    cell = CELLS[kind]
    import jax

    import jaxviz

    ns: dict = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(SETUP, ns)
    warm = jaxviz.trace_cell(cell, ns)  # fills JAX's and jaxviz's one-time caches
    t = next((x for x in warm.traces if x.name == "train_step"), warm.traces[0])
    print(
        f"== cell {kind!r}: {len(warm.traces)} traces kept per cell; {t.graph.n_eqns:,} "
        f"equations in {t.name}, {t.calls} calls per cell"
    )
    del warm, t
    for _ in range(2):
        exec(cell, ns)
    # RSS first (C++ allocations included: compiled executables, XLA buffers), no tracemalloc
    r0 = _settled_rss_mb()
    for _ in range(N_KEPT):
        exec(cell, ns)
    r1 = _settled_rss_mb()
    kept = [jaxviz.trace_cell(cell, ns) for _ in range(N_KEPT)]
    r2 = _settled_rss_mb()
    del kept
    r3 = _settled_rss_mb()
    print(
        f"(a) RSS after malloc_trim: plain cell +{(r1 - r0) / N_KEPT:6.2f} MB/cell; kept "
        f"CellTrace +{(r2 - r1) / N_KEPT:6.2f} MB each; after dropping them {r3 - r1:+.1f} MB  "
        f"{_verdict((r2 - r1) / N_KEPT)}"
    )
    tracemalloc.start(25)
    gc.collect()
    base = tracemalloc.take_snapshot()
    b0, _ = tracemalloc.get_traced_memory()
    for _ in range(N_KEPT):
        exec(cell, ns)
    gc.collect()
    p1, _ = tracemalloc.get_traced_memory()
    t0 = time.perf_counter()
    kept = [jaxviz.trace_cell(cell, ns) for _ in range(N_KEPT)]
    dt = (time.perf_counter() - t0) / N_KEPT
    gc.collect()
    k1, _ = tracemalloc.get_traced_memory()
    snap = tracemalloc.take_snapshot()
    plain = _mb(p1 - b0) / N_KEPT
    traced = _mb(k1 - p1) / N_KEPT
    verdict = "ok" if traced - plain <= TARGET_MB else f"OVER target {TARGET_MB} MB"
    print(
        f"(a) plain cell retains {plain:6.2f} MB/cell; kept CellTrace {traced:6.2f} MB each "
        f"(trace_cell {dt:.2f} s/cell)  {verdict}"
    )
    print("    top holders (tracemalloc, grouped by the allocating line, kept - base):")
    stats = snap.compare_to(base, "lineno")
    for s in stats[:12]:
        fr = s.traceback[0]
        print(
            f"    {_mb(s.size_diff) / N_KEPT:7.3f} MB/cell  {s.count_diff // N_KEPT:7d} blk/cell  "
            f"{fr.filename.split('site-packages/')[-1].split('wt-i11-soak/')[-1]}:{fr.lineno}"
        )
    print("    grouped by the first jaxviz frame on the allocating stack:")
    by: dict = {}
    for s in snap.compare_to(base, "traceback"):
        if s.size_diff <= 0:
            continue
        key = next(
            (
                f"{f.filename.split('/jaxviz/')[-1]}:{f.lineno}"
                for f in s.traceback
                if "/jaxviz/" in f.filename
            ),
            "(no jaxviz frame)",
        )
        by[key] = by.get(key, 0) + s.size_diff
    for key, size in sorted(by.items(), key=lambda kv: -kv[1])[:12]:
        print(f"    {_mb(size) / N_KEPT:7.3f} MB/cell  {key}")
    tracemalloc.stop()
    del kept
    print(f"    jax {jax.__version__}, python {sys.version.split()[0]}")


def _settled_rss_mb() -> float:
    """This process's RSS after gc and glibc's malloc_trim: the pages malloc keeps from
    memory already freed (a compile's churn) go back first, so what is left is what is
    held. Without it the RSS line reads malloc's high-water mark: dropping all the kept
    traces then gave back nothing."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: RSS as it is
        pass
    return _rss_mb(os.getpid())


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _kernel_soak(kind: str, traced: bool) -> tuple[float, float, float, float]:
    """(rss before, rss after, seconds, rss after gc) of N_SOAK cells in a fresh kernel."""
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ, PYTHONPATH=os.getcwd())
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=os.getcwd())
    try:

        def run(code: str, timeout: float = 120) -> None:
            reply = kc.execute_interactive(code, timeout=timeout, output_hook=lambda msg: None)
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"cell failed: {reply['content'].get('evalue')}")

        pid = km.provisioner.process.pid
        run(SETUP + "\n%load_ext jaxviz\nimport gc\n")
        head = "%%jaxtrace --no-run\n" if traced else ""
        run(head + CELLS[kind])  # the first cell pays the one-time costs in both kernels
        run("gc.collect()")
        before = _rss_mb(pid)
        t0 = time.perf_counter()
        for _ in range(N_SOAK):
            run(head + CELLS[kind])
        dt = time.perf_counter() - t0
        after = _rss_mb(pid)
        run("gc.collect()")
        return before, after, dt, _rss_mb(pid)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def part_b(kind: str) -> None:
    print(f"== soak, cell {kind!r}", flush=True)
    res = {}
    for traced in (False, True):
        res[traced] = _kernel_soak(kind, traced)
        b, a, dt, g = res[traced]
        name = "traced (%%jaxtrace --no-run)" if traced else "plain"
        print(
            f"(b) {name:28s} {N_SOAK} cells: RSS {b:7.1f} -> {a:7.1f} MB "
            f"(+{a - b:6.1f} MB, after gc +{g - b:6.1f}), {dt / N_SOAK:.2f} s/cell",
            flush=True,
        )
    grow_t = res[True][1] - res[True][0]
    grow_p = res[False][1] - res[False][0]
    verdict = (
        "ok" if grow_t <= grow_p + SOAK_SLACK_MB else f"OVER target plain + {SOAK_SLACK_MB:g} MB"
    )
    print(
        f"(b) growth traced {grow_t:.1f} MB vs plain {grow_p:.1f} MB "
        f"({(grow_t - grow_p) / N_SOAK:.2f} MB/cell over plain)  {verdict}"
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    which = [a for a in args if a in ("a", "b")] or ["a", "b"]
    kinds = [k for k in CELLS if any(k.startswith(a) for a in args if a not in which)] or list(
        CELLS
    )
    for kind in kinds:
        if "a" in which:
            part_a(kind)
    for kind in kinds:
        if "b" in which:
            part_b(kind)

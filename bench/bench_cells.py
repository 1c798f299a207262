"""%%jaxtrace --no-run -q on realistic notebook cells vs the same cells plain.

Target (issue "A %%jaxtrace cell costs at most 1.2x the plain cell on real notebooks"):
median ratio <= 1.2x over the cells, none above 1.5x. Every cell runs in IPython's real shell,
plain and under the magic, alternating, 7 to 31 rounds; a cell's ratio is the median over rounds
of its traced time over the plain run just before it (bench._timing.paired), the ratio of each
side's best time printed next to it. Its `result:` lines must be equal both ways (a mismatch is
a bug and fails the bench; a ratio over target only prints OVER).

Each cell says whether its first-call cost is kept (the cell defines its jitted functions, as
a notebook's training or script cell does: every run compiles afresh) or warmed (the functions
and eager primitives were compiled in an earlier cell: `setup`, run once, untimed).

The sharded cell needs 8 CPU devices, which must be asked for before jax is imported: it runs
in a subprocess of this script (`--sharded`) with XLA_FLAGS set, and reports back one line.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys

MAGIC = "%%jaxtrace --no-run -q\n"
# best of REPEAT runs each (alternating), more for short cells: the machine is shared, a
# 30 ms cell's single runs vary by 2x and a 0.3 s one's by 20%; about BUDGET_S of runs per
# cell and mode. The verdict is the median of the rounds' ratios: with 2 s, a 0.25 s cell
# had 8 rounds, and one run's paired median read 1.52x where its best-of ratio read 1.30x
# (the median of 8 is the mean of two rounds); 4 s gives it 16
REPEAT, MAX_REPEAT, BUDGET_S = 7, 41, 4.0
TARGET_MEDIAN, TARGET_MAX = 1.2, 1.5

COMMON = """
import numpy as np
import jax, jax.numpy as jnp
"""

# (name, setup run once untimed, the timed cell)
CELLS: list[tuple[str, str, str]] = []


def cell(name: str, setup: str, body: str) -> None:
    CELLS.append((name, setup, body))


# (1) optax-style training loop, adam by hand. First call kept: the cell defines the model,
# the optimizer and the jitted step, then trains 200 steps (the step compiles in the cell).
cell(
    "1 adam training loop (jit step, 200 steps)",
    """
rng = np.random.RandomState(0)
X1 = jnp.asarray(rng.randn(256, 16).astype(np.float32))
Y1 = jnp.asarray((X1 @ jnp.arange(16.0) / 16.0 + 0.1 * rng.randn(256)).astype(np.float32))
""",
    """
def init_params(key):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (16, 32)) * 0.1, "b1": jnp.zeros(32),
            "w2": jax.random.normal(k2, (32, 1)) * 0.1, "b2": jnp.zeros(1)}

def model(p, x):
    return (jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"])[:, 0]

def loss_fn(p, x, y):
    return jnp.mean((model(p, x) - y) ** 2)

def adam_init(p):
    z = jax.tree_util.tree_map(jnp.zeros_like, p)
    return (z, z, jnp.zeros((), jnp.int32))

def adam_update(g, state, p, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
    m, v, t = state
    t = t + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
    mh = jax.tree_util.tree_map(lambda m: m / (1 - b1 ** t), m)
    vh = jax.tree_util.tree_map(lambda v: v / (1 - b2 ** t), v)
    p = jax.tree_util.tree_map(lambda p, m, v: p - lr * m / (jnp.sqrt(v) + eps), p, mh, vh)
    return p, (m, v, t)

@jax.jit
def train_step(p, state, x, y):
    loss, g = jax.value_and_grad(loss_fn)(p, x, y)
    p, state = adam_update(g, state, p)
    return p, state, loss

params = init_params(jax.random.PRNGKey(0))
opt_state = adam_init(params)
for step in range(200):
    params, opt_state, loss = train_step(params, opt_state, X1, Y1)
print("result:", float(loss))
""",
)

# (2) eager PRNG loop. Warmed: split and uniform of these shapes ran in earlier cells.
cell(
    "2 eager PRNG loop (2,000 split+uniform)",
    """
_k = jax.random.PRNGKey(1)
_k1, _k2 = jax.random.split(_k); jax.random.uniform(_k2).block_until_ready()
""",
    """
k = jax.random.PRNGKey(42)
for i in range(2000):
    k1, k2 = jax.random.split(k)
    u = jax.random.uniform(k2)
    k = k1
print("result:", float(u), k.tolist() if hasattr(k, "tolist") else k)
""",
)

# (3) a %timeit cell. Warmed: f was compiled in an earlier cell (timeit would time it anyway).
cell(
    "3 %timeit -n 200 -r 3 f(x)",
    """
@jax.jit
def f(x):
    return jnp.tanh(x @ x.T).sum(axis=0)
x = jnp.linspace(0.0, 1.0, 64 * 64).reshape(64, 64)
f(x).block_until_ready()
""",
    """
%timeit -n 200 -r 3 f(x).block_until_ready()
print("result:", float(f(x).sum()))
""",
)

# (4) a script like JAX's examples/mnist_classifier_fromscratch.py on synthetic data. First
# call kept: the whole script is the cell (init, jitted update, eager accuracy).
cell(
    "4 mnist_classifier_fromscratch-style script",
    """
_r = np.random.RandomState(0)
train_images = _r.rand(2048, 784).astype(np.float32)
train_labels = np.eye(10, dtype=np.float32)[_r.randint(0, 10, 2048)]
test_images = _r.rand(512, 784).astype(np.float32)
test_labels = np.eye(10, dtype=np.float32)[_r.randint(0, 10, 512)]
""",
    """
import numpy.random as npr
from jax.scipy.special import logsumexp

def init_random_params(scale, layer_sizes, rng=npr.RandomState(0)):
    return [(scale * rng.randn(m, n), scale * rng.randn(n))
            for m, n, in zip(layer_sizes[:-1], layer_sizes[1:])]

def predict(params, inputs):
    activations = inputs
    for w, b in params[:-1]:
        outputs = jnp.dot(activations, w) + b
        activations = jnp.tanh(outputs)
    final_w, final_b = params[-1]
    logits = jnp.dot(activations, final_w) + final_b
    return logits - logsumexp(logits, axis=1, keepdims=True)

def loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return -jnp.mean(jnp.sum(preds * targets, axis=1))

def accuracy(params, batch):
    inputs, targets = batch
    target_class = jnp.argmax(targets, axis=1)
    predicted_class = jnp.argmax(predict(params, inputs), axis=1)
    return jnp.mean(predicted_class == target_class)

layer_sizes = [784, 128, 128, 10]
param_scale, step_size, num_epochs, batch_size = 0.1, 0.001, 3, 64
num_train = train_images.shape[0]
num_complete_batches, leftover = divmod(num_train, batch_size)
num_batches = num_complete_batches + bool(leftover)

def data_stream():
    rng = npr.RandomState(0)
    while True:
        perm = rng.permutation(num_train)
        for i in range(num_batches):
            batch_idx = perm[i * batch_size:(i + 1) * batch_size]
            yield train_images[batch_idx], train_labels[batch_idx]
batches = data_stream()

@jax.jit
def update(params, batch):
    grads = jax.grad(loss)(params, batch)
    return [(w - step_size * dw, b - step_size * db)
            for (w, b), (dw, db) in zip(params, grads)]

params = init_random_params(param_scale, layer_sizes)
for epoch in range(num_epochs):
    for _ in range(num_batches):
        params = update(params, next(batches))
    train_acc = accuracy(params, (train_images, train_labels))
    test_acc = accuracy(params, (test_images, test_labels))
print("result:", float(train_acc), float(test_acc), float(loss(params, (test_images, test_labels))))
""",
)

# (5) six jitted step functions defined and called. First call kept: the cell defines them.
cell(
    "5 six jitted step functions, defined + called",
    """
xs5 = jnp.linspace(-1.0, 1.0, 32 * 32).reshape(32, 32)
""",
    """
@jax.jit
def normalize(x):
    return (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-6)

@jax.jit
def dense(x, w):
    return jax.nn.relu(x @ w)

@jax.jit
def attention(q, k, v):
    return jax.nn.softmax(q @ k.T / jnp.sqrt(q.shape[-1]), axis=-1) @ v

@jax.jit
def sgd_step(w, x):
    return w - 0.1 * jax.grad(lambda w: jnp.mean(dense(x, w) ** 2))(w)

@jax.jit
def scan_cumsum(x):
    return jax.lax.scan(lambda c, r: (c + r, c), jnp.zeros(x.shape[1]), x)[1]

@jax.jit
def clip_norm(x, max_norm=1.0):
    n = jnp.linalg.norm(x)
    return jnp.where(n > max_norm, x * max_norm / n, x)

h = normalize(xs5)
w = jnp.eye(32) * 0.5
for _ in range(10):
    w = sgd_step(w, h)
out = attention(dense(h, w), h, h)
out = clip_norm(scan_cumsum(out))
print("result:", float(out.sum()), float(w.sum()))
""",
)

# (6) data loading: numpy batches through jnp.asarray into a jitted step. Warmed: the step
# was compiled in an earlier cell (the loader cell runs after the model cell).
cell(
    "6 data loading loop (np -> jnp.asarray, jit)",
    """
@jax.jit
def lin_step(w, x, y):
    g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - 0.05 * g
_w6 = jnp.zeros((32, 1), jnp.float32)
lin_step(_w6, jnp.zeros((64, 32), jnp.float32), jnp.zeros((64, 1), jnp.float32))
data6 = np.random.RandomState(3).randn(300 * 64, 33).astype(np.float32)
""",
    """
def loader(data, batch_size=64):
    for i in range(0, len(data), batch_size):
        chunk = data[i:i + batch_size]
        yield chunk[:, :32], chunk[:, 32:]

w = jnp.zeros((32, 1), jnp.float32)
for xb, yb in loader(data6):
    xb, yb = jnp.asarray(xb), jnp.asarray(yb)
    w = lin_step(w, xb, yb)
print("result:", float(w.sum()))
""",
)

# (7) vmap/grad exploration, eager. Warmed: the eager primitives of these shapes ran before.
cell(
    "7 eager grad/vmap/jacfwd/hessian exploration",
    "",
    """
def f7(x):
    return jnp.sum(jnp.sin(x) * x ** 2)

def g7(x, y):
    return jnp.dot(jnp.tanh(x), y)

xv = jnp.linspace(0.0, 1.0, 8)
yv = jnp.linspace(1.0, 2.0, 8)
outs = []
outs.append(jax.grad(f7)(xv).sum())
outs.append(jax.vmap(jax.grad(lambda s: jnp.sin(s) * s ** 2))(xv).sum())
outs.append(jax.jacfwd(lambda x: jnp.sin(x) * x)(xv).sum())
outs.append(jax.jacrev(g7, argnums=1)(xv, yv).sum())
outs.append(jax.hessian(f7)(xv).sum())
outs.append(jax.vmap(g7, in_axes=(0, None))(jnp.stack([xv, yv]), yv).sum())
outs.append(jax.vmap(jax.vmap(lambda a, b: a * b, (0, None)), (None, 0))(xv, yv).sum())
outs.append(jax.grad(jax.grad(lambda s: jnp.exp(jnp.sin(s))))(0.3))
print("result:", [float(o) for o in outs])
""",
)

# (8) a sharded step on 8 CPU devices: see SHARDED below, run in a subprocess.
SHARDED = (
    "8 sharded step on 8 CPU devices (subprocess)",
    """
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
assert len(jax.devices()) == 8, jax.devices()
mesh = Mesh(np.array(jax.devices()), ("data",))
data_sh = NamedSharding(mesh, P("data"))
repl = NamedSharding(mesh, P())

@jax.jit
def shard_step(w, x, y):
    g = jax.grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)
    return w - 0.1 * g

_r8 = np.random.RandomState(8)
xb8 = _r8.randn(40, 64, 16).astype(np.float32)
yb8 = _r8.randn(40, 64, 4).astype(np.float32)
_w8 = jax.device_put(jnp.zeros((16, 4)), repl)
shard_step(_w8, jax.device_put(xb8[0], data_sh), jax.device_put(yb8[0], data_sh))
""",
    # Warmed: mesh, shardings and the step were set up and compiled in earlier cells.
    """
w = jax.device_put(jnp.full((16, 4), 0.01), repl)
for i in range(40):
    x = jax.device_put(xb8[i], data_sh)
    y = jax.device_put(yb8[i], data_sh)
    w = shard_step(w, x, y)
print("result:", float(w.sum()), str(w.sharding.spec))
""",
)

# (9) eager-heavy optimizer in the image of optax's SAM example: a jitted gradient, then the
# SAM ascent step and adam all eager over a pytree of 20 small arrays, 50 steps (~15k eager
# binds). Warmed: the gradient was compiled, and the eager primitives ran, in earlier cells.
cell(
    "9 eager SAM+adam on 20-leaf pytree (50 steps)",
    """
_r9 = np.random.RandomState(9)
params9 = {f"layer{i}": {"w": jnp.asarray(_r9.randn(8, 8).astype(np.float32) * 0.1),
                         "b": jnp.asarray(_r9.randn(8).astype(np.float32) * 0.1)}
           for i in range(10)}
x9 = jnp.asarray(_r9.randn(16, 8).astype(np.float32))

@jax.jit
def grad9(p, x):
    def loss(p):
        h = x
        for i in range(10):
            h = jnp.tanh(h @ p[f"layer{i}"]["w"] + p[f"layer{i}"]["b"])
        return jnp.mean(h ** 2)
    return jax.grad(loss)(p)
grad9(params9, x9)
""",
    """
tm = jax.tree_util.tree_map
lr, b1, b2, eps, rho = 1e-2, 0.9, 0.999, 1e-8, 0.05
p = params9
m = tm(jnp.zeros_like, p)
v = tm(jnp.zeros_like, p)
for t in range(1, 51):
    g = grad9(p, x9)
    # SAM: climb to the worst nearby point, take the gradient there
    gnorm = jnp.sqrt(sum(jnp.sum(l * l) for l in jax.tree_util.tree_leaves(g)))
    p_adv = tm(lambda p, g: p + rho * g / (gnorm + 1e-12), p, g)
    g = grad9(p_adv, x9)
    # adam, eagerly, leaf by leaf
    m = tm(lambda m, g: b1 * m + (1 - b1) * g, m, g)
    v = tm(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
    p = tm(lambda p, m, v: p - lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps),
           p, m, v)
print("result:", float(sum(jnp.sum(l) for l in jax.tree_util.tree_leaves(p))))
""",
)

# (10) a data generator of eager random ops feeding a jitted outer step, in the image of
# optax's meta-learning notebook (its training cell read 2.6x before the capture told a
# generator's resumptions apart). Warmed: the step and the generator's ops ran before.
cell(
    "10 generator of eager samples -> jit step (300 steps)",
    """
def samples10(seed):
    key = jax.random.PRNGKey(seed)
    while True:
        key, kx, kn = jax.random.split(key, num=3)
        x = jax.random.uniform(kx, minval=0.0, maxval=10.0)
        yield x, 3.0 * x + jax.random.normal(kn)

@jax.jit
def fit10(w, lr, batch):
    def loss(w):
        return sum((w * x - y) ** 2 for x, y in batch) / len(batch)
    return w - lr * jax.grad(loss)(w)

_g10 = samples10(1)
fit10(jnp.zeros(()), 0.001, [next(_g10) for _ in range(5)]).block_until_ready()
""",
    """
g = samples10(0)
w = jnp.zeros(())
ws = []
for step in range(300):
    batch = [next(g) for _ in range(5)]
    w = fit10(w, 0.001, batch)
    ws.append(w)
print("result:", float(w), len(ws))
""",
)

# (11) an MCMC sampler's loop, in the image of blackjax's quickstart: a jitted step taking a
# fresh key folded in from one base key at each step. Warmed. The step consumes its key: its
# calls took JAX's Python path under the magic (1.4x on blackjax's NUTS; 22x on a step of a
# few ops), and the ledger scanned every earlier fold-in of the base key at each step.
cell(
    "11 sampler loop: step(fold_in(key, i), state) (1,000 steps)",
    """
def logdensity11(x):
    return -0.5 * jnp.sum((x - 3.0) ** 2)

@jax.jit
def rmh_step11(key, state):
    x, logp = state
    k1, k2 = jax.random.split(key)
    prop = x + 0.5 * jax.random.normal(k1, x.shape)
    logp_prop = logdensity11(prop)
    accept = jnp.log(jax.random.uniform(k2)) < logp_prop - logp
    return (jnp.where(accept, prop, x), jnp.where(accept, logp_prop, logp)), accept

_s11 = (jnp.zeros(4), logdensity11(jnp.zeros(4)))
rmh_step11(jax.random.key(1), _s11)[0][0].block_until_ready()
""",
    """
rng_key = jax.random.key(0)
state = (jnp.zeros(4), logdensity11(jnp.zeros(4)))
accepted = 0
for i in range(1_000):
    step_key = jax.random.fold_in(rng_key, i)
    state, acc = rmh_step11(step_key, state)
    accepted += acc
print("result:", float(state[0].sum()), int(accepted))
""",
)

# the loop count %timeit chooses (no -n) for the same f, plain vs traced (from -o results)
TIMEIT_ROUNDS = 5
TIMEIT_AUTO = """
_t = %timeit -o -q -r 3 f(x).block_until_ready()
print("loops:", _t.loops, _t.best)
"""


def shell():
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_cell("%load_ext jaxviz")
    return ip


def run(ip, source: str) -> str:
    """Runs a cell, returns what it printed; fails loudly if the cell failed."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        r = ip.run_cell(source)
    out = buf.getvalue()
    if not r.success or "Traceback" in out:
        raise RuntimeError(f"cell failed:\n{source[:200]}\n---\n{out}")
    return out


def results(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(("result:", "loops:"))]


# each cell's plain time right after a traced run over right after a plain one: what a
# traced cell leaves the user's next plain cell to pay (C++ dispatch entries it dropped,
# code instrumented for its events). Target: 1.00 within noise.
AFTER: dict[str, float] = {}


def measure(ip, name: str, setup: str, body: str) -> tuple[float, float, float, list[str]]:
    """Best-of-REPEAT wall time of the cell plain and traced (alternating), the median of
    each round's traced over plain time (bench._timing.paired: the verdict's), and its
    results. The plain time is taken right after a traced run; another plain run right
    after it gives the after-effect (AFTER), and is the paired ratio's plain run: the
    traced run follows it."""
    from bench._timing import best, paired

    run(ip, COMMON + setup)
    out = {"plain": "", "traced": ""}

    def plain():
        out["plain"] = run(ip, body)

    def traced():
        out["traced"] = run(ip, MAGIC + body)

    # untimed: jaxviz's own first-use costs, eager primitives' compiles; sizes the repeats
    est = best(plain, repeat=1)
    traced()
    pt, pp, tt = [], [], []
    for _ in range(max(REPEAT, min(MAX_REPEAT, int(BUDGET_S / est)))):
        pt.append(best(plain, repeat=1))  # right after the last round's traced run
        pp.append(best(plain, repeat=1))  # right after a plain run
        tt.append(best(traced, repeat=1))
    rp, rt = results(out["plain"]), results(out["traced"])
    assert rp and rp == rt, f"{name}: plain printed {rp}, traced printed {rt}"
    AFTER[name] = paired(pt, pp)
    return min(pt), min(tt), paired(tt, pp), rp


def sharded_child() -> None:
    ip = shell()
    name, setup, body = SHARDED
    p, t, r, res = measure(ip, name, setup, body)
    out = {"plain": p, "traced": t, "ratio": r, "result": res, "after": AFTER[name]}
    print("SHARDED " + json.dumps(out), flush=True)


def main() -> None:
    import jax

    from bench._timing import paired, report

    ip = shell()
    ratios: dict[str, float] = {}
    print(f"{'cell: %%jaxtrace --no-run -q / plain':58s} {'traced':>11s} / {'plain':>11s}")
    for name, setup, body in CELLS[:7]:
        p, t, r, _ = measure(ip, name, setup, body)
        report(name, t, p, target=TARGET_MEDIAN, ratio=r)
        ratios[name] = r
    # (8): in a subprocess with 8 host devices, asked for before jax is imported there
    env = dict(os.environ)
    flag = "--xla_force_host_platform_device_count=8"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flag}".strip()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    child = subprocess.run(
        [sys.executable, __file__, "--sharded"], env=env, capture_output=True, text=True
    )
    line = [ln for ln in child.stdout.splitlines() if ln.startswith("SHARDED ")]
    if child.returncode or not line:
        print(child.stdout[-3000:], child.stderr[-3000:])
        raise SystemExit(f"the sharded cell's subprocess failed (rc {child.returncode})")
    got = json.loads(line[0][len("SHARDED ") :])
    report(SHARDED[0], got["traced"], got["plain"], target=TARGET_MEDIAN, ratio=got["ratio"])
    ratios[SHARDED[0]] = got["ratio"]
    AFTER[SHARDED[0]] = got["after"]
    for name, setup, body in CELLS[7:]:
        p, t, r, _ = measure(ip, name, setup, body)
        report(name, t, p, target=TARGET_MEDIAN, ratio=r)
        ratios[name] = r

    med, worst = statistics.median(ratios.values()), max(ratios.values())
    worst_name = max(ratios, key=ratios.__getitem__)
    print(
        f"median ratio {med:.2f}x (target <= {TARGET_MEDIAN}x)"
        f"{'  ok' if med <= TARGET_MEDIAN else '  OVER'}"
    )
    print(
        f"max ratio    {worst:.2f}x (target <= {TARGET_MAX}x, {worst_name})"
        f"{'  ok' if worst <= TARGET_MAX else '  OVER'}"
    )

    after = max(AFTER, key=AFTER.__getitem__)
    print(
        f"plain cell after a traced run / after a plain run: max {AFTER[after]:.2f}x "
        f"({after}; target 1.00x within noise), median {statistics.median(AFTER.values()):.2f}x"
    )

    # %timeit's own loop count, chosen with no -n: the issue asks that it be the same traced
    # and the time per loop it reports, traced over plain (target <= 1.2x); TIMEIT_ROUNDS
    # runs each, alternating (one best-of-3 each read 0.69x to 1.28x between runs)
    plain_runs, traced_runs = [], []
    for _ in range(TIMEIT_ROUNDS):
        plain_runs.append(results(run(ip, TIMEIT_AUTO))[0].split())
        traced_runs.append(results(run(ip, MAGIC + TIMEIT_AUTO))[0].split())
    plain_loops = sorted({p[1] for p in plain_runs})
    traced_loops = sorted({t[1] for t in traced_runs})
    same = "same" if plain_loops == traced_loops else "DIFFERENT"
    print(
        f"%timeit (no -n) loop count, {TIMEIT_ROUNDS} runs each: plain "
        f"{'/'.join(plain_loops)}, traced {'/'.join(traced_loops)} ({same})"
    )
    plain_best = [float(p[2]) for p in plain_runs]
    traced_best = [float(t[2]) for t in traced_runs]
    report(
        "%timeit (no -n) best time per loop, traced / plain",
        min(traced_best) * 1e6,
        min(plain_best) * 1e6,
        target=TARGET_MEDIAN,
        unit="us",
        ratio=paired(traced_best, plain_best),
    )
    print(
        f"python {sys.version.split()[0]}, jax {jax.__version__}; "
        f"sys.monitoring: {hasattr(sys, 'monitoring')}"
    )


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if "--sharded" in sys.argv:
        sharded_child()
    else:
        main()

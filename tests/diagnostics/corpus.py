"""The diagnostics corpus: notebook cells in the style of real user code.

Each misuse case marks the line the user must change with `# expect: RULE`; the clean
programs must produce no diagnostic at all. Modelled on the JAX docs' "Common gotchas",
"Errors" and "Sharp bits" pages and on reported issues.
"""

HEADER = "import jax, jax.numpy as jnp, numpy as np\nfrom jax import lax, random\n"

CASES: dict[str, str] = {}
CLEAN: dict[str, str] = {}

# --- tracer-bool -----------------------------------------------------------------------------
CASES["bool_if"] = """
@jax.jit
def relu(x):
    if x > 0:  # expect: tracer-bool
        return x
    return 0.0
relu(3.0)
"""
CASES["bool_while"] = """
@jax.jit
def halve_until_small(x):
    while x > 1.0:  # expect: tracer-bool
        x = x / 2
    return x
halve_until_small(jnp.float32(10.0))
"""
CASES["bool_and"] = """
def in_range(x, lo, hi):
    return lo < x and x < hi  # expect: tracer-bool
f = jax.jit(in_range)
f(jnp.float32(0.5), 0.0, 1.0)
"""
CASES["bool_vmap"] = """
def clip_one(x):
    return x if x < 1 else 1.0  # expect: tracer-bool
jax.vmap(clip_one)(jnp.arange(4.0))
"""
# --- concretization ------------------------------------------------------------------------
CASES["conc_int"] = """
@jax.jit
def make_buffer(x):
    n = int(x.sum())  # expect: concretization
    return jnp.zeros(n)
make_buffer(jnp.ones(3))
"""
CASES["conc_item"] = """
@jax.jit
def scale(x):
    s = x.max().item()  # expect: concretization
    return x / s
scale(jnp.arange(1.0, 4.0))
"""
CASES["conc_shape"] = """
def pad_to(x, n):
    return jnp.concatenate([x, jnp.zeros(n - x.shape[0])])  # expect: concretization
jax.jit(pad_to)(jnp.ones(3), 5)
"""
CASES["conc_mask"] = """
def positive_mean(x):
    return x[x > 0].mean()  # expect: concretization
jax.jit(positive_mean)(jnp.array([-1.0, 2.0, 3.0]))
"""
CASES["conc_float"] = """
@jax.jit
def log_lr(step):
    lr = float(0.1 * step)  # expect: concretization
    return jnp.log(lr)
log_lr(3)
"""
# --- tracer-array --------------------------------------------------------------------------
CASES["array_asarray"] = """
@jax.jit
def normalize(x):
    arr = np.asarray(x)  # expect: tracer-array
    return arr / arr.sum()
normalize(jnp.ones(4))
"""
CASES["array_npfunc"] = """
def activation(x):
    return np.tanh(x)  # expect: tracer-array
jax.grad(lambda x: jnp.sum(jax.jit(activation)(x)))(jnp.ones(3))
"""
CASES["array_vmap"] = """
def row_norm(r):
    return np.linalg.norm(r)  # expect: tracer-array
jax.vmap(row_norm)(jnp.ones((2, 3)))
"""
# --- tracer-integer ------------------------------------------------------------------------
CASES["int_range"] = """
@jax.jit
def cumulative(x, n):
    total = 0.0
    for i in range(n):  # expect: tracer-integer
        total = total + x[i]
    return total
cumulative(jnp.arange(5.0), 3)
"""
CASES["int_list_index"] = """
layers = [jnp.ones(2), 2 * jnp.ones(2), 3 * jnp.ones(2)]
@jax.jit
def pick(i):
    return layers[i]  # expect: tracer-integer
pick(1)
"""
CASES["int_tuple_index"] = """
def choose(sizes, i):
    return sizes[i] * 2.0  # expect: tracer-integer
jax.jit(choose)((1.0, 2.0, 3.0), jnp.int32(1))
"""
# --- non-jax-type --------------------------------------------------------------------------
CASES["nonjax_string"] = """
def apply_act(x, act):
    return jnp.tanh(x) if act == "tanh" else x
f = jax.jit(apply_act)
y = f(jnp.ones(3), "tanh")  # expect: non-jax-type
"""
CASES["nonjax_lax"] = """
def shift(x):
    return lax.add("1", x)  # expect: non-jax-type
shift(jnp.ones(2))
"""
CASES["nonjax_object"] = """
class Config:
    scale = 2.0
@jax.jit
def scaled(cfg, x):
    return cfg.scale * x
out = scaled(Config(), jnp.ones(3))  # expect: non-jax-type
"""
CASES["nonjax_self"] = """
class Dense:
    def __init__(self):
        self.w = jnp.ones((3, 3))
    def __call__(self, x):
        return x @ self.w
layer = Dense()
apply = jax.jit(Dense.__call__)
y = apply(layer, jnp.ones(3))  # expect: non-jax-type
"""
# --- leaked-tracer -------------------------------------------------------------------------
CASES["leak_global"] = """
last_hidden = None
@jax.jit
def forward(x):
    global last_hidden
    h = jnp.tanh(x)
    last_hidden = h  # expect: leaked-tracer
    return h.sum()
forward(jnp.ones(3))
"""
CASES["leak_append"] = """
activations = []
def layer(x):
    y = jax.nn.relu(x)
    activations.append(y)  # expect: leaked-tracer
    return y
jax.jit(layer)(jnp.ones(4))
"""
CASES["leak_self"] = """
class Counter:
    def __init__(self):
        self.state = jnp.zeros(())
    def step(self, x):
        self.state = self.state + x.sum()  # expect: leaked-tracer
        return x
c = Counter()
jax.jit(c.step)(jnp.ones(2))
"""
CASES["leak_closure"] = """
def make_logger():
    log = {}
    def f(x):
        log["x"] = x * 2  # expect: leaked-tracer
        return x
    return f
logged = make_logger()
jax.jit(logged)(jnp.ones(2))
"""
CASES["leak_used_later"] = """
saved = []
@jax.jit
def g(x):
    saved.append(x + 1)  # expect: leaked-tracer
    return x
g(jnp.ones(2))
z = saved[0] * 2
"""
CASES["leak_grad"] = """
grads_seen = []
def loss(w):
    l = jnp.sum(w ** 2)
    grads_seen.append(l)  # expect: leaked-tracer
    return l
g = jax.grad(loss)(jnp.ones(3))
"""
CASES["leak_callable_model"] = """
class Model:
    def __call__(self, x):
        h = jnp.tanh(x)
        self.h = h  # expect: leaked-tracer
        return h
m = Model()
jax.jit(lambda x: m(x))(jnp.ones(2))
"""
# --- large-constant ------------------------------------------------------------------------
CASES["const_numpy"] = """
embedding = np.random.randn(2048, 256).astype(np.float32)
@jax.jit
def lookup(ids):
    return jnp.take(embedding, ids, axis=0)  # expect: large-constant
lookup(jnp.arange(4))
"""
CASES["const_jnp"] = """
W = jnp.ones((1024, 1024))
def predict(x):
    return jnp.dot(x, W)  # expect: large-constant
jax.jit(predict)(jnp.ones((2, 1024)))
"""
CASES["const_inside"] = """
@jax.jit
def add_bias(x):
    bias = np.full((512, 1024), 0.5, np.float32)
    return x + bias  # expect: large-constant
add_bias(jnp.ones((512, 1024)))
"""
# --- out-of-bounds ---------------------------------------------------------------------------
CASES["oob_getitem_jit"] = """
@jax.jit
def last_two(x):
    return x[10] + x[3]  # expect: out-of-bounds
last_two(jnp.arange(5.0))
"""
CASES["oob_at_set"] = """
x = jnp.zeros(5)
x = x.at[7].set(1.0)  # expect: out-of-bounds
"""
CASES["oob_getitem_eager"] = """
scores = jnp.arange(5.0)
best = scores[5]  # expect: out-of-bounds
"""
CASES["oob_dynamic_slice"] = """
def window(x):
    return lax.dynamic_slice(x, (6,), (4,))  # expect: out-of-bounds
jax.jit(window)(jnp.arange(8.0))
"""
CASES["oob_index_array"] = """
def last_two(x):
    idx = jnp.array([4, 5])
    return x[idx]  # expect: out-of-bounds
jax.jit(last_two)(jnp.arange(4.0))
"""
CASES["oob_negative_2d"] = """
@jax.jit
def update(grid):
    return grid.at[-4, 1].add(1.0)  # expect: out-of-bounds
update(jnp.zeros((3, 3)))
"""
CLEAN["indices_in_range"] = """
@jax.jit
def ends(x):
    return x[0] + x[-1] + x[-5] + x[4] + x[jnp.array([1, -2])].sum()
e = ends(jnp.arange(5.0))
y = jnp.arange(5.0).at[4].set(0.0).at[-5].add(1.0)
w = lax.dynamic_slice(jnp.arange(8.0), (4,), (4,))
@jax.jit
def shift(x, i):
    return x[i + 10] + x.at[i].get()
s = shift(jnp.arange(5.0), 1)
"""
CLEAN["padding_indices"] = """
senders = np.array([0, 1, 2, 3, 4])          # edge list padded with the node count (4)
@jax.jit
def messages(h):
    m = h[senders]
    return jax.ops.segment_sum(m, jnp.array([1, 2, 3, 0, 4]), num_segments=4)
out = messages(jnp.ones((4, 2)))
x = jnp.zeros(3).at[jnp.array([0, 3])].add(1.0)
"""
CLEAN["out_of_bounds_on_purpose"] = """
x = jnp.arange(5.0)
padded = x.at[7].get(mode='fill', fill_value=0.0)
dropped = x.at[7].set(1.0, mode='drop')
clipped = x.at[9].get(mode='clip')
@jax.jit
def gather_fill(x):
    return x.at[jnp.array([2, 8])].get(
        mode='fill', fill_value=-1.0)
g = gather_fill(x)
"""
# --- key-reuse -----------------------------------------------------------------------------
CASES["key_eager_twice"] = """
key = random.PRNGKey(0)
noise = random.normal(key, (3,))
mask = random.normal(key, (3,))  # expect: key-reuse
"""
CASES["key_sliced_twice"] = """
keys = random.split(random.key(0), 3)
w = random.normal(keys[1], (4,))
b = random.normal(keys[1], (4,))  # expect: key-reuse
"""
CASES["key_legacy_sliced_twice"] = """
keys = random.split(random.PRNGKey(0), 4)
init = [random.normal(keys[i], (2,)) for i in range(3)]
drop = random.bernoulli(keys[2], 0.5, (2,))  # expect: key-reuse
"""
CASES["key_two_samplers"] = """
key = random.PRNGKey(42)
x = random.uniform(key, (2,))
y = random.bernoulli(key, 0.5, (2,))  # expect: key-reuse
"""
CASES["key_sample_then_split"] = """
key = random.PRNGKey(1)
w = random.normal(key, (4, 4))
key, sub = random.split(key)  # expect: key-reuse
"""
CASES["key_typed"] = """
key = random.key(7)
a = random.normal(key, (2,))
b = random.uniform(key, (2,))  # expect: key-reuse
"""
CASES["key_in_jit"] = """
@jax.jit
def init(key):
    w1 = random.normal(key, (3, 3))
    w2 = random.normal(key, (3, 3))  # expect: key-reuse
    return w1, w2
init(random.PRNGKey(0))
"""
CASES["key_scan_closed_over"] = """
key = random.PRNGKey(0)
def step(carry, x):
    noise = random.normal(key, ())  # expect: key-reuse
    return carry + x + noise, carry
final, hist = lax.scan(step, 0.0, jnp.arange(5.0))
"""
CASES["key_fori"] = """
@jax.jit
def random_walk(key):
    def body(i, pos):
        return pos + random.normal(key, (2,))  # expect: key-reuse
    return lax.fori_loop(0, 10, body, jnp.zeros(2))
random_walk(random.PRNGKey(3))
"""
CASES["key_split_fold"] = """
@jax.jit
def two_streams(key):
    k1, k2 = random.split(key)
    k3 = random.fold_in(key, 1)  # expect: key-reuse
    return random.normal(k2, ()), random.normal(k3, ())
two_streams(random.PRNGKey(0))
"""
CASES["key_jit_loop"] = """
@jax.jit
def sample(key):
    return random.normal(key, (2,))
key = random.PRNGKey(0)
a = sample(key)
b = sample(key)  # expect: key-reuse
"""
CASES["key_train_loop_fixed"] = """
@jax.jit
def step(w, key, x):
    return w - 0.1 * random.normal(key, x.shape) * x
key = random.PRNGKey(0)
w = jnp.ones(3)
for i in range(3):
    w = step(w, key, jnp.ones(3))  # expect: key-reuse
"""
CASES["key_split_not_rebound"] = """
@jax.jit
def step(w, key):
    return w - 0.1 * random.normal(key, w.shape)
key = random.key(0)
w = jnp.ones(3)
for i in range(3):
    k1, k2 = random.split(key)  # expect: key-reuse
    w = step(w, k1)
"""
CASES["key_vmap_switch_plus_draw"] = """
def noisy(k, i, x):
    y = lax.switch(i, [lambda x: x + random.normal(k, x.shape), lambda x: x * 2.0], x)
    return y + random.normal(k, x.shape)  # expect: key-reuse
f = jax.jit(jax.vmap(noisy))
ys = f(random.split(random.key(0), 4), jnp.array([0, 1, 0, 1]), jnp.ones((4, 3)))
"""
# --- use-after-donate ------------------------------------------------------------------------
CASES["donate_use_after"] = """
@jax.jit
def update(params, g):
    return params - 0.1 * g
update = jax.jit(update, donate_argnums=0)
params = jnp.ones(8)
new_params = update(params, jnp.ones(8))
print(jnp.sum(params))  # expect: use-after-donate
"""
CASES["donate_twice"] = """
step = jax.jit(lambda a, b: a + b, donate_argnums=(0,))
x = jnp.ones(4)
y = step(x, x)  # expect: use-after-donate
"""
CASES["donate_loop_old"] = """
def sgd(w, g):
    return w - 0.01 * g
sgd = jax.jit(sgd, donate_argnums=(0,))
w = jnp.zeros(16)
history = [w]
for _ in range(2):
    w = sgd(w, jnp.ones(16))
first = history[0] + 1  # expect: use-after-donate
"""
CASES["donate_helper_use"] = """
def loss(p, x):
    return jnp.sum(p * x)
step = jax.jit(lambda p, x: p - 0.1 * x, donate_argnums=0)
p = jnp.ones(4); x = jnp.ones(4)
old = p
p = step(p, x)
print(loss(old, x))  # expect: use-after-donate
"""
# --- donation-unusable -----------------------------------------------------------------------
CASES["donate_sum"] = """
def total(x):
    return x.sum()
total = jax.jit(total, donate_argnums=0)
s = total(jnp.ones(100))  # expect: donation-unusable
"""
CASES["donate_dtype"] = """
to_half = jax.jit(lambda x: (x * 2).astype(jnp.float16), donate_argnums=0)
h = to_half(jnp.ones((256,), jnp.float32))  # expect: donation-unusable
"""
CASES["donate_unused"] = """
def reset(state, x):
    return x * 2
reset = jax.jit(reset, donate_argnums=(0,))
out = reset(jnp.ones(4), jnp.ones(3))  # expect: donation-unusable
"""
# --- nan -------------------------------------------------------------------------------------
CASES["nan_log_zero"] = """
@jax.jit
def entropy(p):
    return -jnp.sum(p * jnp.log(p))  # expect: nan
h = entropy(jnp.array([0.0, 0.5, 0.5]))
"""
CASES["nan_grad_where_sqrt"] = """
def safe_norm(x):
    n = jnp.sqrt(jnp.sum(x ** 2))  # expect: nan
    return jnp.where(n > 0, n, 0.0)
g = jax.grad(safe_norm)(jnp.zeros(3))
"""
CASES["nan_jit_grad_log"] = """
def loss(x):
    y = jnp.where(x > 0, jnp.log(x), 0.0)  # expect: nan
    return y.sum()
grad_fn = jax.jit(jax.grad(loss))
g = grad_fn(jnp.array([0.0, 1.0]))
"""
CASES["nan_div"] = """
def normalize(v):
    return v / jnp.linalg.norm(v)  # expect: nan
u = normalize(jnp.zeros(3))
"""
CASES["nan_printed_not_kept"] = """
@jax.jit
def weighted_log(x, y):
    return jnp.sum(y * jnp.log(x))  # expect: nan
print(weighted_log(jnp.array([0.0, 1.0]), jnp.array([0.0, 1.0])))
"""
CASES["nan_eager_printed"] = """
def xent(probs, labels):
    return -jnp.sum(labels * jnp.log(probs))  # expect: nan
print(xent(jnp.array([0.0, 1.0]), jnp.array([0.0, 1.0])))
"""
CASES["nan_eager_complex_sin"] = """
z = jax.lax.sin(jnp.array([1.0 + 1000.0j]))  # expect: nan
"""
# a narrowing conversion overflows (float32 -> float16: 1e5 is Inf); the widening one back
# to float32 is not a finding of its own, nor a conversion of the same type
CASES["nan_eager_narrowing_cast"] = """
big = jnp.full(3, 1e5)
half = big.astype(jnp.float16)  # expect: nan
wide = half.astype(jnp.float32) * 1.0
same = jnp.asarray(big, jnp.float32) + 1.0
"""
# bfloat16, mixed precision's dtype (an ml_dtypes float, which numpy's issubdtype does not
# call inexact): its NaNs are found, eager and in a jitted function's first call
CASES["nan_eager_bfloat16"] = """
h = jnp.linspace(-1.0, 1.0, 8, dtype=jnp.bfloat16)
r = jnp.sqrt(h)  # expect: nan
"""
CASES["nan_jit_bfloat16"] = """
@jax.jit
def logits(w, x):
    h = (x @ w).astype(jnp.bfloat16)
    return jnp.log(h)  # expect: nan
out = logits(jnp.full((4, 4), -1.0), jnp.ones((2, 4)))
"""
# an eager op whose inputs are still computing (a 512x512 matmul): its check waits for the
# values, after the ops dispatched behind it; then one whose output a jit donates at once
CASES["nan_eager_while_computing"] = """
m = jnp.ones((512, 512))
prod = jax.lax.dot(m, m)  # an eager primitive, not a jit
logs = jnp.log(prod - 1024.0)  # expect: nan
total = logs.sum() + jnp.ones(3).sum()
"""
CASES["nan_eager_then_donated"] = """
m = jnp.ones((512, 512))
scaled = jax.lax.sqrt(jax.lax.dot(m, m) - 1024.0)  # expect: nan
twice = jax.jit(lambda a: a * 2, donate_argnums=0)
out = twice(scaled)
"""
# --- recompile -------------------------------------------------------------------------------
CASES["recompile_shape"] = """
@jax.jit
def mse(pred, y):
    return jnp.mean((pred - y) ** 2)
a = mse(jnp.ones(8), jnp.zeros(8))
b = mse(jnp.ones(5), jnp.zeros(5))  # expect: recompile
"""
CASES["recompile_static"] = """
from functools import partial
@partial(jax.jit, static_argnames=("n",))
def power(x, n):
    return x ** n
p2 = power(jnp.ones(3), n=2)
p3 = power(jnp.ones(3), n=3)  # expect: recompile
"""
CASES["recompile_lambda"] = """
xs = [jnp.ones(3), jnp.ones(3)]
out = []
for x in xs:
    out.append(jax.jit(lambda v: v * 2)(x))  # expect: recompile
"""
CASES["recompile_dtype"] = """
@jax.jit
def double(x):
    return 2 * x
double(jnp.ones(3, jnp.float32))
double(jnp.ones(3, jnp.int32))  # expect: recompile
"""
CASES["recompile_pytree_keys"] = """
@jax.jit
def total(batch):
    return sum(v.sum() for v in batch.values())
a = total({"x": jnp.ones(3)})
b = total({"x": jnp.ones(3), "mask": jnp.ones(3)})  # expect: recompile
"""
CASES["recompile_partial_loop"] = """
from functools import partial
def scale(x, s):
    return x * s
for s in (1.0, 2.0, 3.0):
    y = jax.jit(partial(scale, s=s))(jnp.ones(3))  # expect: recompile
"""
CASES["recompile_precision_context"] = """
@jax.jit
def gram(x):
    return x @ x.T
g = gram(jnp.ones((4, 4)))
with jax.default_matmul_precision("float32"):
    g32 = gram(jnp.ones((4, 4)))  # expect: recompile
"""

# --- sharding (explicit mesh axes: the type check needs no more than one device) -------------
CASES["sharding_contracting"] = """
from jax.sharding import PartitionSpec as P, AxisType
mesh = jax.make_mesh((1,), ("model",), axis_types=(AxisType.Explicit,))
@jax.jit
def project(h, w):
    return h @ w  # expect: sharding
with jax.set_mesh(mesh):
    h = jax.device_put(jnp.ones((8, 4)), P(None, "model"))
    w = jax.device_put(jnp.ones((4, 2)), P("model", None))
    out = project(h, w)
"""
# --- out-of-memory (the real RESOURCE_EXHAUSTED: a 1 TiB temporary on CPU) ------------------
CASES["oom_outer_product"] = """
@jax.jit
def sorted_products(x):
    return jnp.sort(x[:, None] * x[None, :], axis=0).sum()
total = float(sorted_products(jnp.ones(1 << 19)))  # expect: out-of-memory
"""
# --- correct programs: no diagnostic ----------------------------------------------------------
CLEAN["mlp_donation"] = """
def init(key, sizes):
    keys = random.split(key, len(sizes) - 1)
    return [(random.normal(k, (m, n)) * 0.1, jnp.zeros(n)) for k, m, n in zip(keys, sizes[:-1], sizes[1:])]
def forward(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b
def loss(params, x, y):
    return jnp.mean((forward(params, x) - y) ** 2)
@jax.jit
def train_step(params, x, y):
    l, g = jax.value_and_grad(loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g), l
train_step = jax.jit(train_step, donate_argnums=0)
key = random.PRNGKey(0)
kp, kx = random.split(key)
params = init(kp, [4, 16, 1])
x = random.normal(kx, (32, 4))
y = x.sum(axis=1, keepdims=True)
for _ in range(3):
    params, l = train_step(params, x, y)
"""
CLEAN["scan_rnn"] = """
def rnn_cell(h, x, W, U):
    return jnp.tanh(h @ W + x @ U)
@jax.jit
def run_rnn(W, U, xs):
    def step(h, x):
        h = rnn_cell(h, x, W, U)
        return h, h
    h, hs = lax.scan(step, jnp.zeros(8), xs)
    return hs.sum()
k1, k2, k3 = random.split(random.PRNGKey(0), 3)
W = random.normal(k1, (8, 8)) * 0.1
U = random.normal(k2, (4, 8)) * 0.1
xs = random.normal(k3, (10, 4))
g = jax.grad(run_rnn)(W, U, xs)
"""
CLEAN["transformer_remat_scan"] = """
def attention(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv
    s = q @ k.T / jnp.sqrt(q.shape[-1])
    return jax.nn.softmax(s, axis=-1) @ v
def block(x, p):
    h = x + attention(jax.nn.standardize(x, axis=-1), p["wq"], p["wk"], p["wv"])
    return h + jax.nn.gelu(h @ p["w1"]) @ p["w2"]
@jax.jit
def model(stacked, x):
    def body(x, p):
        return jax.checkpoint(block)(x, p), None
    x, _ = lax.scan(body, x, stacked)
    return jnp.mean(x ** 2)
d = 16
keys = random.split(random.PRNGKey(1), 5)
stacked = {n: random.normal(k, (2, d, d)) * 0.05 for n, k in zip(["wq", "wk", "wv", "w1", "w2"], keys)}
x = random.normal(random.PRNGKey(2), (6, d))
val, grads = jax.jit(jax.value_and_grad(model))(stacked, x)
"""
CLEAN["nested_control_flow"] = """
@jax.jit
def inner(x):
    return jnp.sin(x) + 1.0
@jax.jit
def outer(x, i):
    def body(c, t):
        c = lax.cond(t > 2, lambda v: inner(v), lambda v: v * 0.5, c)
        return c, c.sum()
    c, s = lax.scan(body, x, jnp.arange(5))
    y = lax.switch(i, [jnp.cos, jnp.tanh, inner], c)
    return lax.fori_loop(0, 3, lambda j, v: v + j, y)
out = outer(jnp.ones(3), 1)
"""
CLEAN["vmap_per_example"] = """
def predict(w, x):
    return jnp.tanh(x @ w)
def per_example_grad(w, x, y):
    return jax.grad(lambda w: (predict(w, x) - y) ** 2)(w)
w = jnp.ones(3) * 0.1
xs = jnp.arange(12.0).reshape(4, 3) / 10
ys = jnp.ones(4)
grads = jax.jit(jax.vmap(per_example_grad, in_axes=(None, 0, 0)))(w, xs, ys)
"""
CLEAN["shard_map_one_device"] = """
from jax.sharding import Mesh, PartitionSpec as P
try:
    from jax import shard_map
except ImportError:
    from jax.experimental.shard_map import shard_map
mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
def local_sum(x):
    return lax.psum(x.sum(keepdims=True), "data")
f = jax.jit(shard_map(local_sum, mesh=mesh, in_specs=P("data"), out_specs=P()))
total = f(jnp.arange(8.0))
"""
CLEAN["prng_correct"] = """
key = random.PRNGKey(0)
key, k_init, k_noise = random.split(key, 3)
w = random.normal(k_init, (4,))
noise = random.uniform(k_noise, (4,))
@jax.jit
def dropout(key, x, step):
    k = random.fold_in(key, step)
    return jnp.where(random.bernoulli(k, 0.9, x.shape), x / 0.9, 0.0)
outs = []
for step in range(3):
    outs.append(dropout(key, w, step))
typed = random.key(1)
ta, tb = random.split(typed)
samples = random.normal(ta, (2,)), random.gamma(tb, 2.0, (2,))
"""
CLEAN["keys_sliced_once_each"] = """
keys = random.split(random.key(0), 3)
w = random.normal(keys[0], (4,))
b = random.normal(keys[1], (4,))
k1, k2 = random.split(random.PRNGKey(1))
u = random.uniform(k1, (2,)) + random.uniform(k2, (2,))
"""
CLEAN["key_in_both_cond_branches"] = """
@jax.jit
def sample(key, use_normal):
    return lax.cond(use_normal, lambda k: random.normal(k), lambda k: random.uniform(k), key)
x = sample(random.key(0), True)
"""
CLEAN["vmap_switch_branch_keys"] = """
def augment(k, i, x):
    branches = [lambda x: x + random.normal(k, x.shape), lambda x: x * random.uniform(k, x.shape)]
    return lax.switch(i, branches, x)
f = jax.jit(jax.vmap(augment))
ys = f(random.split(random.key(0), 4), jnp.array([0, 1, 0, 1]), jnp.ones((4, 3)))
"""
CLEAN["scan_keys_carried"] = """
def sample_path(key, n):
    def step(carry, _):
        key, x = carry
        key, sub = random.split(key)
        x = x + random.normal(sub, ())
        return (key, x), x
    _, xs = lax.scan(step, (key, 0.0), None, length=n)
    return xs
path = jax.jit(sample_path, static_argnums=1)(random.PRNGKey(0), 8)
perm = random.permutation(random.PRNGKey(5), 10)
choice = random.choice(random.PRNGKey(6), 10, (3,), replace=False)
"""
CLEAN["safe_where_grad"] = """
def safe_sqrt_norm(x):
    sq = jnp.sum(x ** 2)
    safe = jnp.where(sq > 0, sq, 1.0)
    return jnp.where(sq > 0, jnp.sqrt(safe), 0.0)
g0 = jax.grad(safe_sqrt_norm)(jnp.zeros(3))
g1 = jax.jit(jax.grad(safe_sqrt_norm))(jnp.ones(3))
masked = jnp.where(jnp.arange(3) > 0, jnp.log(jnp.arange(3.0)), 0.0)
"""
CLEAN["adam_by_hand"] = """
def adam_step(p, g, m, v, t, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g ** 2
    mhat = m / (1 - b1 ** t)
    vhat = v / (1 - b2 ** t)
    return p - lr * mhat / (jnp.sqrt(vhat) + eps), m, v
step = jax.jit(adam_step, donate_argnums=(0, 2, 3))
p = jnp.ones(5); m = jnp.zeros(5); v = jnp.zeros(5)
for t in range(1, 4):
    g = jax.grad(lambda q: jnp.sum(q ** 2))(p)
    p, m, v = step(p, g, m, v, t)
small = jnp.ones((64, 64))
res = jax.jit(lambda x: x @ small)(jnp.ones((2, 64)))
"""
CLEAN["while_loop_newton"] = """
@jax.jit
def newton_sqrt(a):
    def cond(s):
        x, i = s
        return (jnp.abs(x * x - a) > 1e-4) & (i < 50)
    def body(s):
        x, i = s
        return (x - (x * x - a) / (2 * x), i + 1)
    return lax.while_loop(cond, body, (a, 0))[0]
r = newton_sqrt(jnp.float32(2.0))
"""

# recompile's look-alikes: each function object is traced once (jit's cache is per object)
CLEAN["steps_from_one_factory"] = """
def make_step(s):
    @jax.jit
    def step(t):
        return jax.tree.map(lambda x: x * s, t)
    return step
a, b = make_step(1.0), make_step(2.0)
a({"w": jnp.ones(2)}); b({"w": jnp.ones(2), "m": jnp.ones(2)})
steps = [make_step(lr) for lr in (0.1, 0.01)]
for st in steps:
    st({"w": jnp.ones(2)})
"""
CLEAN["jit_of_one_function_in_a_loop"] = """
def loss(w, x):
    return jnp.mean((x @ w) ** 2)
w = jnp.ones((3, 1))
for x in [jnp.ones((4, 3)), jnp.zeros((4, 3))]:
    l = jax.jit(loss)(w, x)
"""


def expected(source: str) -> tuple[str, int]:
    """(rule, 1-based line in HEADER + source) of the case's `# expect:` marker."""
    lines = (HEADER + source).splitlines()
    for i, line in enumerate(lines, 1):
        if "# expect:" in line:
            return line.split("# expect:")[1].strip(), i
    raise ValueError("case without an expect marker")

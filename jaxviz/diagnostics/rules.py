"""The diagnostic rules as one table: each rule's name, default severity, summary and hints.

The analyses (check.py, errors.py) read their hints here; Diagnostic checks its rule against
the table's keys. docs/diagnostics.md has one section per rule, in the table's order, and
tests/diagnostics/test_rule_table.py checks the two against each other. Imports nothing of
jaxviz, so every stage can read it.
"""

from __future__ import annotations

import dataclasses

SEVERITIES = ("error", "warning", "info")


@dataclasses.dataclass(frozen=True)
class Rule:
    """One diagnostic rule: what it finds, how bad it is by default, and how to fix it.

    Example:
        Rule("tracer-array", "error", "numpy conversion of a tracer: ...",
             "Use jax.numpy inside traced code, not numpy:\\n    bad:  np.sin(x)\\n"
             "    good: jnp.sin(x)")
    """

    name: str  # "key-reuse"
    severity: str  # the default, "warning"; nan and recompile decide per case
    summary: str  # what it finds: its docs/diagnostics.md section's first sentence
    hint: str  # the fix, with a bad -> good example: "Split the key ...\n bad: ..."
    variants: tuple[tuple[str, str], ...] = ()  # other cases' hints, (("loop", "Derive ..."),)

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"rule {self.name!r}: unknown severity {self.severity!r}")

    def hint_for(self, variant: str = "") -> str:
        """The hint of one case ("loop"); "" is the rule's own hint."""
        return dict(self.variants)[variant] if variant else self.hint

    @property
    def hints(self) -> tuple[str, ...]:
        """Every hint of the rule, its own first."""
        return (self.hint,) + tuple(h for _v, h in self.variants)


_TABLE = (
    Rule(
        "leaked-tracer",
        "error",
        "A tracer escaped its transformation: stored in a global, in a list/dict captured by a "
        "closure, in an attribute.",
        "Return values from the transformed function instead of storing them:\n"
        "    bad:  def f(x): cache.append(x * 2); return x\n"
        "    good: def f(x): y = x * 2; return x, y",
    ),
    Rule(
        "concretization",
        "error",
        "A traced value where a concrete one is needed: `int()`, `float()`, `.item()`, a shape "
        "computed from a traced value, boolean-mask indexing.",
        "Keep the value traced, or mark the argument static "
        "(jax.jit(f, static_argnames=('n',))):\n"
        "    bad:  n = int(x.sum()); jnp.zeros(n)\n"
        "    good: jax.jit(f, static_argnames=('n',)); f(x, n=3)",
    ),
    Rule(
        "tracer-bool",
        "error",
        "Python control flow on a traced value: `if`, `while`, `and`/`or`/`not`, `bool()`.",
        "Use jnp.where or lax.cond, or mark the argument static:\n"
        "    bad:  if x > 0: y = x\n    good: y = jnp.where(x > 0, x, 0.0)",
    ),
    Rule(
        "tracer-array",
        "error",
        "numpy conversion of a tracer: `np.asarray(x)`, `np.sin(x)`, any `np.*` function.",
        "Use jax.numpy inside traced code, not numpy:\n    bad:  np.sin(x)\n    good: jnp.sin(x)",
    ),
    Rule(
        "tracer-integer",
        "error",
        "`__index__` on a tracer: `range(n)`, list or tuple indexing with a traced index.",
        "Index with jnp/lax ops, or make the index static:\n"
        "    bad:  for i in range(n): ...\n"
        "    good: lax.fori_loop(0, n, body, init)  or  static_argnames=('n',)",
    ),
    Rule(
        "non-jax-type",
        "error",
        "A value that is not a JAX type passed to a primitive or a jitted function (a string, "
        "an object, a method's `self`), naming the argument path.",
        "Pass arrays (or pytrees of arrays); mark other arguments static:\n"
        "    bad:  jax.jit(f)(x, 'relu')\n"
        "    good: jax.jit(f, static_argnames=('act',))(x, act='relu')",
    ),
    Rule(
        "large-constant",
        "warning",
        "An array captured as a constant at trace time (closed over instead of passed in) above "
        "`jaxviz.options.large_constant_bytes` (1 MiB), with its size and the node "
        "that consumes it.",
        "Pass the array as an argument instead of closing over it:\n"
        "    bad:  w = np.ones((1024, 1024)); f = jax.jit(lambda x: x @ w)\n"
        "    good: f = jax.jit(lambda w, x: x @ w); f(w, x)",
    ),
    Rule(
        "out-of-bounds",
        "warning",
        "An index known at trace time to be out of bounds: `x[10]` on a length-5 array, "
        "`x.at[7].set(1.)`, a constant start of `lax.dynamic_slice`.",
        "Keep the index within the array, or choose what an out-of-bounds index does with "
        "mode=:\n"
        "    bad:  x = jnp.zeros(5); x = x.at[7].set(1.)    # dropped, no error\n"
        "    good: x = jnp.zeros(8); x = x.at[7].set(1.)    or  x.at[7].set(1., mode='drop')",
        variants=(
            (
                "slice",  # lax.dynamic_slice / dynamic_update_slice: a clamped start, no mode=
                (
                    "Keep the start within the array (dynamic_slice has no mode=: it always "
                    "clamps), or pad the array first:\n"
                    "    bad:  lax.dynamic_slice(x, (5,), (3,))    # x has 6: reads from 3\n"
                    "    good: lax.dynamic_slice(jnp.pad(x, (0, 2)), (5,), (3,))   or  a start "
                    "<= 3"
                ),
            ),
        ),
    ),
    Rule(
        "key-reuse",
        "warning",
        "A PRNG key consumed twice, typed (`jax.random.key`) or legacy (`PRNGKey`): two "
        "samplers, a sampler and a split, the same key in every scan/loop iteration, a key "
        "closed over by a jitted function called repeatedly, `split(k)[i]` colliding with "
        "`fold_in(k, i)`.",
        "Split the key and use each piece once:\n"
        "    bad:  a = random.normal(key, s); b = random.uniform(key, s)\n"
        "    good: ka, kb = random.split(key); a = random.normal(ka, s); "
        "b = random.uniform(kb, s)",
        variants=(
            (
                "loop",  # the same key in every iteration of a scan or loop
                (
                    "Derive a new key each iteration (fold_in with the step, or carry and split "
                    "it):\n"
                    "    bad:  lax.scan(lambda c, x: (c + random.normal(key), None), 0., xs)\n"
                    "    good: lax.scan(lambda c, i: (c + random.normal(random.fold_in(key, i)), "
                    "None), 0., jnp.arange(n))"
                ),
            ),
            (
                "python-loop",  # a Python loop (layers, steps) passes one key to each iteration
                (
                    "Split one key per iteration (layer, step) before the loop:\n"
                    "    bad:  for p in layers: x = dropout(block(p, x), key)\n"
                    "    good: for p, k in zip(layers, random.split(key, len(layers))): "
                    "x = dropout(block(p, x), k)"
                ),
            ),
            (
                "split-fold",  # split(k)[i] and fold_in(k, i) of one key
                (
                    "Use one way of deriving keys from a key: split(k)[i] equals fold_in(k, i):\n"
                    "    bad:  k1, k2 = random.split(key); k3 = random.fold_in(key, 1)\n"
                    "    good: k1, k2, k3 = random.split(key, 3)"
                ),
            ),
            (
                "closed-over",  # a jitted function closes over a key, called again
                (
                    "Pass the key as an argument and split it for each call:\n"
                    "    bad:  f = jax.jit(lambda x: x + random.normal(key, x.shape))\n"
                    "    good: f = jax.jit(lambda k, x: x + random.normal(k, x.shape))"
                ),
            ),
            (
                "library",  # info: an installed library consumed a key twice in one call
                (
                    "Nothing to change in your code unless the call passes one key for two "
                    "arguments:\n"
                    "    bad:  model.fit(key, key)\n"
                    "    good: k1, k2 = random.split(key); model.fit(k1, k2)"
                ),
            ),
            (
                "jvp-pair",  # info: a custom_jvp's primal and its JVP rule sample one key
                (
                    "Nothing to change when the rule must see the primal's noise; for fresh "
                    "noise in the rule, derive its own key:\n"
                    "    same:  z = noise(key) in the primal and again in its jvp rule\n"
                    "    fresh: z = noise(random.fold_in(key, 1)) in the jvp rule"
                ),
            ),
            (
                "same-inputs",  # info: one key builds the same inputs for two consumers
                (
                    "Nothing to change when both should see the same inputs; if each should "
                    "draw its own, split the key:\n"
                    "    same:  a = solve_a(key); b = solve_b(key)   # one test problem\n"
                    "    fresh: ka, kb = random.split(key); a = solve_a(ka); b = solve_b(kb)"
                ),
            ),
            (
                "fixed-key",  # info: a fixed key, its draws only collected (evaluation)
                (
                    "A fixed key draws the same numbers at every call, as evaluation means to "
                    "(scores compare); if each call should draw anew, fold in the step:\n"
                    "    fixed: for s in range(n): losses.append(eval_loss(params, key, x))\n"
                    "    fresh: for s in range(n): "
                    "losses.append(eval_loss(params, random.fold_in(key, s), x))"
                ),
            ),
        ),
    ),
    Rule(
        "use-after-donate",
        "error",
        "An array used after it was donated, or donated and passed again in the same call.",
        "Rebind the donated name to the call's result (the old buffer is gone):\n"
        "    bad:  step(params); loss(params)          # params was donated\n"
        "    good: params = step(params); loss(params)",
        variants=(
            (
                "old-value",  # the call's result has its own name: the old value is wanted
                (
                    "Read what you need of the old value before the call, or do not donate it:\n"
                    "    bad:  new = step(params); change = new - params   # params donated\n"
                    "    good: old = params.copy(); new = step(params); change = new - old   "
                    "or  jax.jit(step) without donate_argnums"
                ),
            ),
        ),
    ),
    Rule(
        "donation-unusable",
        "warning",
        "A donated argument XLA cannot alias: no output with its shape and dtype (JAX's "
        '"Some donated buffers were not usable", here with the argument\'s name), the silent '
        "dtype-changing case (f32 in, f16 out: no warning, nothing reused), or an argument the "
        "function never reads.",
        "Donate only arguments that an output can replace (same shape and dtype):\n"
        "    bad:  jax.jit(lambda x: x.sum(), donate_argnums=0)\n"
        "    good: jax.jit(lambda x: x * 2, donate_argnums=0)",
        variants=(
            (
                "chosen",  # a library donates every array and silences JAX's warning
                "Nothing to change: the library donates every array on purpose; to keep "
                "an argument's buffer, pass it where the library does not donate:\n"
                "    bad:  eqx.filter_jit(step, donate='all')(model, x)  # x kept too\n"
                "    good: eqx.filter_jit(step, donate='all-except-first')(x, model)",
            ),
        ),
    ),
    Rule(
        "nan",
        "error",  # an Inf is a warning (one may be meant: log(0))
        "A NaN or Inf produced by the function or its gradient, including the silent NaN "
        "gradients through `jnp.where`, `sqrt` or `log` at 0.",
        "Keep the unsafe op off the masked values too (jnp.where does not stop its gradient):\n"
        "    bad:  jnp.where(x > 0, jnp.sqrt(x), 0.)\n"
        "    good: safe = jnp.where(x > 0, x, 1.); jnp.where(x > 0, jnp.sqrt(safe), 0.)",
        variants=(
            (
                "later",  # a name the cell keeps holds NaN from a later call
                (
                    "Run the cell again with `%%jaxtrace --nans` (a script: "
                    "`python -m jaxviz --nans "
                    "FILE.py`): every call is checked, more slowly, and the operation that first "
                    "made the value is named."
                ),
            ),
            (
                "domain",  # a forward op made NaN from a value outside its domain (sqrt of < 0)
                (
                    "Keep the input inside the operation's domain where it is made (a positive "
                    "transform or a floor), not only its output:\n"
                    "    bad:  sigma = jnp.sqrt(out[:, 1])                 # NaN where < 0\n"
                    "    good: sigma = jnp.sqrt(jax.nn.softplus(out[:, 1]))  "
                    "or  jnp.sqrt(jnp.maximum(out[:, 1], 1e-6))"
                ),
            ),
            (
                "decomposition",  # a gradient through svd / eigh at repeated values
                (
                    "Differentiate a form whose derivative stays finite where singular values "
                    "(eigenvalues) repeat, as they do for an identity or a symmetric matrix:\n"
                    "    bad:  x = jnp.linalg.lstsq(m, b)[0]      # its gradient goes through svd\n"
                    "    good: x = jnp.linalg.solve(m, b)         # square m; else "
                    "jnp.linalg.pinv(m) @ b"
                ),
            ),
            (
                "overflow",  # a value became infinite from finite inputs (a NaN's input or itself)
                (
                    "Keep the value finite where it first became infinite: exp of a large value "
                    "overflows (subtract the max first, as jax.nn.softmax and "
                    "jax.nn.logsumexp do), log and division need inputs away from 0:\n"
                    "    bad:  e = jnp.exp(s); p = e / e.sum()\n"
                    "    good: p = jax.nn.softmax(s)   # exp(s - s.max()): no overflow"
                ),
            ),
        ),
    ),
    Rule(
        "recompile",
        "info",  # a warning from the third signature, or a new function
        "A user function traced again within the cell, with the reason (shape, dtype, weak "
        "type, static argument, pytree structure, mesh or config context, a function made anew "
        "at each call) and the time tracing and compiling took.",
        "Keep shapes, dtypes and static arguments fixed, and jit a function once:\n"
        "    bad:  for b in batches: jax.jit(lambda x: loss(x))(b)   # new lambda each time\n"
        "    good: loss_j = jax.jit(loss)\n          for b in batches: loss_j(b)",
        variants=(
            (
                "static-identity",  # a static argument's class compares by identity
                (
                    "Give the static argument's class value equality, or build it once:\n"
                    "    bad:  for s in steps: x = step(x, Hparams(0.1))   # a new object each "
                    "call\n"
                    "    good: @dataclasses.dataclass(frozen=True)\n"
                    "          class Hparams: lr: float        # or hp = Hparams(0.1) before "
                    "the loop"
                ),
            ),
            (
                "static",  # a static argument took another value
                (
                    "Pass what changes as a traced argument, or keep the static value fixed:\n"
                    "    bad:  for t in temps: sample(x, temp=t)     # static: a trace per value\n"
                    "    good: sample = jax.jit(sample_fn)           # temp traced: one trace\n"
                    "          for t in temps: sample(x, temp=t)"
                ),
            ),
            (
                "python-number",  # an int at one call, a float at another
                (
                    "Pass the number with one type at every call, a float from the start:\n"
                    "    bad:  lr = 2 ** -step      # an int at step 0, a float after\n"
                    "    good: lr = 2.0 ** -step"
                ),
            ),
            (
                "dtype",  # an array of one dtype, then of another
                (
                    "Make the array with one dtype at every call:\n"
                    "    bad:  x = jnp.array([1, 2, 3])                     # int32 here, "
                    "float32 elsewhere\n"
                    "    good: x = jnp.array([1, 2, 3], dtype=jnp.float32)"
                ),
            ),
            (
                "shape",  # an array of one shape, then of another
                (
                    "Keep the shapes fixed: pad the short batch (and mask the padding), or "
                    "drop it:\n"
                    "    bad:  for b in batches: step(params, b)          # the last one is "
                    "shorter\n"
                    "    good: for b in batches[:-1]: step(params, b)     # or pad it to the "
                    "batch size"
                ),
            ),
            (
                "structure",  # a pytree of one structure, then of another
                (
                    "Pass the same pytree structure at every call (keys, fields, None-ness):\n"
                    "    bad:  state = {'w': w}; state = step(state)   # step adds 'm'\n"
                    "    good: state = {'w': w, 'm': jnp.zeros_like(w)}; state = step(state)"
                ),
            ),
            (
                "mesh",  # called under another mesh (jax.set_mesh): a program per mesh
                (
                    "A function is traced and compiled once per mesh it runs under: set the "
                    "mesh once, or keep one jitted function per mesh if both are meant:\n"
                    "    bad:  with jax.set_mesh(m1): loss(x)\n"
                    "          with jax.set_mesh(m2): loss(x)       # traced again for m2\n"
                    "    good: jax.set_mesh(m1)                     # once, at the top\n"
                    "          loss(x); loss(x)"
                ),
            ),
            (
                "sharding",  # an argument laid out otherwise than at the first call
                (
                    "Give the first call its arguments as the step returns them, made on the "
                    "mesh (an optimizer's state made off it comes back on it):\n"
                    "    bad:  opt_state = opt.init(params)     # its count: uncommitted\n"
                    "    good: with jax.set_mesh(mesh):\n"
                    "              opt_state = opt.init(params)\n"
                    "    or:   jax.set_mesh(mesh)               # once, at the top"
                ),
            ),
            (
                "factory",  # a function made anew per config, each one called many times
                (
                    "To trace once for all configs, pass what differs as an argument instead of "
                    "building it into each new function:\n"
                    "    bad:  for lr in lrs: step = make_step(lr)   # lr a constant in each step\n"
                    "    good: step = make_step()\n"
                    "          for lr in lrs: step(params, opt_state, x, y, lr)"
                ),
            ),
        ),
    ),
    Rule(
        "sharding",
        "error",
        "A sharding error at your line: `ShardingTypeError` under explicit mesh axes, a "
        "`shard_map` whose `in_specs` do not fit its arguments, an array put or passed onto a "
        "mesh it does not fit; naming the operands' shardings.",
        "Say the output's sharding, or reshard an operand first:\n"
        "    bad:  y = a @ b          # a: f32[64@data,32@model], b: f32[32@model,16]\n"
        "    good: y = jnp.matmul(a, b, out_sharding=P('data', None))  "
        "or  y = a @ jax.reshard(b, P())",
        (
            (
                "default-explicit",
                "Code written for automatic sharding (`with_sharding_constraint`, jit's "
                "`in_shardings`, flax's `nnx.with_partitioning`) wants a mesh of Auto axes; "
                "under explicit ones, say the output's sharding:\n"
                "    bad:  mesh = jax.make_mesh((2, 4), ('data', 'model'))   # Explicit axes\n"
                "    good: mesh = jax.make_mesh((2, 4), ('data', 'model'),\n"
                "                               axis_types=(AxisType.Auto,) * 2)\n"
                "    or:   y = jnp.matmul(a, b, out_sharding=P('data', None))",
            ),
            (
                "in-specs",
                "Give shard_map one spec per argument, no longer than its rank, over mesh "
                "axes whose sizes divide its dimensions:\n"
                "    bad:  shard_map(f, mesh=mesh, in_specs=P('x'), out_specs=P('x'))(x)  "
                "# x: f32[12,4], x=8\n"
                "    good: shard_map(f, mesh=mesh, in_specs=P(None, 'x'), ...)  or pad x to "
                "f32[16,4]",
            ),
            (
                "device-put",
                "Put the array on the function's mesh, with a spec whose axes divide its "
                "dimensions:\n"
                "    bad:  jax.device_put(x, NamedSharding(mesh, P('x')))   # x: f32[12,4], "
                "x=8\n"
                "    good: jax.device_put(x, NamedSharding(mesh, P(None, 'x')))  or  "
                "jax.reshard(x, P(...)) onto the mesh the function uses",
            ),
            (
                "fed-back",
                "Give the step's output the sharding its input asks for, so its result can be "
                "fed back without a reshard:\n"
                "    bad:  step = jax.jit(f, in_shardings=NamedSharding(mesh, P('x')),\n"
                "                         out_shardings=NamedSharding(mesh, P(None, 'x')))\n"
                "          for _ in range(n): h = step(h)\n"
                "    good: step = jax.jit(f, in_shardings=NamedSharding(mesh, P('x')),\n"
                "                         out_shardings=NamedSharding(mesh, P('x')))",
            ),
        ),
    ),
    Rule(
        "unwatched",
        "info",
        "A block of the cell ran with jaxviz stepped aside, unwatched: IPython's %timeit and "
        "%%timeit time their statement as a plain cell would, so a misuse only inside them "
        "(a jit made per call, which compiles again each time) is not found there.",
        "Run the timed statement once in the cell, outside %timeit, to have it checked:\n"
        "    bad:  %timeit jax.jit(partial(f, n=3))(x)   # not watched\n"
        "    good: y = jax.jit(partial(f, n=3))(x)       # watched once\n"
        "          %timeit jax.jit(partial(f, n=3))(x)",
    ),
    Rule(
        "collective",
        "info",
        "A sharded program's costly reshard: an all-gather that makes a value whole on each "
        "device, over 10% of its compiled peak, that a sharding of yours asked for; a "
        "reshard inside a `scan` / `while` body, run each iteration; or a value a loop body "
        "reshards back and forth between two shardings, each iteration.",
        "Keep the value sharded where it is used, or ask for the layout the op needs:\n"
        "    bad:  y = jax.lax.with_sharding_constraint(h, P())        # gathers h whole\n"
        "    good: y = jax.lax.with_sharding_constraint(h, P('x'))     # or out_shardings=P('x')",
        (
            (
                "loop",
                "Reshard once, before the loop, what its body needs in another layout:\n"
                "    bad:  def body(c, _): return f(with_sharding_constraint(c, P())), None\n"
                "    good: c = with_sharding_constraint(c, P()); jax.lax.scan(body, c, ...)",
            ),
            (
                "back-and-forth",
                "Keep one sharding for the value through the loop body (reshard once, outside "
                "the loop, what needs the other):\n"
                "    bad:  h = with_sharding_constraint(f(h), P('x'))\n"
                "          h = with_sharding_constraint(g(h), P(None, 'x'))  # and back, each "
                "iteration\n"
                "    good: h = with_sharding_constraint(g(h), P('x'))        # one sharding "
                "throughout",
            ),
        ),
    ),
    Rule(
        "out-of-memory",
        "error",
        "XLA could not allocate what a call needs (at compile time, at dispatch, or at the "
        "first use of its result), or a function's compiled peak exceeds its device's "
        "memory: the largest buffers of its compiled program at its peak, with their lines "
        "and categories.",
        "Shrink, rematerialise or donate the largest buffers the finding lists:\n"
        "    bad:  step = jax.jit(train_step)                        # activations kept\n"
        "    good: step = jax.jit(train_step, donate_argnums=(0, 1))  # and jax.checkpoint "
        "the blocks, or a smaller batch",
    ),
    Rule(
        "program-mismatch",
        "error",
        "The processes of one jax.distributed run traced different programs of one function "
        "whose arrays span them: the first difference (an argument's shape, or the first "
        "equation whose result differs) at the line that made it.",
        "Give every process the same shapes: each process's local batch the same size, the "
        "same code path on every process:\n"
        "    bad:  local = data[: n_rows_of_this_host]      # 4 rows here, 6 on another host\n"
        "    good: local = data[:batch // jax.process_count()]  # the same on every process",
    ),
)

RULES: dict[str, Rule] = {r.name: r for r in _TABLE}  # in the order of docs/diagnostics.md

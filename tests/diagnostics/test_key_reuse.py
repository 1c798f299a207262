"""key-reuse: the false positives of tests/diagnostics/realcode.py (a fixed evaluation key,
MC-dropout keys split from it, cond/switch branches under vmap), each beside the true
reuse it must not hide.

The fixed-key rule (docs/diagnostics.md, key-reuse; jaxviz/diagnostics/keys/fixed.py): a key
a Python loop consumes again is a fixed key, an info, when no draw feeds a later iteration's
draws, each call that draws differs in more than its key, and a split key reaches a draw;
otherwise the finding stays a warning. Inside a jaxpr, draws whose results meet only in a
select_n are alternatives (KeyFlow).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
from jax import lax, random

import jaxviz
from jaxviz.diagnostics.keys.fixed import fixed_key
from jaxviz.diagnostics.keys.flow import KeyFlow
from tests.diagnostics.corpus import HEADER


def run(name: str, source: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ct = jaxviz.trace_cell(HEADER + source, filename=f"<keys {name}>")
    assert ct.error is None, repr(ct.error)
    return ct


def key_findings(ct) -> list:
    return [d for d in ct.diagnostics if d.rule == "key-reuse"]


def one(ct, severity: str, code: str):
    """The cell's one key-reuse finding: its severity, at the line holding `code`."""
    got = key_findings(ct)
    assert len(got) == 1, [d.format() for d in got]
    d = got[0]
    assert d.severity == severity, d.format()
    assert code in d.code, d.format()
    assert d.code in d.message
    return d


def reuses(f, *args) -> list[str]:
    return [r.why for r in KeyFlow().run(jax.make_jaxpr(f)(*args)).reuses]


STEP = """
@jax.jit
def step(w, key, x):
    keep = random.bernoulli(key, 0.5, x.shape)
    return w - 0.1 * jnp.mean(jnp.where(keep, x, 0.0) * w)

@jax.jit
def eval_loss(w, key, x):
    keep = random.bernoulli(key, 0.5, x.shape)
    return jnp.mean(jnp.where(keep, x, 0.0) * w)

w = jnp.ones(3)
x = jnp.arange(3.0)
"""


# --- 1. a fixed evaluation key -------------------------------------------------------------


def test_fixed_eval_key_is_an_info_that_states_the_fact():
    ct = run(
        "fixed_eval",
        STEP
        + """
key = random.key(0)
eval_key = random.key(1234)
losses = []
for i in range(4):
    key, sub = random.split(key)
    w = step(w, sub, x)
    losses.append(eval_loss(w, eval_key, x))
""",
    )
    d = one(ct, "info", "losses.append(eval_loss(w, eval_key, x))")
    assert "every call of eval_loss draws the same random numbers from `eval_key`" in d.message
    assert "4 calls" in d.message and "fixed key" in d.message
    assert "fold_in" in d.hint


def test_fixed_eval_key_over_nested_batches_with_a_printed_mean_is_an_info():
    ct = run(
        "fixed_eval_nested",
        STEP
        + """
key = random.key(0)
eval_key = random.key(1)
hist = []
for epoch in range(2):
    key, sub = random.split(key)
    w = step(w, sub, x)
    for b in [x, 2 * x]:
        hist.append(eval_loss(w, eval_key, b))
    print(np.mean(np.asarray(hist)))
""",
    )
    one(ct, "info", "hist.append(eval_loss(w, eval_key, b))")


def test_fixed_key_over_a_comprehension_of_params_is_an_info():
    ct = run(
        "fixed_eval_comp",
        STEP
        + """
eval_key = random.key(1)
scores = [eval_loss(w * s, eval_key, x) for s in (1.0, 2.0, 3.0)]
""",
    )
    one(ct, "info", "scores = [eval_loss(w * s, eval_key, x)")


def test_training_step_with_a_fixed_key_stays_a_warning():
    """The output feeds the next call: the same dropout mask every step."""
    ct = run(
        "train_fixed",
        STEP
        + """
key = random.key(0)
for i in range(3):
    w = step(w, key, x)
""",
    )
    d = one(ct, "warning", "w = step(w, key, x)")
    assert "3 times in this loop" in d.message


def test_fixed_key_whose_draws_reach_training_through_another_call_stays_a_warning():
    ct = run(
        "grads_update",
        STEP
        + """
grads = jax.jit(jax.grad(lambda w, k, x: eval_loss(w, k, x)))
update = jax.jit(lambda w, g: w - 0.1 * g)
key = random.key(0)
for i in range(3):
    g = grads(w, key, x)
    w = update(w, g)
""",
    )
    one(ct, "warning", "g = grads(w, key, x)")


def test_eval_draws_fed_back_into_the_params_stay_a_warning():
    ct = run(
        "eval_feeds_train",
        STEP
        + """
eval_key = random.key(1)
for i in range(3):
    loss = eval_loss(w, eval_key, x)
    w = w - 0.1 * loss
""",
    )
    one(ct, "warning", "loss = eval_loss(w, eval_key, x)")


def test_the_same_call_with_the_same_key_in_a_comprehension_stays_a_warning():
    """Nothing but the key: every call gives the same sample."""
    ct = run(
        "same_call",
        """
sample = jax.jit(lambda k: random.normal(k, (2,)))
key = random.key(0)
samples = [sample(key) for _ in range(3)]
""",
    )
    one(ct, "warning", "samples = [sample(key) for _ in range(3)]")


def test_an_eager_sampler_on_a_fixed_key_in_a_loop_stays_a_warning():
    ct = run(
        "eager_sampler",
        """
key = random.key(0)
xs = []
for i in range(3):
    xs.append(random.normal(key, (2,)))
""",
    )
    one(ct, "warning", "xs.append(random.normal(key, (2,)))")


# --- 2. keys split from the fixed evaluation key (MC dropout) -----------------------------


MC = """
@jax.jit
def mc_predict(w, keys, x):
    masks = jax.vmap(lambda k: random.bernoulli(k, 0.7, x.shape))(keys)
    return jnp.mean(jnp.where(masks, x, 0.0) * w, axis=1)
"""


def test_mc_dropout_split_of_the_fixed_eval_key_is_an_info():
    ct = run(
        "mc_dropout",
        STEP
        + MC
        + """
key = random.key(0)
eval_key = random.key(2)
spread = []
for i in range(4):
    key, sub = random.split(key)
    w = step(w, sub, x)
    sample_keys = random.split(eval_key, 8)
    spread.append(mc_predict(w, sample_keys, x).std())
""",
    )
    d = one(ct, "info", "sample_keys = random.split(eval_key, 8)")
    assert "random.split derives the same keys from `eval_key`" in d.message


def test_mc_dropout_with_legacy_keys_is_an_info():
    ct = run(
        "mc_dropout_legacy",
        STEP
        + MC
        + """
key = random.PRNGKey(0)
eval_key = random.PRNGKey(2)
spread = []
for i in range(3):
    key, sub = random.split(key)
    w = step(w, sub, x)
    spread.append(mc_predict(w, random.split(eval_key, 8), x).std())
""",
    )
    one(ct, "info", "random.split(eval_key, 8)")


def test_eval_keys_unpacked_from_a_split_of_the_fixed_key_are_an_info():
    ct = run(
        "split_unpacked",
        STEP
        + """
two = jax.jit(lambda w, k1, k2, x: eval_loss(w, k1, x) + eval_loss(w, k2, x))
key = random.key(0)
eval_key = random.key(1)
out = []
for i in range(3):
    key, sub = random.split(key)
    w = step(w, sub, x)
    ka, kb = random.split(eval_key)
    out.append(two(w, ka, kb, x))
""",
    )
    one(ct, "info", "ka, kb = random.split(eval_key)")


def test_split_without_rebinding_the_key_driving_training_stays_a_warning():
    """`key` is never rebound: every iteration splits it into the same keys, and k1 drives
    the step whose result feeds the next step (in MC dropout the keys only reach calls
    whose results are collected)."""
    ct = run(
        "split_not_rebound",
        STEP
        + """
key = random.key(0)
for i in range(3):
    k1, k2 = random.split(key)
    w = step(w, k1, x)
""",
    )
    d = one(ct, "warning", "k1, k2 = random.split(key)")
    assert "3 times in this loop" in d.message


def test_split_without_rebinding_the_key_drawing_the_same_sample_stays_a_warning():
    ct = run(
        "split_same_sample",
        """
key = random.key(0)
xs = []
for i in range(3):
    k1, k2 = random.split(key)
    xs.append(random.normal(k1, (2,)))
""",
    )
    one(ct, "warning", "k1, k2 = random.split(key)")


def test_split_of_a_fixed_key_whose_keys_no_call_draws_from_stays_a_warning():
    ct = run(
        "split_unused",
        """
key = random.key(0)
for i in range(3):
    ks = random.split(key)
""",
    )
    one(ct, "warning", "ks = random.split(key)")


def test_the_analysis_without_the_source_says_not_fixed():
    f = jaxviz._compat.UserFrame("<no such file>", 1, 0, "<module>", 0, 0)
    assert fixed_key(f, False, []) is None


# --- 3. cond / switch branches under vmap --------------------------------------------------


def _augment(key, x):
    branches = [
        lambda k, x: x + 0.1 * random.normal(k, x.shape),
        lambda k, x: x * random.uniform(k, x.shape, minval=0.9, maxval=1.1),
        lambda k, x: jnp.roll(x, random.randint(k, (), 0, x.shape[0])),
    ]
    k_choice, k_noise = random.split(key)
    return lax.switch(random.randint(k_choice, (), 0, 3), branches, k_noise, x)


def test_vmapped_switch_branches_drawing_from_one_key_are_alternatives():
    f = lambda key, xs: jax.vmap(_augment)(random.split(key, xs.shape[0]), xs)
    assert reuses(f, random.key(0), jnp.ones((5, 6))) == []


def test_vmapped_cond_branches_drawing_from_one_key_are_alternatives():
    def one_example(k, flip, x):
        return lax.cond(
            flip, lambda x: x + random.normal(k, x.shape), lambda x: x * random.uniform(k), x
        )

    f = lambda key, flips, xs: jax.vmap(one_example)(random.split(key, 4), flips, xs)
    assert reuses(f, random.key(0), jnp.array([True, False] * 2), jnp.ones((4, 3))) == []


def test_unbatched_switch_branches_give_nothing():
    assert reuses(_augment, random.key(0), jnp.ones(6)) == []


def test_a_where_between_two_draws_of_one_key_is_alternatives():
    f = lambda k, p: jnp.where(p, random.normal(k, (3,)), random.uniform(k, (3,)))
    assert reuses(f, random.key(0), jnp.array([True, False, True])) == []


def test_two_draws_of_one_key_added_stay_a_reuse():
    f = lambda k: random.normal(k, (3,)) + random.uniform(k, (3,))
    assert reuses(f, random.key(0)) == ["twice"]


def test_two_draws_of_one_key_returned_side_by_side_stay_a_reuse():
    f = lambda k: (random.normal(k, (3,)), random.uniform(k, (3,)))
    assert reuses(f, random.key(0)) == ["twice"]


def test_a_selected_draw_combined_with_one_of_its_alternatives_stays_a_reuse():
    def f(k, p):
        a, b = random.normal(k, (3,)), random.uniform(k, (3,))
        return jnp.where(p, a, b) + a

    assert reuses(f, random.key(0), jnp.array([True, False, True])) == ["twice"]


def test_a_draw_in_the_predicate_of_the_select_of_another_stays_a_reuse():
    f = lambda k, x: jnp.where(random.bernoulli(k, 0.5, (3,)), x, random.normal(k, (3,)))
    assert reuses(f, random.key(0), jnp.ones(3)) == ["twice"]


def test_vmapped_switch_branch_added_to_a_draw_outside_it_stays_a_reuse():
    def one_example(k, i, x):
        branches = [lambda x: x + random.normal(k, x.shape), lambda x: x * random.uniform(k)]
        return lax.switch(i, branches, x) + random.normal(k, x.shape)

    f = lambda key, idx, xs: jax.vmap(one_example)(random.split(key, 4), idx, xs)
    assert reuses(f, random.key(0), jnp.array([0, 1, 0, 1]), jnp.ones((4, 3)))


def test_vmapped_switch_in_a_jitted_cell_gives_no_finding_and_a_true_reuse_still_does():
    ct = run(
        "vmap_switch",
        """
def augment(key, x):
    branches = [
        lambda k, x: x + 0.1 * random.normal(k, x.shape),
        lambda k, x: x * random.uniform(k, x.shape, minval=0.9, maxval=1.1),
    ]
    k_choice, k_noise = random.split(key)
    return lax.switch(random.randint(k_choice, (), 0, 2), branches, k_noise, x)

@jax.jit
def forward(key, xs):
    return jax.vmap(augment)(random.split(key, xs.shape[0]), xs)

@jax.jit
def noisy(key, x):
    return random.normal(key, x.shape) + random.uniform(key, x.shape)

out = forward(random.key(0), jnp.ones((5, 6)))
y = noisy(random.key(1), jnp.ones(3))
""",
    )
    one(ct, "warning", "random.uniform(key, x.shape)")


# --- jax.random's jits keep the fast path, their consumptions seen by the CALL event --------

SAMPLERS = """
k = random.PRNGKey(0)
for i in range(6):
    u = random.uniform(k)
good = random.key(1)
for i in range(6):
    good, sub = random.split(good)
    v = random.normal(sub)
w = random.normal(k)
"""


def _python_path_calls(monkeypatch) -> list[str]:
    """The names of the jitted calls that take JAX's Python path (the observer's on_jit
    sees them) from now on in the test."""
    from jaxviz.diagnostics.observer import CellObserver

    seen: list[str] = []
    on_jit = CellObserver.on_jit

    def counting(self, call, frame, run):
        seen.append(call.name)
        return on_jit(self, call, frame, run)

    monkeypatch.setattr(CellObserver, "on_jit", counting)
    return seen


def test_jax_random_samplers_on_the_fast_path_still_count_every_consumption():
    got = sorted((d.line, d.message) for d in key_findings(run("fast samplers", SAMPLERS)))
    assert [line for line, _ in got] == [6, 11], got
    assert "6 times in this loop" in got[0][1], got
    assert "consumed by uniform on line 6" in got[1][1], got


def test_jax_random_samplers_keep_the_fast_path(monkeypatch):
    from jaxviz import _compat

    seen = _python_path_calls(monkeypatch)
    run("fast samplers, counted", SAMPLERS)
    fast = _compat.has_sys_monitoring()  # Python >= 3.12: one Python-path call a signature
    assert seen.count("_uniform") == (1 if fast else 6), seen
    assert seen.count("_normal") == (1 if fast else 7), seen


# --- so do the user's jits that consume exactly their first argument (a sampler's step) -----

STEPS = """
@jax.jit
def kstep(key, x):
    return x + random.normal(key, x.shape)

x = jnp.ones(3)
keys = list(random.split(random.key(0), 20))
for i in range(20):
    y = kstep(keys[i], x)
late = kstep(keys[19], x)
"""

# One signature consumes its key, the other none: the second's calls must not count as
# consumptions, nor take the first's off the ledger while they run on the fast path.
MIXED = """
@jax.jit
def maybe(key, x):
    return x + random.normal(key, x.shape) if x.ndim == 1 else x * 2

a, b = jnp.ones(3), jnp.ones((2, 2))
keys = list(random.split(random.key(0), 8))
for i in range(8):
    y = maybe(keys[i], a)
    w = maybe(keys[i], b)
late = maybe(keys[7], a)
"""


def test_a_jit_of_the_users_consuming_its_first_argument_keeps_the_fast_path(monkeypatch):
    from jaxviz import _compat

    seen = _python_path_calls(monkeypatch)
    ct = run("user step on the fast path", STEPS)
    # Python >= 3.12: its consumptions are the CALL events' (each call took JAX's Python
    # path before: 21 of 21); Python 3.11 has no events to record them
    assert seen.count("kstep") == (1 if _compat.has_sys_monitoring() else 21), seen
    got = key_findings(ct)
    assert [d.line for d in got] == [12], [d.format() for d in got]
    assert "consumed by kstep on line 11" in got[0].message, got[0].message


def test_a_signature_consuming_no_key_neither_counts_nor_hides_the_others_consumptions():
    got = key_findings(run("user step, two signatures", MIXED))
    assert [d.line for d in got] == [13], [d.format() for d in got]
    assert "consumed by maybe on line 11" in got[0].message, got[0].message


# A key folded in with a new value at each step conflicts with none of its earlier uses (the
# ledger does not scan them: it was quadratic in the loop's length), but a value folded in
# again, or a split of the key after them, still does.
FOLDS = """
key = random.key(0)
for i in range(30):
    k = random.fold_in(key, i)
again = random.fold_in(key, 7)
late = random.fold_in(key, 25)
whole = random.split(key)
"""


def test_fold_ins_of_new_values_are_no_reuse_but_a_value_again_or_a_split_after_is():
    from jaxviz import _compat

    # (7 was folded in by one of the loop's recorded runs, 25 by a counted one: its value
    # known from the host integer the eager convert before it made a device scalar of;
    # Python 3.11 follows no key through a loop's counted runs)
    got = sorted((d.line, d.message) for d in key_findings(run("fold-ins", FOLDS)))
    want = [7, 8, 9] if _compat.has_sys_monitoring() else [7, 9]
    assert [line for line, _ in got] == want, got
    assert all("random.fold_in on line 6" in m for _, m in got), got

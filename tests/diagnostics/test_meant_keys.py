"""Keys reused on purpose are at most info, with the reason (issue 45, item 12); their
misuse twins stay warnings.

The three shapes, from real code: a fixed evaluation key closed over by a jitted
`evaluate` and split at each call; a benchmark building one test problem from one key for
two solvers; a custom_jvp (jaxopt's perturbations) whose primal and JVP rule sample the
same key. The realcode gate (tests/diagnostics/realcode.py) runs programs in their image.
"""

from __future__ import annotations

import warnings

import jaxviz
from jaxviz.diagnostics.rules import RULES

HEAD = "import jax, jax.numpy as jnp\nfrom jax import random\n"
HINT = RULES["key-reuse"]


def reuses(source: str, name: str) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ct = jaxviz.trace_cell(HEAD + source, filename=f"<{name}>")
    assert ct.error is None, ct.error
    return [d for d in ct.diagnostics if d.rule == "key-reuse"]


EVALUATE = """
test_rng = random.key(1)  # fixed prng key for evaluation
@jax.jit
def evaluate(params, x):
    k1, k2 = random.split(test_rng)
    noise = random.normal(k1, (x.shape[0], 2)) * 0.01
    return jnp.mean((x @ params + noise) ** 2)
params = jnp.ones((3, 2))
scores = []
for step in range(3):
    params = params * 0.9
    {call}
"""


def test_a_fixed_key_closed_over_by_evaluate_is_info():
    (d,) = reuses(EVALUATE.format(call="scores.append(evaluate(params, jnp.ones((4, 3))))"), "eval")
    assert d.severity == "info" and d.line == 7, d.format()
    assert "evaluate closes over the PRNG key `test_rng`" in d.message
    assert "collected, never fed back" in d.message and "fixed key" in d.message
    assert d.hint == HINT.hint_for("fixed-key")


def test_a_closed_over_key_whose_results_are_fed_back_stays_a_warning():
    (d,) = reuses(EVALUATE.format(call="params = params + evaluate(params, jnp.ones((4, 3)))"),
                  "fed")
    assert d.severity == "warning", d.format()
    assert d.hint == HINT.hint_for("closed-over")


PROBLEM = """
def make_problem(key, n=8):
    ka, kb = random.split(key)
    return random.normal(ka, (n, n)) + n * jnp.eye(n), random.normal(kb, (n,))
def solve_a(key):
    A, b = make_problem(key)
    return jnp.linalg.solve(A, b)
def solve_b(key):
    A, b = make_problem(key)
    return jax.scipy.sparse.linalg.cg(A, b)[0]
key = random.key(0)
"""


def test_one_key_building_one_problem_for_two_solvers_is_info():
    (d,) = reuses(PROBLEM + "a = solve_a(key)\nb = solve_b(key)\nerr = jnp.abs(a - b).max()\n",
                  "bench")
    assert d.severity == "info" and d.line == 15, d.format()
    assert "`solve_a` on line 14 and `solve_b` here draw from the same PRNG key" in d.message
    assert "same code" in d.message and "split it" in d.message
    assert d.hint == HINT.hint_for("same-inputs")


def test_one_function_drawing_twice_from_one_key_stays_a_warning():
    (d,) = reuses(PROBLEM + "a = solve_a(key)\nb = solve_a(key)\n", "twice")
    assert d.severity == "warning", d.format()
    (d,) = reuses("key = random.key(0)\na = random.normal(key, (3,))\n"
                  "b = random.uniform(key, (3,))\n", "two-samplers")
    assert d.severity == "warning", d.format()


PERTURBED = """
def make_perturbed_argmax(argmax_fun, num_samples=20, sigma=0.1):
    @jax.custom_jvp
    def forward_pert(inputs, rng):
        samples = random.gumbel(rng, (num_samples,) + inputs.shape)
        return jnp.mean(jax.vmap(argmax_fun)(inputs + sigma * samples), axis=0)
    def pert_jvp(tangent, _, inputs, rng):
        samples = random.gumbel(rng, (num_samples,) + inputs.shape)
        out = jax.vmap(argmax_fun)(inputs + sigma * samples)
        return jnp.einsum('nd,ne,e->d', out, samples, tangent) / (num_samples * sigma)
    forward_pert.defjvps(pert_jvp, None)
    return forward_pert
pert = make_perturbed_argmax(lambda x: jax.nn.one_hot(jnp.argmax(x), x.shape[0]))
key = jax.random.PRNGKey(0)
x = jnp.array([0.5, 0.2, 0.3])
"""


def test_a_custom_jvp_primal_and_its_rule_on_one_key_is_info():
    found = reuses(PERTURBED + "g = jax.jit(jax.grad(lambda x: jnp.sum(pert(x, key) * "
                   "jnp.arange(3.0))))(x)\n", "jvp")
    assert found, "the pair is reported, as an info"
    for d in found:
        assert d.severity == "info", d.format()
        assert "a custom_jvp's primal and its JVP rule sample the same PRNG key" in d.message
        assert d.hint == HINT.hint_for("jvp-pair")


def test_a_custom_jvp_and_a_sampler_beside_it_on_one_key_stay_a_warning():
    found = reuses(PERTURBED + "g = jax.jit(jax.grad(lambda x: jnp.sum(pert(x, key) * "
                   "random.normal(key, (3,)))))(x)\n", "jvp-misuse")
    assert any(d.severity == "warning" for d in found), [d.format() for d in found]


def test_two_jitted_functions_building_one_problem_are_info_and_different_draws_warn():
    jitted = PROBLEM.replace("def solve_a", "@jax.jit\ndef solve_a").replace(
        "def solve_b", "@jax.jit\ndef solve_b")
    (d,) = reuses(jitted + "a = solve_a(key)\nb = solve_b(key)\n", "jits")
    assert d.severity == "info" and "`solve_a` on line 16 and `solve_b` here" in d.message, \
        d.format()
    (d,) = reuses("""
@jax.jit
def init(key):
    return random.normal(key, (3, 3))
@jax.jit
def data(key):
    return random.uniform(key, (8, 3))
key = random.key(0)
w = init(key)
x = data(key)
""", "init-and-data")
    assert d.severity == "warning", d.format()  # weights and data correlated: a bug

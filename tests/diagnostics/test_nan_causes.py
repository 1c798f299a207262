"""A NaN's finding names what made it (issue 45, items 6 and 13).

Item 6: `sigma = jnp.sqrt(out[:, 1])` with negative entries, under jit + grad (with and
without `jax_debug_nans`), was called a gradient NaN with a masking hint; the forward value
is NaN (JAX itself says the sqrt's output is), so the finding names the forward NaN and the
fix is to constrain the input. Item 13: lstsq's gradient at an identity matrix was blamed on
`sqrt`; the NaN comes from the SVD's derivative at repeated singular values.
"""

from __future__ import annotations

import warnings

import jax
import pytest

import jaxviz
from jaxviz.diagnostics.rules import RULES

HEAD = "import jax, jax.numpy as jnp\n"

FORWARD = """
def loss(w, x):
    out = x @ w
    sigma = jnp.sqrt(out[:, 1])
    return jnp.sum(sigma * out[:, 0])
x = jnp.array([[1., 2.], [1., -2.], [2., 1.], [-1., -3.], [1., 1.], [2., -1.], [.5, .5], [1., 3.]])
g = jax.jit(jax.grad(loss))(jnp.eye(2), x)
"""


def nan_of(source: str, name: str, debug_nans: bool = False):
    before = jax.config.jax_debug_nans
    jax.config.update("jax_debug_nans", debug_nans)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ct = jaxviz.trace_cell(HEAD + source, filename=f"<{name}>")
    finally:
        jax.config.update("jax_debug_nans", before)
    found = [d for d in ct.diagnostics if d.rule == "nan"]
    assert len(found) == 1, [d.format() for d in ct.diagnostics]
    return ct, found[0]


@pytest.mark.parametrize("debug_nans", [False, True], ids=["plain", "debug_nans"])
def test_a_forward_nan_under_grad_is_named_as_the_forward_value(debug_nans, capsys):
    ct, d = nan_of(FORWARD, "forward", debug_nans)
    if debug_nans:
        assert isinstance(ct.error, FloatingPointError)  # the cell fails as without jaxviz
    assert d.line == 5 and d.code == "sigma = jnp.sqrt(out[:, 1])"
    assert "NaN from `sqrt` of a negative value here" in d.message, d.message
    assert "gradient" not in d.message and "jnp.where" not in d.message, d.message
    assert d.hint == RULES["nan"].hint_for("domain")
    assert "softplus" in d.hint and "jnp.maximum" in d.hint


def test_a_masked_forward_nan_is_still_the_gradient_s():
    """`jnp.where(v > 0, jnp.sqrt(v), 0.)`: the forward result is finite; the gradient is not."""
    _, d = nan_of(
        "x = jnp.array([-2., 1., 3.])\n"
        "g = jax.jit(jax.grad(lambda v: jnp.sum(jnp.where(v > 0, jnp.sqrt(v), 0.))))(x)\n",
        "masked",
    )
    assert "NaN in the gradient: the derivative of `sqrt` here" in d.message, d.message
    assert "masking its output (jnp.where) does not mask its gradient" in d.message
    assert d.hint == RULES["nan"].hint


def test_a_derivative_s_own_log_is_blamed_on_the_op_the_line_calls():
    """x ** y's derivative in y takes log(x): a negative base makes the gradient NaN while
    the value (-2.) ** 2. is finite. The line calls `**`, not log."""
    _, d = nan_of(
        "x = jnp.array([-2., 1., 3.])\ng = jax.jit(jax.grad(lambda y: jnp.sum(x ** y)))(2.0)\n",
        "pow",
    )
    assert "the derivative of `pow` here" in d.message, d.message
    assert "of a negative value" not in d.message


@pytest.mark.parametrize(
    "call",
    ["jnp.linalg.lstsq(m, jnp.arange(3.0))[0].sum()", "jnp.linalg.svd(m)[0].sum()"],
    ids=["lstsq", "svd"],
)
def test_a_gradient_nan_from_svd_names_svd_and_why(call):
    _, d = nan_of(f"g = jax.jit(jax.grad(lambda m: {call}))(jnp.eye(3))\n", "svd")
    assert "NaN in the gradient: the derivative of `svd`" in d.message, d.message
    assert "singular values repeat" in d.message
    assert "sqrt" not in d.message and "jnp.where" not in d.message
    assert d.hint == RULES["nan"].hint_for("decomposition")
    if "lstsq" in call:
        assert "(run by this line's call)" in d.message


# --- issue 54: a NaN no output depends on; a derivative's op named with its primal op --------

LOG1PEXP = """
@jax.custom_jvp
def log1pexp(x):
    return jnp.log(1. + jnp.exp(x))

@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = log1pexp(x)
    ans_dot = (1 - 1/(1 + jnp.exp(x))) * x_dot
    return ans, ans_dot

print(jax.grad(log1pexp)(100.))
"""


def test_an_inf_on_a_primal_that_grad_throws_away_is_an_info(capsys):
    # JAX's custom_jvp example: exp(100.) overflows in the primal, which jax.grad drops; the
    # rule's gradient (1.0) is right. It was a warning
    ct, d = nan_of(LOG1PEXP, "log1pexp")
    assert "1.0" in capsys.readouterr().out
    assert (d.severity, d.line) == ("info", 5), d.format()
    assert d.message.startswith("`return jnp.log(1. + jnp.exp(x))`: Inf from `exp` here")
    assert "No output depends on it: JAX dropped the Inf where it was made, unused" in d.message


def test_an_inf_the_cell_prints_or_keeps_stays_a_warning(capsys):
    _, d = nan_of("print(jnp.log(1. + jnp.exp(jnp.float32(100.))))\n", "printed")
    assert d.severity == "warning" and "No output depends" not in d.message, d.format()
    _, d = nan_of("y = jnp.exp(jnp.float32(100.))\n", "kept")
    assert d.severity == "warning" and "No output depends" not in d.message, d.format()


def test_a_dropped_primal_does_not_hide_the_gradient_on_its_line():
    # jax.grad(log)(0.): the primal -inf is dropped; the gradient 1/0 the cell keeps is not.
    # One finding a line: the gradient's, a warning naming log's derivative (it named the
    # primal's `log` before)
    _, d = nan_of("g = jax.grad(lambda x: jnp.log(x))(0.)\n", "log0")
    assert d.severity == "warning", d.format()
    assert "Inf in the gradient: the derivative of `log` here is not finite at 0" in d.message


def test_a_derivative_s_op_is_named_with_the_op_it_differentiates():
    # the user's own `/ 2` on the line: the Inf of sqrt's derivative (0.5 / sqrt(0)) was
    # blamed on "`div` here", as if it were the user's division
    _, d = nan_of("g = jax.grad(lambda x: jnp.sqrt(x) / 2)(0.)\n", "sqrt0")
    assert "Inf in the gradient: the derivative of `sqrt` here is not finite at 0" in d.message
    assert "`div` in the derivative of `sqrt` made it" in d.message, d.message
    # a NaN made from that Inf (0 * inf) names the derivative's op that made the Inf
    _, d = nan_of("def f(x):\n    return jnp.linalg.norm(x)\n"
                  "g = jax.jit(jax.grad(f))(jnp.zeros(3))\n", "norm0")
    assert "the derivative of `sqrt`" in d.message
    assert "`div` in the derivative of `sqrt` made it" in d.message, d.message

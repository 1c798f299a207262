"""Functions whose text twins are golden (tests/golden/*.txt). Line numbers matter: append only."""
import jax
import jax.numpy as jnp
from jax import lax


def mlp(x, w):
    h = jnp.tanh(x @ w)
    return h * 2.0


def loop(c):
    return lax.scan(lambda c, _: (jnp.sin(c), c), c, None, length=3)


inner = jax.jit(lambda v: v + 1.0)


def calls(x):
    return inner(inner(x))


def branch(x, n):
    y = lax.cond(n > 0, lambda v: v * 2.0, lambda v: -v, x)
    return lax.while_loop(lambda v: v.sum() < 10.0, lambda v: v + 1.0, y)


CASES = {
    "mlp": (mlp, lambda: (jnp.ones((8, 4)), jnp.ones((4, 2)))),
    "loop": (loop, lambda: (jnp.ones(2),)),
    "calls": (calls, lambda: (jnp.ones(2),)),
    "branch": (branch, lambda: (jnp.ones(2), 1)),
}

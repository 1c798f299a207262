"""Writes notebooks/quickstart.ipynb (kept as code so the notebook is reviewable)."""
import nbformat as nbf

cells = [
    nbf.v4.new_markdown_cell(
        "# jaxviz quickstart\n\n"
        "`%%jaxtrace` runs a cell as usual and shows every function it ran through JAX: "
        "the staged jaxpr as an interactive graph (click a node for its source line, "
        "expand `jit`/`scan`/`cond`/`while` bodies in place), and what went wrong."),
    nbf.v4.new_code_cell(
        "import os\n"
        "os.environ.setdefault('JAX_NUM_CPU_DEVICES', '8')   # 8 simulated CPU devices, before jax is imported\n"
        "import functools\n"
        "import jax, jax.numpy as jnp\n"
        "from jax import lax\n"
        "import jaxviz\n"
        "%load_ext jaxviz\n"
        "print(jax.__version__, jax.device_count(), 'devices')"),
    nbf.v4.new_markdown_cell("## An MLP training step with donation"),
    nbf.v4.new_code_cell(
        "def init(key, sizes=(16, 64, 64, 4)):\n"
        "    keys = jax.random.split(key, len(sizes) - 1)\n"
        "    return [dict(w=jax.random.normal(k, (m, n)) / jnp.sqrt(m), b=jnp.zeros(n))\n"
        "            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]\n"
        "\n"
        "def mlp(params, x):\n"
        "    for layer in params[:-1]:\n"
        "        x = jax.nn.relu(x @ layer['w'] + layer['b'])\n"
        "    return x @ params[-1]['w'] + params[-1]['b']\n"
        "\n"
        "def loss(params, x, y):\n"
        "    return jnp.mean((mlp(params, x) - y) ** 2)\n"
        "\n"
        "@functools.partial(jax.jit, donate_argnums=0)\n"
        "def train_step(params, x, y):\n"
        "    l, grads = jax.value_and_grad(loss)(params, x, y)\n"
        "    return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads), l\n"
        "\n"
        "params = init(jax.random.key(0))\n"
        "x, y = jnp.ones((32, 16)), jnp.zeros((32, 4))"),
    nbf.v4.new_code_cell(
        "%%jaxtrace -o step_trace --compare\n"
        "for _ in range(3):\n"
        "    params, l = train_step(params, x, y)\n"
        "float(l)"),
    nbf.v4.new_markdown_cell("## A scan RNN"),
    nbf.v4.new_code_cell(
        "def rnn(wh, wx, xs):\n"
        "    def cell(h, x):\n"
        "        h = jnp.tanh(h @ wh + x @ wx)\n"
        "        return h, h.sum()\n"
        "    return lax.scan(cell, jnp.zeros(wh.shape[0]), xs)\n"
        "\n"
        "wh, wx, xs = jnp.eye(8) * 0.5, jnp.ones((3, 8)) * 0.1, jnp.ones((20, 3))"),
    nbf.v4.new_code_cell(
        "%%jaxtrace\n"
        "h, outs = jax.jit(rnn)(wh, wx, xs)"),
    nbf.v4.new_markdown_cell("## cond and while_loop"),
    nbf.v4.new_code_cell(
        "%%jaxtrace\n"
        "@jax.jit\n"
        "def collatz_steps(n):\n"
        "    step = lambda c: (lax.cond(c[0] % 2 == 0, lambda v: v // 2, lambda v: 3 * v + 1, c[0]), c[1] + 1)\n"
        "    return lax.while_loop(lambda c: c[0] != 1, step, (n, 0))[1]\n"
        "\n"
        "collatz_steps(27)"),
    nbf.v4.new_markdown_cell("## A sharded step on 8 CPU devices"),
    nbf.v4.new_code_cell(
        "from jax.sharding import NamedSharding, PartitionSpec as P\n"
        "mesh = jax.make_mesh((jax.device_count(),), ('data',))\n"
        "batch = jax.device_put(jnp.ones((64, 16)), NamedSharding(mesh, P('data')))\n"
        "w = jax.device_put(jnp.ones((16, 4)), NamedSharding(mesh, P()))"),
    nbf.v4.new_code_cell(
        "%%jaxtrace\n"
        "@jax.jit\n"
        "def sharded_step(w, batch):\n"
        "    g = jax.grad(lambda w: jnp.mean((batch @ w) ** 2))(w)\n"
        "    return w - 0.1 * g\n"
        "\n"
        "w = sharded_step(w, batch)"),
    nbf.v4.new_markdown_cell(
        "## Without the magic\n\n`jaxviz.trace` stages a function without running it; "
        "errors become part of the result instead of exceptions."),
    nbf.v4.new_code_cell(
        "def bad(x):\n"
        "    if x.sum() > 0:      # Python control flow on a traced value\n"
        "        return x\n"
        "    return -x\n"
        "\n"
        "t = jaxviz.trace(bad, jnp.ones(3))\n"
        "t"),
]
nb = nbf.v4.new_notebook(cells=cells, metadata={
    "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
    "language_info": {"name": "python"}})
nbf.write(nb, "notebooks/quickstart.ipynb")
print("wrote notebooks/quickstart.ipynb")

"""One kernel per process, as a notebook on each host would run: IPython's real shell, with
jaxviz loaded, runs the cells of a data-parallel notebook; the %%jaxtrace cell's view
(its text twin, --text) goes to stdout. `python notebook_cells.py PROCESS N PORT`."""

import sys

from IPython.testing.globalipapp import get_ipython, start_ipython

process, n, port = sys.argv[1], sys.argv[2], sys.argv[3]
shell = start_ipython() or get_ipython()
shell.run_cell("%load_ext jaxviz")
shell.run_cell(f"""
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address="localhost:{port}", num_processes={n},
                           process_id={process})
""")
shell.run_cell("""%%jaxtrace --text
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()), ("batch",))
batch = jax.make_array_from_process_local_data(
    NamedSharding(mesh, P("batch")), np.ones((4, 8), np.float32))
key = jax.random.key(0)
noise = jax.random.normal(key, (8,))
again = jax.random.uniform(key, (8,))
step = jax.jit(lambda w, b: w - 0.1 * jnp.mean(b @ w))
w = jnp.ones(8) * noise
for i in range(4):
    w = step(w, batch)
print("process", jax.process_index(), "done", float(w.sum()))
""")
sys.stdout.flush()

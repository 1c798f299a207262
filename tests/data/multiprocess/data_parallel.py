"""A small data-parallel step over every process's devices, as tests/test_multiprocess.py
runs it: `python -m jaxviz data_parallel.py PROCESS N PORT [MODE]`.

MODE: "" (all alike), "shape" (process 1's batch has more rows: a different program, which
hangs in its collective), "slow" (process 1 sleeps in its loop: the straggler), "recompile" (process 1 alone
takes a bigger batch at its 4th step: a new program process 0 never traces), "die"
(process 1 kills itself after its loop, before jaxviz's exchange at the end).
"""

import os
import signal
import sys
import time

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
process, n, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
mode = sys.argv[4] if len(sys.argv) > 4 else ""
jax.distributed.initialize(
    coordinator_address=f"localhost:{port}", num_processes=n, process_id=process
)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))
rows = 6 if mode == "shape" and process == 1 else 4
local = np.ones((rows * jax.local_device_count(), 8), np.float32)
sharding = NamedSharding(mesh, P("batch"))
batch = jax.make_array_from_process_local_data(sharding, local)

key = jax.random.key(0)
noise = jax.random.normal(key, (8,))
dropout = jax.random.bernoulli(key, 0.5, (8,))  # the same key again: a finding on every process


@jax.jit
def step(w, batch):
    loss = jnp.mean((batch @ w) ** 2)
    return w - 0.1 * jax.grad(lambda w: jnp.mean((batch @ w) ** 2))(w), loss


w = jnp.ones((8,)) * noise
for i in range(6):
    if mode == "recompile" and process == 1 and i == 3:  # process 1 alone: a bigger batch
        batch = jax.make_array_from_process_local_data(sharding, np.ones((24, 8), np.float32))
    w, loss = step(w, batch)
    if mode == "slow" and process == 1:
        time.sleep(0.3)
print(f"process {process}: loss {float(loss):.3f}", flush=True)
if mode == "die" and process == 1:  # after the last collective: process 0 runs to its end
    os.kill(os.getpid(), signal.SIGKILL)

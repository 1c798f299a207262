"""The coordination service `jax.distributed.initialize` runs: who this process is, and its
key-value store (jax 0.10.2 and 0.12: `jax._src.distributed.global_state.client`, a
`DistributedRuntimeClient` with the same methods in both).

jaxviz opens no socket of its own: what processes tell each other goes through this store,
which JAX already runs for the user's program. The client is read only from the thread that
called `jax.distributed.initialize` after it returned, or from a thread that thread started
later: a client used before `connect()` has returned makes the service fail every process
("wrong service incarnation"), measured on jax 0.12.1.
"""

from __future__ import annotations

from typing import Any

from jax._src import distributed as _distributed


def process_group() -> tuple[int, int] | None:
    """(this process's index, the number of processes) when `jax.distributed` runs with more
    than one process; None otherwise (a single process pays one attribute read)."""
    state = _distributed.global_state
    if state.client is None:
        return None
    n = state.num_processes or 0
    if n < 2 or state.process_id is None:
        return None
    return int(state.process_id), int(n)


def _client() -> Any:
    client = _distributed.global_state.client
    if client is None:
        raise RuntimeError("jax.distributed is not running (shut down already?)")
    return client


def kv_set(key: str, value: str) -> None:
    """Stores `value` under `key` (overwriting)."""
    _client().key_value_set(key, value, allow_overwrite=True)


def kv_dir(prefix: str) -> dict[str, str]:
    """Every key under `prefix` (ending in "/") and its value; {} when none. Never blocks
    beyond one round trip to the coordinator."""
    return dict(_client().key_value_dir_get(prefix))

"""Many processes, one view: a `jax.distributed` run's processes merged on process 0.

Each process of a multi-process JAX run (`jax.distributed.initialize`) is captured alone, as
any script or cell is. This stage tells process 0 what the others saw, through the key-value
store of JAX's own coordination service (`_compat.kv_set` / `kv_dir`; no socket of jaxviz's):

- `programs.py`: a function's program as a small signature (its inputs' types, its
  equations' primitives and types, their lines) and the first difference of two;
- `watch.py`: `ProgramWatch`, an observer of the capture that publishes each program when
  its first call is traced, and on process 0 a thread that compares them while the
  processes run (a mismatch is printed even while the processes hang in its collective);
- `summary.py`: `ProcessSummary`, one process's capture in a few KB (functions, findings,
  compiled and live memory, step and device time);
- `exchange.py`: the one exchange at the end (each process publishes its summary, process 0
  waits a bounded time for the others);
- `merge.py`: `MergedReport`, the processes side by side: programs, findings once each,
  memory, time, the straggler, the missing processes.

A single-process run reads one attribute (`_compat.process_group()`) and does nothing more.
See docs/multiprocess.md.
"""

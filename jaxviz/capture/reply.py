"""Work after a cell's reply: a traced cell's analysis, in a Jupyter kernel's own time.

In a Jupyter kernel (ipykernel) a cell's execute request is handled in one piece: the cell
runs (IPython's run_cell, whose post_execute event ends a traced cell's capture), the kernel
sends the execute_reply (the cell's result and stdout are out, the front end shows the cell
done), then calls its `post_handler_hook`, then reports idle and reads the next request. A
job given to `AfterReply.schedule` runs in that hook: after the reply, before idle. So it
never runs while a later cell runs (the next request waits for it, as it waits for any
cell), and its display updates carry the traced cell's own parent: a front end applies them
to the cell's output (JupyterLab, and nbclient / papermill, which read a cell's messages
until its idle), and a saved notebook holds the complete view.

Without a kernel (IPython's terminal, its test shell) `schedule` says False: the caller runs
the work at once. A kernel that calls no `post_handler_hook` runs the jobs at the next
cell's pre_run_cell, before that cell's code. A job's failure is its own to report (the
view's note); here it is swallowed, never raised into the kernel.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class AfterReply:
    """The jobs to run after the running cell's reply (`schedule`), in the kernel's
    `post_handler_hook`, set on the kernel object for one call and taken off there."""

    def __init__(self) -> None:
        self.jobs: list[Callable[[], Any]] = []
        self._kernel: Any = None  # the kernel whose hook is ours until it runs
        self._shell: Any = None

    def schedule(self, shell: Any, job: Callable[[], Any]) -> bool:
        """Runs `job()` after the running cell's reply; False (nothing scheduled): no
        kernel to run it after, the caller runs it now."""
        kernel = getattr(shell, "kernel", None)
        if (
            kernel is None
            or not callable(getattr(kernel, "post_handler_hook", None))
            or threading.current_thread() is not threading.main_thread()
        ):
            return False
        self.jobs.append(job)
        if self._kernel is None:
            self._kernel, self._shell = kernel, shell
            kernel.post_handler_hook = self._after_reply  # (an instance attribute: ours)
            shell.events.register("pre_run_cell", self._before_next)
        return True

    def _take_off(self) -> None:
        kernel, shell, self._kernel, self._shell = self._kernel, self._shell, None, None
        if kernel is not None and kernel.__dict__.get("post_handler_hook") == self._after_reply:
            del kernel.post_handler_hook  # the kernel's own method again
        if shell is not None:
            try:
                shell.events.unregister("pre_run_cell", self._before_next)
            except ValueError:
                pass

    def _after_reply(self) -> None:
        """The kernel's post_handler_hook: the reply is sent; the jobs run, then the
        kernel's own hook (it puts the kernel's SIGINT handler back: until then an
        interrupt stops a job, which notes it)."""
        kernel = self._kernel
        self._take_off()
        try:
            self.run()
        finally:
            if kernel is not None:
                kernel.post_handler_hook()

    def _before_next(self, *args: Any) -> None:
        """pre_run_cell: the jobs the kernel did not run after the reply, before this cell."""
        self._take_off()
        self.run()

    def run(self) -> None:
        """Runs the waiting jobs now, in order (also when the extension is unloaded)."""
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            try:
                job()
            except BaseException:  # (a job notes its own failure: never the kernel's)
                pass

    def close(self) -> None:
        """`%unload_ext jaxviz`: what waits runs now, and the kernel's hook is its own."""
        self._take_off()
        self.run()

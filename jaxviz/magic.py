"""The %%jaxtrace cell magic: parses its flags, runs the cell under the capture, displays.

A `%%jaxtrace` cell runs as IPython runs any cell: its first line becomes a call of the line
magic `%jaxtrace` (`cell_to_line`), which starts the capture; IPython's post_execute event
ends it (jaxviz.capture.shell: the cell at its usual depth, with IPython's own tracebacks,
line numbers, `;`, Out and history). The cell magic itself, for stacked magics and
`run_cell_magic`, runs its body through a second `run_cell` inside the capture. The cell's
memory chart shows while it runs (jaxviz.view.cellcharts); then its CellTrace (jaxviz.api)
shows under the cell's own output, then the cell's error if it failed (jaxviz.view.session).
`--compare` or `--steps N` also runs each captured function again on synthesised inputs.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import sys
import traceback
from collections.abc import Callable
from typing import Any

from IPython.core import magic_arguments
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from jaxviz import _compat
from jaxviz.api import CellCapture, CellTrace
from jaxviz.capture import shell as ipy
from jaxviz.capture.aside import timeit_aside
from jaxviz.capture.cell import take_staged
from jaxviz.capture.reply import AfterReply
from jaxviz.capture.shell import cell_to_line as cell_to_line  # (IPython's transform)
from jaxviz.graph.files import register_file_label
from jaxviz.memory.plan import DEFAULT_RUN_SECONDS, DEFAULT_STEPS
from jaxviz.view.assets import in_kernel
from jaxviz.view.cellcharts import CellChart
from jaxviz.view.session import Kept, cell_id, show_cell, show_later


@dataclasses.dataclass(eq=False)
class _Cell:
    """One traced cell, from before its statements run to after (`_start`, `_stop`)."""

    args: Any  # the magic's arguments
    cell: ipy.ShellCell  # its file, number and source
    capture: CellCapture  # its recorder, observer, options and profiler (jaxviz.api)
    # what is set on IPython's objects while the cell runs
    undo: contextlib.ExitStack = dataclasses.field(default_factory=contextlib.ExitStack)
    shown: list = dataclasses.field(default_factory=list)  # IPython's tracebacks, held
    live: CellChart = dataclasses.field(default_factory=CellChart)  # memory watch, chart
    result: Any = None  # `%jaxtrace`: IPython's ExecutionResult of the cell


def _after_reply(args: Any) -> bool:
    """Whether a cell with these flags shows its view after its reply, in a kernel: not
    -q, --text, --compare / --steps or --profile, which show (or keep) it at once."""
    return not (args.quiet or args.text or args.compare or args.steps or args.profile)


@magics_class
class JaxTraceMagics(Magics):
    """%%jaxtrace: run a cell and show what JAX staged, what went wrong, where memory went."""

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        self.kept = Kept()
        self._parsed: dict[str, Any] = {}  # the magic's line -> its arguments
        self._transforms = ipy.Transforms()  # the cells as IPython's run_cell transforms them
        self._active: _Cell | None = None  # the cell `%jaxtrace` is tracing
        self._after = AfterReply()  # the views shown after their cell's reply

    @magic_arguments.magic_arguments()
    @magic_arguments.argument(
        "-o",
        "--output",
        metavar="NAME",
        default=None,
        help="store the jaxviz.CellTrace in the variable NAME once the cell has run "
        "(after it: NAME is not defined inside the cell itself; use it in the next cell)",
    )
    @magic_arguments.argument(
        "--text", action="store_true", help="show the text twin instead of the interactive view"
    )
    @magic_arguments.argument(
        "-q",
        "--quiet",
        action="store_true",
        help="display nothing and compute nothing (with -o: the CellTrace, analysed when read)",
    )
    @magic_arguments.argument(
        "--no-run",
        action="store_true",
        help="only trace: no memory chart of the cell, no runs",
    )
    @magic_arguments.argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="also run each captured function N steps again on synthesised inputs, "
        "for its memory chart",
    )
    @magic_arguments.argument(
        "--compare",
        action="store_true",
        help="also run each captured function again on synthesised inputs, with and "
        f"without donation, and compare peak memory (up to {DEFAULT_STEPS} steps, "
        f"about {DEFAULT_RUN_SECONDS:g} s each, unless --steps)",
    )
    @magic_arguments.argument(
        "--profile",
        action="store_true",
        help="run JAX's profiler around the cell and show each line's device time, the "
        "top kernels, FLOP/s, compile times and whether the loop is dispatch-bound "
        "(the time tab; docs/time.md)",
    )
    @magic_arguments.argument(
        "--nans",
        action="store_true",
        help="check every call's outputs for NaN/Inf, not only the first "
        "call of each function (slower, like jax_debug_nans)",
    )
    @line_cell_magic
    def jaxtrace(self, line: str, cell: str | None = None):
        """Runs the cell as usual, then shows every function it ran through JAX.

        Examples:
            %%jaxtrace
            loss = train_step(params, batch)

            %%jaxtrace -o ct --text
            y = jax.grad(f)(x)

        `%jaxtrace` (one %) traces the rest of the cell it is in, from the next line on.
        """
        try:
            args = self._args(line)
        except UsageError as e:
            usage = " ".join(self.jaxtrace.parser.format_usage().replace("::", "").split())
            raise UsageError(
                f"%%jaxtrace: {e}\nusage: %{usage}\nSee %%jaxtrace? for help."
            ) from None
        if args.output is not None and not args.output.isidentifier():
            raise UsageError(f"-o needs a Python variable name, got {args.output!r}.")
        if args.steps is not None and args.steps < 1:
            raise UsageError(f"--steps needs a positive number of steps, got {args.steps}.")
        shell: Any = self.shell  # the running InteractiveShell
        if cell is None:  # `%jaxtrace`: the cell's first line (what a %%jaxtrace cell becomes)
            return self._trace_rest_of_cell(shell, args)
        transformed = self._transforms(shell, cell)  # as run_cell will: once here
        if ipy.awaits_in_running_loop(shell, cell, transformed[0]):
            raise UsageError(
                "%%jaxtrace cannot run a cell with top-level `await`: the kernel runs such a "
                "cell on its own event loop, which a cell magic cannot wait on. Put the JAX "
                "work in a cell without `await` (or in a function you call from one), or run "
                "this cell without %%jaxtrace."
            )
        body = ipy.magic_body(shell, cell, transformed[0])
        cap = self._start(shell, args, body)
        ipy.as_this_cell(
            cap.undo, shell, cell, transformed, body.filename, body.number, cap.capture.rec
        )
        try:
            cap.capture.start()
            result = shell.run_cell(cell, store_history=False, silent=False)
        finally:
            cell_memory = self._stop(cap)
        error = result.error_before_exec or result.error_in_exec
        ipy.show_held_first(shell, error, cap.shown)  # what IPython shows its own way: first
        self._report(shell, cap, error, cell_memory)
        if error is not None:  # the cell fails as it would without jaxviz
            raise ipy.failure(shell, error, cap.shown)
        return None

    def _trace_rest_of_cell(self, shell: Any, args: Any) -> None:
        """`%jaxtrace`: starts the capture of the cell running it, from its next statement
        on; IPython's post_execute (`_post_execute`) ends it when the cell has run. A
        `%%jaxtrace` cell runs this way (its first line made `%jaxtrace` by `cell_to_line`)."""
        frame = ipy.line_magic_caller()
        if frame is None or frame.f_code.co_name != "<module>":
            raise UsageError(
                "%jaxtrace traces the rest of the notebook cell it is in: put it (or "
                "%%jaxtrace) on the cell's first line, not inside a function."
            )
        if self._active is not None:
            if ipy.running(self._active.cell.filename):
                return  # a cell run from a traced cell: the traced cell's capture sees it
            self._end()  # a capture whose cell ended without IPython's post_execute
        cap = self._active = self._start(shell, args, *ipy.rest_of_cell(shell, frame))
        try:
            cap.capture.start()
            cap.capture.rec.watch_calls()
        except BaseException:
            self._active = None
            self._stop(cap)
            raise

    def _post_execute(self) -> None:
        """IPython's post_execute event: the traced cell has run, its capture ends and its
        view is shown (its error after it: IPython's traceback of it was held back)."""
        cap = self._active
        if cap is None or ipy.running(cap.cell.filename):
            return  # a cell run from inside the traced one ended: the traced one runs on
        self._end()

    def _end(self) -> None:
        cap, self._active = self._active, None
        if cap is None:
            return
        shell: Any = self.shell
        try:
            cell_memory = self._stop(cap)
            error, cap.result = ipy.error_of(shell, cap.result), None
            self._report(shell, cap, error, cell_memory)
        except Exception:  # jaxviz's own failure: the cell ran as usual
            print(
                "jaxviz: could not show this cell's trace (a bug in jaxviz; the cell itself "
                "ran as usual):",
                file=sys.stderr,
            )
            traceback.print_exc()
        finally:
            ipy.show_held(shell, cap.shown)  # the cell's own error, after jaxviz's view

    def install(self) -> None:
        """Runs %%jaxtrace cells as IPython runs any cell (`cell_to_line`), their capture
        ended by IPython's post_execute event."""
        ipy.install(self.shell, self._post_execute)

    def uninstall(self) -> None:
        ipy.uninstall(self.shell, self._post_execute)
        if self._active is not None:
            self._end()
        self._after.close()

    def _start(self, shell: Any, args: Any, cell: ipy.ShellCell, result: Any = None) -> _Cell:
        """A traced cell's capture, made before its statements run (`capture.start()`
        starts it): its recorder, its memory watch and live chart, IPython's tracebacks
        held (showing the magic's line as written in place of IPython's call of it)."""
        label = f"cell [{cell.number}]"
        # (earlier cells' files are labelled from IPython's own map: jaxviz.graph.files)
        register_file_label(cell.filename, label)
        capture = CellCapture(
            cell.filename, shell.user_ns, label, nans=args.nans, profile=args.profile
        )
        cap = _Cell(args, cell, capture, result=result)
        note = stored_after(args.output) if args.output else None
        # the NaN checks still pending when the cell ends are left to the analysis after
        # its reply (their values may still be computing: the reply need not wait)
        capture.obs.defer_finish = _after_reply(args) and in_kernel()
        ipy.hold_tracebacks(cap.undo, shell, cap.shown, cell.head, note)
        timeit_aside(cap.undo, shell, capture.rec, cap.live.paused)
        if not (args.quiet or args.no_run):
            cap.live.start(
                capture.rec, cell.filename, cell.number, chart=in_kernel() and not args.text
            )
        return cap

    def _stop(self, cap: _Cell) -> Any:
        """Ends the capture (what `_start` set is put back); the cell's CellMemory record."""
        try:
            cap.capture.stop()
        finally:
            try:
                memory = cap.live.stop(
                    cap.capture.rec, schedule=lambda job: self._after.schedule(self.shell, job)
                )
            finally:
                cap.undo.close()
        return memory

    def _report(
        self, shell: Any, cap: _Cell, error: BaseException | None, cell_memory: Any
    ) -> CellTrace | None:
        """The cell's CellTrace: built, stored (-o), displayed under the cell's output, and
        the runs after the cell that were asked for. None: -q without -o, runs or a profile:
        nobody can read it, so nothing of it is computed."""
        args, capture = cap.args, cap.capture
        cid = cell_id(shell)
        # the capture's records hold the cell's jitted functions strongly (a trace holds them
        # weakly) until the memory runs below are done: `staged` lives to the report's end
        staged = take_staged(capture.rec, error)
        # runs of the user's functions again: only when asked for
        run = error is None and not args.no_run and bool(args.compare or args.steps)
        if args.quiet and not (args.output or run or args.profile):
            self.kept.add(cid, [])  # nothing shown, nothing kept: nothing to do
            return None
        # the view after the reply, in a kernel (capture/reply.py): not --text, runs or a
        # profile, which show at once
        # (JAX raised while tracing: nothing ran, and the view is one line now: show_cell)
        tracing_failed = error is not None and (
            _compat.raised_while_tracing(error) or any(s.error is not None for s in staged)
        )
        if (
            _after_reply(args)
            and staged
            and not tracing_failed
            and show_later(
                capture.label,
                lambda: self._analyse(shell, cap, staged, error, cell_memory),
                cell_memory,
                schedule=lambda job: self._after.schedule(shell, job),
                then=lambda ct: self.kept.add_cell(cid, ct, stored=bool(args.output)),
            )
        ):
            return None
        capture.obs.finish()  # (the NaN checks still pending, if left to the analysis)
        # (--compare: the donation what-if compiles again per argument; each function's
        # compiled memory is read from JAX's caches, unless --no-run). -q: the analysis
        # runs when the CellTrace is first read (what the namespace holds is read now)
        ct = capture.finish(
            staged,
            error,
            cap.cell.source,
            what_if=args.compare,
            compiled_memory=not args.no_run,
            lazy=args.quiet and not run,
            cell_memory=cell_memory,
        )
        if args.output:
            shell.user_ns[args.output] = ct
        show_cell(
            ct,
            cap.live,
            cell_memory,
            text=args.text,
            quiet=args.quiet,
            run=run,
            steps=args.steps,
            compare=args.compare,
            tracing_failed=tracing_failed,
        )
        staged = []  # the runs are done: the traces' functions may go with the user's names
        self.kept.add_cell(cid, ct, stored=bool(args.output))
        return ct

    def _analyse(
        self, shell: Any, cap: _Cell, staged: list, error: Any, cell_memory: Any
    ) -> CellTrace:
        """After the reply (show_later): the NaN checks still pending, then the CellTrace,
        stored (-o). No cell has run since the traced one: its namespace is as it ended."""
        args, capture = cap.args, cap.capture
        capture.obs.finish()
        ct = capture.finish(staged, error, cap.cell.source, compiled_memory=not args.no_run,
                            cell_memory=cell_memory)  # fmt: skip
        if args.output:
            shell.user_ns[args.output] = ct
        return ct

    def _args(self, line: str) -> Any:
        """The magic's arguments (argparse's Namespace, read only), parsed once per line:
        argparse takes ~50 us, a tenth of a tiny cell's cost."""
        args = self._parsed.get(line)
        if args is None:
            args = magic_arguments.parse_argstring(self.jaxtrace, line)
            if len(self._parsed) >= 64:
                self._parsed.clear()
            self._parsed[line] = args
        return copy.copy(args)


def stored_after(name: str) -> Callable[[BaseException], bool]:
    """A note for the NameError of `name` used inside its own `-o name` cell: jaxviz stores
    it once the cell has run. The error keeps its type and traceback."""

    def note(e: BaseException) -> bool:
        if not isinstance(e, NameError) or getattr(e, "name", None) != name:
            return False
        text = (
            f"jaxviz: %%jaxtrace -o {name} stores the cell's trace in `{name}` once the cell "
            f"has run, not while it runs: use `{name}` in the next cell."
        )
        if text not in getattr(e, "__notes__", ()):
            e.add_note(text)
        return True

    return note


__all__ = ["CellTrace", "JaxTraceMagics"]

"""The %%jaxtrace cell magic: thin, over jaxviz.trace_cell's machinery.

A `%%jaxtrace` cell runs as IPython runs any cell: its first line becomes a call of the line
magic `%jaxtrace` (`cell_to_line`, an input transformer), which starts the capture; IPython's
post_execute event ends it. The cell's statements run at their usual depth, with IPython's
own tracebacks, line numbers, `;`, Out and history. (The cell magic itself, for stacked
magics and `run_cell_magic`, runs its body through a second `run_cell` inside the capture.)
When the cell starts, its memory chart is displayed (a MemoryChart widget, fed through its
own comm while the cell runs: device memory from a background sampler, each jitted call a
mark, the arrays alive at any moment); when it ends, that output becomes a self-contained
copy of the finished chart, and the CellTrace is displayed under the cell's own output: the
graph view, then the cell's error if it failed.

Nothing runs the user's functions again unless asked: `--compare` (or `--steps N`) compiles
and runs each captured function on synthesised inputs, with and without donation.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import linecache
import re
import sys
import time
import traceback
from typing import Any

from IPython.core import magic_arguments
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from jaxviz import _compat
from jaxviz.api import CellTrace, finish_cell, finish_profile, recorder, start_profile
from jaxviz.capture.aside import timeit_aside
from jaxviz.capture.cell import drop_hook_frames, magic_line_back, take_staged
from jaxviz.capture.lines import leading_blank_lines, register_first_line
from jaxviz.config import options
from jaxviz.graph.files import register_file_label
from jaxviz.graph.trace import CellCost
from jaxviz.memory.peaks import with_donations
from jaxviz.memory.plan import DEFAULT_RUN_SECONDS, DEFAULT_STEPS
from jaxviz.memory.timeline import CellMemory
from jaxviz.view.assets import in_kernel
from jaxviz.view.cellcharts import CellChart
from jaxviz.view.session import Kept, show_cell
from jaxviz.view.session import cell_id as _cell_id


class CellFailed(Exception):
    """Fails a %%jaxtrace cell whose SyntaxError IPython already showed; renders as nothing.

    `failed(error)` makes one named after the error, so that what reads a notebook's error
    outputs (nbclient, papermill) reports `SyntaxError: '(' was never closed`, as it would
    without the magic. (IPython shows a SyntaxError raised again by a magic with the magic's
    own frames, so the original is shown once, where IPython first showed it.)
    """

    def _render_traceback_(self):
        return []


def failed(error: BaseException) -> CellFailed:
    cls = type(type(error).__name__, (CellFailed,), {"__module__": "builtins"})
    return cls(str(error))


def _silence(exc: BaseException, stb: list | None = None) -> BaseException:
    """Makes IPython show `stb` (its own traceback of the cell, held back) for `exc`.

    IPython renders an exception through its `_render_traceback_` when it has one; the
    mark is removed once the cell has finished.
    """
    try:
        exc._render_traceback_ = lambda: list(stb or [])  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass
    return exc


def _cell_number(shell, cell: str) -> int:
    """The In[] number of the running cell.

    IPython counts the cell before its magics run, so while a stored cell runs,
    execution_count is already the next cell's number.
    """
    hist = shell.history_manager.input_hist_raw
    if hist and "%%jaxtrace" in hist[-1] and hist[-1].rstrip().endswith(cell.rstrip()):
        return shell.execution_count - 1
    return shell.execution_count


def _awaits_in_running_loop(shell: Any, cell: str, transformed: str) -> bool:
    """A cell with top-level await, under a kernel whose event loop is running (Jupyter):
    the nested run_cell would fail with "This event loop is already running"."""
    import asyncio

    if "await" not in transformed and "async" not in transformed:
        return False  # (should_run_async compiles the cell to find out)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False  # a plain IPython shell runs it in its own runner
    try:
        return bool(shell.should_run_async(cell, transformed_cell=transformed))
    except Exception:
        return False


_HEAD = re.compile(r"%%jaxtrace(?:[ \t][^\n]*)?\n?")


def cell_to_line(lines: list[str]) -> list[str]:
    """IPython's cleanup transform of a `%%jaxtrace` cell: its first line becomes a call of
    the line magic `%jaxtrace` (the rest of the cell traced), so that IPython runs the cell as it
    runs any cell, not as a cell magic's argument: its statements at their usual depth
    (JAX records a traceback per result: a deeper stack is a slower call), its own line
    numbers, tracebacks, `;` and Out, and no second run_cell (~0.4 ms a cell).

    Cells the cell magic runs as before: stacked cell magics (the body starts with `%%`),
    an indented body (IPython dedents a cell magic's body) and `await`/`async` (the magic
    says why it cannot run those under a running loop). `has_side_effects`: IPython's
    check_complete leaves it out, so a terminal still waits for the blank line that ends
    a cell magic."""
    if not lines or not lines[0].startswith("%%jaxtrace"):
        return lines
    head = lines[0]
    if not _HEAD.fullmatch(head) or head.rstrip().endswith(("?", "\\")):
        return lines
    body = lines[1:]
    first = next((ln for ln in body if ln.strip()), "")
    if first.startswith(("%%", " ", "\t")):
        return lines
    if any("await" in ln or "async" in ln for ln in body):
        return lines
    # the call IPython's token transform makes of `%jaxtrace ...` (_tr_magic), written here:
    # left as `%jaxtrace`, the cell is tokenized twice (once to find the escape, once more
    # after it), ~0.5 ms a cell of 20 lines
    rest = head[len("%%jaxtrace") :].strip()
    return [f"get_ipython().run_line_magic('jaxtrace', {rest!r})\n", *body]


cell_to_line.has_side_effects = True  # type: ignore[attr-defined]


def _line_magic_caller() -> Any:
    """The frame that called IPython's run_line_magic (a cell's, for `%jaxtrace`)."""
    f: Any = sys._getframe(1)
    while f is not None and f.f_code.co_name != "run_line_magic":
        f = f.f_back
    return None if f is None else f.f_back


def _running(filename: str) -> bool:
    """Whether the cell compiled as `filename` is running: one of its statements is on the
    stack (IPython compiles and runs a cell's statements one by one)."""
    return _compat.module_frame(sys._getframe(1), filename) is not None


@dataclasses.dataclass(eq=False)
class _Cell:
    """One traced cell, from before its statements run to after: its capture (`enter`
    starts it; JaxTraceMagics._stop ends it) and what the view is built from."""

    args: Any  # the magic's arguments
    filename: str
    number: int
    source: str  # the cell as compiled, the magic's line blank
    rec: Any  # its Recorder and CellObserver
    obs: Any
    # what is set on IPython's objects while the cell runs; the options and the recorder
    undo: contextlib.ExitStack = dataclasses.field(default_factory=contextlib.ExitStack)
    scope: contextlib.ExitStack = dataclasses.field(default_factory=contextlib.ExitStack)
    shown: list = dataclasses.field(default_factory=list)  # IPython's tracebacks, held
    live: CellChart = dataclasses.field(default_factory=CellChart)  # memory watch, chart
    t0: float = 0.0
    t1: float = 0.0
    result: Any = None  # `%jaxtrace`: IPython's ExecutionResult of the cell
    profiling: Any = None  # --profile: JAX's profiler around the cell (jaxviz.profile)

    def enter(self) -> None:
        self.t0 = time.perf_counter()
        every = self.args.nans or options.check_every_call
        self.scope.enter_context(options.using(check_every_call=every))
        self.scope.enter_context(self.rec)
        if getattr(self.args, "profile", False):  # stopped first when the scope closes
            self.profiling = start_profile()
            self.scope.callback(self.profiling.stop)


_UNSET = object()


def _set_for(undo: contextlib.ExitStack, obj: Any, name: str, value: Any) -> None:
    """Sets `obj.name` on the instance until `undo` closes; then the instance's own value
    is back, or none (its class's attribute again)."""
    own = vars(obj).get(name, _UNSET)
    setattr(obj, name, value)
    undo.callback(_put_back, obj, name, own)


def _put_back(obj: Any, name: str, own: Any) -> None:
    if own is _UNSET:
        vars(obj).pop(name, None)
    else:
        setattr(obj, name, own)


@magics_class
class JaxTraceMagics(Magics):
    """%%jaxtrace: run a cell and show what JAX staged, what went wrong, where memory went."""

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        self.kept = Kept()
        self._parsed: dict[str, Any] = {}  # the magic's line -> its arguments
        # (cell, IPython's transformers) -> (the cell transformed, its last value silenced)
        self._transformed: dict[tuple, tuple[str, bool]] = {}
        self._active: _Cell | None = None  # the cell `%jaxtrace` is tracing

    @magic_arguments.magic_arguments()
    @magic_arguments.argument(
        "-o",
        "--output",
        metavar="NAME",
        default=None,
        help="store the jaxviz.CellTrace in the variable NAME",
    )
    @magic_arguments.argument(
        "--text", action="store_true", help="show the text twin instead of the interactive view"
    )
    @magic_arguments.argument(
        "-q", "--quiet", action="store_true", help="display nothing (use with -o)"
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
        try:
            transformed, quiet = self._transform(shell, cell)  # as run_cell will: once here
            reuse = True
        except Exception:  # a cell IPython cannot transform: run_cell reports it
            transformed, reuse, quiet = cell, False, False
        if _awaits_in_running_loop(shell, cell, transformed):
            raise UsageError(
                "%%jaxtrace cannot run a cell with top-level `await`: the kernel runs such a "
                "cell on its own event loop, which a cell magic cannot wait on. Put the JAX "
                "work in a cell without `await` (or in a function you call from one), or run "
                "this cell without %%jaxtrace."
            )
        number = _cell_number(shell, cell)
        # the filename IPython's run_cell gives the cell: tracebacks and linecache use it
        filename = shell.compile.cache(transformed, number, raw_code=cell)
        # the body's line 1 is the editor's line 2 (after the blank lines IPython drops):
        # jaxviz shows the editor's numbers, and reads the source as IPython compiled it
        blank = leading_blank_lines(cell)
        source = "".join(cell.splitlines(True)[blank:])
        cap = self._start(shell, args, filename, number, source, first_line=2 + blank)
        # The inner run_cell names the cell after execution_count, already the next cell's
        # number; name it after this cell, as IPython would (Out[] is right as it is).
        undo = cap.undo  # what the lines below set on IPython's objects
        compiler = shell.compile
        cache = compiler.cache
        # (the cell itself was cached above: its name again, not hashed and registered twice)
        _set_for(undo, compiler, "cache", lambda code, n=0, raw_code=None: (
            filename if code is transformed else cache(code, number, raw_code=raw_code)
        ))  # fmt: skip
        # run_cell below transforms the cell again: it gets the transformation made above
        # (IPython's transform_cell is a pure function of the text)
        if reuse:
            transform = shell.transform_cell
            _set_for(undo, shell, "transform_cell",
                     lambda raw: transformed if raw is cell else transform(raw))  # fmt: skip
        # and it asks whether the cell has top-level `await` by compiling it: one with
        # neither `await` nor `async` in it has none
        run_async = shell.should_run_async
        sync = "await" not in transformed and "async" not in transformed

        def should_run_async(raw: str, **k: Any) -> bool:
            return False if raw is cell and sync else run_async(raw, **k)

        _set_for(undo, shell, "should_run_async", should_run_async)
        # A trailing `;` silences the cell's last value: IPython reads it from the history's
        # last input, which is this magic's line, not the cell (run with store_history=False)
        _set_for(undo, shell.displayhook, "quiet", lambda: quiet)
        # CALL events while IPython runs the cell's statements (run_ast_nodes), not through
        # IPython's machinery before and after them
        run_nodes = shell.run_ast_nodes
        rec = cap.rec

        async def watched_run_nodes(*a: Any, **k: Any) -> Any:
            rec.watch_calls()
            try:
                return await run_nodes(*a, **k)
            finally:
                rec.watch_calls(False)

        _set_for(undo, shell, "run_ast_nodes", watched_run_nodes)
        try:
            cap.enter()
            result = shell.run_cell(cell, store_history=False, silent=False)
        finally:
            cell_memory = self._stop(cap)
        shown = cap.shown
        error = result.error_before_exec or result.error_in_exec
        if isinstance(error, (SyntaxError, SystemExit)) or (error is not None and not shown):
            for stb in shown:  # IPython renders these without _render_traceback_
                shell._showtraceback(*stb)
            shown.clear()
        self._report(shell, cap, error, cell_memory)
        if error is not None:
            # The cell fails as it would without jaxviz, with IPython's own traceback of it
            # (held back above), rendered through the exception's _render_traceback_.
            def unmark(*_a, exc=error):
                shell.events.unregister("post_run_cell", unmark)
                exc.__dict__.pop("_render_traceback_", None)

            # IPython already showed these its own way (a SyntaxError, an ExceptionGroup),
            # and would show them again, jaxviz's frames included, ignoring the hook
            if isinstance(error, (SyntaxError, SystemExit)) or not shown:
                raise failed(error) from None
            shell.events.register("post_run_cell", unmark)
            raise _silence(error, shown[-1][2] if shown else [])
        return None

    def _trace_rest_of_cell(self, shell: Any, args: Any) -> None:
        """`%jaxtrace`: starts the capture of the cell running it, from its next statement
        on; IPython's post_execute (`_post_execute`) ends it when the cell has run.

        A `%%jaxtrace` cell is run this way (its first line made `%jaxtrace` by
        `cell_to_line`): the cell's statements run as IPython runs any cell's, at the same
        depth, with its own tracebacks, `;`, Out and line numbers."""
        frame = _line_magic_caller()
        if frame is None or frame.f_code.co_name != "<module>":
            raise UsageError(
                "%jaxtrace traces the rest of the notebook cell it is in: put it (or "
                "%%jaxtrace) on the cell's first line, not inside a function."
            )
        if self._active is not None:
            if _running(self._active.filename):
                return  # a cell run from a traced cell: the traced cell's capture sees it
            self._end()  # a capture whose cell ended without IPython's post_execute
        filename = frame.f_code.co_filename
        result = getattr(shell.displayhook, "exec_result", None)  # the running cell's
        raw = getattr(getattr(result, "info", None), "raw_cell", None)
        count = getattr(result, "execution_count", None)
        number = count if isinstance(count, int) else shell.execution_count
        if not isinstance(raw, str):  # run by other means than run_cell: the code's lines
            raw = "".join(linecache.getlines(filename))
        blank = leading_blank_lines(raw)
        lines = raw.splitlines(True)[blank:]
        at = frame.f_lineno - 1
        head = ""
        if 0 <= at < len(lines):
            head = lines[at].rstrip("\r\n") if lines[at].lstrip().startswith("%") else ""
            lines[at] = "\n"  # the magic's line: none of the cell's code (as compiled)
        cap = self._start(
            shell, args, filename, number, "".join(lines), first_line=1 + blank, head=head
        )
        cap.result = result
        self._active = cap
        try:
            cap.enter()
            cap.rec.watch_calls()
        except BaseException:
            self._active = None
            self._stop(cap)
            raise

    def _post_execute(self) -> None:
        """IPython's post_execute event: the traced cell has run, its capture ends and its
        view is shown (its error after it: IPython's traceback of it was held back)."""
        cap = self._active
        if cap is None or _running(cap.filename):
            return  # a cell run from inside the traced one ended: the traced one runs on
        self._end()

    def _end(self) -> None:
        cap, self._active = self._active, None
        if cap is None:
            return
        shell: Any = self.shell
        try:
            cell_memory = self._stop(cap)
            result = cap.result
            error = None
            if result is not None and shell.last_execution_result is result:
                error = result.error_in_exec
            cap.result = None
            self._report(shell, cap, error, cell_memory)
        except Exception:  # jaxviz's own failure: the cell ran as usual
            print(
                "jaxviz: could not show this cell's trace (a bug in jaxviz; the cell itself "
                "ran as usual):",
                file=sys.stderr,
            )
            traceback.print_exc()
        finally:
            for held in cap.shown:  # the cell's own error, after jaxviz's view
                shell._showtraceback(*held)
            cap.shown.clear()

    def install(self) -> None:
        """Runs %%jaxtrace cells as IPython runs any cell (`cell_to_line`), their capture
        ended by IPython's post_execute event."""
        shell: Any = self.shell
        cleanup = shell.input_transformers_cleanup
        if cell_to_line not in cleanup:
            cleanup.append(cell_to_line)
        shell.events.register("post_execute", self._post_execute)

    def uninstall(self) -> None:
        shell: Any = self.shell
        cleanup = shell.input_transformers_cleanup
        if cell_to_line in cleanup:
            cleanup.remove(cell_to_line)
        try:
            shell.events.unregister("post_execute", self._post_execute)
        except ValueError:  # not registered
            pass
        if self._active is not None:
            self._end()

    def _start(
        self,
        shell: Any,
        args: Any,
        filename: str,
        number: int,
        source: str,
        first_line: int,
        head: str = "",
    ) -> _Cell:
        """A traced cell's capture, made before its statements run (`_Cell.enter` starts
        it): its recorder, its memory watch and live chart, IPython's tracebacks held
        (`head`: the magic's line as written, which they show in place of IPython's call)."""
        # (earlier cells' files are labelled from IPython's own map: jaxviz.graph.files)
        register_file_label(filename, f"cell [{number}]")
        register_first_line(filename, first_line)
        rec, obs = recorder(filename, shell.user_ns, calls_deferred=True)
        cap = _Cell(args, filename, number, source, rec, obs)
        # IPython's traceback of a failing cell is held back and shown once, as this cell's
        # own error, after jaxviz's view (else the cell would show it, then an empty error)
        shown = cap.shown

        def hold(etype: Any, evalue: Any, stb: list) -> None:
            # jaxviz's hooks on JAX's dispatch were on the stack: the traceback without them
            # is the one the cell shows without jaxviz
            if isinstance(evalue, BaseException) and drop_hook_frames(evalue):
                try:
                    stb = shell.InteractiveTB.structured_traceback(
                        etype, evalue, evalue.__traceback__, tb_offset=None
                    )
                except Exception:  # IPython's own rendering failed: keep what it made
                    pass
            shown.append((etype, evalue, magic_line_back(stb, head)))

        _set_for(cap.undo, shell, "_showtraceback", hold)  # (ipykernel sets one per instance)
        timeit_aside(cap.undo, shell, rec, cap.live.paused)
        if not (args.quiet or args.no_run):
            cap.live.start(rec, filename, number, chart=in_kernel() and not args.text)
        return cap

    def _stop(self, cap: _Cell) -> CellMemory | None:
        """Ends the capture (what `_start` set is put back); the cell's memory record."""
        try:
            cap.scope.close()
        finally:
            cap.t1 = time.perf_counter()
            try:
                memory = cap.live.stop(cap.rec)
            finally:
                cap.undo.close()
        return memory

    def _report(
        self, shell: Any, cap: _Cell, error: BaseException | None, cell_memory: Any
    ) -> CellTrace:
        """The cell's CellTrace: built, stored (-o), displayed under the cell's output, and
        the runs after the cell that were asked for."""
        args, number, rec = cap.args, cap.number, cap.rec
        # the capture's records hold the cell's jitted functions strongly (a trace holds them
        # weakly) until the memory runs below are done: `staged` lives to the report's end
        staged = take_staged(rec, error)
        ct = finish_cell(
            staged,
            source=cap.source,
            filename=cap.filename,
            error=error,
            namespace=shell.user_ns,
            label=f"cell [{number}]",
            observer=cap.obs,
            internal_errors=rec.internal_errors,
            compiled_memory=not args.no_run,  # each function's compiled memory: cache hits
        )
        profiler = 0.0  # --profile: JAX's profiler starting and stopping, not the cell's time
        if cap.profiling is not None:  # --profile: each line's device time (the time tab)
            finish_profile(ct, cap.profiling, f"cell [{number}]", rec)
            profiler = cap.profiling.start_seconds + cap.profiling.stop_seconds
        ct.cost = CellCost(
            cap.t1 - cap.t0 - profiler, rec.hook_seconds, time.perf_counter() - cap.t1
        )
        if args.compare and ct.compiled:  # the donation what-if compiles again per argument
            ct.compiled = with_donations(ct.traces, ct.compiled)
        if args.output:
            shell.user_ns[args.output] = ct
        # runs of the user's functions again: only when asked for
        run = error is None and not args.no_run and bool(args.compare or args.steps)
        show_cell(
            ct,
            cap.live,
            cell_memory,
            text=args.text,
            quiet=args.quiet,
            run=run,
            steps=args.steps,
            compare=args.compare,
        )
        del staged  # the runs are done: the traces' functions may go with the user's names
        self.kept.add_cell(_cell_id(shell), ct, stored=bool(args.output))
        return ct

    def _transform(self, shell: Any, cell: str) -> tuple[str, bool]:
        """The cell as IPython's run_cell transforms it (its `%` magics, `!` commands, `?`
        help), and whether a trailing `;` silences its last value. Both are pure functions
        of the text and of the transformers registered: a cell run again (the common case)
        reuses them, its tokenizing (~60 us, more when cold) done once."""
        m = getattr(shell, "input_transformer_manager", None)
        key = (cell, *map(id, getattr(shell, "input_transformers_post", ())), None,
               *(id(t) for name in ("cleanup_transforms", "line_transforms",
                                    "token_transformers")
                 for t in getattr(m, name, ())))  # fmt: skip
        known = self._transformed.get(key)
        if known is not None:
            return known
        transformed = shell.transform_cell(cell)  # (raises: not kept, run_cell reports it)
        try:
            quiet = bool(shell.displayhook.semicolon_at_end_of_expression(transformed))
        except Exception:  # a cell that does not tokenize: it will not run either
            quiet = False
        if len(self._transformed) >= 64:
            self._transformed.clear()
        self._transformed[key] = (transformed, quiet)
        return transformed, quiet

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


__all__ = ["CellTrace", "JaxTraceMagics"]

"""A cell run by IPython's own machinery under the capture (%%jaxtrace, jaxviz.magic).

A traced cell runs as IPython runs any cell: its statements at their usual depth, with
IPython's tracebacks, line numbers, `;`, Out and history. What the magic sets on IPython's
objects while the cell runs is put back when it ends (`set_for`); the cell magic's nested
`run_cell` is made to run the cell as this cell (`as_this_cell`); IPython's tracebacks of a
failing cell are held back (`hold_tracebacks`) and shown once, after jaxviz's view, and the
cell then fails as it would without jaxviz (`failure`). Nothing here imports IPython: it
works on the running shell it is given.

    >>> undo = contextlib.ExitStack()
    >>> set_for(undo, shell.displayhook, "quiet", lambda: True)   # until undo.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import linecache
import re
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

from jaxviz import _compat
from jaxviz.capture.cell import drop_hook_frames, magic_line_back
from jaxviz.capture.lines import leading_blank_lines, register_first_line

_UNSET = object()


def set_for(undo: contextlib.ExitStack, obj: Any, name: str, value: Any) -> None:
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


# --- the cell: its number, its text as IPython runs it, where it is running -----------------


def cell_number(shell: Any, cell: str) -> int:
    """The In[] number of the running cell.

    IPython counts the cell before its magics run, so while a stored cell runs,
    execution_count is already the next cell's number.
    """
    hist = shell.history_manager.input_hist_raw
    if hist and "%%jaxtrace" in hist[-1] and hist[-1].rstrip().endswith(cell.rstrip()):
        return shell.execution_count - 1
    return shell.execution_count


def awaits_in_running_loop(shell: Any, cell: str, transformed: str) -> bool:
    """A cell with top-level await, under a kernel whose event loop is running (Jupyter):
    the nested run_cell would fail with "This event loop is already running"."""
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


class Transforms:
    """The cells as IPython's run_cell transforms them (their `%` magics, `!` commands, `?`
    help), and whether a trailing `;` silences the last value. Both are pure functions of
    the text and of the transformers registered: a cell run again (the common case) reuses
    them, its tokenizing (~60 us, more when cold) done once."""

    def __init__(self) -> None:
        # (cell, IPython's transformers) -> (the cell transformed, its last value silenced)
        self._known: dict[tuple, tuple[str, bool]] = {}

    def __call__(self, shell: Any, cell: str) -> tuple[str, bool, bool]:
        """(the cell transformed, its last value silenced, reusable by run_cell); a cell
        IPython cannot transform is returned as it is, for run_cell to report."""
        try:
            return (*self._transform(shell, cell), True)
        except Exception:
            return cell, False, False

    def _transform(self, shell: Any, cell: str) -> tuple[str, bool]:
        m = getattr(shell, "input_transformer_manager", None)
        key = (cell, *map(id, getattr(shell, "input_transformers_post", ())), None,
               *(id(t) for name in ("cleanup_transforms", "line_transforms",
                                    "token_transformers")
                 for t in getattr(m, name, ())))  # fmt: skip
        known = self._known.get(key)
        if known is not None:
            return known
        transformed = shell.transform_cell(cell)  # (raises: not kept, run_cell reports it)
        try:
            quiet = bool(shell.displayhook.semicolon_at_end_of_expression(transformed))
        except Exception:  # a cell that does not tokenize: it will not run either
            quiet = False
        if len(self._known) >= 64:
            self._known.clear()
        self._known[key] = (transformed, quiet)
        return transformed, quiet


def line_magic_caller() -> Any:
    """The frame that called IPython's run_line_magic (a cell's, for `%jaxtrace`)."""
    f: Any = sys._getframe(1)
    while f is not None and f.f_code.co_name != "run_line_magic":
        f = f.f_back
    return None if f is None else f.f_back


def running(filename: str) -> bool:
    """Whether the cell compiled as `filename` is running: one of its statements is on the
    stack, run by IPython (`InteractiveShell.run_code` runs a cell's statements one by one).
    Not any module frame of that filename: code exec'd from a string is "<string>", as is
    a `python -c` process's bottom frame (a pytest-xdist worker's), where an exec'd
    `%jaxtrace` cell was taken to run on and its capture never ended."""
    f: Any = _compat.module_frame(sys._getframe(1), filename)
    while f is not None:
        back = f.f_back
        if back is not None and back.f_code.co_name == "run_code":
            return True
        f = _compat.module_frame(back, filename)
    return False


class ShellCell(NamedTuple):
    """A cell IPython runs, as the capture and the view need it (its first line's number in
    the editor registered: jaxviz.capture.lines)."""

    filename: str  # the cell's, as IPython compiles it
    number: int  # its In[] number
    source: str  # the cell as compiled (a `%jaxtrace` line blank)
    head: str = ""  # `%jaxtrace`'s line as written ("%%jaxtrace -q"), "" when none


def magic_body(shell: Any, cell: str, transformed: str) -> ShellCell:
    """The cell magic's body, as its nested run_cell will compile it (`transformed`)."""
    number = cell_number(shell, cell)
    # the filename IPython's run_cell gives the cell: tracebacks and linecache use it
    filename = shell.compile.cache(transformed, number, raw_code=cell)
    # the body's line 1 is the editor's line 2 (after the blank lines IPython drops):
    # jaxviz shows the editor's numbers, and reads the source as IPython compiled it
    blank = leading_blank_lines(cell)
    register_first_line(filename, 2 + blank)
    return ShellCell(filename, number, "".join(cell.splitlines(True)[blank:]))


def rest_of_cell(shell: Any, frame: Any) -> tuple[ShellCell, Any]:
    """What `%jaxtrace` traces: the running cell whose statement at `frame` called it, from
    its next statement on; and IPython's ExecutionResult of that cell (or None)."""
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
    register_first_line(filename, 1 + blank)
    return ShellCell(filename, number, "".join(lines), head), result


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


def install(shell: Any, post_execute: Any) -> None:
    """%%jaxtrace cells run as IPython runs any cell (`cell_to_line`), their capture ended
    by IPython's post_execute event (`post_execute`)."""
    cleanup = shell.input_transformers_cleanup
    if cell_to_line not in cleanup:
        cleanup.append(cell_to_line)
    shell.events.register("post_execute", post_execute)


def uninstall(shell: Any, post_execute: Any) -> None:
    """What `install` set, taken off."""
    cleanup = shell.input_transformers_cleanup
    if cell_to_line in cleanup:
        cleanup.remove(cell_to_line)
    try:
        shell.events.unregister("post_execute", post_execute)
    except ValueError:  # not registered
        pass


# --- the cell magic's nested run_cell, run as this cell -------------------------------------


def as_this_cell(
    undo: contextlib.ExitStack,
    shell: Any,
    cell: str,
    transformed: tuple[str, bool, bool],
    filename: str,
    number: int,
    rec: Any,
) -> None:
    """Sets what IPython's run_cell reads (until `undo` closes) so that the cell magic's
    nested run of `cell` runs it as this cell: its name, its transformation (made once, by
    `Transforms`), its trailing `;`, and CALL events only while its statements run."""
    text, quiet, reuse = transformed
    # The inner run_cell names the cell after execution_count, already the next cell's
    # number; name it after this cell, as IPython would (Out[] is right as it is).
    compiler = shell.compile
    cache = compiler.cache
    # (the cell itself was cached already: its name again, not hashed and registered twice)
    set_for(undo, compiler, "cache", lambda code, n=0, raw_code=None: (
        filename if code is text else cache(code, number, raw_code=raw_code)
    ))  # fmt: skip
    # run_cell transforms the cell again: it gets the transformation made before
    # (IPython's transform_cell is a pure function of the text)
    if reuse:
        transform = shell.transform_cell
        set_for(undo, shell, "transform_cell",
                lambda raw: text if raw is cell else transform(raw))  # fmt: skip
    # and it asks whether the cell has top-level `await` by compiling it: one with
    # neither `await` nor `async` in it has none
    run_async = shell.should_run_async
    sync = "await" not in text and "async" not in text

    def should_run_async(raw: str, **k: Any) -> bool:
        return False if raw is cell and sync else run_async(raw, **k)

    set_for(undo, shell, "should_run_async", should_run_async)
    # A trailing `;` silences the cell's last value: IPython reads it from the history's
    # last input, which is the magic's line, not the cell (run with store_history=False)
    set_for(undo, shell.displayhook, "quiet", lambda: quiet)
    # CALL events while IPython runs the cell's statements (run_ast_nodes), not through
    # IPython's machinery before and after them
    run_nodes = shell.run_ast_nodes

    async def watched_run_nodes(*a: Any, **k: Any) -> Any:
        rec.watch_calls()
        try:
            return await run_nodes(*a, **k)
        finally:
            rec.watch_calls(False)

    set_for(undo, shell, "run_ast_nodes", watched_run_nodes)


# --- a failing cell: IPython's traceback, once, after jaxviz's view -------------------------


def hold_tracebacks(
    undo: contextlib.ExitStack,
    shell: Any,
    shown: list,
    head: str,
    note: Callable[[BaseException], bool] | None = None,
) -> None:
    """IPython's tracebacks of the cell go to `shown` instead of the output, until `undo`
    closes: shown once, as the cell's own error, after jaxviz's view (else the cell would
    show it, then an empty error). `head`: the magic's line as written, shown in place of
    the call IPython made of it; `note(error)`: adds a note to the error (its type and
    traceback kept), True when it did."""

    def hold(etype: Any, evalue: Any, stb: list) -> None:
        # jaxviz's hooks on JAX's dispatch were on the stack: the traceback without them
        # is the one the cell shows without jaxviz
        again = isinstance(evalue, BaseException) and drop_hook_frames(evalue)
        if note is not None and isinstance(evalue, BaseException) and note(evalue):
            again = True
        if again:
            try:
                stb = shell.InteractiveTB.structured_traceback(
                    etype, evalue, evalue.__traceback__, tb_offset=None
                )
            except Exception:  # IPython's own rendering failed: keep what it made
                pass
        shown.append((etype, evalue, magic_line_back(stb, head)))

    set_for(undo, shell, "_showtraceback", hold)  # (ipykernel sets one per instance)


def _shown_already(error: BaseException | None, shown: list) -> bool:
    """IPython showed the cell's error its own way (a SyntaxError, an ExceptionGroup), and
    would show it again, jaxviz's frames included, ignoring `_render_traceback_`."""
    return isinstance(error, (SyntaxError, SystemExit)) or (error is not None and not shown)


def show_held(shell: Any, shown: list) -> None:
    """The held tracebacks shown, as IPython shows them."""
    for stb in shown:
        shell._showtraceback(*stb)
    shown.clear()


def show_held_first(shell: Any, error: BaseException | None, shown: list) -> None:
    """The held tracebacks IPython renders without `_render_traceback_`: shown now, before
    jaxviz's view."""
    if _shown_already(error, shown):
        show_held(shell, shown)


def error_of(shell: Any, result: Any) -> BaseException | None:
    """The error of the cell whose ExecutionResult is `result`, once IPython has run it
    (None while another cell's result is the last)."""
    if result is not None and shell.last_execution_result is result:
        return result.error_in_exec
    return None


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


def failure(shell: Any, error: BaseException, shown: list) -> BaseException:
    """What the cell magic raises for the cell's `error`: the cell fails as it would
    without jaxviz, with IPython's own traceback of it (held back), rendered through the
    exception's `_render_traceback_`, the mark removed when the cell has run."""

    def unmark(*_a: Any, exc: BaseException = error) -> None:
        shell.events.unregister("post_run_cell", unmark)
        exc.__dict__.pop("_render_traceback_", None)

    if _shown_already(error, shown):
        stand_in = failed(error)
        stand_in.__suppress_context__ = True  # (`raise ... from None`)
        return stand_in
    shell.events.register("post_run_cell", unmark)
    return _silence(error, shown[-1][2] if shown else [])

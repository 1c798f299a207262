"""`python -m jaxviz FILE.py [--html OUT.html]`: run a script under jaxviz's capture.

Prints what the script printed, then one line per captured function and every
diagnostic as `FILE:LINE: severity: rule: message`. Exit status: the script's own when it
called sys.exit with a non-zero status, else 1 when it raised or any diagnostic is an error,
else 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import traceback
import types
from typing import Any

from jaxviz.api import finish_cell, finish_profile, recorder, start_profile
from jaxviz.capture.cell import capture, drop_hook_frames, register_source
from jaxviz.config import options
from jaxviz.distributed.session import (
    WAIT,
    Finished,
    Processes,
)
from jaxviz.format import fmt_bytes
from jaxviz.memory.report import report_text
from jaxviz.mesh.text import eager_lines
from jaxviz.view.html import save_html
from jaxviz.view.processes import merged_lines
from jaxviz.view.text import cell_text, compare_line, fix_lines, related_lines, summary_lines

OWN_OPTIONS = {
    "--html": 1, "--text": 0, "--nans": 0, "--memory": 0, "--profile": 0, "--process-wait": 1,
}  # fmt: skip


def _split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """jaxviz's own options may stand before or after the script; the script gets the rest.

    `python -m jaxviz train.py --lr 3 --html out.html` runs train.py with ['--lr', '3'];
    after `--`, everything is the script's (`... train.py -- --html mine.html`).
    """
    own, script_args, seen_script, i = [], [], False, 0
    while i < len(argv):
        a = argv[i]
        if a == "--" and seen_script:
            script_args.extend(argv[i + 1 :])
            break
        name = a.split("=", 1)[0]
        if name in OWN_OPTIONS or (not seen_script and a.startswith("-")):
            take = OWN_OPTIONS.get(name, 0) if "=" not in a else 0
            own.extend(argv[i : i + 1 + take])
            i += 1 + take
            continue
        if not seen_script:
            own.append(a)
            seen_script = True
        else:
            script_args.append(a)
        i += 1
    return own, script_args


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jaxviz",
        usage=(
            "python -m jaxviz FILE.py [--html OUT.html] [--text] [--nans] [--memory] [--profile] "
            "[script args] "
            "[-- script args]"
        ),
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("script", help="the Python file to run")
    parser.add_argument("--html", metavar="OUT.html", help="also write the interactive report here")
    parser.add_argument(
        "--text", action="store_true", help="print the full text twin of every graph"
    )
    parser.add_argument(
        "--nans",
        action="store_true",
        help="check every call's outputs for NaN/Inf, not only each function's "
        "first call (slower, like jax_debug_nans)",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="compile each jitted function again (without running it) and print the "
        "largest buffers at its peak, with their lines",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run JAX's profiler around the script and print each line's device time, the "
        "top kernels, FLOP/s, compile times and whether its loop is dispatch-bound",
    )
    parser.add_argument(
        "--process-wait",
        type=float,
        default=WAIT,
        metavar="SECONDS",
        help="in a jax.distributed run: how long process 0 waits for the other processes' "
        f"summaries at the end before it reports without them (default {WAIT:g})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    own, script_args = _split_argv(list(sys.argv[1:] if argv is None else argv))
    opts = _parser().parse_args(own)
    opts.args = script_args
    path = os.path.abspath(opts.script)
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError as e:
        print(f"jaxviz: cannot read {opts.script}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        compile(source, path, "exec")
    except SyntaxError as e:
        print(f"{opts.script}:{e.lineno}: error: syntax: {e.msg}", file=sys.stderr)
        return 1
    run = _run_script(path, source, opts)
    exit_code, error = _script_exit(run.error, path)
    ct = finish_cell(
        run.staged,
        source=source,
        filename=path,
        error=error,
        namespace=run.ns,
        observer=run.obs,
        internal_errors=run.rec.internal_errors,
    )
    if run.prof is not None:  # before the script's names go: its functions' compiled HLO
        finish_profile(ct, run.prof, opts.script, run.rec)
    done = _finish_processes(run, ct, opts)
    if done is not None and done.report is None:  # a process but 0: process 0 reports
        print(
            f"\njaxviz: process {done.process} of {done.processes}: its summary "
            f"({fmt_bytes(done.sent)}, in {done.seconds * 1e3:.1f} ms) went to process 0, which "
            f"prints the merged report"
        )
        mine = error is not None or any(d.severity == "error" for d in ct.diagnostics)
        return exit_code or (1 if mine else 0)
    merged = done.report if done is not None else None
    _print_report(ct, opts, path, merged)
    failed = error is not None or any(d.severity == "error" for d in ct.diagnostics)
    failed = failed or (merged is not None and merged.errors)
    if exit_code:  # the script's own non-zero status comes first
        return exit_code
    return 1 if failed else 0


@dataclasses.dataclass
class _Run:
    """What running the script under the capture left: its staged functions, its error,
    its namespace, the recorder and observer, the profile session (or None)."""

    staged: Any
    error: BaseException | None
    ns: dict
    rec: Any
    obs: Any
    prof: Any
    procs: Processes  # the multi-process side (jaxviz.distributed)
    seconds: float  # the script's wall time under the capture


def _run_script(path: str, source: str, opts: argparse.Namespace) -> _Run:
    """Runs the script as `__main__` under the capture (and the profiler with --profile),
    with its own argv and its folder first on sys.path, all restored after."""
    register_source(path, source)
    old_argv = sys.argv
    sys.argv = [path, *opts.args]
    sys.path.insert(0, os.path.dirname(path))
    # The script runs as `__main__`, a real module in sys.modules (as `python FILE.py` and
    # runpy do): pickle finds the classes it defines.
    main_module = types.ModuleType("__main__")
    main_module.__file__ = path
    old_main = sys.modules.get("__main__")
    sys.modules["__main__"] = main_module
    prof = None
    procs = Processes()
    t0 = time.perf_counter()
    try:
        ns = main_module.__dict__
        ns["__builtins__"] = __builtins__
        code = compile(source, path, "exec")
        with options.using(check_every_call=opts.nans or options.check_every_call):
            rec, obs = recorder(path, observers=procs.observers)
            if opts.profile:  # (JAX's profiler starts with JAX's backends: after the
                prof = start_profile()  # script's own setup of them, Profiling.start)
            try:
                staged, error = capture(lambda: exec(code, ns), rec, (Exception, SystemExit))
            finally:
                if prof is not None:
                    prof.stop()
    finally:
        if old_main is not None:
            sys.modules["__main__"] = old_main
        sys.argv = old_argv
        if sys.path and sys.path[0] == os.path.dirname(path):
            del sys.path[0]
    return _Run(staged, error, ns, rec, obs, prof, procs, time.perf_counter() - t0)


def _finish_processes(run: _Run, ct: Any, opts: argparse.Namespace) -> Finished | None:
    """In a jax.distributed run, the one exchange at the end (jaxviz.distributed); None in
    a single process. jaxviz's own failure here is said, never raised."""
    try:
        return run.procs.finish(ct, seconds=run.seconds, wait=opts.process_wait)
    except Exception as e:
        print(f"jaxviz: could not merge the processes' reports: {type(e).__name__}: {e}",
              file=sys.stderr)  # fmt: skip
        return None


def _script_exit(error: BaseException | None, path: str) -> tuple[int | None, BaseException | None]:
    """(the script's own exit status, the error to report): a SystemExit is the script's
    status, not an error; an error's traceback is printed as Python prints it."""
    if isinstance(error, SystemExit):  # the script's own exit: its status, no traceback
        code = error.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
        return (code if isinstance(code, int) else (0 if code is None else 1)), None
    if error is not None:
        # the script's traceback as Python prints it: from the script's first frame on
        drop_hook_frames(error)  # jaxviz's hooks on JAX's dispatch: not the script's frames
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        traceback.print_exception(type(error), error, tb or error.__traceback__)
    return None, error


def _print_report(ct: Any, opts: argparse.Namespace, path: str, merged: Any = None) -> None:
    """The captured functions, each diagnostic with its fix and related lines (in a
    multi-process run, the merged report in their place), the profile, --memory's
    buffers; --html's page."""
    print(f"\njaxviz: {len(ct.traces)} functions captured in {opts.script}")
    for line in summary_lines(ct):
        print("  " + line)
    if opts.text:  # with each function's top buffers at its compiled peak, or --memory's below
        below = frozenset(t.name for t in _memory_traces(ct)) if opts.memory else frozenset()
        print(cell_text(ct, memory_below=below))
    if merged is not None:  # each finding once, with the processes that found it
        print()
        for line in merged_lines(merged):
            print(line.replace(path, opts.script))
    for d in ct.diagnostics if merged is None else ():
        print(d.format().replace(path, opts.script, 1))
        for line in fix_lines(d):  # what to change, with its bad -> good example
            print("  " + line)
        for line in related_lines(d):  # where it was donated, first consumed, used
            print("  " + (opts.script + line[len(path) :] if line.startswith(path) else line))
        if cmp := compare_line(d, opts.script):  # a recompile: its two signatures compared
            print("  " + cmp)
    if ct.profile is not None and not opts.text:  # (--text prints it with str(ct))
        print("\n" + str(ct.profile).replace(path, opts.script))
    reports: list = []
    if opts.memory:
        lines, reports = memory_lines(ct)
        for line in lines:
            print(line.replace(path, opts.script))
        if not opts.text:  # (the text twin lists them) the collectives of its eager ops
            for line in ["", *eager_lines(ct.eager_collectives)] if ct.eager_collectives else []:
                print(line.replace(path, opts.script))
    if opts.html:  # with --memory, the page's memory tab lists the buffers too
        out = save_html(ct, opts.html, memory_reports=reports, processes=merged)
        print(f"jaxviz: wrote {out}")
    sys.stdout.flush()  # (a process that hangs at exit, waiting for a dead one, is killed)


def _memory_traces(ct) -> list:
    """The traces `--memory` reports on: the script's own jitted functions that traced."""
    return [
        t
        for t in ct.traces
        if t.kind == "jit" and t.error is None and t.fun is not None and t.user_code
    ]


def memory_lines(ct) -> tuple[list[str], list]:
    """`--memory`: each of the script's own jitted functions' MemoryReport text (the top
    buffers at its compiled peak), and the reports."""
    out: list[str] = []
    reports = []
    for t in _memory_traces(ct):
        try:
            report = t.memory(what_if=True)
        except Exception as e:  # a function jaxviz cannot compile again: say so, go on
            why = f"{type(e).__name__}: {e!s:.120}"
            out.append(f"\njaxviz: memory of {t.name}: not available ({why})")
            continue
        out.append("\n" + report_text(report, top=10))
        reports.append(report)
    return out, reports

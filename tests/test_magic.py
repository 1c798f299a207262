"""%%jaxtrace through IPython's real shell."""
from __future__ import annotations

import sys

import jax
import pytest

SETUP = ("import jax, jax.numpy as jnp\n"
         "@jax.jit\n"
         "def f(x):\n"
         "    return jnp.sin(x) * 2\n")


def test_magic_runs_cell_displays_and_stores(ip, capsys, dispatch_state):
    ip.run_cell(SETUP, store_history=True)
    r = ip.run_cell("%%jaxtrace -o ct --text\ny = f(jnp.ones(3))\nprint('hello')\ny.sum()\n",
                    store_history=True)
    out = capsys.readouterr().out
    assert r.success
    assert "hello" in out
    # the last expression is displayed and lands in Out as without the magic
    n = ip.execution_count - 1
    assert float(ip.user_ns["Out"][n]) == pytest.approx(float((2 * __import__("numpy").sin(1.0)) * 3), rel=1e-6)
    assert f"Out[{n}]" in out
    ct = ip.user_ns["ct"]
    assert [t.name for t in ct.traces if t.kind == "jit"][0] == "f"
    assert "jit f(x: f32[3]) · 1 call (line 2)" in out  # the editor's line: %%jaxtrace is 1
    assert ct.filename.startswith("<ipython-input-")


def test_magic_reraises_users_exception_once(ip, capsys, dispatch_state):
    ip.run_cell(SETUP)
    r = ip.run_cell("%%jaxtrace -q -o ct\nz = f(jnp.ones(3))\nraise ValueError('bad value')\n",
                    store_history=True)
    out = capsys.readouterr()
    text = out.out + out.err
    assert not r.success
    assert isinstance(r.error_in_exec, ValueError)
    assert text.count("ValueError: bad value") == 1          # one traceback, the usual one
    assert "jaxviz/_magic.py" not in text                     # no jaxviz frames shown
    assert not hasattr(r.error_in_exec, "_render_traceback_")  # the mark is removed after the cell
    assert isinstance(ip.user_ns["ct"].error, ValueError)
    assert ip.user_ns["z"] is not None


def test_using_the_output_name_inside_its_own_cell_says_when_it_is_stored(ip, capsys, dispatch_state):
    """`-o NAME` is stored once the cell has run (issue 57, item 15): NAME inside the cell
    raises the user's NameError, as without jaxviz, with a note saying so; the help says it."""
    ip.run_cell(SETUP)
    ip.user_ns.pop("ct", None)
    r = ip.run_cell("%%jaxtrace -q -o ct\nz = f(jnp.ones(3))\nprint(ct)\n", store_history=True)
    out = capsys.readouterr()
    text = out.out + out.err
    assert not r.success and type(r.error_in_exec) is NameError
    assert text.count("NameError: name 'ct' is not defined") == 1
    assert text.count("stores the cell's trace in `ct` once the cell has run") == 1, text
    assert r.error_in_exec.__traceback__ is not None and not hasattr(r.error_in_exec, "_render_traceback_")
    assert "ct" in ip.user_ns                                # stored after the cell
    # another name's NameError gets no note
    r = ip.run_cell("%%jaxtrace -q -o ct\nprint(nothing_here)\n", store_history=True)
    assert "stores the cell's trace" not in "".join(capsys.readouterr())
    assert not getattr(r.error_in_exec, "__notes__", None)
    help_text = ip.find_cell_magic("jaxtrace").parser.format_help()
    assert "once the cell has run" in " ".join(help_text.split())


def test_magic_syntax_error(ip, capsys):
    r = ip.run_cell("%%jaxtrace\nx = (1,\n", store_history=True)
    text = "".join(capsys.readouterr())
    assert not r.success
    assert text.count("SyntaxError") == 1
    # IPython's own, as for any cell: nbclient and papermill report it by its name
    error = r.error_before_exec or r.error_in_exec
    assert type(error).__name__ == "SyntaxError" and str(error)
    assert "line 2" in text and "jaxviz" not in text  # the editor's line: %%jaxtrace is 1
    # (IPython's displayhook tokenizes the last stored input: an incomplete one fails the
    # next unstored cell's display, with or without jaxviz)
    ip.run_cell("pass", store_history=True)


def test_magic_usage_errors_and_help(ip, capsys):
    r = ip.run_cell("%%jaxtrace --bogus\nx = 1\n")
    text = "".join(capsys.readouterr())
    assert not r.success
    assert "unrecognized arguments: --bogus" in text and "usage: %%jaxtrace" in text
    r = ip.run_cell("%%jaxtrace -o 3x\nx = 1\n")
    assert "-o needs a Python variable name" in "".join(capsys.readouterr())
    doc = ip.find_cell_magic("jaxtrace").__doc__
    for flag in ("-o NAME", "--no-run", "--steps", "--text"):
        assert flag in doc


def test_magic_displays_rich_output(ip, dispatch_state):
    """Without --text the CellTrace goes to IPython's display machinery (mimebundle), once:
    by default nothing runs after the cell, so there is nothing to update."""
    ip.run_cell(SETUP)
    outputs = displayed(ip, "%%jaxtrace\ny = f(jnp.ones(3))\n")
    graphs = [o for o in outputs if "jit f(x: f32[3])" in o["data"].get("text/plain", "")]
    assert [bool(o.get("update")) for o in graphs] == [False]
    assert not [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o["data"]]
    from tests.test_widget_payload import decode_fragment
    assert not decode_fragment(graphs[0]["data"]["text/html"]).get("memory")   # no runs


def test_magic_compare_runs_and_updates_the_view(ip, dispatch_state):
    """--compare runs f again on synthesised inputs: the view is updated in place with the
    run's summary in its memory tab."""
    ip.run_cell(SETUP)
    outputs = displayed(ip, "%%jaxtrace --compare\ny = f(jnp.ones(3))\n")
    from tests.test_widget_payload import decode_fragment
    graphs = [o for o in outputs if "jit f(x: f32[3])" in o["data"].get("text/plain", "")]
    # one output: displayed once, then updated in place when f's compiled run ends
    assert [bool(o.get("update")) for o in graphs] == [False, True]
    ids = {o["transient"]["display_id"] for o in graphs}
    assert len(ids) == 1 and None not in ids
    summary = decode_fragment(graphs[-1]["data"]["text/html"])["memory"][0]["summary"]
    assert summary["name"] == "f" and summary["steps"] == 5
    assert summary["runs"][0]["step_ms"]["n"] == 5 and summary["runs"][0]["chart"]
    assert [r["label"] for r in summary["runs"]] == ["with donation", "without donation"]


def test_magic_default_takes_memory_from_the_cell_itself(ip, capsys, dispatch_state):
    """A default cell runs nothing again: its memory record has the cell's own jitted calls
    (name and cell line, in order), samples of each lane, and the arrays it made."""
    ip.run_cell(SETUP + "g = jax.jit(lambda x: x + 1)\n")
    ip.run_cell("%%jaxtrace -o ct --text\n"
                "x = jnp.ones((256, 1024))\n"
                "for _ in range(3):\n"
                "    x = f(x)\n"
                "y = g(x)\n")
    out = capsys.readouterr().out
    ct = ip.user_ns["ct"]
    assert ct.memory_of("f") is None and ct.memory_of("<lambda>") is None   # not run again
    (entry,) = [m for m in ct.memory if m.cell is not None]
    mem = entry.cell
    assert ct.cell_memory is mem
    # lines as the editor numbers them: the %%jaxtrace line is line 1
    assert [(c.name, c.line, c.file) for c in mem.calls] == [("f", 4, "")] * 3 + [("<lambda>", 5, "")]
    assert [c.t for c in mem.calls] == sorted(c.t for c in mem.calls)
    # the device lane: live JAX arrays on CPU, the allocator's memory_stats on an accelerator
    device_lane = "live_arrays" if jax.default_backend() == "cpu" else "memory_stats"
    assert {mem.lanes[lane].source for _t, lane, _v in mem.samples} >= {device_lane}
    big = [a for a in mem.arrays if a.type == "float32[256,1024]"]
    assert big and all(a.nbytes == 256 * 1024 * 4 for a in big)
    assert "memory while the cell ran" in out and "4 jitted calls" in out


def test_magic_compiles_and_runs_captured_functions(ip, dispatch_state):
    ip.run_cell(SETUP)
    ip.run_cell("%%jaxtrace -q -o ct --steps 3\ny = f(jnp.ones(3))\n")
    report = ip.user_ns["ct"].memory_of("f").report
    assert len(report.step_times) == 3
    assert report.peak_bytes
    ip.run_cell("%%jaxtrace -q -o ct2 --no-run --steps 3\ny = f(jnp.ones(3))\n")
    assert ip.user_ns["ct2"].memory_of("f") is None
    ip.run_cell("%%jaxtrace -q -o ct3\ny = f(jnp.ones(3))\n")      # quiet: nothing runs
    assert ip.user_ns["ct3"].memory_of("f") is None


def test_magic_does_not_run_data_dependent_while_loops(ip, capsys):
    ip.run_cell("import jax\nfrom jax import lax\n"
                "@jax.jit\ndef collatz(n):\n"
                "    return lax.while_loop(lambda c: c != 1, lambda c: lax.select(c % 2 == 0, c // 2, 3 * c + 1), n)\n")
    r = ip.run_cell("%%jaxtrace -o ct --text --compare\ncollatz(27)\n")
    assert r.success
    out = capsys.readouterr().out
    ct = ip.user_ns["ct"]
    m = ct.memory_of("collatz")
    assert m is not None and m.report is None                         # not run
    assert "could run forever on zeros" in m.note                      # the view's note
    assert "memory:\n  collatz: not run on synthesised inputs: its while_loop could run " \
           "forever on zeros" in str(ct)                               # the text twin's
    assert out.count("could run forever on zeros") == 1                # printed as part of it
    assert out.rstrip().endswith("(use -o ct).")                       # no print after it
    from jaxviz.view.payload import build_payload
    (entry,) = build_payload(ct.traces, ct.diagnostics, memory=ct.memory)["memory"]
    assert entry["trace"] == "collatz" and "could run forever on zeros" in entry["note"]
    assert entry["summary"] is None and entry["live"] == ""
    # without --text: the view carries the note, the cell's stdout has nothing of jaxviz's
    outputs = displayed(ip, "%%jaxtrace -o ct2 --compare\nprint('mine')\nn = collatz(27)\n")
    assert capsys.readouterr().out == "mine\n"
    (view,) = outputs
    assert "could run forever on zeros" in view["data"]["text/plain"]
    from tests.test_widget_payload import decode_fragment
    (entry,) = decode_fragment(view["data"]["text/html"])["memory"]
    assert entry["trace"] == "collatz" and "could run forever on zeros" in entry["note"]


def displayed(ip, cell: str) -> list:
    """What running `cell` sent to IPython's display machinery (not its stdout)."""
    from IPython.core.displaypub import CapturingDisplayPublisher
    pub, ip.display_pub = ip.display_pub, CapturingDisplayPublisher()
    try:
        assert ip.run_cell(cell).success
        return list(ip.display_pub.outputs)
    finally:
        ip.display_pub = pub


def test_magic_cell_keeps_its_number(ip, capsys):
    n = ip.execution_count
    r = ip.run_cell("%%jaxtrace -q -o ct\n1/0\n", store_history=True)
    text = "".join(capsys.readouterr())
    assert not r.success
    assert f"Cell In[{n}], line 2" in text  # the editor's line: %%jaxtrace is line 1
    assert "jaxviz" not in text.replace("run_line_magic('jaxtrace'", "")  # IPython's own
    assert ip.user_ns["ct"].label == f"cell [{n}]"
    ip.run_cell("%%jaxtrace -q\n6 * 7\n", store_history=True)
    assert ip.user_ns["Out"][n + 1] == 42


def test_magic_does_not_repeat_side_effects(ip, capsys):
    ip.run_cell("import jax, jax.numpy as jnp\nlog = []\n"
                "@jax.jit\ndef g(x):\n"
                "    jax.debug.callback(lambda v: log.append(1), x)\n"
                "    return x * 2\n")
    (view,) = displayed(ip, "%%jaxtrace -o ct --compare\ny = g(jnp.arange(3.))\n")
    assert ip.user_ns["log"] == [1]                   # once, as without jaxviz
    assert "side effects" not in capsys.readouterr().out   # not in the cell's own output
    assert "it has side effects (debug_callback)" in view["data"]["text/plain"]
    ct = ip.user_ns["ct"]
    assert "it has side effects (debug_callback)" in ct.memory_of("g").note
    assert "g: not run again: it has side effects (debug_callback)" in str(ct)


def test_views_name_the_cell_as_the_user_does(ip):
    from jaxviz.view.payload import build_payload
    ip.run_cell(SETUP)
    n = ip.execution_count
    ip.run_cell("%%jaxtrace -q -o ct\ny = f(jnp.ones(3))\n", store_history=True)
    ct = ip.user_ns["ct"]
    payload = build_payload(ct.traces, ct.diagnostics)
    f = next(t for t in payload["traces"] if t["name"] == "f")
    assert f["call_sites"][0][0] == f"cell [{n}]"


def test_magic_nans_checks_every_call(ip, capsys, dispatch_state):
    import jaxviz
    ip.run_cell("import jax, jax.numpy as jnp\n"
                "step = jax.jit(lambda w: (w * 1e3) - (w * 1e3) * 0.5)\n")
    cell = "w = jnp.ones(4)\nfor _ in range(30):\n    w = step(w)\n"
    ip.run_cell("%%jaxtrace -q -o plain\n" + cell)
    ip.run_cell("%%jaxtrace -q --nans -o every\n" + cell)
    assert not jaxviz.options.check_every_call                      # only for that cell
    (late,) = [d for d in ip.user_ns["plain"].diagnostics if d.rule == "nan"]
    (found,) = [d for d in ip.user_ns["every"].diagnostics if d.rule == "nan"]
    from jaxviz import _compat
    if _compat.has_sys_monitoring():
        assert late.line == 4 and "--nans" in late.hint
    assert "NaN from `sub`" in found.message
    assert found.related and found.related[0][1] == 4               # called here


def test_magic_trailing_semicolon_silences_the_value(ip, capsys):
    ip.run_cell("import jax.numpy as jnp")
    ip.run_cell("marker = 41", store_history=True)
    before = ip.user_ns.get("_")
    ip.run_cell("%%jaxtrace -q\njnp.float32(1) + 1;\n", store_history=True)
    out = capsys.readouterr().out
    assert "Out[" not in out and ip.user_ns.get("_") is before
    ip.run_cell("%%jaxtrace -q\njnp.float32(1) + 1\n", store_history=True)
    assert "Out[" in capsys.readouterr().out
    assert "quiet" not in vars(ip.displayhook)                  # restored


def test_magic_cell_run_again_is_transformed_as_ipython_would(ip, capsys):
    """The cell magic (run_cell_magic; stacked magics) runs its body through run_cell: a
    body run again reuses its transformation, until the user registers a transformer: then
    it is transformed anew, as IPython's run_cell would."""
    body = "value = 2 * 21\nvalue;\n"
    ip.run_cell_magic("jaxtrace", "-q", body)
    ip.run_cell_magic("jaxtrace", "-q", body)
    assert ip.user_ns["value"] == 42 and "Out[" not in capsys.readouterr().out

    def to_43(lines):
        return [ln.replace("2 * 21", "43") for ln in lines]

    ip.input_transformers_post.append(to_43)
    try:
        ip.run_cell_magic("jaxtrace", "-q", body)
        assert ip.user_ns["value"] == 43
    finally:
        ip.input_transformers_post.remove(to_43)
    ip.run_cell_magic("jaxtrace", "-q", body)
    assert ip.user_ns["value"] == 42


def test_magic_never_traces_the_users_python_again_to_run_it(ip, capsys):
    """A function whose jitted object jaxviz did not see (Python 3.11; a jitted __call__)
    is not run after the cell: jitting it again would run the user's Python (and its side
    effects) again, without its static arguments."""
    ip.run_cell("import jax, jax.numpy as jnp\nfrom functools import partial\ncalls = []")
    ip.run_cell("%%jaxtrace --compare\n"
                "@partial(jax.jit, static_argnums=1)\n"
                "def f(x, n):\n"
                "    calls.append(n)\n"
                "    return x * n\n"
                "y = f(jnp.ones(3), 4)\n")
    assert ip.user_ns["calls"] == [4]
    ip.run_cell("%%jaxtrace --compare\n"
                "class Model:\n"
                "    @partial(jax.jit, static_argnums=0)\n"
                "    def __call__(self, x):\n"
                "        calls.append('model')\n"
                "        return x * 2\n"
                "z = Model()(jnp.ones(3))\n")
    out = capsys.readouterr().out
    assert ip.user_ns["calls"] == [4, "model"]
    assert "could not run" not in out


def test_magic_explains_top_level_await_under_a_running_loop(ip, capsys):
    """In Jupyter the kernel's event loop is running while a cell executes: a nested
    run_cell of an `await` cell cannot work there, so the magic says so plainly."""
    import asyncio
    cell = "%%jaxtrace\nimport asyncio\nawait asyncio.sleep(0)\nprint('ran')\n"
    try:                    # the browser tests' Playwright may already run a loop here
        asyncio.get_running_loop()
        looping = True
    except RuntimeError:
        looping = False

    async def in_kernel_loop():
        return ip.run_cell(cell)
    r = ip.run_cell(cell) if looping else asyncio.run(in_kernel_loop())
    text = "".join(capsys.readouterr())
    assert not r.success and "top-level `await`" in text and "already running" not in text
    if not looping:         # a plain shell with no loop running runs the cell itself
        r = ip.run_cell(cell.replace("%%jaxtrace", "%%jaxtrace -q"))
        assert r.success and "ran" in capsys.readouterr().out


def test_magic_exception_group_is_shown_once(ip, capsys):
    r = ip.run_cell('%%jaxtrace -q\nraise ExceptionGroup("several", [ValueError("a"), KeyError("b")])\n',
                    store_history=True)
    text = "".join(capsys.readouterr())
    assert not r.success and text.count("ExceptionGroup: several") == 1 and "jaxviz" not in text


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="Python >= 3.12: CALL events")
def test_call_events_are_on_from_the_cells_own_code_on(ip, capsys):
    # the events go on at the cell's `%jaxtrace` line (its first statement): IPython's
    # machinery before the cell's code runs without them, the cell's statements with them
    # (between cells jaxviz's held tool keeps its events set, with a callback that only
    # turns each place off: the traced cell's own callback is what tells)
    ip.run_cell(
        "import sys\n"
        "from jaxviz.capture import events as _ev\n"
        "def events_now():\n"
        "    mon = sys.monitoring\n"
        "    def callback(i):\n"
        "        cb = mon.register_callback(i, mon.events.CALL, None)\n"
        "        mon.register_callback(i, mon.events.CALL, cb)\n"
        "        return cb\n"
        "    return any(mon.get_tool(i) == 'jaxviz' and mon.get_events(i)\n"
        "               and callback(i) is not _ev.idle_call_event for i in range(6))\n"
    )
    seen: list[bool] = []
    hook = lambda *a: seen.append(ip.user_ns["events_now"]())  # noqa: E731
    ip.events.register("pre_run_cell", hook)  # runs in run_cell, before run_code
    try:
        ip.run_cell("%%jaxtrace -q\na = events_now()\nevents_now()\n")
    finally:
        ip.events.unregister("pre_run_cell", hook)
    assert ip.user_ns["a"] is True and "]: True" in capsys.readouterr().out  # its last value
    assert seen and not any(seen), seen  # the outer cell's and the magic's inner run_cell
    assert not ip.user_ns["events_now"]()
    assert not {"run_ast_nodes", "transform_cell", "should_run_async"} & set(vars(ip))  # restored


def test_the_cells_code_runs_at_the_depth_of_a_plain_cell(ip):
    """A %%jaxtrace cell is run as IPython runs any cell (its first line made `%jaxtrace`),
    not by a second run_cell inside the magic: the user's code is as deep in the stack as
    in a plain cell (JAX records a traceback per result: each frame costs every call)."""
    import jaxviz.magic
    assert ip.transform_cell("%%jaxtrace -q\nx = 1\n").startswith(
        "get_ipython().run_line_magic('jaxtrace', '-q')\nx = 1")
    ip.run_cell("import sys\ndef depth():\n    f, n = sys._getframe(1), 0\n"
                "    while f is not None:\n        f, n = f.f_back, n + 1\n    return n\n")
    ip.run_cell("plain = depth()")
    ip.run_cell("%%jaxtrace -q -o ct\ntraced = depth()\n")
    assert ip.user_ns["traced"] == ip.user_ns["plain"]
    assert ip.user_ns["ct"].filename.startswith("<ipython-input-")
    assert jaxviz.magic.JaxTraceMagics is type(ip.magics_manager.registry["JaxTraceMagics"])


def test_cells_the_cell_magic_runs_still_trace(ip, capsys, dispatch_state):
    """Stacked cell magics, and the magic called directly, run the body through the cell
    magic (a nested run_cell): the same capture, the same single traceback."""
    ip.run_cell(SETUP)
    assert "run_cell_magic('capture'" in ip.transform_cell("%%capture\n%%jaxtrace\nx = 1\n")
    assert "run_cell_magic('jaxtrace'" in ip.transform_cell("%%jaxtrace\n%%time\nx = 1\n")
    ip.run_cell("%%capture\n%%jaxtrace -q -o ct\ny = f(jnp.ones(3))\n")
    assert [t.name for t in ip.user_ns["ct"].traces if t.kind == "jit"] == ["f"]
    r = ip.run_cell("%%jaxtrace -q -o ct2\n%%time\nz = f(jnp.ones(2))\nraise ValueError('bad')\n")
    text = "".join(capsys.readouterr())
    assert isinstance(r.error_in_exec, ValueError) and text.count("ValueError: bad") == 1
    assert [t.name for t in ip.user_ns["ct2"].traces if t.kind == "jit"] == ["f"]


def test_a_cell_run_from_a_traced_cell_does_not_end_its_capture(ip, dispatch_state):
    """IPython's post_execute ends the capture: one for a cell the traced cell runs (a nested
    run_cell, %run of a notebook) comes first and leaves it running."""
    ip.run_cell(SETUP + "g = jax.jit(lambda x: x - 1)\n")
    ip.run_cell("%%jaxtrace -q -o ct\n"
                "a = f(jnp.ones(3))\n"
                "get_ipython().run_cell('b = g(jnp.ones(2))')\n"
                "get_ipython().run_cell('%%jaxtrace -q -o inner\\nc = g(jnp.ones(4))', silent=True)\n"
                "d = f(jnp.ones(5))\n")
    ct = ip.user_ns["ct"]
    assert sorted((t.name, t.args_spec[0].shape) for t in ct.traces if t.kind == "jit") == [
        ("<lambda>", (2,)), ("<lambda>", (4,)), ("f", (3,)), ("f", (5,))]
    assert "inner" not in ip.user_ns  # the traced cell's capture saw it
    # and a capture whose cell never reached post_execute (run by exec) ends at the next one.
    # exec(str)'s code is "<string>", as is any frame exec'd below the shell (a `python -c`
    # process's, a pytest-xdist worker's): the magic tells the exec'd cell by its own frame,
    # not by its filename (by filename, it saw the cell as running on, and never ended it)
    ip.run_cell("code = get_ipython().transform_cell('%jaxtrace -q -o lost\\nx = f(jnp.ones(6))')")
    exec("ip.run_cell('exec(code)')", {"ip": ip})
    assert [t.name for t in ip.user_ns["lost"].traces if t.kind == "jit"] == ["f"]


def test_the_line_magic_traces_the_rest_of_its_cell_and_only_there(ip, capsys, dispatch_state):
    ip.run_cell(SETUP)
    r = ip.run_cell("before = f(jnp.ones(2))\n%jaxtrace -q -o ct\nafter = f(jnp.ones(3))\n")
    assert r.success
    assert [t.args_spec[0].shape for t in ip.user_ns["ct"].traces if t.kind == "jit"] == [(3,)]
    r = ip.run_cell("def inside():\n    %jaxtrace -q\ninside()\n")
    assert not r.success and "not inside a function" in "".join(capsys.readouterr())


def test_a_cell_magics_first_line_becomes_the_code_ipython_makes_of_the_line_magic(ip):
    # the cell runs as a cell whose first line is `%jaxtrace ...` (IPython's own code for
    # it), with the body's own escapes (`!`, `%`) still transformed, and its line count kept
    for head in ("%%jaxtrace", "%%jaxtrace --no-run -q -o ct", "%%jaxtrace\t--text"):
        body = "x = 1\n!echo hi\ny = %time 2\n"
        line = "%jaxtrace" + head[len("%%jaxtrace") :]
        assert ip.transform_cell(f"{head}\n{body}") == ip.transform_cell(
            f"{line.replace(chr(9), ' ')}\n{body}"
        )
    out = ip.transform_cell("%%jaxtrace -q\nx = 1\n")
    assert out.splitlines()[0] == "get_ipython().run_line_magic('jaxtrace', '-q')"
    assert len(out.splitlines()) == 2


def test_unloading_takes_the_transform_and_the_hook_out(ip):
    from jaxviz.magic import cell_to_line
    magics = ip.magics_manager.registry["JaxTraceMagics"]
    assert cell_to_line in ip.input_transformers_cleanup
    # a terminal still waits for the blank line that ends a cell magic
    assert ip.input_transformer_manager.check_complete("%%jaxtrace\nx = 1\n")[0] == "incomplete"
    ip.run_cell("%unload_ext jaxviz")
    try:
        assert cell_to_line not in ip.input_transformers_cleanup
        assert magics._post_execute not in ip.events.callbacks["post_execute"]
    finally:
        ip.run_cell("%load_ext jaxviz")
    assert ip.input_transformers_cleanup.count(cell_to_line) == 1


def test_a_traceback_shows_the_magic_line_as_written(ip, capsys, dispatch_state):
    """The cell's first line in its traceback is `%%jaxtrace -q`, as in the editor, not the
    call jaxviz's input transform made of it (also with IPython's colours on)."""
    ip.run_cell(SETUP)
    for colors in ("nocolor", "linux"):
        ip.run_cell(f"%colors {colors}")
        capsys.readouterr()
        r = ip.run_cell("%%jaxtrace -q\nz = f(jnp.ones(3))\nraise ValueError('bad value')\n",
                        store_history=True)
        out = capsys.readouterr()
        text = out.out + out.err
        assert isinstance(r.error_in_exec, ValueError)
        assert "run_line_magic" not in text, text
        assert "      1 %%jaxtrace -q\n" in text, text
    ip.run_cell("%colors nocolor")


def test_an_error_raised_while_jax_traces_is_told_from_one_raised_after(ip, dispatch_state):
    """Issue 57, item 16: a library's own check raised while JAX traced a function leaves one
    line under the cell, not an empty output; the magic tells it by JAX's tracer frames,
    which IPython keeps (hidden) in the traceback."""
    from jaxviz import _compat
    from jaxviz.view.session import failed_line

    ip.run_cell("import jax, jax.numpy as jnp")
    r = ip.run_cell("@jax.jit\ndef check(x):\n    if x.shape[0] != 4:\n        raise ValueError('4 rows')\n"
                    "    return x * 2\ncheck(jnp.ones(3))\n")
    assert _compat.raised_while_tracing(r.error_in_exec)
    r = ip.run_cell("y = jax.jit(lambda x: x * 2)(jnp.ones(3))\nraise ValueError('after')\n")
    assert not _compat.raised_while_tracing(r.error_in_exec)
    ip.user_ns.pop("ct", None)
    ip.run_cell("%%jaxtrace -q -o ct\n@jax.jit\ndef check(x):\n    raise ValueError('no')\ncheck(jnp.ones(3))\n")
    assert failed_line(ip.user_ns["ct"]) == (
        "jaxviz: JAX raised while tracing `check`: captured before it: line 5 (%%jaxtrace -o NAME keeps them).")

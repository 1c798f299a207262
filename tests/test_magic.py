"""%%jaxtrace through IPython's real shell."""
from __future__ import annotations

import sys

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


def test_magic_syntax_error(ip, capsys):
    r = ip.run_cell("%%jaxtrace\nx = (1,\n", store_history=True)
    text = "".join(capsys.readouterr())
    assert not r.success
    assert text.count("SyntaxError") == 1
    # what nbclient and papermill report: the user's error, by its name
    assert type(r.error_in_exec).__name__ == "SyntaxError" and str(r.error_in_exec)


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
    assert {mem.lanes[lane].source for _t, lane, _v in mem.samples} >= {"live_arrays"}
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
    assert f"Cell In[{n}], line 1" in text
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
        assert late.line == 3 and "--nans" in late.hint
    assert "NaN from `sub`" in found.message
    assert found.related and found.related[0][1] == 3               # called here


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
    """A cell run again reuses its transformation, until the user registers a transformer:
    then it is transformed anew, as IPython's run_cell would."""
    cell = "%%jaxtrace -q\nvalue = 2 * 21\nvalue;\n"
    ip.run_cell(cell)
    ip.run_cell(cell)
    assert ip.user_ns["value"] == 42 and "Out[" not in capsys.readouterr().out

    def to_43(lines):
        return [ln.replace("2 * 21", "43") for ln in lines]

    ip.input_transformers_post.append(to_43)
    try:
        ip.run_cell(cell)
        assert ip.user_ns["value"] == 43
    finally:
        ip.input_transformers_post.remove(to_43)
    ip.run_cell(cell)
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
    # the magic wraps IPython's run_ast_nodes (per instance, restored): IPython's machinery
    # before the cell's code runs without events, the cell's statements with them
    # (between cells jaxviz's held tool keeps its events set, with a callback that only
    # turns each place off: the traced cell's own callback is what tells)
    ip.run_cell(
        "import sys\n"
        "from jaxviz.capture import recorder as _rec\n"
        "def events_now():\n"
        "    mon = sys.monitoring\n"
        "    def callback(i):\n"
        "        cb = mon.register_callback(i, mon.events.CALL, None)\n"
        "        mon.register_callback(i, mon.events.CALL, cb)\n"
        "        return cb\n"
        "    return any(mon.get_tool(i) == 'jaxviz' and mon.get_events(i)\n"
        "               and callback(i) is not _rec._idle_call_event for i in range(6))\n"
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

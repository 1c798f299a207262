"""Line numbers as the notebook editor shows them: a %%jaxtrace cell's line 1 is the magic's
own line. IPython compiles the whole cell (the magic's line made `%jaxtrace`), so the file's
numbers are the editor's, less the blank lines IPython drops before the magic (the cell
magic, run directly or stacked, compiles the body alone: its lines are shifted). Every
line jaxviz prints or draws is the editor's, in diagnostics, the text twin and the view's
payload; scripts keep theirs."""
from __future__ import annotations

import re

from jaxviz.view.payload import build_payload

SETUP = "import jax, jax.numpy as jnp\n"

# editor lines:  1: %%jaxtrace   2: @jax.jit   3: def g   4: sin   5: return   6: call
OK_CELL = ("%%jaxtrace -q -o ct --no-run\n"
           "@jax.jit\n"
           "def g(x):\n"
           "    y = jnp.sin(x)\n"
           "    return y * 2\n"
           "out = g(jnp.ones(3))\n")

# editor lines: 1: %%jaxtrace  2: (blank)  3: @jax.jit  4: def h
# 5: the `if` on a tracer  6: return  7: return  8: the call
BAD_CELL = ("%%jaxtrace -q -o ct --no-run\n"
            "\n"
            "@jax.jit\n"
            "def h(x):\n"
            "    if x.sum() > 0:\n"
            "        return x\n"
            "    return -x\n"
            "h(jnp.ones(3))\n")


def _payload(ct):
    return build_payload(ct.traces, ct.diagnostics, {ct.filename: ct.source})


def _cell(ip, cell):
    ip.run_cell(SETUP, store_history=True)
    ip.run_cell(cell, store_history=True)
    return ip.user_ns["ct"]


def test_graph_lines_are_the_editors(ip, dispatch_state):
    ct = _cell(ip, OK_CELL)
    g = next(t for t in ct.traces if t.name == "g")
    text = str(ct)
    assert re.search(r"= sin %\d+ : f32\[3\] +line 4 \(g\)", text), text
    assert re.search(r"= mul %\d+ 2\.0 : f32\[3\] +line 5 \(g\)", text), text
    assert "jit g(x: f32[3]) · 1 call (line 6)" in text
    entry = next(t for t in _payload(ct)["traces"] if t["name"] == "g")
    graph = entry["graph"]
    label = graph["files"][0]
    assert re.fullmatch(r"cell \[\d+\]", label) and label == ct.label
    lines = {n["op"]: n["loc"][1] for b in graph["bodies"] for n in b["nodes"]
             if n.get("loc") and n.get("op") in ("sin", "mul")}
    assert lines == {"sin": 4, "mul": 5}
    assert entry["call_sites"] == [[label, 6, 1]]
    # the inspector's source snippet: the editor's line 4 is the `sin` line
    src = _payload(ct)["sources"][label]
    assert src["4"] == "    y = jnp.sin(x)" and src["6"] == "out = g(jnp.ones(3))"
    # the records keep the file's own numbers, which linecache reads: here the editor's
    sin = next(n for _, n in g.graph.eqns() if n.op == "sin")
    assert sin.loc.line == 4


def test_diagnostic_lines_are_the_editors(ip, dispatch_state):
    ct = _cell(ip, BAD_CELL)
    (d,) = [d for d in ct.diagnostics if d.rule == "tracer-bool"]
    assert d.code == "if x.sum() > 0:"
    assert d.line == 5   # the file's line, the editor's
    assert d.format().startswith(f"{ct.label}:5: error: tracer-bool:"), d.format()
    text = str(ct)
    assert "5: error: tracer-bool:" in text and ":3: error" not in text, text
    p = _payload(ct)
    (pd,) = [x for x in [*p["diagnostics"], *(x for t in p["traces"] for x in t["diagnostics"])]
             if x["rule"] == "tracer-bool"]
    assert (pd["filename"], pd["line"]) == (ct.label, 5)
    assert p["sources"][ct.label]["5"] == "    if x.sum() > 0:"


def test_blank_lines_before_the_magic_shift_the_files_lines(ip, dispatch_state):
    """IPython drops blank lines before `%%jaxtrace`: the file starts at the magic."""
    ct = _cell(ip, "\n\n" + BAD_CELL)           # the `if` is the editor's line 7, the file's 5
    (d,) = [d for d in ct.diagnostics if d.rule == "tracer-bool"]
    assert d.line == 5 and d.format().startswith(f"{ct.label}:7: error: tracer-bool:")
    assert _payload(ct)["sources"][ct.label]["7"] == "    if x.sum() > 0:"


def test_plain_cells_and_trace_cell_keep_their_numbers(ip, dispatch_state):
    import jaxviz
    ct = jaxviz.trace_cell("import jax, jax.numpy as jnp\n"
                           "f = jax.jit(lambda x: jnp.cos(x))\n"
                           "f(jnp.ones(2))\n")
    assert "1 call (line 3)" in str(ct)
    assert _payload(ct)["traces"][0]["call_sites"][0][1] == 3


def test_cli_lines_are_the_files_own(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "s.py"
    script.write_text("import jax, jax.numpy as jnp\n\n"
                      "@jax.jit\n"
                      "def h(x):\n"
                      "    if x.sum() > 0:\n"
                      "        return x\n"
                      "    return -x\n"
                      "h(jnp.ones(3))\n")
    p = subprocess.run([sys.executable, "-m", "jaxviz", str(script)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=240)
    out = p.stdout + p.stderr
    assert f"{script}:5: error: tracer-bool:" in out or "s.py:5: error: tracer-bool:" in out, out

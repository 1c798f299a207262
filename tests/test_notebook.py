"""notebooks/quickstart.ipynb executes headless in a real kernel, and make demo's page is offline."""
from __future__ import annotations

import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "tools"))
pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def executed():
    pytest.importorskip("nbclient")
    pytest.importorskip("nbconvert")
    import demo
    return demo.execute(ROOT / "notebooks" / "quickstart.ipynb")


def outputs(nb):
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            yield cell, out


def test_quickstart_runs_and_shows_every_trace(executed):
    errors = [o for _, o in outputs(executed) if o.output_type == "error"]
    assert errors == []
    texts = [o["data"]["text/plain"] for _, o in outputs(executed)
             if o.output_type == "display_data" and "text/plain" in o.get("data", {})]
    joined = "\n".join(texts)
    assert "jit train_step(" in joined and "3 calls" in joined
    assert "jit rnn(" in joined and "scan" in joined
    assert "jit collatz_steps(" in joined and "while" in joined and "cond" in joined
    assert "jit sharded_step(" in joined and "@data" in joined        # 8 devices, sharded batch
    first = next(o for _, o in outputs(executed) if o.output_type == "stream")
    assert "8 devices" in first["text"]


def test_demo_page_is_self_contained(executed, tmp_path):
    import demo
    html = demo.offline_html(executed)
    # no script or stylesheet from the network
    assert not re.search(r"<script[^>]+src=[\"']https?://", html)
    assert not re.search(r"<link[^>]+href=[\"']https?://[^\"']+\.css", html)
    assert "train_step" in html


def test_failing_magic_cell_shows_one_usual_error_in_a_kernel():
    """In a real kernel: one error output, IPython's own traceback of the cell, and the
    notebook stops there as it would without jaxviz."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext jaxviz\nimport jax.numpy as jnp"),
                nbformat.v4.new_code_cell("%%jaxtrace\nx = jnp.ones(3) * 2\nraise ValueError('bad value')"),
                nbformat.v4.new_code_cell("print('not reached')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    with pytest.raises(CellExecutionError, match="ValueError"):
        NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    errors = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert len(errors) == 1
    assert (errors[0].ename, errors[0].evalue) == ("ValueError", "bad value")
    tb = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(errors[0].traceback))
    assert "line 3" in tb and "raise ValueError('bad value')" in tb    # the editor's line
    assert "jaxviz" not in tb
    assert nb.cells[2].outputs == []
    views = [o for o in nb.cells[1].outputs if o.output_type == "display_data"]
    # the cell's memory chart (displayed when it started, now its saved copy), then the view
    assert [v.data["text/plain"].split(" ", 1)[0] for v in views] == ["memory", "jaxviz:"]
    assert "jaxviz-memory" in views[0].data["text/html"]


def test_the_real_code_cells_behave_in_a_real_kernel():
    """Issue 45's notebook-level items in a real kernel, each cell as a user writes it: a
    config cell (item 1: jaxviz starts no backend before the cell's first line), `%timeit`
    inside a traced cell (item 3: the same loop count as plain), a jit made anew per
    iteration (item 5: the view folds its traces), and a trivial cell among many live
    arrays (item 2: it runs, and states what jaxviz added). `%timeit` is given its loop
    count here: the count it picks itself is a timing (test_timeit.py checks that JAX's own
    dispatch runs inside it)."""
    import nbformat
    from nbclient import NotebookClient
    cells = [
        "%load_ext jaxviz",
        "%%jaxtrace\nimport jax\njax.config.update('jax_num_cpu_devices', 8)\n"
        "print('devices:', len(jax.devices()))",
        "import jax.numpy as jnp\nf = jax.jit(lambda x: x * 2.0)\nx = jnp.ones(1000)\n"
        "r = %timeit -o -n 200 -r 3 f(x).block_until_ready()\nprint('loops:', r.loops)",
        "%%jaxtrace\nr = %timeit -o -n 200 -r 3 f(x).block_until_ready()\nprint('loops:', r.loops)",
        "%%jaxtrace -o ct --text\nfor i in range(30):\n    g = jax.jit(lambda v: v + 1.0)\n"
        "    y = g(x)",
        "print('shown:', sum(t.name == '<lambda>' for t in ct.traces))",
        "keep = [jnp.full((4,), float(i)) for i in range(20000)]",
        "%%jaxtrace -o small\nlr = 0.01",
        "print('lr:', lr, 'cost:', small.cost is not None)",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=240, kernel_name="python3").execute()

    def printed(i):
        return "".join(o.get("text", "") for o in nb.cells[i].outputs if o.output_type == "stream")

    assert [o for c in nb.cells for o in c.outputs if o.output_type == "error"] == []
    assert "devices: 8" in printed(1)
    assert printed(2).split("loops:")[1].strip() == printed(3).split("loops:")[1].strip() == "200"
    shown = int(printed(5).split("shown:")[1])
    assert 1 <= shown <= 2, printed(5)      # 30 look-alike traces folded to first and last
    assert "lr: 0.01 cost: True" in printed(8)

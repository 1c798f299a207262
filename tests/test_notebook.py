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

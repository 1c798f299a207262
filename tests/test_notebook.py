"""notebooks/quickstart.ipynb executes headless in a real kernel, and make demo's page is offline."""
from __future__ import annotations

import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "tools"))


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

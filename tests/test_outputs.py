"""Where outputs are isolated (Colab, VS Code), the graph view is the widget itself (item 9).

The detection (`isolated_outputs`) reads jaxviz.options.outputs and, on "auto", the kernel's
own process: `google.colab` imported, VS Code's environment. The bundle then carries the
GraphWidget's widget view (payload through its comm) and the self-contained HTML beside it.
"""
from __future__ import annotations

import json
import re
import sys
import types

import pytest

from jaxviz.config import options
from jaxviz.view.assets import isolated_outputs
from jaxviz.view.html import mimebundle
from jaxviz.view.payload import build_payload
from jaxviz.view.widget import make_widget
from tools.synth import FakeTrace, flat_graph

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
VSCODE_ENV = ("VSCODE_PID", "VSCODE_CWD", "JPY_SESSION_NAME")


@pytest.fixture
def plain_host(monkeypatch):
    """A kernel neither in Colab nor in VS Code (whatever runs these tests)."""
    for k in VSCODE_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)


def test_auto_detects_colab_and_vscode(plain_host, monkeypatch):
    assert options.outputs == "auto" and not isolated_outputs()
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert isolated_outputs()
    monkeypatch.delitem(sys.modules, "google.colab")
    monkeypatch.setenv("VSCODE_PID", "4242")          # a kernel VS Code started
    assert isolated_outputs()
    monkeypatch.setenv("JPY_SESSION_NAME", "/w/a.ipynb")  # a Jupyter server's kernel, run
    assert not isolated_outputs()                     # from VS Code's terminal: JupyterLab's page


def test_the_option_overrides_the_guess(plain_host, monkeypatch):
    with options.using(outputs="isolated"):
        assert isolated_outputs()
    monkeypatch.setenv("VSCODE_CWD", "/w")
    with options.using(outputs="shared"):
        assert not isolated_outputs()
    with pytest.raises(ValueError, match=r"outputs must be one of 'auto', 'shared', 'isolated'.*iframe"):
        options.outputs = "colab"
    assert options.outputs == "auto"


def _data_script(fragment: str) -> dict:
    m = re.search(r'<script type="application/json" id="[^"]+-data">(.*?)</script>', fragment, re.S)
    assert m
    return json.loads(m.group(1))


def test_isolated_outputs_display_the_widget_with_the_html_beside_it(plain_host):
    t = FakeTrace(flat_graph(120))
    w = make_widget([t], lazy=True)
    try:
        with options.using(outputs="isolated"):
            shown = mimebundle([t], text="f: 120 equations", widget=w)
        assert isinstance(shown, tuple), "a (data, metadata) pair, as anywidget gives it"
        data, _meta = shown
        assert data[WIDGET_VIEW]["model_id"] == w.model_id
        assert w.payload == build_payload([t])          # the view draws from its own model
        assert data["text/plain"] == "f: 120 equations"
        # the saved copy stands alone: no token pointing at a model in some other page
        assert _data_script(data["text/html"])["live"] == ""
        # the same widget, shared page: HTML only, linked by token, payload not synced twice
        w2 = make_widget([t], lazy=True)
        with options.using(outputs="shared"):
            data2 = mimebundle([t], widget=w2)
        assert WIDGET_VIEW not in data2 and w2.payload == {}
        assert _data_script(data2["text/html"])["live"] == w2.live_token != ""
        w2.close()
    finally:
        w.close()


def test_a_closed_widget_falls_back_to_the_html(plain_host):
    t = FakeTrace(flat_graph(30))
    w = make_widget([t], lazy=True)
    w.close()                                       # e.g. its cell was run again
    with options.using(outputs="isolated"):
        data = mimebundle([t], widget=w)
    assert isinstance(data, dict) and WIDGET_VIEW not in data and "text/html" in data

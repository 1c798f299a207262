"""`make demo`: execute a notebook headless (a real kernel) and write a self-contained HTML page.

Usage: python tools/demo.py notebooks/quickstart.ipynb reports/quickstart.html

The page is offline: jaxviz's outputs carry their own self-contained `text/html` (the
interactive graph with its script inlined), which is what the page shows; the widget-view
entries, which need a widget manager from a CDN, are left out of the HTML export only.
"""
from __future__ import annotations

import pathlib
import re
import sys

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def execute(path: pathlib.Path, timeout: int = 600) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            store_widget_state=True)
    client.execute()
    return nb


def offline_html(nb: nbformat.NotebookNode) -> str:
    nb = nbformat.from_dict(nb)   # a copy: the saved notebook keeps its widget views
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW in data and "text/html" in data:
                del data[WIDGET_VIEW]
    nb.metadata.pop("widgets", None)
    exporter = HTMLExporter(template_name="lab")
    exporter.mathjax_url = ""
    body, _ = exporter.from_notebook_node(nb)
    # nbconvert's template loads require.js from a CDN; nothing on this page needs it
    return re.sub(r'<script[^>]*\bsrc="https?://[^"]*"[^>]*>\s*</script>', "", body)


def main(argv: list[str]) -> int:
    src, dst = pathlib.Path(argv[0]), pathlib.Path(argv[1])
    nb = execute(src)
    dst.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dst.with_suffix(".ipynb"))
    dst.write_text(offline_html(nb), encoding="utf-8")
    print(f"jaxviz demo: wrote {dst.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

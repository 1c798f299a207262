"""The bundled front-end (jaxviz/static/*.js, built from js/ at install) and where it runs.

>>> bundle("graph.js")          # a path, or a stand-in ESM that says the bundle is missing
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import pathlib
import sys
import zlib

from jaxviz.config import options

STATIC = pathlib.Path(__file__).parent.parent / "static"

MISSING = (
    "jaxviz: the bundle jaxviz/static/{name} is missing; reinstall with `pip install .` "
    "(it needs npm) or run `cd js && npm run build`."
)


def bundle(name: str) -> pathlib.Path | str:
    """A widget's ESM: jaxviz/static/NAME, or a stand-in that says why it is missing."""
    path = STATIC / name
    if path.is_file():
        return path
    return (
        "export default { render({ el }) {\n"
        f"  el.textContent = {MISSING.format(name=name)!r};\n"
        "} };\n"
    )


def packed_bundle(name: str) -> tuple[str, str] | None:
    """(zlib + base64 of jaxviz/static/NAME, a short digest of it), or None when missing."""
    path = STATIC / name
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    return _packed(path, mtime)


@functools.lru_cache(maxsize=4)
def _packed(path: pathlib.Path, mtime_ns: int) -> tuple[str, str]:
    code = path.read_bytes()
    return base64.b64encode(zlib.compress(code, 9)).decode(), hashlib.sha1(code).hexdigest()[:12]


def in_kernel() -> bool:
    """Whether a Jupyter kernel runs us (so a widget model can sync to a front-end)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def isolated_outputs() -> bool:
    """Whether each output renders in its own iframe or webview, with no page shared between
    outputs (Colab, VS Code): jaxviz.options.outputs, or with "auto" a guess from the kernel.

    Colab imports `google.colab` into its kernels. VS Code starts its kernels with its own
    environment (VSCODE_PID, VSCODE_CWD); a Jupyter server started from VS Code's terminal
    has those too, but it names each kernel's session (JPY_SESSION_NAME), and its pages are
    JupyterLab's.
    """
    if options.outputs != "auto":
        return options.outputs == "isolated"
    if "google.colab" in sys.modules:
        return True
    env = os.environ
    return bool(env.get("VSCODE_PID") or env.get("VSCODE_CWD")) and "JPY_SESSION_NAME" not in env

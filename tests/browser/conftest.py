"""Fixtures for the real-browser tests: Debian's Chromium through Playwright, a real JupyterLab.

Chromium is `/usr/bin/chromium` (never `playwright install`); JupyterLab runs as in
shared/UI_NOTES.md: 127.0.0.1, a token, a free port, every Jupyter dir in a temp HOME.
Screenshots go to test-artifacts/.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

# Browser test modules written as `from conftest import wait_until` keep working now that
# tests/ is a package (they get their own copy of these helpers; the fixtures are pytest's).
sys.path.insert(0, str(pathlib.Path(__file__).parent))

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def pytest_collection_modifyitems(items):
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in pathlib.Path(item.fspath).parents:
            item.add_marker(pytest.mark.browser)


def _require_chromium() -> None:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: `make chromium` installs Debian's chromium package")
    pytest.importorskip("playwright.sync_api", reason="the ui extra (playwright) is not installed")


@pytest.fixture(scope="session")
def artifacts() -> pathlib.Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory):
    """One persistent Chromium context for the session (fresh profile dir)."""
    _require_chromium()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM,
            headless=True, args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 860})
        ctx.set_default_timeout(20_000)
        yield ctx
        ctx.close()



@pytest.fixture
def page(browser_context):
    pg = browser_context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    pg.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    pg.errors = errors
    yield pg
    pg.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 2.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return None, b""


def wait_until(check, timeout: float, what: str, interval: float = 0.2):
    """Polls `check()` until truthy or `timeout` seconds pass (then fails, naming `what`)."""
    end = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def write_notebook(path: pathlib.Path, cells) -> pathlib.Path:
    """Writes a notebook of code cells (their sources) with a Python 3 kernelspec at `path`."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


class Lab:
    def __init__(self, url: str, token: str, root: pathlib.Path, proc: subprocess.Popen):
        self.url, self.token, self.root, self.proc = url, token, root, proc

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(f"{self.url}/api/{path}?token={self.token}", method=method)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                body = r.read()
                return json.loads(body) if body else None
        except (urllib.error.URLError, ConnectionError, OSError):
            return None

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?reset&token={self.token}"   # reset: only this tab

    def open_notebook(self, page, name: str) -> None:
        """Opens notebook `name` in `page` and waits (bounded) for its cells and an idle kernel."""
        page.goto(self.notebook_url(name))
        page.wait_for_selector(".jp-Notebook .jp-CodeCell .cm-content", timeout=60_000)
        wait_until(lambda: any(k.get("execution_state") == "idle" for k in self.api("kernels") or []),
                   60, "the kernel to be idle")

    def shutdown_kernels(self) -> None:
        for k in self.api("kernels") or []:
            self.api(f"kernels/{k['id']}", method="DELETE")
        wait_until(lambda: self.api("kernels") == [], 20, "kernels to shut down")


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory):
    """A real JupyterLab server on 127.0.0.1 with a token, all state in a temp HOME."""
    _require_chromium()
    jupyter = pathlib.Path(sys.executable).with_name("jupyter")
    if not jupyter.exists() or shutil.which("jupyter-lab", path=str(jupyter.parent)) is None:
        pytest.skip("jupyterlab is not installed (the ui extra)")
    home = tmp_path_factory.mktemp("labhome")
    root = tmp_path_factory.mktemp("labroot")
    env = dict(os.environ, HOME=str(home), JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               JUPYTER_PLATFORM_DIRS="1")
    # no news or update pop-ups over the page
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    log = open(home / "lab.log", "wb")
    proc = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--allow-root",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.poll() is not None or _get(f"{url}/api/status?token={token}")[0] == 200,
                   60, "JupyterLab to answer /api/status")
        if proc.poll() is not None:
            raise AssertionError(f"jupyter lab exited: {(home / 'lab.log').read_text()[-2000:]}")
        yield Lab(url, token, root, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


PROMPT_DONE = re.compile(r"\[\d+\]")


def start_cell(page, cell, tries: int = 3) -> None:
    """Runs `cell` as a user does (its editor clicked, Shift+Enter) and waits, bounded, until
    JupyterLab has taken the request: its prompt turns to [*] (or already to its number). A key
    press that lands before the editor holds the focus is lost without a trace, so after 5 s
    with the prompt unchanged the editor is clicked and the key pressed again, `tries` times."""
    prompt = cell.locator(".jp-InputPrompt")
    before = prompt.text_content() or ""
    for _ in range(tries):
        cell.locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
        end = time.monotonic() + 5
        while time.monotonic() < end:
            now = prompt.text_content() or ""
            if "*" in now or (now != before and PROMPT_DONE.search(now)):
                return
            page.wait_for_timeout(100)
    raise AssertionError(f"the cell did not start after {tries} presses of Shift+Enter "
                         f"(its prompt still reads {prompt.text_content()!r})")


def run_cell(page, cell, timeout: float = 180_000) -> None:
    """start_cell, then waits (bounded, `timeout` ms) for the prompt's number: the kernel is done
    with the cell. The bound is wide: the first cell of a kernel imports JAX and jaxviz, which
    takes a minute on a CI machine whose cores the other test workers share."""
    start_cell(page, cell)
    cell.locator(".jp-InputPrompt").filter(has_text=PROMPT_DONE).wait_for(timeout=timeout)


def samples_while_running(page, cell, chart, seconds: float = 90) -> list[int]:
    """The chart's sample counts (`data-samples`) read while the cell's prompt says [*],
    until the prompt shows its number: how the tests see a chart update during the run."""
    seen = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        prompt = cell.locator(".jp-InputPrompt").text_content() or ""
        n = int(chart.get_attribute("data-samples") or 0) if chart.count() else 0
        if "*" in prompt:
            seen.append(n)
        elif re.search(r"\[\d+\]", prompt):
            break
        page.wait_for_timeout(50)
    return seen

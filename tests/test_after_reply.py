"""A traced cell's view fills in after its reply, in a real Jupyter kernel (issue 56 item 1).

The cell's reply, result and stdout come back when its code is done; its graph, findings and
memory tabs are worked out after the reply, while the kernel would otherwise wait for the
next request (jaxviz.capture.reply): never while a later cell runs, even one already sent.
The cell's output says it is analysing until the view replaces it (an update of the same
display, with the cell's own parent: nbclient and a saved notebook get it too). A failure in
that analysis is a note in the view's place, never a traceback in another cell.

The analysis is made slow on purpose (diagnose_cell sleeps 1 s in the kernel) and logs when
it runs; the kernel's own message dates order it against the reply and the next cell.
"""
from __future__ import annotations

import datetime

import pytest

pytestmark = pytest.mark.kernel

SETUP = """
%load_ext jaxviz
import time
import jax, jax.numpy as jnp
import jaxviz.api as _api
LOG = []
_diagnose = _api.diagnose_cell
def _slow(*a, **k):
    LOG.append(("analysis", time.time()))
    time.sleep(1.0)
    if BROKEN:
        raise RuntimeError("a bug in jaxviz's analysis")
    return _diagnose(*a, **k)
_api.diagnose_cell = _slow
"""
TRACED = "%%jaxtrace\nf = jax.jit(lambda x: x * 2)\ny = f(jnp.ones(3))\nprint('done')\n"
NEXT = "LOG.append(('next', time.time())); time.sleep(0.3); LOG.append(('next end', time.time()))"


@pytest.fixture(scope="module")
def kernel():
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3", startup_timeout=120)
    try:
        reply = kc.execute_interactive(SETUP + "BROKEN = False\n", timeout=120)
        assert reply["content"]["status"] == "ok", reply["content"]
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _run_two(kc, first: str, second: str) -> tuple[dict, dict, dict]:
    """Sends both cells at once (the second queued while the first runs); the replies and
    the iopub messages of each, until each is idle."""
    ids = [kc.execute(first), kc.execute(second)]
    replies = {}
    while len(replies) < 2:
        msg = kc.get_shell_msg(timeout=120)
        replies[msg["parent_header"]["msg_id"]] = msg
    msgs: dict[str, list] = {i: [] for i in ids}
    idle: set[str] = set()
    while idle != set(ids):
        msg = kc.get_iopub_msg(timeout=120)
        parent = msg["parent_header"].get("msg_id")
        if parent in msgs:
            msgs[parent].append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                idle.add(parent)
    return replies, msgs, {"first": ids[0], "second": ids[1]}


def _kernel_log(kc) -> list:
    out: list = []
    kc.execute_interactive(
        "print(repr(LOG)); LOG.clear()",
        timeout=60,
        output_hook=lambda m: out.append(m["content"].get("text", "")),
    )
    return eval("".join(out))  # a list of (str, float)


def _view(msgs: list) -> dict:
    """The update of the cell's "analysing" output: the one display_data saying so, then
    the one update_display_data of its display id."""
    (note,) = [m for m in msgs if m["msg_type"] == "display_data"
               and "analysing" in m["content"]["data"]["text/plain"]]
    display_id = note["content"]["transient"]["display_id"]
    (update,) = [m for m in msgs if m["msg_type"] == "update_display_data"
                 and m["content"]["transient"]["display_id"] == display_id]
    return update


def _date(msg) -> float:
    d = msg["header"]["date"]
    if isinstance(d, str):
        d = datetime.datetime.fromisoformat(d)
    return d.timestamp()


def test_the_view_comes_after_the_reply_and_before_the_next_cell(kernel):
    kernel.execute_interactive("BROKEN = False", timeout=60)
    replies, msgs, ids = _run_two(kernel, TRACED, NEXT)
    first = msgs[ids["first"]]
    reply = replies[ids["first"]]
    assert reply["content"]["status"] == "ok"
    assert replies[ids["second"]]["content"]["status"] == "ok"
    stream = [m for m in first if m["msg_type"] == "stream"]
    assert stream and "done" in stream[0]["content"]["text"]
    update = _view(first)
    assert "jit <lambda>" in update["content"]["data"]["text/plain"]
    log = dict(_kernel_log(kernel))
    # the reply was sent before the analysis began; the view after it; the next cell, sent
    # while the first ran, began after the analysis was done
    assert _date(reply) <= log["analysis"] <= _date(update) <= log["next"]
    assert not any(m["msg_type"] == "error" for ms in msgs.values() for m in ms)


def test_a_failing_analysis_is_a_note_in_the_view_not_another_cells_error(kernel):
    kernel.execute_interactive("BROKEN = True", timeout=60)
    try:
        replies, msgs, ids = _run_two(kernel, TRACED, NEXT)
    finally:
        kernel.execute_interactive("BROKEN = False", timeout=60)
    assert all(r["content"]["status"] == "ok" for r in replies.values())
    assert not any(m["msg_type"] == "error" for ms in msgs.values() for m in ms)
    second = msgs[ids["second"]]
    assert not any("jaxviz" in str(m["content"]) for m in second if m["msg_type"] != "status")
    text = _view(msgs[ids["first"]])["content"]["data"]["text/plain"]
    assert "could not finish this cell's analysis" in text and "a bug in jaxviz" in text
    _kernel_log(kernel)


SLOW = """
from jax import lax
import threading
slow = jax.jit(lambda c, n: lax.fori_loop(0, n, lambda i, c: c * 0.999 + 0.001, c))
c0 = jnp.ones((64, 64)); slow(c0, 10).block_until_ready()
t0 = time.time(); slow(c0, 20_000).block_until_ready()
N = int(20_000 * 1.0 / max(time.time() - t0, 1e-4))   # about a second of work
"""
LAST = """%%jaxtrace
y = slow(c0, N)   # its NaN check waits for the value: after the reply
threading.Thread(target=lambda: (y.block_until_ready(), LOG.append(("ready", time.time())))).start()
"""


def test_the_reply_does_not_wait_for_a_value_still_computing(kernel):
    # the cell's last call is still computing when its code is done: its NaN check (the
    # watch's finish, which waits for the value) runs with the analysis, after the reply
    reply = kernel.execute_interactive(SLOW, timeout=120)
    assert reply["content"]["status"] == "ok"
    _kernel_log(kernel)
    replies, msgs, ids = _run_two(kernel, LAST, "pass")
    reply = replies[ids["first"]]
    assert reply["content"]["status"] == "ok"
    log = dict(_kernel_log(kernel))
    assert _date(reply) < log["ready"] <= log["analysis"] + 0.5, (_date(reply), log)
    assert "jit <lambda>" in _view(msgs[ids["first"]])["content"]["data"]["text/plain"]

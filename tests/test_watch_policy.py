"""The watch policy is written once (jaxviz/capture/policy.py) and read by the docs and the
handlers: docs/architecture.md shows the same table, each row's Python is one the capture
tells apart, and the limits this Python's handlers apply are the table's."""
from __future__ import annotations

import pathlib
import re
import sys

from jaxviz.capture import policy

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
PYTHONS = {"all", "3.12+", "3.11", "3.11 fallback", "3.12+, 3.11"}


def norm(text: str) -> str:
    return " ".join(text.split())


def test_the_architecture_doc_shows_the_policy_table():
    doc = DOC.read_text()
    want = policy.markdown()
    assert want in doc, "docs/architecture.md's watch-policy table differs from policy.markdown()"
    # and only once: a second, hand-edited copy would drift
    assert norm(doc).count(norm(want.splitlines()[0])) == 1


def test_each_row_says_a_python_the_capture_tells_apart_and_fills_every_column():
    for rule in policy.WATCH_POLICY:
        assert rule.python in PYTHONS, rule
        assert all(getattr(rule, f).strip() for f in ("what", "watched", "until", "then", "count"))


def test_the_limits_the_table_names_are_the_policy_s_own():
    named = {name: int(n.replace(",", "")) for rule in policy.WATCH_POLICY
             for n, name in re.findall(r"([\d,]+) [a-z ]+\(`([A-Z_]+)`\)", rule.until)}
    assert named, "no limit named in the table"
    for name, n in named.items():
        assert getattr(policy, name) == n, name


def test_this_python_s_limits_are_its_rows():
    if sys.version_info >= (3, 12):
        assert policy.MONITORING and not policy.COUNTS_EVERY_CALL
        assert policy.JIT_CALLS_WATCHED == policy.CHARTED_CALLS_WATCHED == policy.CALLS_WATCHED
    else:
        assert not policy.MONITORING
        assert policy.JIT_CALLS_WATCHED == policy.FALLBACK_CALLS_WATCHED
        assert policy.CHARTED_CALLS_WATCHED == policy.FALLBACK_CHARTED_CALLS_WATCHED
        assert policy.fallback_watched(False, True) == policy.LIBRARY_CALLS_WATCHED

"""Golden text twins, in jaxviz's own format (stable across JAX 0.10.2 and 0.12).

Regenerate after an intended format change: JAXVIZ_REGOLD=1 pytest tests/test_text.py
"""
from __future__ import annotations

import os
import pathlib

import pytest

import jaxviz
from jaxviz._text import human, human_bytes
from tests.golden.funcs import CASES

GOLDEN = pathlib.Path(__file__).parent / "golden"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_text_twin(name):
    fn, args = CASES[name]
    text = str(jaxviz.trace(fn, *args())).replace(str(GOLDEN / "funcs.py"), "funcs.py")
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("JAXVIZ_REGOLD"):
        path.write_text(text + "\n")
    assert text + "\n" == path.read_text()


def test_units():
    assert human(1234567, "FLOP") == "1.2 MFLOP"
    assert human(12, "FLOP") == "12 FLOP"
    assert human_bytes(3 * 2**20) == "3.0 MiB"

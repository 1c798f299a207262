"""Modules a reader can hold (issue 48): in jaxviz/, no module over MAX_LINES lines, and no
function over MAX_FUNCTION_LINES lines unless a comment in it says why it must be one piece (a
measured hot path: "One piece")."""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "jaxviz"
MAX_LINES = 600
MAX_FUNCTION_LINES = 80
WHY = "one piece"


def _modules() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_fits_and_a_long_function_says_why(path):
    text = path.read_text()
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES, f"{path.name}: {len(lines)} lines (at most {MAX_LINES})"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = lines[node.lineno - 1 : node.end_lineno]
            if len(body) > MAX_FUNCTION_LINES:
                assert any(WHY in line.lower() for line in body), (
                    f"{path.name}: {node.name} is {len(body)} lines, and says not why it "
                    f"must be one piece"
                )


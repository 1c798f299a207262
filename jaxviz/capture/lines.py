"""Line numbers as the user's editor shows them.

IPython compiles a `%%jaxtrace` cell whole (its magic's line made `%jaxtrace`), so the
file's line 1 is the magic's: the editor's numbers, less the blank lines IPython drops
before it. The cell magic run as such (stacked magics, `run_cell_magic`) compiles its body
alone, whose line 1 the editor shows as line 2 (and IPython drops blank lines the body
starts with). Records keep the file's own numbers (what tracebacks, `linecache` and JAX's
source info use); everything jaxviz prints or draws shows `shown_line`, the editor's.
A file nobody registered (a module, a script run with `python -m jaxviz`, a plain cell)
shows its own numbers.

    >>> register_first_line("/tmp/ipykernel_81/2000347982.py", 2)
    >>> shown_line("/tmp/ipykernel_81/2000347982.py", 6)
    7
"""

from __future__ import annotations

FIRST_LINES: dict[str, int] = {}  # filename -> the editor's number of the file's line 1


def register_first_line(filename: str, first: int) -> None:
    """Says that line 1 of `filename` is line `first` in the editor."""
    if not filename:
        return
    if len(FIRST_LINES) > 10_000:
        FIRST_LINES.clear()
    if first == 1:
        FIRST_LINES.pop(filename, None)
    else:
        FIRST_LINES[filename] = first


def shown_line(filename: str, line: int) -> int:
    """`line` of `filename` as the editor numbers it."""
    first = FIRST_LINES.get(filename)
    return line + first - 1 if first and line else line


def leading_blank_lines(cell: str) -> int:
    """How many blank lines a cell starts with: IPython drops them before it compiles the
    cell (its `leading_empty_lines`), so the file's line 1 is the first line after them."""
    lines = cell.splitlines()
    return next((i for i, ln in enumerate(lines) if ln.strip()), 0)

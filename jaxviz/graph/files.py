"""File labels: what the user calls a file in every message and view.

A notebook cell runs from a file such as "/tmp/ipykernel_81/2000347982.py"; the magic
registers it as "cell [5]" (as linecache keeps each cell's source), and diagnostics, the
text twin and the views print the label.

    >>> register_file_label("/tmp/ipykernel_81/2000347982.py", "cell [5]")
    >>> file_label("/tmp/ipykernel_81/2000347982.py")
    'cell [5]'
"""

from __future__ import annotations

FILE_LABELS: dict[str, str] = {}


def register_file_label(filename: str, label: str) -> None:
    if filename and label and filename != label:
        if len(FILE_LABELS) > 10_000:
            FILE_LABELS.clear()
        FILE_LABELS[filename] = label


def file_label(filename: str) -> str:
    """A file as the user knows it: `cell [3]` for a notebook cell, else its name."""
    return FILE_LABELS.get(filename, filename)

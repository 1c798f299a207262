"""File labels: what the user calls a file in every message and view.

A notebook cell runs from a file such as "/tmp/ipykernel_81/2000347982.py"; under IPython
that file is "cell [5]" (IPython maps each cell's file to its number, as its tracebacks say
"Cell In[5]"). `file_label` answers from the labels registered here, else from the running
IPython shell's map, so `jaxviz.trace` in a plain cell names cells as %%jaxtrace does.

    >>> register_file_label("/tmp/ipykernel_81/2000347982.py", "cell [5]")
    >>> file_label("/tmp/ipykernel_81/2000347982.py")
    'cell [5]'
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from jaxviz.capture.lines import shown_line
from jaxviz.capture.places import is_library, library_path

FILE_LABELS: dict[str, str] = {}


def register_file_label(filename: str, label: str) -> None:
    if filename and label and filename != label:
        if len(FILE_LABELS) > 10_000:
            FILE_LABELS.clear()
        FILE_LABELS[filename] = label


def _cell_numbers() -> dict:
    """The running IPython shell's map of cell files to cell numbers ({} outside IPython;
    IPython is never imported here)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return {}
    try:
        shell = ipython.get_ipython()
        numbers = getattr(getattr(shell, "compile", None), "_filename_map", None)
    except Exception:  # an IPython without the map: no labels from it
        return {}
    return numbers if isinstance(numbers, dict) else {}


def file_label(filename: str) -> str:
    """A file as the user knows it: `cell [3]` for a notebook cell, an installed library's
    file from its package on (`numpyro/handlers.py`, not the site-packages path before it),
    else its name."""
    label = FILE_LABELS.get(filename)
    if label is not None:
        return label
    n = _cell_numbers().get(filename) if filename else None
    if isinstance(n, int) and not isinstance(n, bool):
        return f"cell [{n}]"
    return (library_path(filename) if filename else None) or filename


def has_labels(filenames: Iterable[str] = ()) -> bool:
    """Whether any file has a label other than its name (registered, or a notebook cell),
    or one of `filenames` is an installed library's."""
    return bool(FILE_LABELS) or bool(_cell_numbers()) or any(map(is_library, filenames))


def place(filename: str, line: int | None) -> str:
    """`cell [4]:7`: a file as the user knows it, and a line as the editor numbers it."""
    name = file_label(filename)
    return f"{name}:{shown_line(filename, line)}" if line is not None else (name or "?")

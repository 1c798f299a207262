"""Where a call belongs: the user's line, not a library's.

JAX calls every file outside JAX the user's (`source_info_util.is_user_filename`): an
installed library too (equinox, optax, flax, IPython). A finding belongs where the user can
change something: in the user's code, at the call into the library, and in the user's names;
the library's own line can go along as a related place.

The rule: a file is a library's when it lies in a directory that installers fill: a path
with a `site-packages` or `dist-packages` component (pip, conda, the system's packages), or a
folder pip filled with `--target` (a notebook's `pip install -t libs`, a vendored folder on
sys.path), whose packages its `*.dist-info` records list. Every other file JAX counts as
the user's is the user's: the cell, the script being run, a module the user wrote next to
the notebook (imported from sys.path or not), an editable install of a package the user is
developing (its records lie in site-packages, not beside its source). The file being run
(`top`: the cell, the script) is always the user's, wherever it lies.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax

from jaxviz import _compat

_INSTALL_DIRS = ("site-packages", "dist-packages")


def is_library(filename: str) -> bool:
    """Whether `filename` is installed code: under site-packages or dist-packages, or in a
    package an installer's record lists in its folder (`installed_names`)."""
    return library_path(filename) is not None


@functools.lru_cache(maxsize=8192)
def _users(filename: str) -> bool:
    return (
        bool(_compat.is_user_filename(filename))
        and not is_library(filename)
        and not filename.startswith("<frozen ")  # the standard library's frozen modules
    )


def is_user_file(filename: str, top: str | None = None) -> bool:
    """The user's code: the file being run, or a file that is neither JAX's, jaxviz's, the
    standard library's nor an installed library's."""
    return filename == top or _users(filename)


def users_frame(stack: Sequence[Any]) -> Any:
    """The innermost frame of a non-empty `stack` (innermost first, each with a `file`) in
    the user's code, else the innermost: an op a library ran (flax's Linear.__call__,
    optax's update) is at the user's line that called it, the line to change."""
    return next((f for f in stack if is_user_file(f.file)), stack[0])


@functools.lru_cache(maxsize=8192)
def library_path(filename: str) -> str | None:
    """An installed library's file from its package on ("numpyro/handlers.py"), as the user
    would look it up; None for a file that is not a library's (`is_library`)."""
    parts = filename.replace("\\", "/").split("/")
    for k in range(len(parts) - 1, -1, -1):
        if parts[k] in _INSTALL_DIRS and k + 1 < len(parts):
            return "/".join(parts[k + 1 :])
    if not os.path.isabs(filename):  # "<cell 3>", "<string>": no folder to look in
        return None
    for k in range(1, len(parts)):  # the outermost folder whose records list the package
        if parts[k] in installed_names("/".join(parts[:k]) or "/"):
            return "/".join(parts[k:])
    return None


@functools.lru_cache(maxsize=1024)
def installed_names(folder: str) -> frozenset[str]:
    """The top-level packages and modules pip's records (`*.dist-info/RECORD`) list in
    `folder`: "numpyro", "six.py". Empty for a folder no installer filled, as a project's
    (an editable install's records lie in site-packages, not beside its source)."""
    try:
        records = [e for e in os.listdir(folder) if e.endswith(".dist-info")]
    except OSError:
        return frozenset()
    names: set[str] = set()
    for record in records:
        try:
            with open(os.path.join(folder, record, "RECORD"), encoding="utf-8") as f:
                for row in f:
                    top = row.split(",", 1)[0].split("/", 1)[0]
                    if top and top != ".." and not top.endswith((".dist-info", ".data")):
                        names.add(top)
        except (OSError, UnicodeDecodeError):
            continue
    return frozenset(names)


def library_label(filename: str) -> str:
    """The installed package a library file belongs to: "equinox", "optax"."""
    path = library_path(filename)
    if path is None:
        return os.path.basename(filename)
    name = path.split("/", 1)[0]
    return name[:-3] if name.endswith(".py") else name


class Site(NamedTuple):
    """Where a call was made: the user's line, and the library line below it, if any."""

    file: str
    line: int
    fn: str
    inner: tuple[str, int] | None  # the innermost library line (the library's own call)


def user_site(frame: Any, top: str | None = None) -> Site | None:
    """The innermost user frame at or above `frame` (a library's frames are passed by);
    without one, the innermost frame JAX calls the user's, as before."""
    f = _compat.user_frame(frame)
    first = f
    inner = None
    while f is not None and not is_user_file(f.f_code.co_filename, top):
        if inner is None:
            inner = (f.f_code.co_filename, f.f_lineno or 0)
        f = _compat.user_frame(f.f_back)
    if f is None:
        if first is None:
            return None
        f, inner = first, None
    return Site(f.f_code.co_filename, f.f_lineno or 0, f.f_code.co_name, inner)


def _entry_frame(frame: Any, top: str | None) -> Any:
    """The outermost library frame below the user's frame: the library function the user's
    line called (None when the call did not come through a library)."""
    f = _compat.user_frame(frame)
    entry = None
    while f is not None and not is_user_file(f.f_code.co_filename, top):
        entry = f
        f = _compat.user_frame(f.f_back)
    return entry if f is not None else None


def user_arg_names(
    frame: Any, args_flat: list, top: str | None = None
) -> tuple[str, dict[int, str]] | None:
    """The user's names for a jitted call a library made on the user's behalf.

    `frame`: where the library called the jitted function. The library function the user's
    line called (its outermost frame) holds the user's arguments; each flat argument of the
    jitted call that is one of their leaves (the same array object) gets the user's path
    to it: the parameter of the user's function (`x`, `params['w']`) when the library
    wraps one (a callable `self` with `__wrapped__`, as equinox's filter_jit), else the
    library function's own parameter. Returns (the wrapped function's name or "", {flat
    index: name}), or None when the call did not come through a library.
    """
    entry = _entry_frame(frame, top)
    if entry is None:
        return None
    try:
        info = inspect.getargvalues(entry)
    except Exception:  # a frame whose locals cannot be read
        return None
    loc = info.locals
    params = list(info.args)
    values: dict[str, Any] = {p: loc[p] for p in params if p in loc}
    extra = list(loc.get(info.varargs, ())) if info.varargs else []
    kwargs = dict(loc.get(info.keywords) or {}) if info.keywords else {}
    name = ""
    owner = values.get(params[0]) if params and params[0] == "self" else None
    wrapped = getattr(owner, "__wrapped__", None) if owner is not None else None
    if callable(owner) and wrapped is not None:
        name = _compat.fun_name(wrapped)
        positional = [values[p] for p in params[1:] if p in values] + extra
        try:
            bound = inspect.signature(owner).bind_partial(*positional, **kwargs).arguments
        except (TypeError, ValueError):
            return None
        named = list(bound.items())
    else:
        named = [(p, values[p]) for p in params if p in values and p != "self"]
        named += [(f"{info.varargs}[{i}]", v) for i, v in enumerate(extra)]
        named += list(kwargs.items())
    leaves: dict[int, str] = {}
    for pname, value in named:
        try:
            flat = jax.tree_util.tree_flatten_with_path(value)[0]
        except Exception:  # a value that is no pytree after all
            continue
        for path, leaf in flat:
            if hasattr(leaf, "shape"):
                leaves.setdefault(id(leaf), pname + jax.tree_util.keystr(path))
    out = {i: leaves[id(x)] for i, x in enumerate(args_flat) if id(x) in leaves}
    return name, out

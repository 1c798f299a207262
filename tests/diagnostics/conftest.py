"""Fixtures of the diagnostics tests: the NaN watch's accelerator path, on the CPU.

CI has no accelerator. On a TPU or GPU the NaN watch reduces a jitted call's outputs where
they are and checks them later (`_compat.nonfinite_flags`, `NanWatch._on_device_call`); the
fixtures below take CPU arrays for device ones (`_compat.on_host` says no), so that path
runs here with real JAX, and fix when jaxviz's reader thread reads the flags, whose timing on a
device the tests cannot choose.
"""
from __future__ import annotations

import jax
import pytest

from jaxviz import _compat


@pytest.fixture
def on_device(monkeypatch):
    """Every jax.Array counts as living on an accelerator; host reads of one are counted."""
    read = []
    host_parts = _compat.host_parts

    def counted(x):
        if isinstance(x, jax.Array):
            read.append(x.shape)
        return host_parts(x)

    monkeypatch.setattr(_compat, "on_host", lambda x: not isinstance(x, jax.Array))
    monkeypatch.setattr(_compat, "host_parts", counted)
    return read


# When jaxviz's reader thread reads a call's flags, for `reader`: "at once" (before the
# user's next statement: a finite call's arrays are let go first, the check finds its inputs
# gone), "never" (the check runs first, with every array held), or "thread" (as it runs).
READERS = ("at once", "never", "thread")


@pytest.fixture(params=READERS)
def reader(request, monkeypatch, on_device):
    """On the accelerator's path, with the flags read at one of READERS' moments."""
    if request.param == "at once":
        monkeypatch.setattr(
            _compat, "when_read",
            lambda flags, then: then(_compat.read_flags(flags), _compat.flags_lost(flags)),
        )
    elif request.param == "never":
        monkeypatch.setattr(_compat, "when_read", lambda flags, then: None)
    return request.param

"""Donation, what-if: what donating each argument saves, measured by the compiler.

For every positional argument, the function is jitted again with that argument donated (or,
when it is donated, not donated) and compiled for the same specs; the saving is the
difference of the two programs' peaks, each simulated over its own buffer assignment in the
device's sizes (`peak_of`, jaxviz.memory.buffers: on a TPU, memory_analysis() counts no
temporaries for many programs), else of XLA's `arguments + outputs + temporaries -
aliased`. Arguments no output could reuse (no output leaf of the same shape and dtype) are
not compiled: donation cannot alias them, and the report says so.

    >>> r = jaxviz.trace(step, params, opt_state, batch).memory()       # doctest: +SKIP
    >>> print(r.donations[1].sentence())                                # doctest: +SKIP
    donating `opt_state` would lower the peak by 48.0 MiB
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxviz import _compat
from jaxviz.memory.compile import CompileReport, _memory, lower_and_compile
from jaxviz.memory.donation import arg_labels
from jaxviz.memory.report import DonationSaving


def donation_savings(
    trace: Any,
    cr: CompileReport,
    arg_bytes: dict[str, int] | None = None,
    peak_of: Callable[[str], int] | None = None,
) -> tuple:
    """One DonationSaving per argument name of the donation table, in signature order
    (arg_bytes: each argument's bytes per device, from the simulation's parameters;
    peak_of: a program's simulated peak from its optimised HLO, None: XLA's totals)."""
    fun = getattr(trace, "fun", None)
    opts = _compat.jit_options(fun) if fun is not None else None

    def figure(compiled: Any, hlo: str) -> int | None:
        if peak_of is not None and hlo:
            try:
                return peak_of(hlo)
            except Exception:  # jaxviz's own failure: XLA's figure instead
                pass
        return _memory(compiled, per_dev).total_bytes

    per_dev = cr.memory.num_devices
    base = figure(None, cr.hlo) if peak_of is not None and cr.hlo else cr.memory.total_bytes
    names, positions = arg_labels(fun, tuple(trace.args_spec), len(trace.args_spec))
    pos_of = dict(zip(names, positions))
    donated_now = sorted({pos_of[d.arg] for d in cr.donations if d.donated and d.arg in pos_of})
    out: list[DonationSaving] = []
    seen: list[str] = []
    for d in cr.donations:
        if d.arg not in seen:
            seen.append(d.arg)
    for arg in seen:
        rows = [d for d in cr.donations if d.arg == arg]
        nbytes = (arg_bytes or {}).get(arg, sum(d.nbytes for d in rows))
        donated = any(d.donated for d in rows)
        if arg not in pos_of:
            why = "a keyword argument: not measured"
            out.append(DonationSaving(arg, nbytes, donated, None, why))
            continue
        if not donated and not any(d.hint for d in rows):
            out.append(DonationSaving(arg, nbytes, False, 0, "no output has its shape and dtype"))
            continue
        if opts is None or base is None:
            out.append(DonationSaving(arg, nbytes, donated, None, "not a jax.jit: not measured"))
            continue
        p = pos_of[arg]
        argnums = [q for q in donated_now if q != p] if donated else sorted(donated_now + [p])
        try:
            variant = _compat.rejit(fun, tuple(argnums))
            _, compiled, _, _, _ = lower_and_compile(
                variant, tuple(trace.args_spec), dict(trace.kwargs_spec),
                mesh=getattr(trace, "call_mesh", None),
            )  # fmt: skip
            other = figure(compiled, compiled.as_text() or "")
        except Exception as e:  # a variant XLA cannot compile: say so, never raise
            out.append(DonationSaving(arg, nbytes, donated, None, f"compile failed: {e!s:.80}"))
            continue
        if other is None:
            out.append(DonationSaving(arg, nbytes, donated, None, "XLA gave no figures"))
            continue
        saves = (other - base) if donated else (base - other)
        out.append(DonationSaving(arg, nbytes, donated, saves))
    return tuple(out)

"""What jit's tracing cache is keyed on besides the arguments: the tracing context (config
values and context managers: the mesh, default device, matmul precision, x64, ...), put in
the user's terms, and whether a trace JAX opened made a given jaxpr.
"""

from __future__ import annotations

from typing import Any

from jax._src import config as _config

from jaxviz._compat.jaxpr import open_jaxpr


def trace_context() -> tuple:
    """The tracing context jit's cache is keyed on (config values and context managers:
    the mesh, default device, matmul precision, x64, ...), as JAX's own values. Cheap (a
    cached tuple). jax 0.10.2 and 0.12: config.trace_context()."""
    try:
        return tuple(_config.trace_context())
    except Exception:  # JAX moved it: no context, no context reasons
        return ()


# The context entries JAX names after its internals, in the user's terms.
_CONTEXT_LABELS = {
    "abstract_mesh_context_manager": "the mesh set by `jax.set_mesh`",
    "mesh_context_manager": "the mesh of `with mesh:`",
    "compute_on_context_manager": "the `compute_on` context",
    "xla_metadata_context_manager": "the `set_xla_metadata` context",
    "user_context": "the user context",
    "axis_env_state": "the named axes in scope",
}


def _context_value(name: str, v: Any) -> str:
    if "mesh" in name:
        meshes = v if isinstance(v, tuple) else (v,)
        shown = []
        for m in meshes:
            names = getattr(m, "axis_names", None)
            sizes = getattr(m, "axis_sizes", None)
            if m is None or not names:
                continue
            shown.append(
                "mesh(" + ", ".join(f"{n!r}: {s}" for n, s in zip(names, sizes or ())) + ")"
            )
        return ", ".join(shown) or "none"
    if _is_device(v):  # jax_default_device: "tpu:0", not TpuDevice(id=0, ..., core_on_chip=0)
        return device_name(v)
    return repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."


def device_name(d: Any) -> str:
    """`cpu:0`, `tpu:0`, `cuda:1`: a device's platform and id, as the memory chart's lanes,
    the compiled reports and the recompile reasons name it."""
    return f"{d.platform}:{d.id}"


def _is_device(v: Any) -> bool:
    """A JAX device (jax 0.10.2 and 0.12: jax.Device, whose repr on a TPU runs to
    `TpuDevice(id=0, process_index=0, coords=(0,0,0), core_on_chip=0)`)."""
    import jax

    return isinstance(v, jax.Device)


def context_changes(before: tuple, after: tuple) -> list[tuple[str, str, str]]:
    """What differs between two `trace_context()`s: [(what, before, after)] in the user's
    terms ("the mesh set by `jax.set_mesh`", "none", "mesh('d': 8)"; a config option as
    "`jax_default_matmul_precision`"). jax 0.10.2 and 0.12: config.trace_context_names()
    names the entries; AbstractMesh has axis_names / axis_sizes (0.10.2: None when no
    mesh is set, 0.12: an empty AbstractMesh)."""
    if not before or not after or len(before) != len(after):
        return []
    try:
        names = tuple(_config.trace_context_names())
    except Exception:
        return []
    if len(names) != len(before):
        return []
    out = []
    for name, a, b in zip(names, before, after):
        try:
            if a == b:
                continue
        except Exception:  # a value without a usable ==
            if a is b:
                continue
        va, vb = _context_value(name, a), _context_value(name, b)
        if va == vb:
            continue
        out.append((_CONTEXT_LABELS.get(name, f"the config option `{name}`"), va, vb))
    return out


def traced_into(frame: Any, jaxpr: Any) -> bool:
    """Whether the trace frame JAX opened (watching_top_frames) is the one that made
    `jaxpr`: the function it traced is the same. jax 0.10.2 and 0.12: the frame's and the
    jaxpr's debug_info (different objects) share func_src_info ("f at FILE:LINE")."""
    fa = getattr(getattr(frame, "debug_info", None), "func_src_info", None)
    fb = getattr(getattr(open_jaxpr(jaxpr), "debug_info", None), "func_src_info", None)
    return fa is not None and fa == fb

"""A collective's devices and async pairs read from XLA's text, in the forms XLA writes on
the backends this suite has no several devices of (TPU and GPU print async pairs; the mesh,
iota and explicit forms of replica_groups): jaxviz.mesh on HLO text alone."""
from __future__ import annotations

import pytest

from jaxviz import _compat
from jaxviz.mesh import Facts, Mesh, collectives

MESH = Mesh(("data", "model"), (2, 4), ("Auto", "Auto"))


@pytest.mark.parametrize("text, groups", [
    ("mesh['data'=2,'model'=4] {'model'}", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("mesh['data'=2,'model'=4] {'data'}", [[0, 4], [1, 5], [2, 6], [3, 7]]),
    ("mesh['axis_0'=2,'axis_1'=1,'axis_2'=4] {'axis_0'}", [[0, 4], [1, 5], [2, 6], [3, 7]]),
    ("[2,4]<=[8]", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("[4,2]<=[2,4]T(1,0)", [[0, 4], [1, 5], [2, 6], [3, 7]]),
    ("{{0,1,2,3},{4,5,6,7}}", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("{}", [list(range(8))]),
])  # fmt: skip
def test_replica_groups_in_each_form(text, groups):
    assert _compat.device_groups(text, 8) == groups


@pytest.mark.parametrize("op_name, prims", [
    ("jit(train_step)/(transpose(jvp())/dot_general:transpose(jvp())/dot_general:jvp()/reduce_sum)",
     ["dot_general", "dot_general", "reduce_sum"]),                # jax 0.12.1's combined all-reduce
    ("jit(f)/(reduce_sum:dot_general)", ["reduce_sum", "dot_general"]),
    ("jit(f)/(reduce_sum[axes=(0,)]:dot_general)", ["reduce_sum", "dot_general"]),
    ("jit(train_step)/transpose(jvp())/dot_general", ["dot_general"]),
    ("jit(f)/jvp(g)", ["jvp(g)"]),
    ("params", ["params"]),
])  # fmt: skip
def test_a_combined_collectives_ops_are_read_whole(op_name, prims):
    assert _compat.op_primitives(op_name) == prims


def test_groups_name_the_mesh_axes():
    assert MESH.axes_of([[0, 1, 2, 3], [4, 5, 6, 7]]) == ("model",)
    assert MESH.axes_of([[0, 4], [1, 5], [2, 6], [3, 7]]) == ("data",)
    assert MESH.axes_of([list(range(8))]) == ("data", "model")
    assert MESH.axes_of(None) == ()


HLO = """HloModule jit_step, is_scheduled=true, entry_computation_layout={(f32[64,64]{1,0})->f32[64,64]{1,0}}, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%async_rs (p: f32[256,64]) -> f32[64,64] {
  %p = f32[256,64]{1,0} parameter(0)
  ROOT %rs = f32[64,64]{1,0} reduce-scatter(%p), channel_id=3, replica_groups=[2,4]<=[8], use_global_device_ids=true, dimensions={0}, to_apply=%add, metadata={op_name="jit(step)/dot_general"}
}

ENTRY %main (p0: f32[64,64]) -> f32[64,64] {
  %p0 = f32[64,64]{1,0} parameter(0), metadata={op_name="w"}
  %ag-start = (f32[64,64]{1,0}, f32[256,64]{1,0}) all-gather-start(%p0), channel_id=1, replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true, metadata={op_name="w"}
  %ag-done = f32[256,64]{1,0} all-gather-done(%ag-start)
  %rs-start = ((f32[256,64]{1,0}), f32[64,64]{1,0}) async-start(%ag-done), calls=%async_rs
  %rs-done = f32[64,64]{1,0} async-done(%rs-start)
  %cp-start = (f32[64,64]{1,0}, f32[64,64]{1,0}, u32[], u32[]) collective-permute-start(%rs-done), channel_id=2, source_target_pairs={{0,1},{1,2},{2,3},{3,0},{4,5},{5,6},{6,7},{7,4}}, metadata={op_name="jit(step)/shard_map/ppermute"}
  ROOT %cp-done = f32[64,64]{1,0} collective-permute-done(%cp-start)
}
"""


def test_async_pairs_count_once_with_their_kind_bytes_and_axes():
    module = _compat.parse_hlo_module(HLO)
    cs = {c.name: c for c in collectives(module, None, Facts(MESH, [("w", "f32[64,64]", "P()")]))}
    assert sorted(cs) == ["ag-start", "cp-start", "rs-start"]
    ag, rs, cp = cs["ag-start"], cs["rs-start"], cs["cp-start"]
    assert (ag.kind, ag.bytes, ag.axes, ag.cause) == ("all-gather", 256 * 64 * 4, ("model",), "input")
    assert (rs.kind, rs.bytes, rs.axes, rs.cause) == ("reduce-scatter", 256 * 64 * 4, ("model",),
                                                      "contracting")
    assert (cp.kind, cp.bytes, cp.axes, cp.cause) == ("collective-permute", 64 * 64 * 4, ("model",),
                                                      "shard_map")


def test_a_collective_not_read_leaves_the_memory_report_standing(monkeypatch):
    from jaxviz.memory import buffers
    from jaxviz.memory.compile import Memory

    def broken(*a, **k):
        raise ValueError("a form not read")

    monkeypatch.setattr(buffers, "collectives", broken)
    xla = Memory(None, None, None, None, None, True, 8)
    r = buffers.analyze_hlo(HLO, "cpu", xla, None, Facts(MESH, [("w", "f32[64,64]", "P()")]))
    assert r.buffers and r.collectives == ()
    assert "the mesh's collectives were not read: ValueError: a form not read" in r.notes

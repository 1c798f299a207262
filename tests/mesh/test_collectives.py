"""Every collective of a sharded program, with the line that caused it (jaxviz.mesh), on 8
CPU devices in a child process (tests/mesh/cases.py), on the JAX this suite runs."""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

CASES = pathlib.Path(__file__).with_name("cases.py")
SOURCE = CASES.read_text().splitlines()


def line_of(marker: str) -> int:
    return next(i for i, s in enumerate(SOURCE, 1) if s.rstrip().endswith(f"# {marker}"))


@pytest.fixture(scope="module")
def found():
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("XLA_FLAGS", None)
    r = subprocess.run([sys.executable, str(CASES)], capture_output=True, text=True,
                       timeout=600, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def one(found, case):
    cs = found[case]["collectives"]
    assert [c["name"] for c in cs] == [n for n, _ in found[case]["hlo"]] or len(cs) == 1, cs
    (c,) = cs
    return c


@pytest.mark.parametrize("case, kind, cause, marker", [
    ("sm_psum", "all-reduce", "shard_map", "psum"),
    ("sm_gather", "all-gather", "shard_map", "gather"),
    ("sm_permute", "collective-permute", "shard_map", "permute"),
    ("sm_all_to_all", "all-to-all", "shard_map", "a2a"),
    ("sm_scatter", "reduce-scatter", "shard_map", "scatter"),
])  # fmt: skip
def test_each_collective_of_a_shard_map_is_named_at_its_line(found, case, kind, cause, marker):
    c = one(found, case)
    assert (c["kind"], c["cause"], c["line"], c["cause_line"]) == (kind, cause, line_of(marker),
                                                                   line_of(marker))
    assert c["axes"] == ["x"]
    assert "in a shard_map at line" in c["reason"]
    assert c["node_ids"], c  # it selects its graph node


def test_a_shard_maps_backward_pass_says_its_collective_is_a_gradients(found):
    cs = {c["kind"]: c for c in found["sm_gather_grad"]["collectives"]}
    assert sorted(cs) == sorted(k for _, k in found["sm_gather_grad"]["hlo"])
    line = line_of("gather grad")
    assert cs["all-gather"]["reason"] == f"`all_gather` in a shard_map at line {line}"
    back = cs["reduce-scatter"]  # the user wrote no psum_scatter: the all_gather's gradient
    assert (back["cause"], back["line"]) == ("shard_map", line)
    assert back["reason"] == f"`psum_scatter` of the gradient of line {line} in a shard_map " \
        "(the backward pass)"


def test_a_gather_names_the_jax_reshard_that_asked_for_it(found):
    c = one(found, "user_reshard")
    assert (c["kind"], c["cause"], c["cause_line"]) == ("all-gather", "constraint",
                                                        line_of("reshard"))
    assert c["reason"] == f"jax.reshard to P() at line {line_of('reshard')}"
    assert c["cause_ids"], c  # the reshard's node


def test_psum_is_called_what_the_user_wrote(found):
    assert one(found, "sm_psum")["reason"].startswith("`psum` in a shard_map")
    assert one(found, "sm_scatter")["reason"].startswith("`psum_scatter` in a shard_map")
    # pmean binds a psum (then divides): named as the line calls it
    assert one(found, "sm_pmean")["reason"] == f"`pmean` in a shard_map at line {line_of('pmean')}"


def test_an_all_gather_names_the_sharding_constraint_that_asked_for_it(found):
    c = one(found, "wsc")
    assert c["kind"] == "all-gather" and c["cause"] == "constraint"
    assert c["cause_line"] == line_of("constraint")
    assert c["line"] == line_of("constraint") - 1  # XLA's metadata: the op it gathers
    assert "with_sharding_constraint to P() at line" in c["reason"]
    assert c["bytes"] == 1024 * 1024 * 4  # the whole array on each device
    assert c["cause_ids"]


def test_a_contracting_dimension_sharded_gives_its_all_reduce(found):
    c = one(found, "contract")
    assert (c["kind"], c["cause"], c["line"], c["op"]) == ("all-reduce", "contracting",
                                                           line_of("contract"), "dot_general")
    assert "contracts a dimension sharded over `x`" in c["reason"]


def test_a_collective_a_librarys_layer_runs_is_at_the_users_line(found):
    # flax's GSPMD guide: the all-reduces of `y = self.dot1(x)` were said at
    # flax/nnx/nn/linear.py:422 (Linear.__call__); the user's line is the one to change
    c = one(found, "lib_contract")
    assert (c["kind"], c["cause"], c["line"]) == ("all-reduce", "contracting", line_of("lib_contract"))
    assert f"line {line_of('lib_contract')}" in c["reason"], c["reason"]


def test_a_reduced_dimension_sharded_gives_its_all_reduce(found):
    c = one(found, "reduced")
    assert (c["kind"], c["cause"], c["line"]) == ("all-reduce", "reduced", line_of("reduce"))
    assert c["bytes"] == 1024 * 4


def test_an_output_sharding_gives_its_all_to_all(found):
    c = one(found, "out_reshard")
    assert (c["kind"], c["cause"], c["line"]) == ("all-to-all", "output", line_of("output"))
    assert "P(None, 'x')" in c["reason"]


def test_the_text_twin_lists_them_and_a_single_device_program_shows_no_section(found):
    assert "collectives on mesh x=8 (Auto), largest first (1," in found["wsc"]["text"]
    assert found["single"]["collectives"] == [] and found["single"]["mesh"] is None
    assert "collective" not in found["single"]["text"]


def test_a_2d_mesh_transformer_steps_collectives_match_the_compiled_hlo_one_for_one(found):
    t = found["transformer"]
    assert t["mesh"] == "mesh data=2 x model=4 (Auto)"
    assert sorted(c["name"] for c in t["collectives"]) == sorted(n for n, _ in t["hlo"])
    kinds = {n: k for n, k in t["hlo"]}
    assert all(kinds[c["name"]] == c["kind"] for c in t["collectives"])
    assert len(t["collectives"]) >= 4
    # the forward products contracting `model` (wo, w2), the gradients summed over `data`
    assert {tuple(c["axes"]) for c in t["collectives"]} == {("model",), ("data",)}
    assert all(c["cause"] in ("contracting", "reduced") for c in t["collectives"]), t
    assert all(c["line"] > 0 for c in t["collectives"])


def test_each_collective_names_the_primitives_of_the_ops_it_serves(found):
    # a combined one each of its parts ("dot_general+reduce_sum"): jax 0.12.1 writes the parts'
    # paths, "jit(f)/(transpose(jvp())/dot_general:jvp()/reduce_sum)", once read as "reduce_sum)"
    ops = {(n, c["name"]): c["op"] for n, case in found.items() for c in case["collectives"]}
    # ("": XLA kept no source)
    assert ops and all(re.fullmatch(r"([a-z_]+(\+[a-z_]+)*)?", op) for op in ops.values()), ops


def test_a_weight_gathered_for_a_product_is_not_blamed_on_its_output_laid_out_alike(found):
    # w2 arrives P('model'), its update leaves P('model'): the output asks for nothing; XLA
    # gathers it whole because the product at its line reads it so (h constrained whole)
    gathers = [c for c in found["combined"]["collectives"]
               if c["kind"] == "all-gather" and c["line"] == line_of("w2 whole")]
    assert len(gathers) == 2, found["combined"]["collectives"]
    for c in gathers:
        assert c["cause"] == "input", c
        assert re.fullmatch(r"the argument `params\[\d\]\['w2'\]` arrives sharded as P\('model',?( None)?\); "
                            r"the product at line \d+ needs it whole", c["reason"]), c


def test_a_weight_every_device_holds_whole_is_named_with_its_total(found):
    r = found["replicated"]
    (w,) = r["replicated"]
    assert w[:6] == ["w", 64 << 20, 8, 512 << 20, 8 << 20, ["x"]]
    assert w[6] == ("`w`: 64.0 MiB on each of 8 devices (512.0 MiB in all); "
                    "sharded over `x` it would take 8.0 MiB each")
    assert ("replicated: 1 argument with the same bytes on several devices (448.0 MiB of the "
            "devices' memory holds copies)") in r["text"]
    assert found["wsc"]["replicated"] == [] and found["single"]["replicated"] == []


def test_buffers_on_a_mesh_say_which_part_of_their_array_they_are(found):
    rows = {b[0]: b[1:] for b in found["replicated"]["buffers"]}
    assert rows["x"] == ["f32[256,4096]", "f32[2048,4096]", "1/8 on `x`"]
    assert rows["v"] == ["f32[512,256]", "f32[4096,256]", "1/8 on `x`"]
    assert rows["w"] == ["f32[4096,4096]", "", ""]  # whole on each device
    # the memory tab's rows say so too
    assert "f32[256,4096] of f32[2048,4096], 1/8 on `x`" in found["replicated"]["tab_types"]
    assert "f32[4096,4096]" in found["replicated"]["tab_types"]
    assert "f32[256,4096]  argument         x  (of f32[2048,4096]: 1/8 on `x`)" in (
        found["replicated"]["text"])


def test_an_all_gather_of_an_argument_names_the_argument(found):
    (g,) = [c for c in found["replicated"]["collectives"] if c["kind"] == "all-gather"]
    assert g["cause"] == "input" and g["line"] == line_of("gathers v")
    assert g["reason"] == ("the argument `v` arrives sharded as P('x'); the product at "
                           f"line {line_of('gathers v')} needs it whole")


def test_a_gathered_argument_whose_readers_keep_its_path_is_at_the_products_line(found):
    # jax 0.12.1: the all-gather and the bitcast reading it keep only the argument's path
    # (a Levanter-style step's FSDP weights said no line at all); the product's line it is
    (g,) = found["fsdp"]["collectives"]
    assert (g["kind"], g["cause"], g["line"]) == ("all-gather", "input", line_of("fsdp"))
    assert [g["name"], "all-gather"] in found["fsdp"]["hlo"]


def test_a_constraint_in_a_helper_names_the_line_that_called_it(found):
    # a Levanter-style step constrains through one helper (shard(x, "batch", ...)) at every
    # layer: the helper's line alone says nothing of which call asked
    (g,) = found["helper_wsc"]["collectives"]
    assert g["cause"] == "constraint" and g["cause_line"] == line_of("helper")
    assert g["reason"] == (f"with_sharding_constraint to P() at line {line_of('helper')} "
                           f"(in `_to`, called at line {line_of('asks P()')})")
    # a constraint written once says its own line only
    (w,) = found["wsc"]["collectives"]
    assert w["reason"] == f"with_sharding_constraint to P() at line {line_of('constraint')}"


def test_the_trace_header_shows_the_arguments_shardings(found):
    assert found["contract"]["signature"] == "f32[1024,1024@x], f32[1024@x,1024]"
    assert found["replicated"]["signature"] == (
        "f32[4096,4096], f32[4096@x,256], f32[2048@x,4096]")  # w replicated: no axis
    assert found["single"]["signature"] == "f32[256,256]"


def test_a_weight_sharded_over_one_axis_is_replicated_over_the_other(found):
    reps = {x[0]: x for x in found["transformer"]["replicated"]}
    w1 = reps["params['blocks'][0]['w1']"]   # f32[64,256] split 4 ways over `model`
    assert w1[1:6] == [16 << 10, 2, 128 << 10, 8 << 10, ["data"]]
    assert w1[6] == ("`params['blocks'][0]['w1']`: each 16.0 KiB shard on 2 devices "
                     "(replicated over `data`: 64.0 KiB of copies on the 8 devices); sharded "
                     "over `data` too it would take 8.0 KiB each")
    assert reps["x"][2] == 4                 # the batch: halves over `data`, each on 4 devices


def test_values_inside_an_auto_sharded_function_get_their_compiled_layout(found):
    ops = {op: typ for typ, op in found["wsc"]["layouts"].values()}
    assert ops["sin"] == "f32[1024@x,1024]"     # as the argument: split over x
    assert ops["mul"] == "f32[1024,1024]"       # after the constraint to P(): whole
    t = found["transformer"]["layouts"]
    assert len(t) > 50 and any("@data" in typ and "@model" in typ for typ, _ in t.values())
    assert found["single"]["layouts"] == {}


def test_the_functions_outputs_get_their_compiled_layout(found):
    # issue 54's new-user session in JupyterLab: a 2-D mesh step's inputs read
    # f32[512,2048@model] and its update `sub` too, but its outputs `out w1` f32[512,2048], as
    # if XLA gathered them (w1.sharding was P(None, 'model')): the outputs now take their
    # layout from the program's results
    assert found["out_reshard"]["out_layouts"] == ["f32[1024,1024@x]"]   # out_shardings=(None, x)
    assert found["wsc"]["out_layouts"] == ["f32[1024,1024]"]             # constrained whole
    t = found["transformer"]["out_layouts"]
    assert t and any("@" in typ for typ in t), t
    assert found["single"]["out_layouts"] == []


def test_a_collective_in_a_scan_body_runs_each_iteration(found):
    c = one(found, "scanned")
    assert (c["kind"], c["cause"], c["line"]) == ("all-reduce", "contracting", line_of("in the loop"))
    assert c["inside"].startswith("while body") and c["times"] == 5


def test_jax_tutorials_mlp_collectives_are_the_hlos_with_their_causes(found):
    t = found["tutorial"]
    assert sorted(c["name"] for c in t["collectives"]) == sorted(n for n, _ in t["hlo"])
    gathers = [c for c in t["collectives"] if c["kind"] == "all-gather"]
    # XLA's metadata names the relu (jax 0.12.1) or the product reading it (0.10.2)
    assert gathers and all(c["line"] in (line_of("relu"), line_of("relu") - 1)
                           and c["cause"] == "contracting"
                           and c["cause_line"] == line_of("relu") - 1 for c in gathers), gathers
    assert all(c["cause"] != "reshard" for c in t["collectives"]), t["collectives"]


def test_the_text_twin_says_where_the_shardings_come_from(found):
    assert found["wsc"]["notes"] == [
        "  note: @x: a dimension split over mesh axis x; the arguments' shardings as passed in "
        "(Auto axes: XLA lays out the rest, and the compiled memory lists its collectives)"]
    assert found["single"]["notes"] == []


def test_a_value_resharded_back_and_forth_in_a_loop_is_one_finding_with_both_shardings(found):
    for case, there, back, times in [("back_and_forth", "there", "and back", 10),
                                     ("back_and_forth_scan", "scan there", "scan back", 6)]:
        loops = [f for f in found[case]["findings"] if f[0] == "back-and-forth"]
        assert len(loops) == 1, found[case]["findings"]
        (variant, (file, line), message, ids) = loops[0]
        assert file.endswith("cases.py") and line == line_of(back)  # the line moving it away
        spec = {"there": "P('x')", "scan there": "P(None, 'x')"}[there]
        other = {"there": "P(None, 'x')", "scan there": "P('x')"}[there]
        assert (f"the loop body asks it for {spec} (line {line_of(there)}) and {other} "
                f"(line {line_of(back)})") in message
        # the two all-to-alls of the loop body, each 512 KiB on each device, every iteration
        assert (f"2 all-to-alls over `x` (512.0 KiB + 512.0 KiB = 1.0 MiB per device an "
                f"iteration, {times}.0 MiB a call)") in message, message
        assert f"each of the loop's {times} iterations" in message and len(ids) == 2
        # its reshards are not each a "loop" finding as well
        assert not [f for f in found[case]["findings"] if f[0] == "loop"]


def test_a_loop_that_reshards_once_is_no_back_and_forth(found):
    assert [f[0] for f in found["reshard_once"]["findings"]] == [""]  # the output's, once
    assert "moves 512.0 KiB on each device to another layout" in (
        found["reshard_once"]["findings"][0][2])  # an all-to-all makes nothing whole
    assert found["scanned"]["findings"] == []     # a contraction's all-reduce in a loop

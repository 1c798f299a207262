"""JAX's sharding errors as findings at the user's line, naming the operands' shardings (the
sharding rule, jaxviz/diagnostics/sharding.py), on 8 CPU devices in a child process."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from jaxviz.diagnostics.rules import RULES

CELLS = pathlib.Path(__file__).with_name("errors_cells.py")


@pytest.fixture(scope="module")
def found():
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("XLA_FLAGS", None)
    r = subprocess.run([sys.executable, str(CELLS)], capture_output=True, text=True,
                       timeout=600, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_sharding_type_error_names_both_operands_shardings_at_the_line(found):
    c = found["typeerr"]
    assert c["error"] == "ShardingTypeError"
    ((rule, line, message, hint),) = c["found"]
    assert (rule, line) == ("sharding", 10)
    assert message.startswith("`return h @ b`: the product contracts a dimension sharded on "
                              "both sides (lhs ('model',), rhs ('model',))")
    assert "here `h`: f32[64@data,32@model], `b`: f32[32@model,16]" in message
    assert hint == RULES["sharding"].hint and "out_sharding=" in hint and "jax.reshard" in hint
    # the graph up to the failing op, with the explicit shardings of its values
    assert "f32[64@data,32@model], f32[32@model,16] | f" in c["traces"]
    assert c["notes"] == ["  note: @data: a dimension split over mesh axis data; the shardings "
                          "are JAX's own types (explicit mesh axes)"]


def test_a_mesh_of_jaxs_default_explicit_axes_is_named_with_the_auto_fix(found):
    # flax's GSPMD guide (auto_mesh = jax.make_mesh((2, 4), ('data', 'model')), then
    # with_sharding_constraint) fails so on jax 0.10.2 and 0.12: make_mesh's axes are
    # Explicit unless axis_types say otherwise. The finding names the mesh's line, and the
    # fix gives it Auto axes first (checked on the guide: it then trains as written)
    c = found["typeerr_default"]
    assert c["error"] == "ShardingTypeError"
    ((rule, line, message, hint),) = c["found"]
    assert (rule, line) == ("sharding", 10)
    assert ("the mesh of line 3 (`mesh = jax.make_mesh((2, 4), (\"data\", \"model\"))`) has "
            "explicit axes, `jax.make_mesh`'s default when no axis_types are given") in message
    assert hint == RULES["sharding"].hint_for("default-explicit") and "AxisType.Auto" in hint
    assert found["typeerr"]["found"][0][3] == RULES["sharding"].hint  # (axis_types given)
    # in a notebook the mesh is made in an earlier cell: that cell's line is named
    c = found["two_cells"]
    ((rule, line, message, hint),) = c["found"]
    assert c["error"] == "ShardingTypeError" and (rule, line) == ("sharding", 4), message
    assert "the mesh of <mesh cell> line 3 (`mesh = jax.make_mesh(" in message, message
    assert hint == RULES["sharding"].hint_for("default-explicit")


def test_a_shard_map_in_specs_that_does_not_divide_is_explained(found):
    ((rule, line, message, hint),) = found["in_specs"]["found"]
    assert (rule, line) == ("sharding", 5)
    assert ("in_specs P('x') splits axis 0 of `v` (f32[12,4]) over mesh axis `x` of 8 "
            "devices, which does not divide its size 12") in message
    assert hint == RULES["sharding"].hint_for("in-specs")


def test_a_device_put_onto_a_mesh_it_does_not_fit_is_explained(found):
    c = found["device_put"]
    assert c["error"] == "IndivisibleError"
    ((rule, line, message, hint),) = c["found"]
    assert (rule, line) == ("sharding", 4)
    assert "splits axis 0 of an array of shape (12, 4) into 8 parts" in message
    assert hint == RULES["sharding"].hint_for("device-put")


def test_a_spec_longer_than_a_leafs_rank_is_explained(found):
    # the tutorial's mistake: one spec for a pytree of weights and (rank-1) biases
    ((rule, line, message, hint),) = found["device_put_rank"]["found"]
    assert (rule, line) == ("sharding", 5)
    assert "the spec P(None, 'model') needs an array of rank 2 or more; it was given one of rank 1" in message
    assert hint == RULES["sharding"].hint_for("device-put")


def test_a_large_gather_a_constraint_asked_for_is_a_finding_at_the_constraint(found):
    c = found["gather"]
    assert c["error"] == "NoneType"
    ((rule, line, message, hint),) = c["found"]
    assert (rule, line) == ("collective", 7)
    assert ("f's all-gather over `x` makes 16.0 MiB whole on each device (80% of its compiled "
            "peak, 20.0 MiB): with_sharding_constraint to P() at line 7") in message
    assert hint == RULES["collective"].hint


def test_a_value_a_scan_body_reshards_there_and_back_is_one_finding(found):
    # P('x') at line 7, then the product with w (P(None, 'x')) at line 8: gathered whole,
    # and back to rows at line 7 by an all-to-all, in each of the 6 iterations
    ((rule, line, message, hint),) = found["loop"]["found"]
    assert (rule, line) == ("collective", 8)
    assert ("the loop body asks it for P('x') (line 7) and P(None, 'x') (line 8), so each "
            "iteration moves it there and back with 1 all-gather, 1 all-to-all over `x` "
            "(1.0 MiB + 128.0 KiB = 1.1 MiB per device an iteration, 6.8 MiB a call)") in message
    assert hint == RULES["collective"].hint_for("back-and-forth")


def test_a_steps_own_result_fed_back_against_its_in_shardings_names_its_out_shardings(found):
    # h = step(h) in a loop, out_shardings P(None, 'x') where in_shardings ask P('x'): JAX
    # refuses the second call (it does not reshard each one); the fix is out_shardings
    c = found["fed_back"]
    assert c["error"] == "ValueError"
    (f,) = [x for x in c["found"] if x[0] == "sharding"]
    assert f[1] == 8
    assert ("the argument arrives sharded as P(None, 'x') where jit's in_shardings ask for "
            "P('x') (it is the step's own earlier result, fed back") in f[2], f[2]
    assert f[3] == RULES["sharding"].hint_for("fed-back")
    # an argument put in another sharding, not fed back: the device-put fix
    (g,) = [x for x in found["not_fed_back"]["found"] if x[0] == "sharding"]
    assert "arrives sharded as P(None, 'x') where jit's in_shardings ask for P('x')" in g[2]
    assert g[3] == RULES["sharding"].hint_for("device-put")


def test_no_collective_finding_without_one_worth_it(found):
    # the explicit-sharding error's cell, and shard_map's: no collective finding
    assert all(f[0] != "collective" for k in ("typeerr", "in_specs") for f in found[k]["found"])

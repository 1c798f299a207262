"""The collective rule's loop cases on the compiled program's facts alone (no devices): one
reshard in a loop body is a "loop" finding; several reshards of one value between two
shardings (jaxviz.mesh.roundtrip) are one "back-and-forth" finding, not one each."""
from __future__ import annotations

from types import SimpleNamespace

from jaxviz.graph.model import Edge
from jaxviz.mesh import Collective
from jaxviz.mesh.findings import collective_findings
from jaxviz.mesh.roundtrip import Roundtrip, roundtrips


def gather(name: str, line: int, inside: str = "while body b", nbytes: int = 1 << 20):
    return Collective(
        name=name, kind="all-gather", bytes=nbytes, type="f32[512,512]", axes=("x",), group=8,
        op="tanh", op_name="jit(f)/while/body/tanh", file="m.py", line=line, fn="body",
        cause="constraint", reason=f"with_sharding_constraint to P() at line {line}",
        cause_line=line, node_ids=("1:3",), cause_ids=("1:4",), inside=inside, times=6,
    )  # fmt: skip


def report(cs, trips=()):
    return SimpleNamespace(name="f", peak_bytes=8 << 20, collectives=tuple(cs), roundtrips=trips)


def test_one_reshard_in_a_loop_body_is_a_loop_finding():
    (f,) = collective_findings([report([gather("all-gather.1", 7)])])
    assert (f.variant, f.where) == ("loop", ("m.py", 7))
    assert ("an all-gather of 1.0 MiB per device over `x` runs in each of the loop's 6 "
            "iterations (6.0 MiB a call)") in f.message


def test_a_round_trip_is_one_finding_in_place_of_its_reshards():
    cs = [gather("all-gather.1", 7), gather("all-gather.2", 8)]
    trip = Roundtrip("while body b", "f32[512,512]", (("P('x')", 7), ("P()", 8)), tuple(cs), 6,
                     "m.py", ("1:4", "1:9"))  # fmt: skip
    (f,) = collective_findings([report(cs, (trip,))])
    assert (f.variant, f.where, f.node_ids) == ("back-and-forth", ("m.py", 8), ("1:4", "1:9"))
    assert ("asks it for P('x') (line 7) and P() (line 8), so each iteration moves it there and "
            "back with 2 all-gathers over `x` (1.0 MiB + 1.0 MiB = 2.0 MiB per device an "
            "iteration, 12.0 MiB a call)") in f.message


def test_reshards_in_two_loop_bodies_or_without_a_graph_are_no_round_trip():
    assert roundtrips([gather("a", 7, "while body b"), gather("b", 8, "while body c")],
                      SimpleNamespace(bodies=[])) == ()  # fmt: skip
    assert roundtrips([gather("a", 7), gather("b", 8)], None) == ()


def fake_body(connected: bool):
    """A loop body: sin -> constraint P('x') -> (cos ->) constraint P(None, 'x'); the second
    constraint reads the first's value (connected) or another value of the same type."""
    loc = lambda line: SimpleNamespace(file="m.py", line=line, fn="body")  # noqa: E731
    eqn = lambda i, op, line: SimpleNamespace(id=i, kind="eqn", op=op, out=["f32[512,512]"],  # noqa: E731
                                              loc=loc(line))  # fmt: skip
    nodes = [SimpleNamespace(id=0, kind="in", op="c", out=["f32[512,512]"], loc=None),
             eqn(1, "sin", 7), eqn(2, "sharding_constraint", 7), eqn(3, "cos", 8),
             eqn(4, "sharding_constraint", 8)]  # fmt: skip
    edges = [Edge(0, 1, "f32[512,512]"), Edge(1, 2, "f32[512,512]"),
             Edge(2 if connected else 0, 3, "f32[512,512]"), Edge(3, 4, "f32[512,512]")]
    specs = {(1, 2): ("x",), (1, 4): (None, "x")}
    return SimpleNamespace(
        bodies=[SimpleNamespace(nodes=[]), SimpleNamespace(nodes=nodes, edges=edges)],
        eqn=lambda b, n: SimpleNamespace(params={"sharding": SimpleNamespace(spec=specs[(b, n)])}),
    )


def test_two_shardings_of_one_value_make_a_round_trip_and_of_two_values_none():
    cs = [gather("all-gather.1", 7), gather("all-gather.2", 8)]
    (trip,) = roundtrips(cs, fake_body(connected=True))
    assert trip.shardings == (("P('x')", 7), ("P(None, 'x')", 8))
    assert (trip.line, trip.step_bytes, trip.times, trip.node_ids) == (8, 2 << 20, 6, ("1:2", "1:4"))
    # the same type constrained two ways, but two values (the second does not read the first)
    assert roundtrips(cs, fake_body(connected=False)) == ()

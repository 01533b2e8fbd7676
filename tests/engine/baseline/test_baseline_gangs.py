"""Placement groups in the FFD baseline (engine/baseline/ffd_gangs.py): all or nothing, by
strategy, before the plain runs; every plan still passes vecsched.engine.model.validate."""
from __future__ import annotations

import numpy as np

from vecsched.engine.baseline.ffd import schedule_baseline
from vecsched.engine.model.build.builder import NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.requests import GangSpec
from vecsched.engine.model.validate import assert_plan

from tests.kits.engine_cases import CPU4, running

PG = "_PG_abc"


def gang(strategy, bundles, name="abc"):
    aff = (PG, "") if strategy == "STRICT_PACK" else None
    anti = (PG, "") if strategy == "STRICT_SPREAD" else None
    return GangSpec([RequestSpec(dict(b), 1, affinity=aff, anti_affinity=anti) for b in bundles],
                    name=f"{name}:{strategy}:PENDING")


def plan_of(types, nodes, requests, gangs, **kw):
    problem = build_problem(types, nodes, requests, gangs=gangs, **kw)
    plan = schedule_baseline(problem)
    assert_plan(problem, plan)
    return problem, plan


CPU = [NodeTypeSpec("cpu", CPU4, max_workers=10)]


def test_strict_spread_needs_one_node_per_bundle():
    _, plan = plan_of(CPU, [], [], [gang("STRICT_SPREAD", [{"CPU": 1.0}] * 3)])
    assert plan.launches() == {"cpu": 3} and not plan.gang_infeasible.any()


def test_pack_and_spread_share_nodes():
    for strategy in ("PACK", "SPREAD"):
        _, plan = plan_of(CPU, [], [], [gang(strategy, [{"CPU": 1.0}] * 3)])
        assert plan.launches() == {"cpu": 1}, strategy


def test_strict_pack_needs_the_sum_on_one_node():
    _, plan = plan_of(CPU, [], [], [gang("STRICT_PACK", [{"CPU": 2.0}] * 2)])
    assert plan.launches() == {"cpu": 1} and not plan.gang_infeasible.any()
    _, plan = plan_of(CPU, [], [], [gang("STRICT_PACK", [{"CPU": 3.0}] * 2)])
    assert plan.n_launched == 0 and plan.gang_infeasible.tolist() == [True]


def test_a_group_that_does_not_fit_opens_nothing():
    """Three STRICT_SPREAD bundles with room for two nodes: nothing launches for the
    group, and the budget is left to the plain run behind it."""
    types = [NodeTypeSpec("cpu", CPU4, max_workers=2)]
    _, plan = plan_of(types, [], [RequestSpec({"CPU": 4.0}, count=1)],
                      [gang("STRICT_SPREAD", [{"CPU": 1.0}] * 3)])
    assert plan.gang_infeasible.tolist() == [True]
    assert plan.launches() == {"cpu": 1} and plan.infeasible.sum() == 0


def test_existing_room_first_and_hosting_nodes_excluded():
    nodes = [running("cpu", rid="a"), running("cpu", rid="b")]
    _, plan = plan_of(CPU, nodes, [], [gang("STRICT_SPREAD", [{"CPU": 1.0}] * 2)])
    assert plan.n_launched == 0
    hosting = running("cpu", rid="a")
    hosting.labels = {PG: ""}                   # the GCS marks a node hosting the group
    _, plan = plan_of(CPU, [hosting, running("cpu", rid="b")], [],
                      [gang("STRICT_SPREAD", [{"CPU": 1.0}] * 2)])
    assert plan.launches() == {"cpu": 1}


def test_gangs_go_before_runs_in_rays_order_and_receivers_are_not_idle_victims():
    """The strict group goes first (Ray's gang key); the idle node that got a bundle is
    kept, the other idle one is terminated."""
    idle = [running("cpu", idle_ms=10 ** 7, rid="a"), running("cpu", idle_ms=10 ** 7, rid="b")]
    problem, plan = plan_of(CPU, idle, [], [gang("PACK", [{"CPU": 4.0}] * 2, "p"),
                                            gang("STRICT_PACK", [{"CPU": 2.0}] * 2, "s")],
                            idle_timeout_s=60.0)
    assert plan.gang_order.tolist() == [1, 0]
    assert plan.launches() == {"cpu": 1}        # STRICT_PACK on node a, PACK on b + one new
    assert plan.term_node.size == 0
    np.testing.assert_array_equal(plan.gang_infeasible, [False, False])


ZONES = [NodeTypeSpec("cpu-a", CPU4, max_workers=10, labels={"zone": "a"}),
         NodeTypeSpec("cpu-b", CPU4, max_workers=10, labels={"zone": "b"})]


def selected(strategy, n, zone, cpu=1.0):
    aff = (PG, "") if strategy == "STRICT_PACK" else None
    anti = (PG, "") if strategy == "STRICT_SPREAD" else None
    return GangSpec([RequestSpec({"CPU": cpu}, 1, label_selectors=[[("zone", "in", [zone])]],
                                 affinity=aff, anti_affinity=anti)] * n,
                    name=f"abc:{strategy}:PENDING")


def test_label_selectors_choose_the_nodes_and_types_of_every_bundle():
    """A bundle goes only where its selector holds: an idle zone-a node with room and
    the first-listed zone-a type are passed over for zone b; an existing zone-b node
    takes what it holds. (Before, the baseline ignored selectors and placed zone-b
    groups on zone-a nodes, which the CP-SAT model rejected: tests/engine/solver/test_solver.py.)"""
    a_node = running("cpu-a", idle_ms=10 ** 7, rid="a")
    a_node.labels = {"zone": "a"}
    for strategy, launches in (("PACK", {"cpu-b": 1}), ("SPREAD", {"cpu-b": 1}),
                               ("STRICT_PACK", {"cpu-b": 1}), ("STRICT_SPREAD", {"cpu-b": 3})):
        problem, plan = plan_of(ZONES, [a_node], [], [selected(strategy, 3, "b")],
                                idle_timeout_s=60.0)
        assert not plan.gang_infeasible.any(), strategy
        assert plan.launches() == launches, strategy
        assert plan.term_node.tolist() == [0], strategy     # a got nothing: idle victim
    b_node = running("cpu-b", rid="b")
    b_node.labels = {"zone": "b"}
    _, plan = plan_of(ZONES, [a_node, b_node], [], [selected("PACK", 3, "b")])
    assert plan.n_launched == 0
    _, plan = plan_of(ZONES, [], [], [selected("PACK", 2, "c")])
    assert plan.gang_infeasible.tolist() == [True] and plan.n_launched == 0

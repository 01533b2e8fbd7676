"""vecsched.engine.baseline: hand cases, then seeded random problems checked by vecsched.engine.model.validate."""
from __future__ import annotations


import numpy as np
import pytest

from vecsched.engine.baseline.ffd import schedule_baseline, size_order
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import IMPLICIT_PREFIX, Kind, Status, Why
from vecsched.engine.model.validate import assert_plan, check_plan

from tests.kits.engine_cases import (CPU4, GPU1, PLAN_ARRAYS, RES, plan_of, placed_by_slot,  # noqa: F401
                                    random_case, running, type_holds_one)


# ---- hand cases -----------------------------------------------------------------------

def test_empty_cluster_launches_enough_nodes():
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)], [],
                      [RequestSpec({"CPU": 1.0}, count=10)])
    assert plan.launches() == {"cpu": 3}
    assert placed_by_slot(plan) == {0: 4, 1: 4, 2: 2}
    assert plan.infeasible.sum() == 0
    np.testing.assert_allclose(plan.cluster_resources, [12.0, 48e9])


def test_fills_existing_nodes_first_in_node_order():
    nodes = [running("cpu", {"CPU": 1.0, "memory": 16e9}), running("cpu"), running("cpu")]
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)], nodes,
                      [RequestSpec({"CPU": 1.0}, count=6)])
    assert plan.n_launched == 0
    assert placed_by_slot(plan) == {0: 1, 1: 4, 2: 1}


def test_opened_new_node_is_reused_before_opening_another():
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)], [],
                      [RequestSpec({"CPU": 2.0}), RequestSpec({"CPU": 1.0}, count=2)])
    assert plan.launches() == {"cpu": 1}
    assert placed_by_slot(plan) == {0: 3}


def test_largest_runs_first_gpu_then_cpu_then_memory():
    problem = build_problem(
        [NodeTypeSpec("gpu", GPU1, max_workers=1)], [],
        [RequestSpec({"CPU": 1.0}), RequestSpec({"memory": 5.0}), RequestSpec({"CPU": 3.0}),
         RequestSpec({"GPU": 0.5}), RequestSpec({"CPU": 1.0}), RequestSpec({"CPU": 1.0, "memory": 1.0})])
    assert size_order(problem).tolist() == [3, 2, 5, 0, 4, 1]


def test_per_type_cap_reports_max_workers():
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=2)], [running("cpu", {"CPU": 0.0})],
                      [RequestSpec({"CPU": 4.0}, count=3)])
    assert plan.launches() == {"cpu": 1}
    assert plan.infeasible_runs() == {0: (2, Why.NAMES[Why.MAX_WORKERS])}


def test_global_cap_reports_max_num_nodes():
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)], [running("cpu", {"CPU": 0.0})],
                      [RequestSpec({"CPU": 4.0}, count=3)], max_num_nodes=2)
    assert plan.launches() == {"cpu": 1}
    assert plan.infeasible_runs() == {0: (2, Why.NAMES[Why.MAX_NUM_NODES])}


def test_global_cap_zero_launches_nothing():
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)], [],
                      [RequestSpec({"CPU": 1.0})], max_num_nodes=0)
    assert plan.n_launched == 0
    assert plan.infeasible_why.tolist() == [Why.MAX_NUM_NODES]


def test_falls_back_to_next_type_when_first_is_capped():
    _, plan = plan_of([NodeTypeSpec("small", CPU4, max_workers=1),
                       NodeTypeSpec("big", {"CPU": 16.0}, max_workers=5)], [],
                      [RequestSpec({"CPU": 2.0}, count=10)])
    assert plan.launches() == {"small": 1, "big": 1}
    assert plan.launch_order == (0, 1)
    assert placed_by_slot(plan) == {0: 2, 1: 8}


def test_gpu_request_not_placed_on_cpu_type():
    _, plan = plan_of([NodeTypeSpec("cpu", {"CPU": 64.0}, max_workers=10),
                       NodeTypeSpec("gpu", GPU1, max_workers=10)],
                      [running("cpu", total={"CPU": 64.0})],
                      [RequestSpec({"CPU": 1.0, "GPU": 1.0}, count=2)])
    assert plan.launches() == {"gpu": 2}
    assert all(s >= 1 for s in plan.place_slot)


def test_fractional_cpu_packs_exactly():
    _, plan = plan_of([NodeTypeSpec("one", {"CPU": 1.0}, max_workers=10)],
                      [running("one", total={"CPU": 0.3})],
                      [RequestSpec({"CPU": 0.1}, count=13)])
    # 0.3 / 0.1 is 2.9999999999999996 in binary64: three units still fit
    assert placed_by_slot(plan) == {0: 3, 1: 10}
    assert plan.launches() == {"one": 1}


def test_request_bigger_than_any_node_is_no_type_fits():
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)], [running("cpu")],
                      [RequestSpec({"CPU": 5.0}, count=2), RequestSpec({"TPU": 1.0}),
                       RequestSpec({"CPU": 1.0})])
    assert plan.infeasible_runs() == {0: (2, Why.NAMES[Why.NO_NODE_TYPE_FITS]),
                                      1: (1, Why.NAMES[Why.NO_NODE_TYPE_FITS])}
    assert plan.n_launched == 0


def test_busy_existing_node_bigger_than_any_type_is_no_type_fits_in_every_policy():
    """The reasons are the seam's (engine/tick/reasons.py), the same in every policy:
    no configured type can hold a unit, whatever a busy existing node could."""
    from vecsched.engine import schedule
    problem, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)],
                            [running("big", {"CPU": 0.0}, total={"CPU": 64.0})],
                            [RequestSpec({"CPU": 32.0})])
    assert plan.infeasible_why.tolist() == [Why.NO_NODE_TYPE_FITS]
    for mode in ("ray-compat", "efficient"):
        assert schedule(problem, mode=mode).infeasible_why.tolist() == [Why.NO_NODE_TYPE_FITS]


def test_zero_quantities_always_fit():
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)],
                      [running("cpu", {"CPU": 0.0, "memory": 0.0})],
                      [RequestSpec({"CPU": 0.0}, count=5), RequestSpec({"GPU": 0.0, "CPU": 0.0})])
    assert plan.n_launched == 0
    assert placed_by_slot(plan) == {0: 6}


def test_zero_shape_on_empty_cluster_opens_one_node():
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)], [], [RequestSpec({}, count=50)])
    assert plan.launches() == {"cpu": 1}
    assert placed_by_slot(plan) == {0: 50}


def test_implicit_resource_absent_means_one():
    imp = IMPLICIT_PREFIX + "x"
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)], [running("cpu")],
                      [RequestSpec({"CPU": 1.0, imp: 0.5}, count=3)])
    assert placed_by_slot(plan) == {0: 2, 1: 1}      # 1.0 of the implicit column per node
    assert plan.launches() == {"cpu": 1}


def test_outdated_and_terminated_nodes_get_no_demand():
    nodes = [NodeSpec("gone", Status.QUEUED), NodeSpec("gone", Status.REQUESTED),
             running("cpu"), running("cpu", idle_ms=5)]
    problem, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=1)], nodes,
                            [RequestSpec({}, count=1)], disable_launch_config_check=False)
    assert problem.node_outdated.tolist() == [True, True, False, False]
    # the REQUESTED outdated node cannot be terminated (Q13); the longest idle goes over max
    assert plan.terminations() == [(0, "OUTDATED"), (3, "MAX_NUM_NODE_PER_TYPE")]
    assert plan.term_value.tolist() == [0, 1]
    assert placed_by_slot(plan) == {2: 1}


def test_head_is_never_a_max_victim():
    nodes = [running("cpu", kind=Kind.HEAD, idle_ms=10**9), running("cpu"), running("cpu")]
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=1)], nodes, [])
    assert sorted(plan.term_node.tolist()) == [1, 2]


def test_min_workers_launch_before_demand_and_take_it():
    _, plan = plan_of([NodeTypeSpec("a", CPU4, min_workers=1, max_workers=5),
                       NodeTypeSpec("b", GPU1, min_workers=2, max_workers=5)],
                      [running("b", {"CPU": 0.0, "GPU": 0.0}, total=GPU1)],
                      [RequestSpec({"CPU": 2.0}, count=2)])
    assert plan.launches() == {"a": 1, "b": 1}
    assert plan.new_type.tolist() == [0, 1]
    assert placed_by_slot(plan) == {1: 2}


def test_min_workers_respect_global_cap():
    _, plan = plan_of([NodeTypeSpec("a", CPU4, min_workers=3, max_workers=5)], [running("a")], [],
                      max_num_nodes=2)
    assert plan.launches() == {"a": 1}


def test_idle_termination_respects_min_and_demand():
    nodes = [running("cpu", idle_ms=120_000), running("cpu", idle_ms=300_000),
             running("cpu", idle_ms=200_000), running("cpu", idle_ms=10_000)]
    _, plan = plan_of([NodeTypeSpec("cpu", CPU4, min_workers=3, max_workers=10)], nodes,
                      [RequestSpec({"CPU": 1.0})], idle_timeout_s=60)
    # node 0 gets the demand (so it stays though idle); node 3 is not idle long
    # enough; of 1 and 2 only the longest idle (1) may go, min 3 keeps 2
    assert plan.terminations() == [(1, "IDLE")]
    assert plan.term_value.tolist() == [300_000]
    assert plan.term_status.tolist() == [Status.RAY_RUNNING]
    np.testing.assert_allclose(plan.cluster_resources, [12.0, 48e9])


def test_idle_timeout_per_type_overrides_and_nan_disables():
    nodes = [running("fast", idle_ms=2_000), running("slow", idle_ms=2_000),
             running("cpu", idle_ms=2_000, kind=Kind.HEAD), NodeSpec("fast", Status.QUEUED)]
    types = [NodeTypeSpec("fast", CPU4, max_workers=5, idle_timeout_s=1.0),
             NodeTypeSpec("slow", CPU4, max_workers=5), NodeTypeSpec("cpu", CPU4, max_workers=5)]
    _, plan = plan_of(types, nodes, [])
    assert plan.terminations() == [(0, "IDLE")]          # global timeout is off (None)
    _, plan = plan_of(types, nodes, [], idle_timeout_s=1.0)
    assert plan.terminations() == [(0, "IDLE"), (1, "IDLE")]   # never the head, never pending


def test_plan_fields_are_filled():
    problem, plan = plan_of([NodeTypeSpec("cpu", CPU4, max_workers=10)], [running("cpu")],
                            [RequestSpec({"CPU": 3.0}, count=2), RequestSpec({"CPU": 9.0})])
    assert plan.run_order.tolist() == [1, 0]
    assert plan.n_nodes == problem.N == 1
    assert plan.launch.dtype == np.int64 and plan.place_slot.dtype == np.int32
    assert plan.stats["scheduler"] == "baseline"


# ---- seeded random problems ---------------------------------------------------------------

@pytest.mark.parametrize("chunk", range(10))
def test_random_plans_are_legal_and_deterministic(chunk):
    for seed in range(chunk * 30, chunk * 30 + 30):
        problem = random_case(seed)
        plan = schedule_baseline(problem)
        violations = check_plan(problem, plan)
        assert violations == [], f"seed {seed}: {violations}"
        again = schedule_baseline(problem)
        for name in PLAN_ARRAYS:
            a, b = getattr(plan, name), getattr(again, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), f"seed {seed}: {name} differs"
        assert plan.launch_order == again.launch_order
        # NO_NODE_TYPE_FITS exactly when no configured type holds one unit
        holds = type_holds_one(problem)
        for s in np.flatnonzero(plan.infeasible):
            no_fit = plan.infeasible_why[s] == Why.NO_NODE_TYPE_FITS
            assert not (no_fit and holds[s]), f"seed {seed}: run {s}"


def test_ten_thousand_nodes_two_hundred_runs_give_a_legal_plan():
    rng = np.random.default_rng(7)
    types = [NodeTypeSpec(f"t{t}", {"CPU": 2.0 ** t, "memory": 2.0 ** t * 4e9,
                                    **({"GPU": 1.0} if t == 3 else {})}, max_workers=20_000)
             for t in range(5)]
    nodes = []
    for i in range(10_000):
        t = int(rng.integers(0, 5))
        total = dict(types[t].resources)
        nodes.append(NodeSpec(f"t{t}", Status.RAY_RUNNING, Kind.WORKER, total,
                              {k: v * float(rng.random() < 0.1) for k, v in total.items()},
                              ray_node_id=f"n{i}"))
    requests = [RequestSpec({"CPU": float(rng.choice([0.5, 1, 2, 4])),
                             "memory": float(rng.choice([1e9, 2e9]))}, count=int(rng.integers(1, 50)))
                for _ in range(200)]
    problem = build_problem(types, nodes, requests, max_num_nodes=20_000)
    plan = schedule_baseline(problem)      # its speed is measured in bench/, not here
    assert check_plan(problem, plan) == []
    assert plan.n_launched > 0


def test_label_selectors_and_anti_affinity_of_plain_runs():
    """A plain run goes only to nodes (existing, opened, new types) its selector
    admits, and a run with an anti-affinity puts at most one unit on a node and none
    on a node already labelled (Ray adds the label on placement, docs/ray-semantics.md
    4.7)."""
    types = [NodeTypeSpec("cpu-a", CPU4, max_workers=10, labels={"zone": "a"}),
             NodeTypeSpec("cpu-b", CPU4, max_workers=10, labels={"zone": "b"})]
    a_node = running("cpu-a", rid="a")
    a_node.labels = {"zone": "a"}
    sel = [[("zone", "in", ["b"])]]
    _, plan = plan_of(types, [a_node], [RequestSpec({"CPU": 1.0}, count=6, label_selectors=sel)])
    assert plan.launches() == {"cpu-b": 2} and placed_by_slot(plan) == {1: 4, 2: 2}
    problem, plan = plan_of(types, [], [RequestSpec({"CPU": 1.0}, count=2,
                                                    label_selectors=[[("zone", "in", ["c"])]])])
    assert plan.n_launched == 0 and plan.infeasible.tolist() == [2]
    assert plan.infeasible_why.tolist() == [Why.NO_LABEL_MATCH]      # the reasons of every policy
    marked = running("cpu-a", rid="m")
    marked.labels = {"zone": "a", "job": "x"}
    _, plan = plan_of(types, [marked, a_node],
                      [RequestSpec({"CPU": 1.0}, count=3, anti_affinity=("job", "x"))])
    assert plan.launches() == {"cpu-a": 2}
    assert placed_by_slot(plan) == {1: 1, 2: 1, 3: 1}

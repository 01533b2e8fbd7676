"""vecsched.engine.model.validate: legal plans pass; every kind of violation is caught on its own."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from vecsched.engine.baseline.ffd import schedule_baseline
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import CNT, CODE, IDX, IMPLICIT_PREFIX, Cause, Kind, Status, Why
from vecsched.engine.model.validate import PlanError, assert_plan, check_plan

CPU4 = {"CPU": 4.0, "memory": 16e9}
GPU1 = {"CPU": 8.0, "GPU": 1.0}


def running(type_, avail=None, total=None, idle_ms=0, kind=Kind.WORKER):
    total = dict(total or CPU4)
    return NodeSpec(type_, Status.RAY_RUNNING, kind, total,
                    dict(total if avail is None else avail), idle_ms=idle_ms, ray_node_id="r")


@pytest.fixture
def case():
    """Node 0 head (full), 1 running, 2 REQUESTED, 3 long idle; one GPU unit and
    three CPU units. The baseline places the CPU units on node 1, launches one
    gpu node (slot 4) for the GPU unit and terminates node 3 as IDLE."""
    types = [NodeTypeSpec("cpu", CPU4, min_workers=1, max_workers=4),
             NodeTypeSpec("gpu", GPU1, max_workers=2)]
    nodes = [running("cpu", {"CPU": 0.0, "memory": 0.0}, kind=Kind.HEAD, idle_ms=10**9),
             running("cpu", idle_ms=10**6), NodeSpec("cpu", Status.REQUESTED),
             running("cpu", idle_ms=10**6)]
    requests = [RequestSpec({"CPU": 1.0}, count=3), RequestSpec({"GPU": 1.0})]
    problem = build_problem(types, nodes, requests, idle_timeout_s=60)
    plan = schedule_baseline(problem)
    assert check_plan(problem, plan) == []
    assert plan.terminations() == [(3, "IDLE")]
    assert plan.launches() == {"gpu": 1}
    assert sorted(zip(plan.place_slot.tolist(), plan.place_run.tolist(), plan.place_count.tolist())) \
        == [(1, 0, 3), (4, 1, 1)]
    return problem, plan


def only(violations: list[str], *needles: str) -> None:
    assert len(violations) == 1, violations
    for needle in needles:
        assert needle in violations[0], violations


def with_terms(problem, plan, nodes, causes, status=None):
    """The plan with these terminations and cluster_resources to match."""
    nodes = np.asarray(nodes, dtype=IDX)
    gone = problem.node_outdated.copy()
    gone[nodes] = True
    return replace(plan, term_node=nodes, term_cause=np.asarray(causes, dtype=CODE),
                   term_value=np.zeros(len(nodes), dtype=CNT),
                   term_status=problem.node_status[nodes] if status is None
                   else np.asarray(status, dtype=CODE),
                   cluster_resources=problem.node_total[~gone].sum(axis=0)
                   + plan.launch.astype(float) @ problem.type_cap)


def with_launches(problem, plan, new_type):
    new_type = np.asarray(new_type, dtype=IDX)
    launch = np.bincount(new_type, minlength=problem.T).astype(CNT)
    plan = replace(plan, new_type=new_type, launch=launch,
                   launch_order=tuple(dict.fromkeys(new_type.tolist())))
    return with_terms(problem, plan, plan.term_node, plan.term_cause)


def with_placements(plan, rows):
    slot, run, count = zip(*rows) if rows else ((), (), ())
    return replace(plan, place_slot=np.asarray(slot, dtype=IDX), place_run=np.asarray(run, dtype=IDX),
                   place_count=np.asarray(count, dtype=CNT))


# ---- the checker accepts and raises -----------------------------------------------------

def test_assert_plan_passes_a_legal_plan_and_raises_with_the_list(case):
    problem, plan = case
    assert_plan(problem, plan)
    bad = replace(plan, infeasible=plan.infeasible + 1)
    with pytest.raises(PlanError) as err:
        assert_plan(problem, bad)
    assert isinstance(err.value, AssertionError)
    assert err.value.violations == check_plan(problem, bad)
    assert len(err.value.violations) == 4             # count and reason, for both runs
    assert "illegal plan" in str(err.value) and "run 1: placed 1 + infeasible 1" in str(err.value)


# ---- structure ---------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, needle", [
    ("n_nodes", 7, "n_nodes"),
    ("launch", np.zeros(5, dtype=CNT), "plan.launch has shape"),
    ("infeasible", np.zeros(1, dtype=CNT), "plan.infeasible has shape"),
    ("cluster_resources", np.zeros(1), "plan.cluster_resources has shape"),
    ("term_cause", np.zeros(0, dtype=CODE), "term_node/term_cause"),
    ("place_count", np.zeros(1, dtype=CNT), "place_slot/place_run/place_count"),
    ("place_slot", np.array([1.0, 4.0]), "must be an integer array"),
    ("type_names", ("cpu", "tpu"), "type_names"),
    ("resources", ("CPU",), "resources"),
])
def test_structure(case, field, value, needle):
    problem, plan = case
    v = check_plan(problem, replace(plan, **{field: value}))
    assert v and any(needle in m for m in v), v


def test_indices_out_of_range(case):
    problem, plan = case
    slots = plan.place_slot.copy()
    slots[slots == 4] = 5                              # only one new node exists
    only(check_plan(problem, replace(plan, place_slot=slots)), "place_slot", "out of range [0, 5)")
    only(check_plan(problem, replace(plan, place_run=np.array([0, 2], dtype=IDX))), "place_run[1] = 2")
    only(check_plan(problem, replace(plan, term_node=np.array([4], dtype=IDX))), "term_node")
    only(check_plan(problem, replace(plan, new_type=np.array([-1], dtype=IDX))), "new_type")
    only(check_plan(problem, replace(plan, launch_order=(1, 9))), "launch_order")


# ---- capacity ----------------------------------------------------------------------------

def test_over_committed_existing_node(case):
    problem, plan = case
    bad = with_placements(plan, [(1, 0, 2), (0, 0, 1), (4, 1, 1)])      # the head has no CPU free
    only(check_plan(problem, bad), "node 0 over-committed on 'CPU'")
    bad = with_placements(plan, [(1, 0, 3), (1, 1, 1)])                 # no GPU on a cpu node
    v = check_plan(problem, bad)
    assert any("node 1 over-committed on 'GPU'" in m for m in v), v


def test_over_committed_new_node(case):
    problem, plan = case
    bad = with_placements(plan, [(4, 0, 3), (4, 1, 1)])                 # 8 CPU: fits
    assert check_plan(problem, bad) == []
    bad = with_placements(plan, [(1, 0, 2), (4, 0, 1), (4, 1, 1)])
    assert check_plan(problem, bad) == []
    problem9 = replace(problem, shape_count=np.array([9, 1], dtype=CNT))
    bad = with_placements(plan, [(4, 0, 9), (4, 1, 1)])                 # 9 CPU > 8
    only(check_plan(problem9, bad), "new node 0 (gpu) over-committed on 'CPU'")


def test_float_tolerance_and_implicit_columns():
    imp = IMPLICIT_PREFIX + "a"
    problem = build_problem([NodeTypeSpec("one", {"CPU": 1.0}, max_workers=3)],
                            [running("one", total={"CPU": 0.3})],
                            [RequestSpec({"CPU": 0.1}, count=13), RequestSpec({imp: 0.5}, count=2)])
    plan = schedule_baseline(problem)
    good = with_placements(plan, [(0, 0, 3), (1, 0, 10), (1, 1, 2)])    # 3 * 0.1 = 0.30000000000000004
    assert check_plan(problem, good) == []
    bad = with_placements(plan, [(0, 0, 3), (1, 0, 10), (1, 1, 1), (0, 1, 1)])
    assert check_plan(problem, bad) == []                              # absent implicit = 1.0 free
    problem3 = replace(problem, shape_count=np.array([13, 3], dtype=CNT))
    bad = with_placements(plan, [(0, 0, 3), (1, 0, 10), (1, 1, 3)])     # 1.5 > 1.0
    only(check_plan(problem3, bad), "new node 0 (one) over-committed on " + repr(imp))
    tight = replace(problem, node_free=problem.node_free * (1 - 1e-7))
    only(check_plan(tight, good), "node 0 over-committed on 'CPU'")     # beyond 1e-9 relative


def test_zero_quantity_on_zero_capacity_is_fine(case):
    problem, plan = case
    zero = replace(problem, shape_qty=np.zeros_like(problem.shape_qty))
    assert check_plan(zero, with_placements(plan, [(0, 0, 3), (0, 1, 1)])) == []


# ---- accounting of runs ----------------------------------------------------------------

def test_placed_plus_infeasible_must_equal_count(case):
    problem, plan = case
    only(check_plan(problem, with_placements(plan, [(1, 0, 2), (4, 1, 1)])),
         "run 0: placed 2 + infeasible 0 != count 3")
    short = with_placements(plan, [(1, 0, 2), (4, 1, 1)])
    fixed = replace(short, infeasible=np.array([1, 0], dtype=CNT),
                    infeasible_why=np.array([Why.MAX_WORKERS, 0], dtype=CODE))
    assert check_plan(problem, fixed) == []
    only(check_plan(problem, replace(plan, infeasible=np.array([-1, 0], dtype=CNT),
                                     place_count=np.array([1, 4], dtype=CNT))),
         "run 0: infeasible -1 is negative")


def test_reason_given_exactly_when_infeasible(case):
    problem, plan = case
    only(check_plan(problem, replace(plan, infeasible_why=np.array([Why.MAX_WORKERS, 0], dtype=CODE))),
         "run 0: infeasible 0 with reason 2")
    only(check_plan(problem, replace(plan, infeasible_why=np.array([0, 9], dtype=CODE))),
         "run 1", "unknown")
    short = with_placements(plan, [(1, 0, 2), (4, 1, 1)])
    only(check_plan(problem, replace(short, infeasible=np.array([1, 0], dtype=CNT))),
         "run 0: infeasible 1 with reason 0")


def test_zero_or_negative_placement_counts(case):
    problem, plan = case
    bad = with_placements(plan, [(1, 0, 3), (2, 0, 0), (4, 1, 1)])
    only(check_plan(problem, bad), "placement 1 has count 0")


def test_run_order_must_be_a_permutation(case):
    problem, plan = case
    only(check_plan(problem, replace(plan, run_order=np.array([1, 1], dtype=IDX))), "run_order")


# ---- launches and caps ------------------------------------------------------------------

def test_launch_must_match_new_node_slots(case):
    problem, plan = case
    bad = replace(plan, launch=np.array([0, 2], dtype=CNT))
    v = check_plan(problem, bad)
    assert any("launch 2 but 1 new node slots" in m for m in v), v
    only(check_plan(problem, replace(plan, launch_order=())), "launch_order")
    only(check_plan(problem, replace(plan, launch_order=(1, 1))), "repeats")


def test_launch_of_unconfigured_type():
    problem = build_problem([NodeTypeSpec("cpu", CPU4, max_workers=4)], [running("ghost")], [])
    assert problem.type_names == ("cpu", "ghost")
    plan = with_launches(problem, schedule_baseline(problem), [1])
    only(check_plan(problem, plan), "unconfigured type 'ghost'")


def test_launches_above_max_workers(case):
    problem, plan = case
    assert check_plan(problem, with_launches(problem, plan, [1, 1])) == []
    only(check_plan(problem, with_launches(problem, plan, [1, 1, 1])),
         "type 'gpu': 3 nodes", "exceed max_worker_nodes 2")
    # cpu keeps nodes 0, 1, 2 (3 is idle-terminated): one more is the max, two are too many
    assert check_plan(problem, with_launches(problem, plan, [1, 0])) == []
    only(check_plan(problem, with_launches(problem, plan, [1, 0, 0])), "type 'cpu'")


def test_existing_nodes_above_max_must_be_cut_unless_untouchable():
    types = [NodeTypeSpec("cpu", CPU4, max_workers=1)]
    problem = build_problem(types, [running("cpu"), running("cpu"), running("cpu")], [])
    plan = schedule_baseline(problem)
    assert plan.terminations() == [(0, "MAX_NUM_NODE_PER_TYPE"), (1, "MAX_NUM_NODE_PER_TYPE")]
    only(check_plan(problem, with_terms(problem, plan, [0], [Cause.MAX_NUM_NODE_PER_TYPE])),
         "type 'cpu': 2 nodes after the plan (0 launched) exceed max_worker_nodes 1")
    # a head and a REQUESTED instance cannot be terminated: their excess is legal ...
    stuck = build_problem(types, [running("cpu", kind=Kind.HEAD), NodeSpec("cpu", Status.REQUESTED)], [])
    assert check_plan(stuck, schedule_baseline(stuck)) == []
    # ... but launching on top of them is not
    more = replace(stuck, type_max=np.array([5], dtype=CNT))
    plan = with_launches(stuck, schedule_baseline(more), [0])
    only(check_plan(stuck, plan), "exceed max_worker_nodes 1")


def test_launches_above_max_num_nodes(case):
    problem, plan = case
    # 3 nodes are kept (0, 1, 2) and 1 is launched
    assert check_plan(replace(problem, max_num_nodes=4), plan) == []
    only(check_plan(replace(problem, max_num_nodes=3), plan),
         "1 launches on top of 3 nodes exceed max_num_nodes 3")
    # the existing count alone may exceed the cap when nothing is launched
    none = with_placements(with_launches(problem, plan, []), [(1, 0, 3)])
    none = replace(none, infeasible=np.array([0, 1], dtype=CNT),
                   infeasible_why=np.array([0, Why.MAX_NUM_NODES], dtype=CODE))
    assert check_plan(replace(problem, max_num_nodes=1), none) == []


# ---- terminations --------------------------------------------------------------------

def test_terminated_node_must_not_receive_demand(case):
    problem, plan = case
    bad = with_terms(problem, plan, [3, 1], [Cause.IDLE, Cause.IDLE])
    only(check_plan(problem, bad), "node 1 receives demand but is terminated")
    capped = with_terms(problem, plan, [3, 1], [Cause.IDLE, Cause.MAX_NUM_NODES])
    only(check_plan(problem, capped), "node 1 receives demand")
    assert check_plan(problem, capped, allow_q1=True) == []           # Ray's quirk Q1
    assert check_plan(problem, bad, allow_q1=True) != []              # never for IDLE


def test_demand_on_outdated_node():
    problem = build_problem([NodeTypeSpec("cpu", CPU4, max_workers=4)],
                            [NodeSpec("gone", Status.QUEUED)], [RequestSpec({"CPU": 0.0})],
                            disable_launch_config_check=False)
    plan = schedule_baseline(problem)
    assert check_plan(problem, plan) == []
    bad = with_launches(problem, with_placements(plan, [(0, 0, 1)]), [])
    only(check_plan(problem, bad), "node 0 receives demand but is terminated")
    assert check_plan(problem, bad, allow_q1=True) == []


def test_head_and_requested_nodes_are_never_terminated(case):
    problem, plan = case
    only(check_plan(problem, with_terms(problem, plan, [3, 0], [Cause.IDLE, Cause.MAX_NUM_NODES])),
         "node 0 is the HEAD node")
    only(check_plan(problem, with_terms(problem, plan, [3, 2], [Cause.IDLE, Cause.MAX_NUM_NODES])),
         "node 2 is REQUESTED")


def test_termination_indices_unique_and_fields_valid(case):
    problem, plan = case
    only(check_plan(problem, with_terms(problem, plan, [3, 3], [Cause.IDLE, Cause.IDLE])),
         "node 3 is terminated 2 times")
    only(check_plan(problem, with_terms(problem, plan, [3], [7])), "unknown cause 7")
    only(check_plan(problem, with_terms(problem, plan, [3], [Cause.IDLE], status=[Status.QUEUED])),
         "carries status 1")


def test_idle_termination_never_below_min(case):
    problem, plan = case
    assert check_plan(replace(problem, type_min=np.array([3, 0], dtype=CNT)), plan) == []
    only(check_plan(replace(problem, type_min=np.array([4, 0], dtype=CNT)), plan),
         "type 'cpu': IDLE terminations leave 3 nodes, below min_worker_nodes 4")


def test_cluster_resources_must_match(case):
    problem, plan = case
    wrong = plan.cluster_resources.copy()
    wrong[problem.col("CPU")] += 4.0                                   # node 3 not subtracted
    only(check_plan(problem, replace(plan, cluster_resources=wrong)), "cluster_resources['CPU']")
    nearly = plan.cluster_resources * (1 + 1e-12)
    assert check_plan(problem, replace(plan, cluster_resources=nearly)) == []


def test_many_violations_are_summarised(case):
    problem, plan = case
    rows = [(1, 0, 1)] * 3 + [(0, 0, 0)] * 8 + [(4, 1, 1)]
    v = check_plan(problem, with_placements(plan, rows))
    assert "... and 3 more like the above" in v


@pytest.mark.parametrize("avail_b_first", [False, True])
def test_private_resources_keep_their_columns_in_any_availability_order(avail_b_first):
    """A node's k-th private resource (named by it alone) takes pseudo column k,
    whatever order its availability map lists them in; one named only in the
    availability map takes the next column."""
    from vecsched.engine.model.dtypes import PRIVATE_PREFIX
    types = [NodeTypeSpec("w", {"CPU": 4.0}, max_workers=5)]
    a = {"node:a": 0.5, "node:b": 1.0}
    avail = {"CPU": 2.0, **(dict(reversed(list(a.items()))) if avail_b_first else a)}
    nodes = [NodeSpec("w", total={"CPU": 4.0, "node:a": 1.0, "node:b": 1.0}, available=avail,
                      ray_node_id="x"),
             NodeSpec("w", total={"CPU": 4.0, "node:c": 1.0},
                      available={"CPU": 4.0, "node:c": 1.0, "node:d": 1.0}, ray_node_id="y")]
    p = build_problem(types, nodes, [], idle_timeout_s=60.0)
    col = {n: i for i, n in enumerate(p.resources)}
    k0, k1 = col[f"{PRIVATE_PREFIX}0"], col[f"{PRIVATE_PREFIX}1"]
    assert (p.node_free[0, k0], p.node_free[0, k1]) == (0.5, 1.0)      # node:a, node:b
    assert (p.node_free[1, k0], p.node_free[1, k1]) == (1.0, 1.0)      # node:c, node:d
    assert p.node_total[1, k1] == 0.0                                  # node:d: no total


def test_private_resources_in_the_same_order_take_their_own_columns():
    """Every node names its private resources in the same order in both maps (the
    usual raylet case, copied column for column): each value lands on its own
    node and pseudo column."""
    from vecsched.engine.model.dtypes import PRIVATE_PREFIX
    types = [NodeTypeSpec("w", {"CPU": 4.0}, max_workers=5)]
    nodes = [NodeSpec("w", total={"CPU": 4.0, "node:a": 1.0, "node:b": 1.0},
                      available={"CPU": 2.0, "node:a": 0.5, "node:b": 0.75}, ray_node_id="x"),
             NodeSpec("w", total={"CPU": 4.0, "node:c": 1.0},
                      available={"CPU": 4.0, "node:c": 0.25}, ray_node_id="y")]
    p = build_problem(types, nodes, [], idle_timeout_s=60.0)
    col = {n: i for i, n in enumerate(p.resources)}
    k0, k1 = col[f"{PRIVATE_PREFIX}0"], col[f"{PRIVATE_PREFIX}1"]
    assert (p.node_free[0, k0], p.node_free[0, k1]) == (0.5, 0.75)
    assert p.node_free[1, k0] == 0.25 and not p.node_free_present[1, k1]

"""Properties every engine plan must have, on seeded random problems (the same
generator as the baseline's tests): legal and feasible per vecsched.engine.model.validate,
deterministic, nothing lost."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine import ProblemError, schedule
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.validate import check_plan

from tests.kits.engine_cases import random_case
from tests.kits.packer_twin import FIELDS, capped_against_twin, plans_equal, twin_schedule

@pytest.mark.parametrize("block", range(3))
def test_engine_plans_are_legal_and_deterministic(block):
    for seed in range(block * 100, (block + 1) * 100):
        p = random_case(seed)
        plan = schedule(p)
        problems = check_plan(p, plan, allow_q1=True)
        if p.max_num_nodes == 0:   # quirk Q6: 0 is "no cap" when cutting, Ray's meaning
            problems = [x for x in problems if "max_num_nodes" not in x]
        assert not problems, (seed, problems)
        again = schedule(p)
        for f in FIELDS:
            assert np.array_equal(getattr(plan, f), getattr(again, f)), (seed, f)
        placed = np.bincount(plan.place_run, weights=plan.place_count, minlength=p.S)
        assert np.array_equal(placed + plan.infeasible, p.shape_count), seed


def test_bad_input_is_a_typed_error_naming_the_field():
    t = [NodeTypeSpec("a", {"CPU": 4.0}, max_workers=2)]
    cases = [
        (lambda: build_problem([], [], []), "node_type_configs"),
        (lambda: build_problem([NodeTypeSpec("a", {"CPU": float("nan")})], [], []),
         "node_type_configs['a'].resources['CPU']"),
        (lambda: build_problem(t, [], [RequestSpec({"CPU": -1.0})]),
         "resource_requests[0].resources_bundle['CPU']"),
        (lambda: build_problem(t, [], [RequestSpec({"CPU": 1.0}, count=-3)]),
         "resource_requests[0].count"),
        (lambda: build_problem(t, [], [RequestSpec({"CPU": 1.0}, count=1 << 50)]),
         "resource_requests[0].count"),
        (lambda: build_problem(t, [NodeSpec("a", total={"CPU": 4.0},
                                            available={"CPU": float("inf")})], []),
         "instances[0].available_resources['CPU']"),
        (lambda: build_problem([NodeTypeSpec("a", {"CPU": 1.0}, min_workers=3, max_workers=1)],
                               [], []), "node_type_configs['a'].min_worker_nodes"),
        (lambda: build_problem(t, [], [], idle_timeout_s=-5), "idle_timeout_s"),
        (lambda: build_problem([NodeTypeSpec("a", {"CPU": 1.0}, availability=1.5)], [], []),
         "cloud_resource_availabilities['a']"),
        (lambda: build_problem(t, [NodeSpec("a", status=99)], []), "instances[0].status"),
    ]
    for fn, field in cases:
        with pytest.raises(ProblemError) as e:
            fn()
        assert e.value.field == field


def test_unknown_running_type_is_kept_not_a_crash():
    """Quirk Q3 fixed: Ray raises KeyError; the engine keeps the node and packs on it."""
    t = [NodeTypeSpec("a", {"CPU": 4.0}, max_workers=2)]
    p = build_problem(t, [NodeSpec("gone", total={"CPU": 8.0}, available={"CPU": 8.0},
                                   ray_node_id="x")], [RequestSpec({"CPU": 8.0})])
    plan = schedule(p)
    assert plan.n_launched == 0 and plan.infeasible.sum() == 0
    assert p.type_names[1] == "gone" and not p.type_configured[1]


def test_available_above_total_is_counted_and_scored_without_crash():
    """Quirk Q12 fixed: Ray asserts when such a node is scored; the engine keeps
    Ray's fit (6 free CPUs hold one {CPU: 4}), counts the entry and clamps the
    utilisation term at 0."""
    t = [NodeTypeSpec("a", {"CPU": 4.0}, max_workers=2)]
    p = build_problem(t, [NodeSpec("a", total={"CPU": 4.0}, available={"CPU": 6.0},
                                   ray_node_id="x")], [RequestSpec({"CPU": 4.0}, 2)])
    assert p.clamped == 1 and p.node_free[0, 0] == 6.0
    assert schedule(p).launches() == {"a": 1}


@pytest.mark.parametrize("scenario", ["saturated", "fragmented"])
def test_batched_picks_equal_one_at_a_time(scenario, monkeypatch):
    """Taking runs of identical picks at once (twins, fresh templates) must give
    exactly the plan of picking one node at a time."""
    from bench.benchmarks.common import cluster_v2, engine_problem

    from vecsched.engine.raycompat.packer import Packer
    for seed in range(6):
        p = engine_problem(cluster_v2(nodes=150, units=3000, shapes=12, scenario=scenario,
                                      seed=seed, gangs=10))
        fast = schedule(p)
        monkeypatch.setattr(Packer, "batching", False)
        slow = schedule(p)
        monkeypatch.setattr(Packer, "batching", True)
        for f in FIELDS:
            assert np.array_equal(getattr(fast, f), getattr(slow, f)), (scenario, seed, f)
        assert np.array_equal(fast.gang_infeasible, slow.gang_infeasible)
        assert fast.n_launched > 0


@pytest.mark.parametrize("scenario", ["saturated", "fragmented"])
def test_kernels_equal_python_packer(scenario, monkeypatch):
    """kernels/gangs.py (all gangs in one call) and kernels/loop.py (a packing
    loop in one call) against their slow twins, on the benchmark clusters with
    many placement groups, many units, and a global node cap that binds part of
    the way through."""
    from bench.benchmarks.common import cluster_pr64175, cluster_v2

    specs = [((scenario, seed), spec) for seed in range(4)
             for spec in (cluster_v2(nodes=120, units=3000, shapes=10, scenario=scenario,
                                     seed=seed, gangs=60),
                          cluster_pr64175(nodes=150, units=1500, scenario=scenario, seed=seed))]
    gangs_seen, infeasible, placed = capped_against_twin(specs, 15, monkeypatch)
    assert gangs_seen == 480 and 0 < infeasible < gangs_seen and placed > 10_000


def test_loop_kernel_anti_affinity_over_running_twins(monkeypatch):
    """Identical running nodes taken as a batch under an anti-affinity: one unit
    per node, and a later run with the same anti-affinity goes elsewhere
    (kernels/loop.py against its twin, and the outcome itself)."""
    types = [NodeTypeSpec("w", {"CPU": 4.0}, max_workers=10)]
    node = dict(total={"CPU": 4.0}, available={"CPU": 4.0}, ray_node_id="n", idle_ms=0)
    nodes = [NodeSpec("w", **node) for _ in range(3)]
    reqs = [RequestSpec({"CPU": 1.0}, 2, anti_affinity=("app", "x")),
            RequestSpec({"CPU": 0.5}, 2, anti_affinity=("app", "x"))]
    p = build_problem(types, nodes, reqs, idle_timeout_s=60.0)
    plan = schedule(p)
    plans_equal(plan, twin_schedule(p, monkeypatch), "twins")
    on = {}
    for slot, run, k in zip(plan.place_slot, plan.place_run, plan.place_count):
        on.setdefault(int(run), []).append(int(slot))
    # One unit per node: two nodes take the first run, the third node and one
    # new node take the second.
    assert sorted(on[0]) == [0, 1] and on[1][0] == 2 and plan.launch.sum() == 1

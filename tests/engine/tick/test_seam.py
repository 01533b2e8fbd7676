"""The seam every policy runs through: limits and held-out groups (engine/tick)."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.model.build.builder import NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import Status, Why
from vecsched.engine.model.problem import ProblemError
from vecsched.engine.model.validate import check_plan
from vecsched.engine.tick import Limits
from vecsched.engine.tick import limits as lim

from tests.kits.engine_cases import random_case, running

MODES = ("ray-compat", "efficient", "baseline")
G8 = {"CPU": 32.0, "GPU": 8.0, "memory": 256e9}
G4 = {"CPU": 16.0, "GPU": 4.0, "memory": 128e9}
C16 = {"CPU": 16.0, "memory": 64e9}


def gpu_problem(pods=12, nodes=()):
    types = [NodeTypeSpec("g8", G8, max_workers=20), NodeTypeSpec("g4", G4, max_workers=20),
             NodeTypeSpec("c16", C16, max_workers=20)]
    reqs = [RequestSpec({"CPU": 2.0, "GPU": 1.0}, pods), RequestSpec({"CPU": 4.0}, 8)]
    return build_problem(types, list(nodes), reqs)


def _opts(mode):
    return EfficientOptions(prices={"g8": 8.0, "g4": 4.4, "c16": 1.0}) \
        if mode == "efficient" else None


@pytest.mark.parametrize("mode", MODES)
def test_no_limit_and_nothing_held_is_the_policy_alone(mode):
    p = gpu_problem()
    a = schedule(p, mode=mode, options=_opts(mode))
    b = schedule(p, mode=mode, options=_opts(mode), limits=Limits(), unavailable=())
    assert a.launches() == b.launches() and a.infeasible.tolist() == b.infeasible.tolist()
    assert "limits" not in b.stats and "held_out" not in b.stats


@pytest.mark.parametrize("mode", MODES)
def test_a_gpu_limit_holds_and_the_rest_is_reported(mode):
    p = gpu_problem(pods=40)
    plan = schedule(p, mode=mode, options=_opts(mode), limits=Limits(total={"GPU": 12}))
    gpus = sum(n * (G8 if t == "g8" else G4 if t == "g4" else {}).get("GPU", 0)
               for t, n in plan.launches().items())
    assert 0 < gpus <= 12
    gpu_run = 0
    assert plan.infeasible[gpu_run] > 0 and plan.infeasible_why[gpu_run] == Why.LIMIT
    assert plan.stats["limits"]["GPU"]["asked"] == gpus
    assert plan.stats["limits"]["GPU"]["headroom"] == 12 - gpus
    assert plan.stats["limit_blocked"] == plan.infeasible[gpu_run]
    assert check_plan(p, plan, allow_q1=mode == "ray-compat") == []


@pytest.mark.parametrize("mode", MODES)
def test_running_nodes_count_and_a_limit_never_terminates(mode):
    nodes = [running("g8", total=G8, rid=f"r{i}") for i in range(3)]      # 24 GPUs already
    p = gpu_problem(pods=30, nodes=nodes)
    plan = schedule(p, mode=mode, options=_opts(mode), limits=Limits(total={"GPU": 16}))
    assert not any(t in ("g8", "g4") for t in plan.launches())
    assert all(p.type_names[p.node_type[n]] != "g8" or c == 1          # idle only
               for n, c in zip(plan.term_node.tolist(), plan.term_cause.tolist()))


@pytest.mark.parametrize("mode", MODES)
def test_cost_and_per_group_limits(mode):
    p = gpu_problem(pods=40)
    prices = {"g8": 8.0, "g4": 4.4, "c16": 1.0}
    limits = Limits(total={"cost_per_hour": 20.0}, per_group={"g4": {"GPU": 4}}, prices=prices)
    plan = schedule(p, mode=mode, options=_opts(mode), limits=limits)
    cost = sum(prices[t] * n for t, n in plan.launches().items())
    assert cost <= 20.0 and plan.launches().get("g4", 0) <= 1
    assert plan.stats["limits"]["g4/GPU"]["limit"] == 4.0


def test_a_cost_limit_needs_every_price():
    with pytest.raises(ProblemError, match=r"cost_per_hour.*'c16'"):
        schedule(gpu_problem(), limits=Limits(total={"cost_per_hour": 5.0},
                                              prices={"g8": 1.0, "g4": 1.0}))


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "8", True])
def test_limit_values_are_checked(bad):
    with pytest.raises(ProblemError, match=r"limits.total\['GPU'\]"):
        Limits(total={"GPU": bad})


@pytest.mark.parametrize("kw, where", [
    (dict(per_group={"g4": 4}), r"limits.per_group\['g4'\]"),
    (dict(per_group=[("g4", {"GPU": 4})]), r"limits.per_group"),
    (dict(total=None), r"limits.total"),
    (dict(total={"": 4}), r"limits.total"),
    (dict(prices={"g4": "cheap"}), r"limits.prices\['g4'\]")])
def test_limit_tables_are_checked(kw, where):
    with pytest.raises(ProblemError, match=where):
        Limits(**kw)


def test_numpy_numbers_are_limits():
    limits = Limits(total={"GPU": np.int64(12)}, prices={"g8": np.float32(8.0)})
    assert limits.total == {"GPU": 12.0} and limits.prices == {"g8": 8.0}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("limits, where", [
    (Limits(per_group={"g9": {"GPU": 4}}), r"limits.per_group\['g9'\]: no worker group"),
    (Limits(total={"gpu": 4}), r"limits.total\['gpu'\].*did you mean 'GPU'"),
    (Limits(per_group={"g4": {"Gpu": 4}}), r"limits.per_group\['g4'\]\['Gpu'\]"),
    (Limits(total={"Cost_Per_Hour": 4}, prices={"g8": 8.0, "g4": 4.4, "c16": 1.0}),
     r"did you mean 'cost_per_hour'")])
def test_a_limit_that_would_cap_nothing_by_a_typo_is_refused(mode, limits, where):
    """A per-group limit on a group the cluster does not have, or a resource spelt in
    another case than the cluster's (Ray's names are case-sensitive), would cap
    nothing: refused, naming the limit, instead of a plan over the intended cap."""
    with pytest.raises(ProblemError, match=where):
        schedule(gpu_problem(pods=40), mode=mode, options=_opts(mode), limits=limits)


@pytest.mark.parametrize("mode", MODES)
def test_a_resource_no_group_offers_yet_caps_nothing(mode):
    p = gpu_problem(pods=40)
    free = schedule(p, mode=mode, options=_opts(mode))
    plan = schedule(p, mode=mode, options=_opts(mode), limits=Limits(total={"TPU": 4}))
    assert plan.launches() == free.launches() and plan.stats["limits"]["TPU"]["asked"] == 0


@pytest.mark.parametrize("mode", ["efficient", "baseline"])
def test_a_held_out_group_falls_back_to_the_next_that_fits(mode):
    p = gpu_problem(pods=16)
    free = schedule(p, mode=mode, options=_opts(mode))
    first = max(("g8", "g4"), key=lambda t: free.launches().get(t, 0))
    plan = schedule(p, mode=mode, options=_opts(mode), unavailable={first})
    assert first not in plan.launches()
    assert plan.infeasible.sum() == free.infeasible.sum() == 0
    assert plan.stats["held_out"] == [first]


@pytest.mark.parametrize("mode", ["efficient", "baseline"])
def test_held_groups_that_are_a_requests_only_fit_probe_one_node(mode):
    """Every GPU group held out: the GPU pods fit nothing else, so each held group may
    launch one node once it is due a probe (capacity may have freed); what is left is
    UNAVAILABLE."""
    p = gpu_problem(pods=16)
    held = schedule(p, mode=mode, options=_opts(mode), unavailable={"g8", "g4"})
    assert "g8" not in held.launches() and "g4" not in held.launches()   # refused lately
    assert held.infeasible[0] == 16 and held.infeasible_why[0] == Why.UNAVAILABLE
    plan = schedule(p, mode=mode, options=_opts(mode), unavailable={"g8", "g4"},
                    probing={"g8", "g4"})
    assert plan.launches().get("g8", 0) <= 1 and plan.launches().get("g4", 0) <= 1
    assert plan.infeasible[0] == 16 - 8 * plan.launches().get("g8", 0) \
        - 4 * plan.launches().get("g4", 0) > 0
    assert plan.infeasible_why[0] == Why.UNAVAILABLE
    assert plan.infeasible[1] == 0                    # the CPU run still launches c16
    assert sorted(plan.stats["probing"]) == ["g4", "g8"] and "held_out" not in plan.stats


@pytest.mark.parametrize("mode", ["efficient", "baseline"])
def test_probing_groups_launch_one_node_a_tick(mode):
    p = gpu_problem(pods=16)
    plan = schedule(p, mode=mode, options=_opts(mode), probing={"g8"},
                    unavailable={"g4"})
    assert plan.launches().get("g8", 0) == 1 and "g4" not in plan.launches()


def test_ray_compat_never_reads_the_memory():
    p = gpu_problem(pods=16)
    a = schedule(p)
    b = schedule(p, unavailable={"g8", "g4", "c16"})
    assert a.launches() == b.launches() and "held_out" not in b.stats


@pytest.mark.parametrize("seed", range(0, 40))
def test_random_cases_never_exceed_a_shared_limit(seed):
    p = random_case(seed)
    if p.S == 0:
        return
    for mode in MODES:
        free = schedule(p, mode=mode)
        launched_cpu = float(np.bincount(free.new_type, minlength=p.T) @ p.type_cap[:, p.col("CPU")]) \
            if p.col("CPU") >= 0 else 0.0
        cap = launched_cpu * 0.5 + float(p.node_total[~p.node_outdated, p.col("CPU")].sum()) \
            if p.col("CPU") >= 0 else 1.0
        limits = Limits(total={"CPU": cap})
        plan = schedule(p, mode=mode, limits=limits)
        lt = lim.table(p, limits)
        assert (lim.asked(lt, plan.new_type) <= lt.cap + 1e-6).all() or plan.n_launched == 0, \
            (seed, mode)
        assert check_plan(p, plan, allow_q1=mode == "ray-compat") == [], (seed, mode)
        # the plan under the limit terminates nothing the plan without it kept
        assert set(plan.term_node.tolist()) <= set(free.term_node.tolist()) | \
            set(np.flatnonzero(p.node_status != Status.RAY_RUNNING).tolist()), (seed, mode)


def test_a_cost_limit_needs_no_price_for_a_group_that_never_launches():
    types = [NodeTypeSpec("g4", G4, max_workers=20), NodeTypeSpec("head", {"CPU": 2.0})]
    p = build_problem(types, [running("head", total={"CPU": 2.0}, rid="h")],
                      [RequestSpec({"GPU": 1.0}, 12)])
    plan = schedule(p, limits=Limits(total={"cost_per_hour": 10.0}, prices={"g4": 4.4}))
    assert plan.launches() == {"g4": 2} and plan.stats["limits"]["cost_per_hour"]["asked"] == 8.8


@pytest.mark.parametrize("mode", MODES)
def test_limits_win_over_min_workers(mode):
    types = [NodeTypeSpec("g8", G8, min_workers=3, max_workers=5)]
    p = build_problem(types, [], [])
    free = schedule(p, mode=mode)
    assert free.launches() == {"g8": 3}
    plan = schedule(p, mode=mode, limits=Limits(total={"GPU": 16}))
    assert plan.launches() == {"g8": 2} and len(plan.term_node) == 0


@pytest.mark.parametrize("mode", ["efficient", "baseline"])
def test_a_learned_room_caps_a_groups_launches(mode):
    p = gpu_problem(pods=40)
    free = schedule(p, mode=mode, options=_opts(mode))
    first = max(free.launches().items(), key=lambda kv: kv[1])[0]
    assert free.launches()[first] > 2
    plan = schedule(p, mode=mode, options=_opts(mode), room={first: 2})
    assert plan.launches()[first] == 2
    assert schedule(p, options=None, room={first: 0}).launches() == schedule(p).launches()

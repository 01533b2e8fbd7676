"""vecsched.engine.efficient: legal per vecsched.engine.model.validate on random problems
(on the differential generator's states: tests/adapters/ray/test_engine_on_ray_states.py),
deterministic, gang packings valid in the solver's model, quality against the FFD baseline (and ray-compat) with stated bounds, and
the behaviours the mode promises (GPU nodes kept for GPU work, price- and
shape-aware type choice, unneeded pending nodes cancelled but never one a
placement group could use). Its short openb replays are
tests/adapters/replay/test_efficient_short_replays.py."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine import MODES, schedule
from vecsched.engine.baseline.ffd import schedule_baseline
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import Cause, Kind, Status
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.model.requests import GangSpec
from vecsched.engine.solver import build_instance, plan_value
from vecsched.engine.model.validate import check_plan

from tests.kits.ganggen import gang_tick, plain_tick
from tests.kits.efficient_checks import efficient, gangs_valid, same_plan
from tests.kits.engine_cases import random_case

GIB = float(2 ** 30)


def test_mode_is_listed_and_options_only_for_it():
    assert MODES == ("ray-compat", "efficient", "baseline")
    p = plain_tick(0, units=10)
    with pytest.raises(ValueError, match="options"):
        schedule(p, options=EfficientOptions())
    for bad in (dict(fill_credit=1.5), dict(gpu_weight=-1), dict(gang_cpsat_bundles=-2),
                dict(cpsat_dtime=float("nan")), dict(prices={"cpu-8": 0.0})):
        with pytest.raises(ValueError, match="options."):
            EfficientOptions(**bad)


@pytest.mark.parametrize("block", range(2))
def test_legal_on_random_problems(block):
    for seed in range(block * 150, (block + 1) * 150):
        p = random_case(seed)
        plan = efficient(p)
        assert check_plan(p, plan) == [], (seed, check_plan(p, plan))
        placed = np.bincount(plan.place_run, weights=plan.place_count, minlength=p.S)
        assert np.array_equal(placed + plan.infeasible, p.shape_count), seed


def test_quality_against_ffd_and_ray_on_plain_ticks():
    """30 seeded plain ticks (tests/ganggen.plain_tick, 100 units, six Ray-like
    worker groups) priced by the model's objective (proxy 1 + GPUs per node):
    the efficient mode never costs more than FFD on a tick, and in total at most
    0.7 x FFD (measured 0.62) and at most 0.95 x ray-compat (measured 0.87);
    ray-compat at most 0.8 x FFD (measured 0.72)."""
    tot = {"ffd": 0, "ray": 0, "eff": 0}
    for seed in range(30):
        p = plain_tick(seed, units=100)
        inst = build_instance(p)
        # reserve off: the reserve adds room on purpose, dearer on a single tick by design
        v = {"ffd": plan_value(inst, schedule_baseline(p)), "ray": plan_value(inst, schedule(p)),
             "eff": plan_value(inst, efficient(p, reserve=False))}
        assert v["eff"] <= v["ffd"], (seed, v)
        for k in tot:
            tot[k] += v[k]
    assert tot["eff"] <= 0.7 * tot["ffd"], tot
    assert tot["eff"] <= 0.95 * tot["ray"], tot
    assert tot["ray"] <= 0.8 * tot["ffd"], tot


@pytest.mark.slow
def test_quality_against_ray_on_gang_ticks():
    """20 seeded gang ticks of 40 bundles: every group placed that ray-compat
    places, and in total at most 0.85 x ray-compat's price (measured 0.79)."""
    tot = {"ray": 0, "eff": 0}
    for seed in range(20):
        p = gang_tick(seed, bundles=40)
        inst = build_instance(p)
        ray, eff = schedule(p), efficient(p)
        assert not (eff.gang_infeasible & ~ray.gang_infeasible).any(), seed
        tot["ray"] += plan_value(inst, ray)
        tot["eff"] += plan_value(inst, eff)
    assert tot["eff"] <= 0.85 * tot["ray"], tot


# ---- behaviours -----------------------------------------------------------------------

GPU8 = {"CPU": 96.0, "memory": 384 * GIB, "GPU": 8.0}
CPU96 = {"CPU": 96.0, "memory": 384 * GIB}


def test_gpu_nodes_kept_for_gpu_work():
    """A GPU type priced like the CPU type and with more CPUs would win CPU work
    on shape fit; it is kept for GPU work. Existing nodes: CPU work goes to the
    node without GPUs first."""
    gpu = {"CPU": 128.0, "memory": 512 * GIB, "GPU": 8.0}
    types = [NodeTypeSpec("gpu", gpu, max_workers=10), NodeTypeSpec("cpu", CPU96, max_workers=10)]
    prices = {"gpu": 1.0, "cpu": 1.0}
    p = build_problem(types, [], [RequestSpec({"CPU": 8.0}, count=4)])
    assert efficient(p, prices=prices).launches() == {"cpu": 1}
    assert efficient(p, prices=prices, keep_gpu_for_gpu=False).launches() == {"gpu": 1}
    # without a CPU type the GPU type is used rather than leaving demand unplaced
    p = build_problem(types[:1], [], [RequestSpec({"CPU": 8.0}, count=4)])
    assert efficient(p).launches() == {"gpu": 1}
    nodes = [NodeSpec(t, Status.RAY_RUNNING, Kind.WORKER, dict(r), dict(r), ray_node_id=t)
             for t, r in (("gpu", gpu), ("cpu", CPU96))]
    p = build_problem(types, nodes, [RequestSpec({"CPU": 8.0}, count=2)])
    assert efficient(p).place_slot.tolist() == [1]


def test_type_choice_follows_prices_when_known():
    types = [NodeTypeSpec("a", {"CPU": 16.0}, max_workers=10),
             NodeTypeSpec("b", {"CPU": 16.0}, max_workers=10)]
    p = build_problem(types, [], [RequestSpec({"CPU": 4.0}, count=8)])
    # reserve off: the tick's own type choice is judged (the reserve adds a third node)
    assert efficient(p, prices={"a": 2.0, "b": 1.0}, reserve=False).launches() == {"b": 2}
    assert efficient(p, prices={"a": 1.0, "b": 2.0}, reserve=False).launches() == {"a": 2}
    # a partial price list is not used: the proxy decides (a tie: the first type)
    assert efficient(p, prices={"b": 1.0}, reserve=False).launches() == {"a": 2}
    # by default the room for the next unit is of the chosen type too
    assert efficient(p, prices={"a": 2.0, "b": 1.0}).launches() == {"b": 3}


def test_shape_aware_type_choice():
    """GPU work needing 16 CPUs per GPU: the CPU-rich 8-GPU type fills its GPUs,
    the CPU-poor one runs out of CPU at half its GPUs. Ray's utilisation score
    and FFD (first listed) both take the CPU-poor one."""
    poor = {"CPU": 64.0, "memory": 512 * GIB, "GPU": 8.0}
    rich = {"CPU": 128.0, "memory": 512 * GIB, "GPU": 8.0}
    types = [NodeTypeSpec("poor", poor, max_workers=10), NodeTypeSpec("rich", rich, max_workers=10)]
    p = build_problem(types, [], [RequestSpec({"CPU": 16.0, "GPU": 1.0, "memory": 32 * GIB},
                                              count=16)])
    # reserve off: the tick's own type choice is judged (the reserve adds a third node)
    assert efficient(p, reserve=False).launches() == {"rich": 2}
    assert schedule_baseline(p).launches() == {"poor": 4}


def test_shape_fit_per_price():
    """Costs.fit: for a mix of 16 CPUs per GPU, one node of the CPU-rich type
    holds twice what the CPU-poor one does at the same price."""
    from vecsched.engine.efficient.cost import Costs
    poor = {"CPU": 64.0, "memory": 512 * GIB, "GPU": 8.0}
    rich = {"CPU": 128.0, "memory": 512 * GIB, "GPU": 8.0}
    types = [NodeTypeSpec("poor", poor, max_workers=10), NodeTypeSpec("rich", rich, max_workers=10)]
    p = build_problem(types, [], [RequestSpec({"CPU": 16.0, "GPU": 1.0}, count=4)])
    costs = Costs(p, EfficientOptions())
    mix = np.tile(p.shape_qty[0] * 4, (2, 1))
    ceq, rel = costs.fit(np.arange(2), mix)
    assert rel.tolist() == [0.5, 1.0] and ceq[1] == 2 * ceq[0]


def test_fill_credit_trades_shape_fit_against_this_ticks_fill():
    """One small unit, the big type half the price per CPU: with full credit the
    type that holds the mix cheapest (the big one: the room it leaves counts as
    used by later demand); with none, the cheapest node for this tick's demand
    alone (the small one)."""
    types = [NodeTypeSpec("big", {"CPU": 64.0, "memory": 256 * GIB}, max_workers=10),
             NodeTypeSpec("small", {"CPU": 4.0, "memory": 8 * GIB}, max_workers=10)]
    prices = {"big": 8.0, "small": 1.0}
    p = build_problem(types, [], [RequestSpec({"CPU": 2.0, "memory": 4 * GIB})])
    assert efficient(p, prices=prices).launches() == {"big": 1}
    assert efficient(p, prices=prices, fill_credit=0.0).launches() == {"small": 1}


def test_a_per_node_cap_does_not_make_every_type_equally_small():
    """Seven replicas of one app capped at one per node: the cap slot bounds how many of
    *this* app a node holds, not its room for the mix, which other apps share. The
    shape fit leaves the slot out, so the 8-GPU type that fits the mix cheaper per GPU
    keeps its edge; with the slot in the fit both types held 1/7 of the mix and the
    cheapest node won whatever its shape."""
    from vecsched.engine.efficient.cost import Costs
    from vecsched.engine.model.dtypes import IMPLICIT_PREFIX
    big = {"CPU": 96.0, "memory": 384 * GIB, "GPU": 8.0}
    small = {"CPU": 16.0, "memory": 64 * GIB, "GPU": 1.0}
    types = [NodeTypeSpec("big", big, max_workers=10), NodeTypeSpec("small", small,
                                                                  max_workers=10)]
    replica = {"CPU": 8.0, "memory": 48 * GIB, "GPU": 1.0, f"{IMPLICIT_PREFIX}app": 1.0}
    p = build_problem(types, [], [RequestSpec(replica, count=7)])
    costs = Costs(p, EfficientOptions(prices={"big": 13.76, "small": 1.96}))
    mix = np.tile(p.shape_qty[0] * 7, (2, 1))
    ceq, rel = costs.fit(np.arange(2), mix)
    # big holds 8/7 of the mix's GPUs and memory at 13.76, small 1/7 at 1.96
    assert ceq[0] == pytest.approx(8 * ceq[1])
    assert rel[0] == pytest.approx(1.0) and rel[1] == pytest.approx(13.76 / (8 * 1.96))
    # full credit (the default): the room each big node leaves counts as used by later
    # demand, as for any unit; judged by this tick's fill alone, the small nodes
    prices = {"big": 13.76, "small": 1.96}
    plan = efficient(p, prices=prices, reserve=False)
    assert check_plan(p, plan) == [] and plan.launches() == {"big": 7}
    assert efficient(p, prices=prices, reserve=False, fill_credit=0.0).launches() == {"small": 7}


def _pending(t, status):
    return NodeSpec(t, status, Kind.WORKER)


def test_unneeded_pending_nodes_cancelled_but_not_one_a_group_could_use():
    types = [NodeTypeSpec("cpu", {"CPU": 8.0}, max_workers=10),
             NodeTypeSpec("big", {"CPU": 64.0}, max_workers=10)]
    nodes = [_pending("cpu", Status.RAY_INSTALLING), _pending("cpu", Status.REQUESTED),
             _pending("big", Status.ALLOCATED), _pending("big", Status.QUEUED)]
    p = build_problem(types, nodes, [RequestSpec({"CPU": 8.0})], idle_timeout_s=60.0)
    plan = efficient(p)
    assert plan.n_launched == 0
    # demand goes to the most advanced node; the QUEUED one nothing needs is cancelled
    # (the cloud was never asked); the booting ALLOCATED one is kept by default and
    # cancelled only with cancel_booting; the REQUESTED one cannot be (quirk Q13)
    assert plan.terminations() == [(3, "IDLE")]
    assert efficient(p, cancel_booting=True, reserve=False).terminations() == [(3, "IDLE"),
                                                                               (2, "IDLE")]
    # with the reserve (the default) the booting big node holds room for the next 8-CPU
    # unit, so even cancel_booting keeps it
    assert efficient(p, cancel_booting=True).terminations() == [(3, "IDLE")]
    assert efficient(p, cancel_pending=False).terminations() == []
    # a placement group that a 64-CPU node could hold keeps the big pending nodes
    gang = GangSpec([RequestSpec({"CPU": 40.0})] * 1)
    p = build_problem(types, nodes, [RequestSpec({"CPU": 8.0})], gangs=[gang],
                      idle_timeout_s=60.0)
    plan = efficient(p, cancel_booting=True)
    assert not {2, 3} & {n for n, _ in plan.terminations()}
    assert not plan.gang_infeasible.any()


def test_idle_termination_respects_timeout_and_min_workers():
    types = [NodeTypeSpec("cpu", {"CPU": 8.0}, min_workers=1, max_workers=10)]
    nodes = [NodeSpec("cpu", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 8.0}, {"CPU": 8.0},
                      idle_ms=idle, ray_node_id=f"n{i}") for i, idle in enumerate((90_000, 30_000,
                                                                                    120_000))]
    p = build_problem(types, nodes, [], idle_timeout_s=60.0)
    plan = efficient(p)
    # two are idle past 60 s; one node must stay (min 1): the longest idle goes first
    assert plan.terminations() == [(2, "IDLE"), (0, "IDLE")]
    assert all(c == Cause.IDLE for c in plan.term_cause)


def test_strict_strategies_in_the_plan():
    types = [NodeTypeSpec("w", {"CPU": 8.0}, max_workers=10)]
    spread = GangSpec([RequestSpec({"CPU": 1.0}, anti_affinity=("_PG_a", ""))] * 3)
    pack = GangSpec([RequestSpec({"CPU": 2.0}, affinity=("_PG_b", ""))] * 3)
    p = build_problem(types, [], [], gangs=[spread, pack])
    plan = efficient(p)
    gp = plan.stats["gang_place"]
    assert len(set(gp[gp[:, 0] == 0, 2].tolist())) == 3          # three distinct nodes
    assert len(set(gp[gp[:, 0] == 1, 2].tolist())) == 1          # one node
    assert plan.launches() == {"w": 3}                            # the pack shares one


@pytest.mark.slow
def test_cpsat_gang_packing_is_deterministic_and_no_worse_than_heuristics():
    for seed in range(4):
        p = gang_tick(seed, bundles=50)
        inst = build_instance(p)
        a, b = efficient(p), efficient(p)
        same_plan(a, b, seed)
        h = efficient(p, gang_cpsat_bundles=0)
        assert plan_value(inst, a) <= plan_value(inst, h), seed


@pytest.mark.slow
def test_neighbourhood_search_improves_a_large_tick_and_stays_legal():
    """200 bundles (ganggen seed 1): the all-at-once CP-SAT step runs out of work short
    of the optimum; the neighbourhood search (engine/efficient/lns.py) re-packs the
    gangs of a few least-filled new nodes at a time. Measured: gap to the proven optimum
    (97) 4.1 % without it, 1.0 % with it. Asserted: strictly cheaper than without, every
    gang placed as before, legal, deterministic."""
    p = gang_tick(1, bundles=200)
    inst = build_instance(p)
    without = efficient(p, lns_dtime=0, tick_budget_s=None)   # the limits unbudgeted
    a, b = efficient(p, tick_budget_s=None), efficient(p, tick_budget_s=None)
    same_plan(a, b, "lns")
    assert a.stats.get("gang_lns_better") == 1 and "gang_lns_better" not in without.stats
    assert plan_value(inst, a) < plan_value(inst, without)
    assert np.array_equal(a.gang_infeasible, without.gang_infeasible)
    assert check_plan(p, a) == [], check_plan(p, a)
    gangs_valid(p, a, "lns")

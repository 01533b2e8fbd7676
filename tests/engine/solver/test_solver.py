"""vecsched.engine.solver: the CP-SAT model against exhaustive enumeration, bound
sandwiches (never exact assignments: docs/design.md §6 item 9), every mode's plan
feasible in the model with a gap >= 0, determinism, and the import boundaries
(importable without OR-Tools; never imported on the ray-compat path)."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine import schedule
from vecsched.engine.baseline.ffd import schedule_baseline
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import Status
from vecsched.engine.model.requests import GangSpec
from vecsched.engine.solver import (assignment_value, build_instance, check_assignment,
                                    cross_check_plan, greedy_assignment, plan_value, solve)

from tests.kits.ganggen import gang_tick, plain_tick
from tests.kits.no_ortools import BLOCK, run_child
from tests.kits.solver_kit import brute_force, problem_of, small_case


def _lexicographic(inst, value):
    """(unplaced bundles + units, cost in price units) of an objective value."""
    return int(value) // inst.big, (int(value) % inst.big) / inst.price_scale


@pytest.mark.parametrize("block", range(4))
def test_optimum_equals_exhaustive_enumeration(block):
    checked = 0
    for seed in range(block * 60, (block + 1) * 60):
        case = small_case(seed, max_units=7 if seed % 3 == 0 else 5)
        inst = build_instance(problem_of(case))
        res = solve(inst, deterministic_limit=10)
        assert res.optimal, seed
        want = brute_force(case, [float(x) for x in inst.price[:len(case[0])]])
        got = _lexicographic(inst, res.objective)
        assert got[0] == want[0] and abs(got[1] - want[1]) < 1e-9, (seed, got, want)
        assert res.bound <= res.objective
        assert not check_assignment(inst, res.assignment), seed
        assert assignment_value(inst, res.assignment) == res.objective, seed
        checked += inst.I > 0
    assert checked > 40          # most cases have demand to place


@pytest.mark.slow
def test_bound_sandwich_under_a_tight_work_limit():
    """With too little work to prove anything the bound still sandwiches: bound <=
    the exhaustive... here the best plan known (every mode's, the greedy's) and
    the solver's own answer; the answer is never worse than its hint."""
    for seed in range(6):
        p = gang_tick(seed, bundles=60)
        inst = build_instance(p)
        greedy = greedy_assignment(inst)
        res = solve(inst, deterministic_limit=0.02)
        assert res.bound <= res.objective <= assignment_value(inst, greedy), seed
        for plan in (schedule(p), schedule(p, mode="efficient")):
            assert res.bound <= plan_value(inst, plan), seed
        full = solve(inst, deterministic_limit=20)
        assert res.bound <= full.bound <= full.objective <= res.objective, seed


def _plans(p):
    yield "ray-compat", schedule(p), None
    eff = schedule(p, mode="efficient")
    yield "efficient", eff, eff.stats["gang_place"]
    yield "ffd", schedule_baseline(p), None


@pytest.mark.parametrize("kind", ["gangs", "plain"])
@pytest.mark.slow
def test_every_mode_feasible_in_the_model_and_gap_nonnegative(kind):
    for seed in range(8):
        p = gang_tick(seed, bundles=30, plain=True) if kind == "gangs" else \
            plain_tick(seed, units=60)
        inst = build_instance(p)
        assert inst.comparable, inst.notes
        res = solve(inst, deterministic_limit=10)
        assert res.feasible
        for name, plan, gp in _plans(p):
            chk = cross_check_plan(inst, plan, res, gang_place=gp)
            assert chk.feasible is True, (seed, name, chk.why)
            assert chk.gap >= 0, (seed, name, chk)
            if res.optimal:
                assert chk.value >= res.objective, (seed, name)


def test_efficient_packing_is_checked_directly_and_is_optimal_on_small_gang_ticks():
    """The efficient mode's own packing (plan.stats['gang_place']) passes the
    model's constraints; with CP-SAT in the loop it equals the optimum here."""
    optimal = 0
    for seed in range(10):
        p = gang_tick(seed, bundles=25)
        inst = build_instance(p)
        plan = schedule(p, mode="efficient")
        res = solve(inst, deterministic_limit=10)
        chk = cross_check_plan(inst, plan, res, gang_place=plan.stats["gang_place"])
        assert chk.feasible is True and chk.why == "the plan's own packing", (seed, chk)
        optimal += chk.optimal
    assert optimal >= 9


def test_model_rejects_what_ray_rejects():
    """Hand cases: a STRICT_SPREAD group needs distinct nodes, a STRICT_PACK group
    one node, a selector a matching label, and caps bound the launches."""
    t = [NodeTypeSpec("w", {"CPU": 4.0}, max_workers=3, labels={"zone": "a"})]
    spread = GangSpec([RequestSpec({"CPU": 1.0}, anti_affinity=("_PG_1", ""))] * 3)
    p = build_problem(t, [], [], gangs=[spread])
    res = solve(build_instance(p))
    assert res.optimal and res.placed_gangs.all() and res.launches.tolist() == [3]
    pack = GangSpec([RequestSpec({"CPU": 3.0}, affinity=("_PG_2", ""))] * 2)   # 6 > 4 CPUs
    res = solve(build_instance(build_problem(t, [], [], gangs=[pack])))
    assert res.optimal and not res.placed_gangs.any()
    sel = GangSpec([RequestSpec({"CPU": 1.0}, label_selectors=[[("zone", "in", ["b"])]])])
    res = solve(build_instance(build_problem(t, [], [], gangs=[sel])))
    assert not res.placed_gangs.any()
    capped = GangSpec([RequestSpec({"CPU": 4.0})] * 4)                        # 4 nodes, max 3
    res = solve(build_instance(build_problem(t, [], [], gangs=[capped])))
    assert not res.placed_gangs.any() and res.launches.sum() == 0
    res = solve(build_instance(build_problem(t, [], [], gangs=[capped], max_num_nodes=2)))
    assert not res.placed_gangs.any()


def test_fractional_and_byte_quantities_scale_exactly():
    """0.1 x 3 fills a 0.3 node exactly, memory in bytes and half GPUs too."""
    t = [NodeTypeSpec("w", {"CPU": 1.0, "GPU": 1.0, "memory": 3 * 2.0 ** 30}, max_workers=5)]
    node = NodeSpec("w", Status.RAY_RUNNING, total={"CPU": 1.0, "GPU": 1.0, "memory": 3 * 2.0 ** 30},
                    available={"CPU": 0.3, "GPU": 1.0, "memory": 3 * 2.0 ** 30}, ray_node_id="n")
    g = GangSpec([RequestSpec({"CPU": 0.1, "GPU": 0.25, "memory": 2.0 ** 30})] * 3)
    inst = build_instance(build_problem(t, [node], [], gangs=[g]))
    assert inst.exact
    res = solve(inst)
    assert res.optimal and res.placed_gangs.all() and res.launches.sum() == 0


def test_solve_is_deterministic():
    p = gang_tick(3, bundles=80)
    inst = build_instance(p)
    a = solve(inst, deterministic_limit=0.5)
    b = solve(inst, deterministic_limit=0.5)
    assert a.status == b.status and a.objective == b.objective and a.bound == b.bound
    assert np.array_equal(a.assignment, b.assignment)


def _run(code: str) -> str:
    out = run_child(code)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_importable_without_ortools_and_clear_error_when_used():
    out = _run(BLOCK + """
from vecsched.engine.solver import SolverUnavailable, build_instance, greedy_assignment, have_ortools, solve
from vecsched.engine import schedule
from tests.kits.ganggen import gang_tick
p = gang_tick(1, bundles=20)
inst = build_instance(p)
greedy_assignment(inst)
assert not have_ortools()
try:
    solve(inst)
except SolverUnavailable as e:
    assert "pip install" in str(e)
    print("clear error")
from vecsched.engine.efficient import EfficientOptions
plan = schedule(p, mode="efficient", options=EfficientOptions(gang_cpsat_bundles=0))
assert "gang_cpsat" not in plan.stats          # heuristics only, asked for explicitly
print("efficient ok")
""")
    assert "clear error" in out and "efficient ok" in out


def test_ray_compat_never_imports_ortools_or_the_solver():
    out = _run("""
import sys
from vecsched.engine import schedule
from tests.kits.ganggen import gang_tick
schedule(gang_tick(2, bundles=40, plain=True))
print(sorted(m for m in sys.modules if m.split(".")[0] == "ortools"
             or m.startswith("vecsched.engine.solver") or m.startswith("vecsched.engine.efficient")))
""")
    assert out.strip() == "[]", out

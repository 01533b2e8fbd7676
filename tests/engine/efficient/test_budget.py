"""EfficientOptions.tick_budget_s: the default budget, spent in
work units (``budget.Allowance``: same input, same plan), and the opt-in wall-clock
guard (an injected clock) that skips or stops the CP-SAT steps, counted in
``stats["budget_guard"]``. Nothing here measures speed."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient import budget as B
from vecsched.engine.efficient.options import DEFAULT_TICK_BUDGET_S
from vecsched.engine.model.validate import check_plan

from tests.kits.ganggen import gang_tick
from tests.kits.engine_cases import PLAN_ARRAYS


def _same(a, b) -> bool:
    return all(np.array_equal(getattr(a, n), getattr(b, n)) for n in PLAN_ARRAYS)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "0.25", True])
def test_budget_is_validated(bad):
    with pytest.raises(ValueError, match="options.tick_budget_s"):
        EfficientOptions(tick_budget_s=bad)


def test_clock_must_be_callable():
    with pytest.raises(ValueError, match="options.clock"):
        EfficientOptions(tick_budget_s=0.25, clock=12.0)


def test_the_default_is_a_quarter_second_budget_without_a_clock():
    o = EfficientOptions()
    assert o.tick_budget_s == DEFAULT_TICK_BUDGET_S == 0.25 and o.clock is None


def test_no_budget_leaves_the_options_limits_as_they_are():
    a = B.Allowance(None, nodes=1000, pass_work=1000)
    assert a.left == math.inf
    assert a.limit(10 ** 6, 2.0, B.CPSAT_STEP_SHARE) == 2.0 and a.limit(50, 0.2) == 0.2
    a.charge(10 ** 6, 5.0)
    a.refuse()
    assert a.left == math.inf


def test_the_heuristics_share_grows_with_the_tick():
    small, large = B.heuristics_estimate(12, 100), B.heuristics_estimate(1000, 1000)
    assert 0 < small < large
    a = B.Allowance(0.25, nodes=1000, pass_work=1000)
    assert a.left == pytest.approx(0.25 - large)
    assert B.Allowance(0.01, nodes=1000, pass_work=1000).left == 0.0   # never negative


def test_a_solve_is_limited_to_what_is_left_after_its_model():
    a = B.Allowance(0.25, nodes=0, pass_work=0)
    cells = 1000
    room = B.CPSAT_STEP_SHARE * a.total - a.fixed_cost(cells)
    assert a.limit(cells, 10.0, B.CPSAT_STEP_SHARE) == pytest.approx(room / B.WALL_PER_DTIME)
    assert a.limit(cells, 0.001, B.CPSAT_STEP_SHARE) == 0.0     # below MIN_DTIME: not started
    assert a.limit(cells, 0.01) == 0.01                          # never above the cap
    huge = int(a.total / B.CELL_S) + 1                           # its model alone spends it
    assert a.limit(huge, 10.0) == 0.0


def test_charges_spend_the_allowance_deterministically():
    a = B.Allowance(0.25, nodes=0, pass_work=0)
    left = a.left
    a.charge(2000, 0.01)
    assert a.left == pytest.approx(left - a.fixed_cost(2000) - B.WALL_PER_DTIME * 0.01)
    before = a.left
    a.refuse()                                    # an instance built, its model not
    assert a.left == pytest.approx(before - B.INSTANCE_S)
    a.charge(10 ** 9, 1.0)
    assert a.left == 0.0 and a.limit(1, 1.0) == 0.0


def test_default_budget_plans_are_deterministic_and_legal():
    """The default budget, no clock: the same plan on every run, no guard firing."""
    for p in (gang_tick(2, bundles=50), gang_tick(0, bundles=200)):
        a = schedule(p, mode="efficient")
        b = schedule(p, mode="efficient", options=EfficientOptions())
        assert _same(a, b) and a.stats["budget_guard"] == 0
        assert check_plan(p, a) == []


def test_a_model_too_big_for_the_budget_is_not_solved(monkeypatch):
    """At 200 bundles the whole-tick model alone would spend the default budget here:
    the packing step is skipped (counted), deterministically, and the neighbourhood
    search still gets the allowance; without a budget the packing step runs."""
    p = gang_tick(0, bundles=200)
    plan = schedule(p, mode="efficient")
    assert plan.stats.get("gang_cpsat_skipped") == 1 and "gang_cpsat" not in plan.stats
    from vecsched.engine.solver import cpsat
    solves, real = [], cpsat.solve
    monkeypatch.setattr(cpsat, "solve", lambda *a, **k: solves.append(1) or real(*a, **k))
    again = schedule(p, mode="efficient")
    assert solves and _same(plan, again)          # the search's re-packs ran
    wide = schedule(p, mode="efficient",
                    options=EfficientOptions(tick_budget_s=None, cpsat_dtime=0.05, lns_dtime=0))
    assert wide.stats.get("gang_cpsat") == 1 and "gang_cpsat_skipped" not in wide.stats


def test_the_budget_never_makes_the_plan_dearer_than_the_heuristics():
    """Anytime: what the budgeted steps keep is never worse than the heuristic packing."""
    from vecsched.engine.solver import build_instance, plan_value
    for seed in (0, 1):
        p = gang_tick(seed, bundles=100)
        inst = build_instance(p)
        heur = schedule(p, mode="efficient", options=EfficientOptions(gang_cpsat_bundles=0))
        budg = schedule(p, mode="efficient")
        assert plan_value(inst, budg) <= plan_value(inst, heur)


def test_guard_skips_cpsat_when_the_wall_budget_is_spent_and_counts_it():
    """A clock that jumps a second per reading spends a 0.5 s budget before the CP-SAT
    step: it is skipped (counted), and the plan is the heuristics' alone."""
    ticks = itertools.count()
    p = gang_tick(2, bundles=100)
    plan = schedule(p, mode="efficient",
                    options=EfficientOptions(tick_budget_s=0.5, clock=lambda: float(next(ticks))))
    assert plan.stats["budget_guard"] >= 1 and "gang_cpsat" not in plan.stats
    heuristics = schedule(p, mode="efficient", options=EfficientOptions(gang_cpsat_bundles=0))
    assert _same(plan, heuristics)
    assert check_plan(p, plan) == []


def test_guard_stops_the_search_when_the_clock_runs_out_mid_tick():
    """A clock that runs out after the packing step: the neighbourhood search is
    stopped by the guard (counted), and the plan stays legal."""
    readings = itertools.count()
    p = gang_tick(2, bundles=50)
    opts = EfficientOptions(tick_budget_s=5.0, clock=lambda: 0.0 if next(readings) < 3 else 99.0)
    plan = schedule(p, mode="efficient", options=opts)
    assert plan.stats.get("gang_cpsat") == 1 and plan.stats["budget_guard"] >= 1
    assert check_plan(p, plan) == []


@pytest.mark.parametrize("budget", [None, 0.25, 2.0])
def test_a_frozen_clock_never_fires_and_changes_nothing(budget):
    """A clock that never moves never spends the budget: the plan is the work-unit plan."""
    p = gang_tick(2, bundles=50)
    frozen = schedule(p, mode="efficient",
                      options=EfficientOptions(tick_budget_s=budget, clock=lambda: 0.0))
    units = schedule(p, mode="efficient", options=EfficientOptions(tick_budget_s=budget))
    assert frozen.stats.get("budget_guard", 0) == 0 and _same(frozen, units)

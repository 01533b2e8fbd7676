"""EfficientOptions.tick_budget_s (issue 22 item 4, started): the CP-SAT steps' work
scaled to the budget in deterministic units (same input, same plan), and the
wall-clock guard (an injected clock) that skips or stops them, counted in
``stats["budget_guard"]``. Nothing here measures speed."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.options import CPSAT_SHARE, LNS_SHARE
from vecsched.engine.model.validate import check_plan

from tests.kits.ganggen import gang_tick
from tests.engine.baseline.test_baseline import PLAN_ARRAYS

pytest.importorskip("ortools")


def _same(a, b) -> bool:
    return all(np.array_equal(getattr(a, n), getattr(b, n)) for n in PLAN_ARRAYS)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "0.25", True])
def test_budget_is_validated(bad):
    with pytest.raises(ValueError, match="options.tick_budget_s"):
        EfficientOptions(tick_budget_s=bad)


def test_clock_must_be_callable():
    with pytest.raises(ValueError, match="options.clock"):
        EfficientOptions(tick_budget_s=0.25, clock=12.0)


def test_budget_scales_the_cpsat_work_limits():
    free = EfficientOptions()
    assert (free.cpsat_limit, free.lns_limit) == (free.cpsat_dtime, free.lns_dtime)
    b = EfficientOptions(tick_budget_s=0.25)
    assert b.cpsat_limit == CPSAT_SHARE * 0.25 and b.lns_limit == LNS_SHARE * 0.25
    big = EfficientOptions(tick_budget_s=100.0)       # never more than the limits themselves
    assert (big.cpsat_limit, big.lns_limit) == (big.cpsat_dtime, big.lns_dtime)


def test_budgeted_plans_are_deterministic_and_legal():
    """Budgeted in work units, without a clock: the same plan on every run, no guard."""
    p = gang_tick(2, bundles=100)
    opts = EfficientOptions(tick_budget_s=0.25)
    a = schedule(p, mode="efficient", options=opts)
    b = schedule(p, mode="efficient", options=opts)
    assert _same(a, b) and a.stats["budget_guard"] == 0 and a.stats.get("gang_cpsat") == 1
    assert check_plan(p, a) == []


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


def test_guard_with_time_to_spare_does_not_fire():
    """A frozen clock never spends the budget: the plan is the work-unit plan."""
    p = gang_tick(2, bundles=100)
    frozen = schedule(p, mode="efficient",
                      options=EfficientOptions(tick_budget_s=0.25, clock=lambda: 0.0))
    units = schedule(p, mode="efficient", options=EfficientOptions(tick_budget_s=0.25))
    assert frozen.stats["budget_guard"] == 0 and _same(frozen, units)

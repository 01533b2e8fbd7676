"""``EfficientOptions.gang_pass_work``: the heuristic passes over the placement
groups run in ``PASS_PRIORITY`` order while their bundle placements stay within
the limit, myopic and joint always (engine/efficient/gang_place.py); below it every
pass runs and the plan is the one of an unlimited run."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient import gang_place

from tests.kits.ganggen import gang_tick

PLAN = ("launch", "new_type", "term_node", "place_slot", "place_run", "place_count",
        "gang_infeasible")
HEURISTIC = {"gang_cpsat_bundles": 0}


def _same(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in PLAN)


def _units(p) -> int:
    """The work one pass costs: the tick's gang units (``gang_batch``'s counts)."""
    return int(sum(gang_place.gang_batch(p, g)[2].sum() for g in range(p.G)))


def _recorded(monkeypatch):
    """The (how, tight) of every pass run, in order."""
    seen = []
    real = gang_place._pass

    def rec(st, costs, opts, batches, order, how, tight, prep=None, kprep=None):
        seen.append((how, tight))
        return real(st, costs, opts, batches, order, how, tight, prep, kprep)
    monkeypatch.setattr(gang_place, "_pass", rec)
    return seen


@pytest.mark.parametrize("seed", range(4))
def test_default_runs_every_pass_and_plans_as_unlimited(seed, monkeypatch):
    p = gang_tick(seed, bundles=60)
    seen = _recorded(monkeypatch)
    plan = schedule(p, mode="efficient", options=EfficientOptions(**HEURISTIC))
    ran = len(seen)
    unlimited = schedule(p, mode="efficient",
                         options=EfficientOptions(gang_pass_work=10**12, **HEURISTIC))
    assert ran >= 4                 # myopic in input order may duplicate myopic largest-first
    assert len(seen) == 2 * ran
    assert "gang_passes_skipped" not in plan.stats
    assert _same(plan, unlimited)


def test_passes_run_in_priority_order_within_the_work(monkeypatch):
    p = gang_tick(1, bundles=60)
    nb = _units(p)
    seen = _recorded(monkeypatch)
    expect = [("myopic", False), ("joint", False), ("myopic", False), ("myopic", True)]
    for k in range(2, 5):
        seen.clear()
        plan = schedule(p, mode="efficient",
                        options=EfficientOptions(gang_pass_work=k * nb, **HEURISTIC))
        assert seen == expect[:k]
        assert plan.stats["gang_passes_skipped"] == 5 - k       # joint tight: last


def test_myopic_and_joint_always_run(monkeypatch):
    p = gang_tick(2, bundles=40)
    seen = _recorded(monkeypatch)
    plan = schedule(p, mode="efficient", options=EfficientOptions(gang_pass_work=0, **HEURISTIC))
    assert seen == [("myopic", False), ("joint", False)]
    assert plan.stats["gang_pass"] in ("myopic", "joint")
    assert plan.stats["gang_passes_skipped"] >= 2


def test_a_limited_run_keeps_the_best_of_its_passes(monkeypatch):
    """Two passes' work gives the better of myopic and joint (each run alone by
    monkeypatching the priority), never a worse packing than either."""
    for seed in range(6):
        p = gang_tick(seed, bundles=50)
        two = schedule(p, mode="efficient",
                       options=EfficientOptions(gang_pass_work=2 * _units(p), **HEURISTIC))
        alone = {}
        for v, name in ((0, "myopic"), (3, "joint")):
            monkeypatch.setattr(gang_place, "PASS_PRIORITY", (v,))
            alone[name] = schedule(p, mode="efficient", options=EfficientOptions(**HEURISTIC))
        monkeypatch.undo()
        assert two.stats["gang_pass"] in alone
        assert _same(two, alone[two.stats["gang_pass"]])
        n_bad = {k: int(a.gang_infeasible.sum()) for k, a in alone.items()}
        assert int(two.gang_infeasible.sum()) == min(n_bad.values())


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_bad_values_are_a_typed_error_naming_the_option(bad):
    with pytest.raises(ValueError, match="options.gang_pass_work"):
        EfficientOptions(gang_pass_work=bad)

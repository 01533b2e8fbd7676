"""engine/efficient/gang_bound.py: the lower bound that lets the efficient mode skip
its gang CP-SAT steps must never pass the proven optimum (else a better packing
would be skipped), and groups it calls impossible must be unplaced by the optimum."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.cost import Costs
from vecsched.engine.efficient.gang_bound import bound_met, impossible_gangs, launch_price_bound
from vecsched.engine.efficient.gang_place import gang_batch
from vecsched.engine.efficient.state import State
from vecsched.engine.solver import build_instance, solve

from tests.kits.ganggen import gang_tick


def _bound(p):
    st = State(p)
    costs = Costs(p, EfficientOptions())
    batches = [gang_batch(p, g) for g in range(p.G)]
    bad = impossible_gangs(st, batches)
    return st, costs, batches, bad, launch_price_bound(st, costs, batches, np.flatnonzero(~bad))


@pytest.mark.slow
def test_launch_price_bound_never_passes_the_optimum():
    checked, positive, tight = 0, 0, 0
    for seed in range(10):
        for bundles in (12, 30):
            p = gang_tick(seed, bundles=bundles)
            st, costs, batches, bad, lb = _bound(p)
            inst = build_instance(p, include_plain=False)
            res = solve(inst, deterministic_limit=5.0)
            if not res.optimal or inst.forced.any():
                continue
            assert not (res.placed_gangs & bad).any(), (seed, bundles)
            if not res.placed_gangs[~bad].all():
                continue
            price = float(costs.price @ res.launches)
            assert lb <= price + 1e-9, (seed, bundles, lb, price)
            checked += 1
            positive += lb > 0
            tight += abs(lb - price) <= 1e-9
            # met exactly when the optimum's price reaches the bound
            unplaced = int(sum(int(p.gang_ptr[g + 1] - p.gang_ptr[g]) for g in np.flatnonzero(bad)))
            assert bound_met(st, costs, batches, unplaced, price) == (price <= lb + 1e-9)
    assert checked >= 10 and positive >= 5, (checked, positive, tight)


def test_impossible_group_and_empty_deficit():
    """A STRICT_PACK group larger than every type is impossible; with nothing else
    pending the launch bound is 0 and any packing that launches nothing meets it. A
    6-CPU group on an empty cluster of 8-CPU nodes needs one whole node."""
    from vecsched.engine.model.build.builder import NodeTypeSpec, RequestSpec, build_problem
    from vecsched.engine.model.requests import GangSpec
    types = [NodeTypeSpec("w", {"CPU": 8.0}, max_workers=4)]
    huge = GangSpec([RequestSpec({"CPU": 6.0}, affinity=("_PG_a", ""))] * 2)   # 12 CPU, one node
    p = build_problem(types, [], [], gangs=[huge])
    st, costs, batches, bad, lb = _bound(p)
    assert bad.tolist() == [True] and lb == 0.0
    assert bound_met(st, costs, batches, 2, 0.0)
    ok = GangSpec([RequestSpec({"CPU": 3.0}, affinity=("_PG_b", ""))] * 2)
    p = build_problem(types, [], [], gangs=[ok])
    st, costs, batches, bad, lb = _bound(p)
    assert bad.tolist() == [False] and lb == pytest.approx(costs.price[0], abs=1e-3)  # one node
    assert not bound_met(st, costs, batches, 2, 0.0)          # unplacing a possible group

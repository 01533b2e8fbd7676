"""The covering LP (``engine/solver/cover_lp.py``): optima checked by hand, the
repaired duals feasible exactly and below the optimum of *every* demand (weak duality,
what a time-shifted bound relies on), identical rows solved once, bad input refused."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine.solver.cover_lp import CoverLP

INF = np.inf


def _one_class(cap, price, upper=None):
    cap = np.asarray(cap, dtype=float)
    upper = np.full(cap.shape[0], INF) if upper is None else np.asarray(upper, dtype=float)
    return CoverLP(cap, price, upper, np.ones((1, cap.shape[0]), dtype=bool))


def test_one_column_takes_the_cheapest_per_unit():
    lp = _one_class([[4.0], [10.0]], [1.0, 2.0])          # 0.25 / unit against 0.20 / unit
    res = lp.solve(np.array([[[20.0]], [[0.0]], [[5.0]]]))
    assert res.value == pytest.approx([4.0, 0.0, 1.0])
    assert res.dual_value == pytest.approx(res.value)
    assert res.y[[0, 2], 0, 0] == pytest.approx([0.2, 0.2])     # the cheaper type's rate


def test_complementary_columns_mix_types():
    # type 0: CPU-heavy, type 1: memory-heavy, type 2: balanced and dear
    lp = _one_class([[8, 2], [2, 8], [8, 8]], [1.0, 1.0, 3.0])
    res = lp.solve(np.array([[[10.0, 10.0]]]))
    # x0 = x1 = 1 covers (10, 10) at 2; the balanced type would cost 3.75
    assert res.value[0] == pytest.approx(2.0)
    assert res.x[0] == pytest.approx([1.0, 1.0, 0.0])
    assert res.dual_value[0] == pytest.approx(2.0)


def test_a_class_keeps_its_work_on_its_types():
    # GPU-model work (class 1: type 1 only) cannot use the cheaper type 0's GPUs
    cap = np.array([[4.0], [4.0]])
    member = np.array([[True, True], [False, True]])
    lp = CoverLP(cap, [1.0, 2.0], [INF, INF], member)
    # 8 GPUs in all, 4 of them for the model only type 1 has
    res = lp.solve(np.array([[[8.0], [4.0]]]))
    assert res.value[0] == pytest.approx(1.0 * 1 + 2.0 * 1)
    assert res.dual_value[0] == pytest.approx(res.value[0])


def test_a_bounded_free_type_is_used_first_and_priced_in_z():
    # the head: free, at most one; 8 CPUs
    lp = _one_class([[8.0], [16.0]], [0.0, 1.0], upper=[1.0, INF])
    res = lp.solve(np.array([[[8.0]], [[24.0]]]))
    assert res.value == pytest.approx([0.0, 1.0])
    assert res.dual_value == pytest.approx(res.value)
    assert res.z[1, 0] == pytest.approx(8.0 / 16.0)        # the head's 8 CPUs at 1/16 each


def _random(seed):
    rng = np.random.default_rng(seed)
    T, R, G = 6, 4, 3
    cap = rng.integers(0, 9, size=(T, R)).astype(float)
    cap[:, 0] = rng.integers(1, 9, size=T)                 # every type offers column 0
    price = rng.uniform(0.5, 3.0, size=T)
    price[0] = 0.0                                         # a free, bounded type
    upper = np.full(T, INF)
    upper[0] = 1.0
    member = np.ones((G, T), dtype=bool)
    member[1:] = rng.random((G - 1, T)) < 0.6
    member[1:, 1] = True                                   # every class has a type
    demand = rng.uniform(0, 20, size=(12, G, R))
    offers = (member[:, :, None] & (cap[None] > 0)).any(axis=1)
    demand *= offers[None]                                 # only what some type offers
    return CoverLP(cap, price, upper, member), demand


@pytest.mark.parametrize("seed", range(6))
def test_duals_are_feasible_and_bound_every_demand(seed):
    lp, demand = _random(seed)
    res = lp.solve(demand)
    assert np.all(res.y >= 0) and np.all(res.z >= 0)
    assert res.dual_value == pytest.approx(res.value, rel=1e-7, abs=1e-7)
    load = np.einsum("kgr,gt,tr->kt", res.y, lp.member.astype(float), lp.cap)
    unbounded = ~np.isfinite(lp.upper)
    assert np.all(load[:, unbounded] <= lp.price[unbounded] + 1e-12)
    assert np.all(load - res.z <= lp.price + 1e-12)
    # weak duality: row k's prices bound row j's optimum
    finite = np.where(np.isfinite(lp.upper), lp.upper, 0.0)
    for k in range(len(demand)):
        priced = np.einsum("gr,jgr->j", res.y[k], demand) - res.z[k] @ finite
        assert np.all(priced <= res.value + 1e-7)


def test_identical_rows_are_solved_once():
    lp, demand = _random(0)
    rows = np.concatenate([demand[:3], demand[:3], demand[:1]])
    res = lp.solve(rows)
    assert res.solves == 3
    assert res.value[:3] == pytest.approx(res.value[3:6])


def test_no_demand_at_all():
    lp = _one_class([[4.0]], [1.0])
    res = lp.solve(np.zeros((4, 1, 1)))
    assert res.solves == 0 and np.all(res.value == 0) and np.all(res.dual_value == 0)


def test_bad_input_is_refused_naming_what():
    with pytest.raises(ValueError, match="price"):
        _one_class([[4.0]], [np.nan])
    with pytest.raises(ValueError, match="cap"):
        _one_class([[-1.0]], [1.0])
    with pytest.raises(ValueError, match="number of types"):
        CoverLP(np.ones((2, 1)), [1.0], [INF, INF], np.ones((1, 2), dtype=bool))
    lp = _one_class([[4.0, 0.0]], [1.0])
    with pytest.raises(ValueError, match="demand must be"):
        lp.solve(np.ones((1, 1, 3)))
    with pytest.raises(ValueError, match="finite"):
        lp.solve(np.full((1, 1, 2), np.nan))
    with pytest.raises(ValueError, match="none of its types offers"):
        lp.solve(np.array([[[1.0, 1.0]]]))

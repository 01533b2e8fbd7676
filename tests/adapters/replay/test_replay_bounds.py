"""The trace's lower bound (``adapters/replay/bounds.py``): below the cost and the
GPU-hours of every scheduler on several short replays (a bound above a real cost is a
bug), exact on a trace worked by hand, and its pieces checked against slow twins."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from vecsched.adapters import traces as T
from vecsched.adapters.replay import GangOverlay, Replay, ReplayConfig, Window, load, make
from vecsched.adapters.replay.bounds import (CoverBound, _min_shifted, common_bounds,
                                             replay_bounds, replay_end_s)

GIB = float(2 ** 30)


def _ray():
    pytest.importorskip("ray.autoscaler.v2.scheduler", reason="ray is not installed")


# ---- the shifted minimum against a fine grid ---------------------------------------------
def test_min_shifted_equals_a_brute_force_search():
    rng = np.random.default_rng(3)
    tau, K = 5.0, 40
    rate = rng.uniform(0, 2, size=K)
    rate[10:14] = 0.0
    grid = np.arange(K + 1) * tau
    cum = np.concatenate([[0.0], np.cumsum(rate * tau)])
    a = rng.uniform(0, 180, size=30)
    d = rng.uniform(1, 90, size=30)
    wait = rng.uniform(0, 40, size=30)
    wait[:5] = 0.0
    got = _min_shifted(cum, grid, a, d, wait, tau)

    def integral(lo, hi):                     # the rate, integrated piece by piece
        lo, hi = min(lo, grid[-1]), min(hi, grid[-1])
        return sum(rate[k] * max(0.0, min(hi, grid[k + 1]) - max(lo, grid[k]))
                   for k in range(K))
    for i in range(a.size):
        ws = np.linspace(0, wait[i], 2001)
        brute = min(integral(a[i] + w, a[i] + w + d[i]) for w in ws)
        assert got[i] <= brute + 1e-9
        assert got[i] == pytest.approx(brute, rel=2e-3, abs=1e-6)


# ---- a trace worked by hand --------------------------------------------------------------
def _hand_groups(price=1.0):
    """Two CPU groups (8 CPUs at 1.0 / h, 32 CPUs at 3.0 / h) and one T4 group (4.0 / h);
    ``price`` None: no group priced."""
    def row(name, cpu, mem, gpu, model, p):
        return {"type": name, "cpu": cpu, "memory": mem * GIB, "gpu": gpu, "gpu_model": model,
                "labels": {T.ACCELERATOR_LABEL: model} if model else {}, "min_workers": 0,
                "max_workers": 10, "price": None if price is None else p, "resources": None}
    return pa.Table.from_pylist([row("small", 8.0, 32, 0.0, None, 1.0),
                                 row("big", 32.0, 128, 0.0, None, 3.0),
                                 row("gpu", 8.0, 32, 1.0, "T4", 4.0)],
                                schema=T.WORKER_GROUP_SCHEMA)


def _hand_rows():
    """Six 4-CPU units for an hour, one 1-GPU (T4) unit for half an hour."""
    rows = [{"arrival_s": 0, "duration_s": 3600.0, "cpu": 4.0, "memory": 4 * GIB, "gpu": 0.0,
             "gpu_spec": None, "group_id": None, "qos": "LS", "name": f"c{i}",
             "resources": None, "app": None, "max_per_node": None} for i in range(6)]
    rows.append({"arrival_s": 0, "duration_s": 1800.0, "cpu": 1.0, "memory": 1 * GIB,
                 "gpu": 1.0, "gpu_spec": "T4", "group_id": None, "qos": "LS", "name": "g",
                 "resources": None, "app": None, "max_per_node": None})
    return rows


def _hand_trace():
    return load(pa.Table.from_pylist(_hand_rows(), schema=T.DEMAND_SCHEMA), _hand_groups(),
                Window(start=0, pods=None, arrival_scale=1.0))


def test_the_bound_of_a_hand_worked_trace():
    tr = _hand_trace()
    b = CoverBound(tr, 5.0, 3600.0)
    got = b.at(0.0)
    # CPU: 24 CPUs for the hour; the head holds 8 free, the 1-GPU unit's node holds 1 CPU
    # of its own work and 7 spare for the first half hour. Cheapest: 3/32 per CPU ('big').
    # first half hour: the GPU node (4.0) + (24 + 1 - 8 - 8) CPUs at 3/32; then 16 CPUs
    want = 0.5 * (4.0 + 9 * 3 / 32) + 0.5 * (16 * 3 / 32)
    assert got["cost"] == pytest.approx(want, rel=1e-9)
    assert got["gpu_hours"] == pytest.approx(0.5, rel=1e-9)
    assert b.lp_integral()["cost"] == pytest.approx(want, rel=1e-9)
    # a wait of up to 600 s may push the GPU unit's half hour and the CPU units' ends past
    # the hour: the bound falls, never rises, with the wait allowed
    later = b.at(600.0)
    assert later["cost"] < got["cost"] and later["gpu_hours"] < got["gpu_hours"]
    assert later["cost"] >= 0.0 and later["gpu_hours"] >= 0.0


def test_units_no_group_holds_are_left_out_and_no_price_no_cost_bound():
    tr = _hand_trace()
    base = CoverBound(tr, 5.0, 3600.0).at(0.0)
    # the same work plus a 64-GPU unit no group holds: the bound does not move
    big = load(pa.Table.from_pylist(_hand_rows() + [dict(_hand_rows()[0], gpu=64.0, name="huge")],
                                    schema=T.DEMAND_SCHEMA), _hand_groups(),
               Window(start=0, pods=None, arrival_scale=1.0))
    b = CoverBound(big, 5.0, 3600.0)
    assert b.left_out == 1 and b.at(0.0) == pytest.approx(base)
    unpriced = load(pa.Table.from_pylist(_hand_rows(), schema=T.DEMAND_SCHEMA),
                    _hand_groups(price=None), Window(start=0, pods=None, arrival_scale=1.0))
    got = CoverBound(unpriced, 5.0, 3600.0).at(0.0)
    assert got["cost"] is None and got["gpu_hours"] == pytest.approx(base["gpu_hours"])


def test_bad_waits_are_refused():
    b = CoverBound(_hand_trace(), 5.0, 3600.0)
    with pytest.raises(ValueError, match="max_wait_s"):
        b.at(-1.0)
    with pytest.raises(ValueError, match="max_wait_s"):
        b.at(np.nan)


def test_common_bounds_take_the_least():
    runs = [{"cost_lower_bound": 5.0, "gpu_hours_lower_bound": 2.0},
            {"cost_lower_bound": 4.0, "gpu_hours_lower_bound": 3.0},
            {"cost_lower_bound": None, "gpu_hours_lower_bound": 2.5}]
    common_bounds(runs)
    assert [r["cost_lower_bound"] for r in runs] == [4.0, 4.0, 4.0]
    assert [r["gpu_hours_lower_bound"] for r in runs] == [2.0, 2.0, 2.0]


# ---- below every scheduler's cost on short replays ---------------------------------------
SLOW = pytest.mark.slow
CASES = [          # one in the quick subset (about 2 s here), the rest slow
    pytest.param("services", Window(start=0, pods=120, arrival_scale=4.0), 0.0, 0, marks=SLOW),
    pytest.param("openb", Window(start=None, pods=120, arrival_scale=200.0), 0.0, 1),
    pytest.param("openb", Window(start=None, pods=120, arrival_scale=200.0), 0.3, 2, marks=SLOW),
    pytest.param("openb_gpuspec33", Window(start=None, pods=120, arrival_scale=100.0), 0.0, 0,
                 marks=SLOW),
    pytest.param("openb_cpu250", Window(start=None, pods=100, arrival_scale=100.0), 0.0, 3,
                 marks=SLOW),
]
SCHEDULERS = ("engine", "baseline", "efficient", "efficient-proxy", "efficient-consolidate")


@pytest.mark.parametrize("trace,window,gangs,seed", CASES)
def test_bound_below_every_schedulers_cost(trace, window, gangs, seed):
    _ray()
    tr = load(trace, None, window, GangOverlay(gangs, seed=seed))
    cfg = ReplayConfig(seed=seed)
    end = replay_end_s(tr, cfg.tick_s, cfg.tail_s)
    runs = []
    for name in SCHEDULERS:
        r = Replay(tr, make(name), cfg)
        m = r.run().metrics
        b = replay_bounds(tr, cfg, r.cluster, end)
        assert m["sim_end_s"] == end
        assert m["cost_lower_bound"] == b["cost_lower_bound"]      # summary's own keys
        assert 0 < b["cost_lower_bound"] <= m["cost"], name
        assert 0 < b["gpu_hours_lower_bound"] <= m["gpu_hours"], name
        lp = b["lower_bound"]
        # the run's waits only lower the trace's LP integral
        assert b["cost_lower_bound"] <= lp["cost_trace_lp"] * (1 + 1e-9)
        assert lp["gpu_hours_trace_lp"] <= m["gpu_hours"]
        runs.append((m, b))
    common = [dict(b) for _, b in runs]
    common_bounds(common)
    for (m, _), b in zip(runs, common):
        assert b["cost_lower_bound"] <= m["cost"] and b["gpu_hours_lower_bound"] <= m["gpu_hours"]

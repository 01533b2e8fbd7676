"""Placement groups in the replay: the seeded gang overlay, atomic placement by strategy
in the cluster stand-in, the GCS's view of placed bundles, and the engine (through
EngineScheduler) against Ray on every tick with groups pending."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from vecsched.adapters.replay import GangOverlay, Replay, ReplayConfig, Window, load, make, replay
from vecsched.adapters.replay.cluster import Cluster
from vecsched.adapters.replay.placement_groups import STRATEGIES, Gangs

SMALL = Window(start=None, pods=150, arrival_scale=200.0)
MID = Window(start=None, pods=400, arrival_scale=200.0)


def _ray():
    pytest.importorskip("ray.autoscaler.v2.scheduler", reason="ray is not installed")


def _conserved(m: dict) -> None:
    assert m["units_in"] == m["placed"] + m["still_pending"] + m["infeasible"]


# ---- the overlay ------------------------------------------------------------------------
def test_overlay_share_sizes_strategies_and_seed():
    t = load(None, None, Window(start=None, pods=2000, arrival_scale=200.0),
             GangOverlay(0.2, seed=3))
    g = t.gangs
    sizes = np.diff(g.ptr)
    share = sizes.sum() / t.n_units
    assert 0.15 < share < 0.25, share
    assert sizes.min() >= 2 and sizes.max() <= 8
    assert set(g.strategy) == set(STRATEGIES)
    assert np.all(np.diff(t.arrival_s) >= 0)
    for k in range(g.G):
        m = g.members(k)
        assert len(set(t.arrival_s[m])) == 1 and len(set(t.duration_s[m])) == 1
        assert np.all(np.diff(m) == 1)            # consecutive in arrival order
        assert (g.unit_gang[m] == k).all()
    assert (g.unit_gang >= 0).sum() == sizes.sum()
    again = load(None, None, Window(start=None, pods=2000, arrival_scale=200.0),
                 GangOverlay(0.2, seed=3)).gangs
    assert again.strategy == g.strategy and np.array_equal(again.units, g.units)
    other = load(None, None, Window(start=None, pods=2000, arrival_scale=200.0),
                 GangOverlay(0.2, seed=4)).gangs
    assert not np.array_equal(other.units, g.units)


def test_overlay_keeps_demand_and_the_window_without_it():
    plain = load(None, None, MID)
    over = load(None, None, MID, GangOverlay(0.3, seed=1))
    assert plain.gangs.G == 0 and over.gangs.G > 0
    # the same bundles are asked for; arrivals only move earlier, durations only grow
    assert Counter(plain.unit_shape.tolist()) == Counter(over.unit_shape.tolist())
    assert over.arrival_s.sum() <= plain.arrival_s.sum()
    assert over.duration_s.sum() >= plain.duration_s.sum()
    assert "gang overlay 0.3" in over.scaling


def test_strict_pack_groups_fit_a_worker_group():
    t = load(None, None, Window(start=None, pods=2000, arrival_scale=200.0),
             GangOverlay(1.0, seed=0))
    g = t.gangs
    assert g.demoted > 0                          # 8 multi-GPU pods do not fit one node
    caps = [dict(ty.resources) for ty in t.types]
    for k in range(g.G):
        if g.strategy[k] != "STRICT_PACK":
            continue
        total: Counter = Counter()
        for u in g.members(k):
            total.update(t.shapes[t.unit_shape[u]])
        assert any(all(v <= c.get(r, 0.0) for r, v in total.items()) for c in caps)


@pytest.mark.parametrize("kw, field", [({"share": 1.5}, "gangs.share"),
                                       ({"share": float("nan")}, "gangs.share"),
                                       ({"share": 0.2, "min_size": 1}, "gangs.min_size"),
                                       ({"share": 0.2, "seed": -1}, "gangs.seed")])
def test_bad_overlay_names_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        GangOverlay(**kw)


# ---- the cluster stand-in ---------------------------------------------------------------
def _cluster(strategy, bundles, n_nodes, node=None):
    """A cluster of n_nodes identical nodes and one group of the given bundles."""
    node = node or {"CPU": 4.0}
    cols = sorted({k for b in bundles for k in b} | set(node))
    shapes = [dict(b) for b in bundles]
    U = len(bundles)
    gangs = Gangs(np.array([0, U]), np.arange(U), (strategy,), ("ab" * 18,),
                  np.zeros(U, np.int32), ("overlay",))
    c = Cluster(cols, shapes, np.zeros(U), np.full(U, 100.0), np.arange(U, dtype=np.int32),
                gangs)
    for i in range(n_nodes):
        c.add_node(f"n{i}", "t", dict(node), 0.0)
    for u in range(U):
        c.arrive(u)
    return c


def test_groups_are_placed_entire_by_strategy():
    one = [{"CPU": 1.0}] * 3
    c = _cluster("STRICT_SPREAD", one, 2)
    assert c.place(0.0) == 0 and c.n_pending == 3          # two nodes, three bundles
    c = _cluster("STRICT_SPREAD", one, 3)
    assert c.place(0.0) == 3 and sorted(c.node_of.tolist()) == [0, 1, 2]
    c = _cluster("STRICT_PACK", [{"CPU": 3.0}] * 2, 3)
    assert c.place(0.0) == 0                                # 6 CPUs on one 4-CPU node
    c = _cluster("STRICT_PACK", [{"CPU": 2.0}] * 2, 3)
    assert c.place(0.0) == 2 and set(c.node_of.tolist()) == {0}
    c = _cluster("PACK", [{"CPU": 3.0}] * 2, 3)
    assert c.place(0.0) == 2 and c.node_of.tolist() == [0, 1]
    c = _cluster("SPREAD", one, 2)
    assert c.place(0.0) == 3 and c.node_of.tolist() == [0, 1, 0]


def test_losing_a_bundle_requeues_the_whole_group():
    c = _cluster("STRICT_SPREAD", [{"CPU": 1.0}] * 3, 3)
    c.place(0.0)
    c.remove_node(c.slot_of["n1"], 10.0)
    assert c.n_pending == 3 and c.n_running == 0 and c.requeued == 3
    assert (c.used == 0).all()
    assert c.pending_gangs() == [0] and (c.pending_since == 10.0).all()
    assert c.place(10.0) == 0                               # two nodes left
    c.add_node("n3", "t", {"CPU": 4.0}, 10.0)
    assert c.place(11.0) == 3


def test_placed_bundles_are_reported_as_rays_gcs_does():
    """The maps a live Ray 2.60 GCS reported for a PACK group of bundles
    {CPU: 1, custom: 0.5} and {CPU: 2} on a 4-CPU node, each bundle running a task that
    holds all of it (ray.init, get_cluster_resource_state)."""
    node = {"CPU": 4.0, "custom": 2.0}
    c = _cluster("PACK", [{"CPU": 1.0, "custom": 0.5}, {"CPU": 2.0}], 1, node)
    assert c.place(0.0) == 2
    total, avail, idle = c.view(0, 5.0)
    labels = c.labels(0)
    pg = "ab" * 18
    assert total == {"CPU": 4.0, "custom": 2.0,
                     f"CPU_group_0_{pg}": 1.0, f"CPU_group_1_{pg}": 2.0, f"CPU_group_{pg}": 3.0,
                     f"custom_group_0_{pg}": 0.5, f"custom_group_{pg}": 0.5,
                     f"bundle_group_0_{pg}": 1000.0, f"bundle_group_1_{pg}": 1000.0,
                     f"bundle_group_{pg}": 2000.0}
    assert avail == {"CPU": 1.0, "custom": 1.5, f"bundle_group_0_{pg}": 999.999,
                     f"bundle_group_1_{pg}": 999.999, f"bundle_group_{pg}": 1999.998}
    assert labels == {f"_PG_{pg}": ""} and idle == 0


# ---- replays with groups -----------------------------------------------------------------
@pytest.mark.slow
def test_check_ray_with_placement_groups_every_tick():
    """Placement groups in the replay, the acceptance check: engine (through
    EngineScheduler) and Ray decide every tick alike, groups pending on many of them."""
    _ray()
    r = replay(None, "engine", window=MID, gangs=GangOverlay(0.3, seed=2), check_ray=True)
    _conserved(r.metrics)
    assert r.check["ticks"] == r.metrics["ticks"]
    assert r.check["ticks_with_placement_groups"] > 30
    assert r.check["differing"] == 0, r.check["examples"]
    assert r.metrics["placement_groups"] > 10 and r.metrics["infeasible"] == 0


@pytest.mark.slow
def test_check_ray_sees_a_wrong_gang_decision():
    _ray()
    trace = load(None, None, SMALL, GangOverlay(0.3, seed=2))
    sched = make("engine", check_ray=True)
    real = sched.decide

    def drops_groups(state):                     # reports a pending group infeasible
        d = real(state)
        if state.gangs:
            d.infeasible_gangs[state.gangs[0].name] += 1
        return d
    sched.decide = drops_groups
    r = Replay(trace, sched).run()
    assert 0 < r.check["differing"] <= r.check["ticks_with_placement_groups"]
    assert "infeasible groups" in r.check["examples"][0]


def test_one_engine_scheduler_serves_every_tick():
    _ray()
    trace = load(None, None, SMALL, GangOverlay(0.2, seed=1))
    sched = make("engine")
    rep = Replay(trace, sched)
    first = sched.sched
    r = rep.run()
    assert sched.sched is first and first.stats["engine_ticks"] == r.metrics["ticks"]


@pytest.mark.slow
def test_pending_idle_tracking_runs_on_the_simulated_clock():
    """Ray's pending-node idle tracking reads time.monotonic(); both schedulers read the
    simulated clock, so with the tracking on they still agree on every tick (Ray on the
    wall clock disagrees on several), and the tracking changes the replay."""
    _ray()
    cfg = dict(latency_jitter=0.5)
    on = replay(None, "engine", window=SMALL, check_ray=True, record_decisions=True,
                config=ReplayConfig(pending_idle_timeout_s=20.0, **cfg))
    off = replay(None, "engine", window=SMALL, record_decisions=True,
                 config=ReplayConfig(**cfg))
    assert on.check["differing"] == 0, on.check["examples"]
    assert on.decisions != off.decisions


def test_gangs_with_preemptions_and_failures_conserve_demand():
    cfg = ReplayConfig(preemption_rate_per_h=6.0, launch_failure_rate=0.2, seed=3)
    for name in ("baseline",) + (("engine",) if _have_ray() else ()):
        r = replay(None, name, window=SMALL, gangs=GangOverlay(0.4, seed=5), config=cfg)
        _conserved(r.metrics)
        assert r.metrics["requeued"] > 0 and r.metrics["placement_groups"] > 5


def _have_ray() -> bool:
    try:
        import ray.autoscaler.v2.scheduler  # noqa: F401
    except ImportError:
        return False
    return True

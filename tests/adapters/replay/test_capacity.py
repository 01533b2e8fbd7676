"""The replay's capacity side on its own: parsing the flags, the per-group simulated
cloud, the cloud's answers as Ray's records, peak asked and limit accounting."""
from __future__ import annotations

import pytest

from vecsched.adapters.replay.capacity import (GroupCloud, apply_schedules, limits_of,
                                               parse_capacity, parse_limit, sim_types)
from vecsched.adapters.replay.cloud_answers import CapacityMetrics, CloudFeed
from vecsched.adapters.sim.lifecycle import SimNodeType, SimProvider
from vecsched.engine.model.build.builder import NodeTypeSpec
from vecsched.engine.model.dtypes import Status as S

from vecsched.adapters.sim.lifecycle import run

from tests.kits.lifecycle_kit import make_store


def test_capacity_and_limit_flags():
    assert parse_capacity("g8=10") == ("g8", GroupCloud(capacity=10))
    g, spec = parse_capacity("g8=0:10,600:2,1800:none")
    assert g == "g8" and spec.schedule == ((0.0, 10), (600.0, 2), (1800.0, None))
    assert [spec.capacity_at(t) for t in (0, 599, 600, 5000)] == [10, 10, 2, None]
    assert parse_limit("GPU=128") == (None, "GPU", 128.0)
    assert parse_limit("g8/GPU=16") == ("g8", "GPU", 16.0)
    assert parse_limit("cost_per_hour=400") == (None, "cost_per_hour", 400.0)
    for bad in ("g8", "=3", "g8=-1", "g8=x", "g8=10:3:2"):
        with pytest.raises(ValueError, match="--capacity"):
            parse_capacity(bad)
    for bad in ("GPU", "GPU=-2", "GPU=nan", "=4", "g8/=4", "/GPU=4", "GPU=1e400"):
        with pytest.raises(ValueError, match="--limit"):
            parse_limit(bad)
    lim = limits_of([parse_limit("GPU=8"), parse_limit("g4/CPU=32"),
                     parse_limit("cost_per_hour=9")], {"g4": 4.4, "g8": None})
    assert lim.total == {"GPU": 8.0, "cost_per_hour": 9.0}
    assert lim.per_group == {"g4": {"CPU": 32.0}} and lim.prices == {"g4": 4.4, "head": 0.0}
    assert limits_of([], {}) is None


def test_group_cloud_values_are_checked():
    for bad, where in ((dict(capacity=-1), "capacity"), (dict(capacity=2.5), "capacity"),
                       (dict(launch_failure_rate=1.5), "launch_failure_rate"),
                       (dict(launch_failure_rate=float("nan")), "launch_failure_rate"),
                       (dict(interruption_rate_per_h=-0.1), "interruption_rate_per_h"),
                       (dict(interruption_rate_per_h=float("inf")), "interruption_rate_per_h"),
                       (dict(schedule=((600.0, 1), (0.0, 2))), "times"),
                       (dict(schedule=((float("nan"), 1),)), "times"),
                       (dict(schedule=((0.0, -3),)), "each capacity"),
                       (dict(schedule=((0.0, 2.5),)), "each capacity")):
        with pytest.raises(ValueError, match=where):
            GroupCloud(**bad)


@pytest.mark.parametrize("kw, where", [
    (dict(limits=5), "limits must be a table"), (dict(limits=["GPU=4"]), "limits must be a table"),
    (dict(capacity=5), "capacity must be a table"), (dict(capacity="g=3"), "capacity must be a table")])
def test_replay_config_tables_are_checked(kw, where):
    """A sweep's [sweep] limits = 5 reached ReplayConfig as an int: AttributeError."""
    from vecsched.adapters.replay.config import ReplayConfig
    with pytest.raises(ValueError, match=where):
        ReplayConfig(**kw)


def _world(groups):
    store, clock = make_store(upscaling_speed=1000, max_concurrent_launches=100)
    default = SimNodeType(alloc_latency_s=10, install_latency_s=10)
    prov = SimProvider(store, sim_types(groups, default, ["a", "b"]), 0, default=default)
    return store, clock, prov


def test_stockouts_reach_the_feed_once_with_rays_words():
    store, clock, prov = _world({"a": GroupCloud(capacity=2)})
    feed = CloudFeed()
    store.apply_plan({"a": 5})
    store.launch_queued()
    run(store, prov, clock, 100)
    first = feed.scan(store)
    assert len(first) == 3 and prov.stats["stockouts"] == 3
    im = first[0].im_instance
    assert im.status == S.ALLOCATION_FAILED
    assert "InsufficientInstanceCapacity" in im.status_history[-1].details
    again = feed.scan(store)                           # the tick was lost: sent again
    assert [a.im_instance.instance_id for a in again] == [a.im_instance.instance_id
                                                          for a in first]
    feed.ack()                                         # a tick decided: each answer once
    assert feed.scan(store) == []
    from vecsched.adapters.ray.availability import CloudAnswers
    events = CloudAnswers().scan(first, 100.0)
    assert {(e[0], e[1], e[3]) for e in events} == {("refused", "a", True)}


def test_a_lost_tick_loses_none_of_the_clouds_answers():
    """The replay sends each answer once; a tick whose scheduler raised is lost (as in
    Ray), and EngineScheduler keeps no answer of a failed tick: the feed sends them
    again until a tick is decided, so the memory still reads every stock-out (without:
    one of the cloud's 8 was never read)."""
    pytest.importorskip("ray.autoscaler.v2.scheduler", reason="ray is not installed")
    from vecsched.adapters.replay import GangOverlay, Replay, ReplayConfig, Window, load, make
    tr = load("openb", None, Window(start=None, pods=120, arrival_scale=200.0),
              GangOverlay(0.0, seed=0))
    cfg = ReplayConfig(seed=0, capacity={"g3-128c-768g-8gpu": 1, "g2-96c-384g-8gpu": 1,
                                         "v100m32-96c-768g-8gpu": 1})
    sched = make("efficient")
    decide, lost = sched.run, []

    def run(request):
        if not lost and any(ai.im_instance.status == S.ALLOCATION_FAILED
                            for ai in request.current_instances if ai.im_instance):
            lost.append(request)
            raise RuntimeError("a lost tick")
        return decide(request)
    sched.run = run
    m = Replay(tr, sched, cfg).run().metrics
    assert lost and m["stockouts"] > 0
    assert sched.sched.memory.counts["stockouts"] == m["stockouts"]


def test_capacity_schedule_changes_what_the_cloud_gives():
    groups = {"a": GroupCloud(schedule=((0.0, 0), (300.0, None)))}
    store, clock, prov = _world(groups)
    apply_schedules(prov.cloud, groups, 0.0)
    store.apply_plan({"a": 1})
    store.launch_queued()
    run(store, prov, clock, 50)
    assert prov.stats["stockouts"] == 1
    apply_schedules(prov.cloud, groups, 300.0)
    store.apply_plan({"a": 1})
    store.launch_queued()
    run(store, prov, clock, 100)
    assert prov.stats["stockouts"] == 1 and store.count(S.RAY_RUNNING) == 1


def test_peak_asked_counts_queued_to_running_and_cost():
    types = [NodeTypeSpec("a", {"CPU": 8.0, "GPU": 2.0}), NodeTypeSpec("b", {"CPU": 4.0})]
    store, clock, prov = _world({})
    m = CapacityMetrics(types, {"a": 3.0, "b": None}, limits_of([parse_limit("GPU=4")], {}))
    store.apply_plan({"a": 3, "b": 1})
    m.tick(store)
    assert m.peak == {"CPU": 28.0, "GPU": 6.0, "cost_per_hour": 9.0}
    assert m.violations() == {"GPU": (4.0, 6.0)}
    out = m.summary({"stockouts": 2, "launch_failures": 1, "preemptions": 3})
    assert (out["stockouts"], out["launch_failures"], out["interruptions"]) == (2, 1, 3)
    assert out["peak_asked"]["GPU"] == 6.0 and out["limit_violations"] == {"GPU": [4.0, 6.0]}


def test_feed_derives_rays_availability_maps_from_timeouts():
    feed = CloudFeed(recovery_s=600.0)
    feed.monitor.timeout("a", 100.0)
    feed.monitor.timeout("b", 200.0)
    types = [NodeTypeSpec("a", {"CPU": 1.0}), NodeTypeSpec("b", {"CPU": 1.0}),
             NodeTypeSpec("c", {"CPU": 1.0})]
    got = {t.name: (t.availability, t.recoverable) for t in feed.availability_types(types, 205.0)}
    assert got == {"a": (0.5, 105 / 600), "b": (0.0, 0.0), "c": (1.0, 1.0)}


def test_group_clouds_from_the_worker_group_table():
    import pyarrow as pa
    from vecsched.adapters.replay.capacity import group_clouds
    from vecsched.adapters.traces.schema import validate_worker_groups
    from tests.kits.group_tables import cloud_groups as _groups
    t = validate_worker_groups(_groups(capacity=pa.array([None, 3], pa.int64()),
                                       spot=pa.array([None, True]),
                                       interruption_rate_per_h=pa.array([None, 0.2])))
    assert group_clouds(t) == {"b": GroupCloud(capacity=3, spot=True,
                                               interruption_rate_per_h=0.2)}


def test_spot_twins_and_capped_groups_of_the_openb_table():
    from vecsched.adapters.replay.capacity import group_clouds, spot_twins, with_cloud
    from vecsched.adapters.traces import bundled, read_worker_groups
    base = read_worker_groups(bundled("openb_nodes"))
    t = spot_twins(base, 0.4, 0.2)
    names = t.column("type").to_pylist()
    priced = [r["type"] for r in base.to_pylist() if r["price"] is not None]
    assert names == base.column("type").to_pylist() + [n + "-spot" for n in priced]
    rows = {r["type"]: r for r in t.to_pylist()}
    g = "g2-96c-384g-8gpu"
    assert rows[g + "-spot"]["price"] == pytest.approx(0.4 * rows[g]["price"])
    assert rows[g + "-spot"]["labels"] == rows[g]["labels"] and rows[g]["spot"] is None
    capped = with_cloud(t, "capacity", {g: 10})
    clouds = group_clouds(capped)
    assert clouds[g] == GroupCloud(capacity=10)
    assert clouds[g + "-spot"] == GroupCloud(spot=True, interruption_rate_per_h=0.2)
    with pytest.raises(ValueError, match="no worker group named nope"):
        with_cloud(t, "capacity", {"nope": 1})

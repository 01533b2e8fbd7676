"""Lifecycle: the status table (against Ray's), the store's reconcile steps, the launch
rate limits, the timeouts, and the simulated provider."""
import copy
import math
import time

import numpy as np
import pytest

from vecsched.adapters.sim.lifecycle import (CREATABLE, TERMINAL, TRANSITIONS, IllegalTransition,
                                InstanceRecord, InstanceStore, InvalidMove, LaunchStep, Move,
                                ReconcileConfig, SimClock, SimCloud, SimNodeType, SimProvider,
                                can_transition, compute_to_launch, reachable, run,
                                sequential_ids, timeout_target, upscaling_speed_for_mode)
from vecsched.engine.model.dtypes import Cause, Status as S

from tests.kits.lifecycle_kit import make_store

SEC = 1_000_000_000


def _ray():
    """Ray's status machine and reconciler, or a clean skip."""
    common = pytest.importorskip("ray.autoscaler.v2.instance_manager.common",
                                 reason="ray is not installed (pip install vecsched[ray])")
    pb = pytest.importorskip("ray.core.generated.instance_manager_pb2",
                             reason="ray is not installed")
    rec = pytest.importorskip("ray.autoscaler.v2.instance_manager.reconciler",
                              reason="ray is not installed")
    return common.InstanceUtil, pb.Instance, rec.Reconciler


# A legal path from creation (QUEUED) to every status.
_RUN = [S.REQUESTED, S.ALLOCATED, S.RAY_INSTALLING, S.RAY_RUNNING]
PATHS = {
    S.QUEUED: [],
    S.REQUESTED: [S.REQUESTED],
    S.ALLOCATED: [S.REQUESTED, S.ALLOCATED],
    S.RAY_INSTALLING: [S.REQUESTED, S.ALLOCATED, S.RAY_INSTALLING],
    S.RAY_RUNNING: _RUN,
    S.RAY_STOP_REQUESTED: _RUN + [S.RAY_STOP_REQUESTED],
    S.RAY_STOPPING: _RUN + [S.RAY_STOPPING],
    S.RAY_STOPPED: _RUN + [S.RAY_STOPPED],
    S.TERMINATING: [S.REQUESTED, S.ALLOCATED, S.TERMINATING],
    S.TERMINATION_FAILED: [S.REQUESTED, S.ALLOCATED, S.TERMINATING, S.TERMINATION_FAILED],
    S.TERMINATED: [S.TERMINATED],
    S.ALLOCATION_FAILED: [S.REQUESTED, S.ALLOCATION_FAILED],
    S.ALLOCATION_TIMEOUT: [S.REQUESTED, S.ALLOCATED, S.ALLOCATION_TIMEOUT],
    S.RAY_INSTALL_FAILED: [S.REQUESTED, S.ALLOCATED, S.RAY_INSTALLING, S.RAY_INSTALL_FAILED],
}


def bring(store, iid, status, itype="a", cloud=None):
    """Create record `iid` and walk it to `status` along legal moves, at the clock's now."""
    store.apply([Move(iid, S.QUEUED, instance_type=itype, create=True)])
    for s in PATHS[status]:
        store.move(iid, s, launch_request_id="req-x" if s == S.REQUESTED else None,
                   cloud_instance_id=(cloud or f"c-{iid}") if s == S.ALLOCATED else None,
                   node_id=f"n-{iid}" if s == S.RAY_RUNNING else None)
    return store[iid]


def snapshot(store):
    return store.version, copy.deepcopy([vars(r) for r in store])


# ---- the status table ------------------------------------------------------------------
def test_table_equals_rays():
    util, instance, _ = _ray()
    ray_table = util.get_valid_transitions()
    assert set(ray_table) == set(TRANSITIONS) == set(instance.InstanceStatus.values())
    for status, nxt in ray_table.items():
        assert TRANSITIONS[status] == set(nxt), S.NAMES[status]


def test_codes_and_reachability_equal_rays():
    util, instance, _ = _ray()
    for value in instance.InstanceStatus.values():
        assert S.NAMES[value] == instance.InstanceStatus.Name(value)
        assert reachable(value) == set(util.get_reachable_statuses(value))


def test_table_shape():
    assert TERMINAL == {S.TERMINATED, S.ALLOCATION_FAILED, S.UNKNOWN}
    assert CREATABLE == {S.QUEUED, S.ALLOCATED, S.TERMINATING}
    assert can_transition(S.QUEUED, S.REQUESTED)
    assert not can_transition(S.QUEUED, S.ALLOCATED)
    assert not can_transition(S.RAY_RUNNING, S.RAY_RUNNING)      # no self loops
    assert not can_transition(S.TERMINATED, S.QUEUED)
    # "Schedulable" statuses are exactly those from which RAY_RUNNING is reachable.
    assert {s for s in TRANSITIONS if S.RAY_RUNNING in reachable(s)} == set(S.SCHEDULABLE)


def test_illegal_transition_names_instance_and_statuses():
    err = IllegalTransition("i-7", S.REQUESTED, S.RAY_STOP_REQUESTED)
    assert (err.instance_id, err.from_status, err.to_status) == \
        ("i-7", S.REQUESTED, S.RAY_STOP_REQUESTED)
    assert "i-7" in str(err) and "REQUESTED -> RAY_STOP_REQUESTED" in str(err)
    assert "(new) -> RAY_RUNNING" in str(IllegalTransition("i-8", None, S.RAY_RUNNING))


# ---- the store and apply_plan ----------------------------------------------------------
def test_launches_become_queued_records_with_factory_ids():
    store, clock = make_store()
    clock.advance(3)
    moves = store.apply_plan({"cpu": 2, "gpu": 1})
    assert [m.instance_id for m in moves] == ["i-000000", "i-000001", "i-000002"]
    assert [(r.instance_id, r.instance_type, r.status) for r in store] == [
        ("i-000000", "cpu", S.QUEUED), ("i-000001", "cpu", S.QUEUED),
        ("i-000002", "gpu", S.QUEUED)]
    assert store["i-000002"].status_history == [(S.QUEUED, 3 * SEC)]
    assert store.apply_plan([("cpu", 0)]) == [] and store.version == 1


@pytest.mark.parametrize("status, expected", [
    (S.QUEUED, S.TERMINATED),                # cancelled before launch
    (S.ALLOCATED, S.TERMINATING),            # no ray yet: terminate directly
    (S.RAY_INSTALLING, S.TERMINATING),
    (S.RAY_RUNNING, S.RAY_STOP_REQUESTED),   # drain first
])
def test_termination_moves(status, expected):
    store, clock = make_store()
    bring(store, "x", status)
    clock.advance(1)
    store.apply_plan({}, [("x", Cause.IDLE)])
    rec = store["x"]
    assert rec.status == expected and rec.termination_cause == Cause.IDLE
    assert rec.status_history[-1] == (expected, 1 * SEC)


@pytest.mark.parametrize("status", [S.REQUESTED, S.RAY_STOP_REQUESTED, S.RAY_STOPPING,
                                    S.TERMINATED, S.ALLOCATION_FAILED])
def test_terminating_a_non_terminable_status_is_illegal(status):
    store, _ = make_store()
    bring(store, "x", status)
    with pytest.raises(IllegalTransition) as e:
        store.apply_plan({}, [("x", Cause.MAX_NUM_NODES)])
    assert e.value.instance_id == "x" and e.value.from_status == status


def test_plan_is_atomic():
    store, clock = make_store()
    bring(store, "q", S.QUEUED)
    bring(store, "run", S.RAY_RUNNING)
    bring(store, "req", S.REQUESTED)
    clock.advance(5)
    before = snapshot(store)
    with pytest.raises(IllegalTransition) as e:
        # Two legal terminations and three launches around one illegal move.
        store.apply_plan({"a": 3}, [("q", Cause.IDLE), ("req", Cause.IDLE),
                                    ("run", Cause.IDLE)])
    assert (e.value.instance_id, e.value.from_status, e.value.to_status) == \
        ("req", S.REQUESTED, S.RAY_STOP_REQUESTED)
    assert snapshot(store) == before
    # Other rejected batches leave it untouched as well.
    for bad in ([Move("q", S.TERMINATED), Move("q", S.REQUESTED, launch_request_id="r")],
                [Move("q", S.TERMINATED), Move("nope", S.TERMINATED)],
                [Move("q", S.REQUESTED)],                        # no launch request id
                [Move("new", S.RAY_RUNNING, instance_type="a", node_id="n", create=True)],
                [Move("q", S.QUEUED, instance_type="a", create=True)],
                [Move("q", S.TERMINATED, cause=99)]):
        with pytest.raises((IllegalTransition, InvalidMove)):
            store.apply(bad)
        assert snapshot(store) == before
    with pytest.raises(InvalidMove):
        store.apply_plan({"a": 1}, [("ghost", Cause.IDLE)])
    assert snapshot(store) == before


def test_creation_statuses_follow_rays_upsert_rule():
    store, _ = make_store()
    store.apply([Move("head", S.ALLOCATED, instance_type="h", cloud_instance_id="c0",
                      create=True),
                 Move("leak", S.TERMINATING, instance_type="a", cloud_instance_id="c1",
                      create=True)])
    with pytest.raises(IllegalTransition) as e:
        store.apply([Move("x", S.REQUESTED, instance_type="a", launch_request_id="r",
                          create=True)])
    assert e.value.from_status is None
    with pytest.raises(InvalidMove):             # ALLOCATED needs a cloud instance id
        store.apply([Move("y", S.ALLOCATED, instance_type="a", create=True)])


# ---- launch rate limiting (§10.2) ------------------------------------------------------
def promoted(moves):
    return [m.instance_id for m in moves]


def test_budget_minus_requested():
    store, _ = make_store(upscaling_speed=1000)
    for i in range(3):
        bring(store, f"r{i}", S.REQUESTED)
    store.apply_plan({"a": 20})
    assert len(store.launch_queued()) == 7
    assert store.count(S.REQUESTED) == 10
    assert store.launch_queued() == []          # the budget is used up


def test_speed_zero_launches_one_per_type_per_tick():
    store, _ = make_store()                      # upscaling_speed 0.0, Ray v2's default
    for i in range(4):
        bring(store, f"run{i}", S.RAY_RUNNING)   # running nodes do not matter at speed 0
    store.apply_plan({"a": 5, "b": 5, "c": 5})
    moves = store.launch_queued()
    assert [store[i].instance_type for i in promoted(moves)] == ["a", "b", "c"]
    assert len(store.launch_queued()) == 3


@pytest.mark.parametrize("speed, running, expected", [
    (1000, 5, 10), (1, 5, 5), (0.5, 5, 3), (1, 0, 1), (0.1, 5, 1), (2, 3, 6)])
def test_speed_scales_with_running_nodes(speed, running, expected):
    store, _ = make_store(upscaling_speed=speed)
    for i in range(running):
        bring(store, f"run{i}", S.RAY_RUNNING)
        bring(store, f"other{i}", S.RAY_RUNNING, itype="b")   # another type's nodes
    store.apply_plan({"a": 30})
    assert len(store.launch_queued()) == expected


def test_oldest_queued_first_and_retries_keep_request_id():
    store, clock = make_store(max_concurrent_launches=1)
    store.apply_plan({"a": 1})                               # i-000000 queued at 0
    first = store.launch_queued()
    assert first[0].launch_request_id == "req-000000"
    clock.advance(100)
    store.apply_plan({"a": 2})                               # i-000001, i-000002 at 100
    clock.advance(601)
    assert [m.to_status for m in store.handle_timeouts()] == [S.QUEUED]
    # The retried record was queued first (t=0), so it goes ahead of the newer two,
    # and keeps its launch request id.
    moves = store.launch_queued()
    assert [(m.instance_id, m.launch_request_id) for m in moves] == \
        [("i-000000", "req-000000")]
    store.move("i-000000", S.ALLOCATION_FAILED)
    moves = store.launch_queued()
    assert [(m.instance_id, m.launch_request_id) for m in moves] == \
        [("i-000001", "req-000001")]


def test_types_in_first_appearance_order_and_one_request_id_per_tick():
    store, _ = make_store(upscaling_speed=1000, max_concurrent_launches=4)
    store.apply_plan([("b", 2), ("a", 5)])
    moves = store.launch_queued()
    assert [store[i].instance_type for i in promoted(moves)] == ["b", "b", "a", "a"]
    assert {m.launch_request_id for m in moves} == {"req-000000"}
    store2, _ = make_store(upscaling_speed=1000, max_concurrent_launches=4)
    store2.apply_plan([("a", 5), ("b", 2)])
    assert [store2[i].instance_type for i in promoted(store2.launch_queued())] == ["a"] * 4


def test_rate_limits_equal_rays_compute_to_launch():
    _, instance, reconciler = _ray()
    rng = np.random.default_rng(7)
    statuses = [S.QUEUED, S.QUEUED, S.REQUESTED, S.RAY_RUNNING, S.ALLOCATED]
    for case in range(300):
        mine, theirs = [], []
        for i in range(int(rng.integers(0, 25))):
            status = statuses[rng.integers(len(statuses))]
            itype = "abc"[rng.integers(3)]
            history = [(S.QUEUED, int(rng.integers(0, 5)) * SEC)]  # many ties
            if status == S.QUEUED and rng.random() < 0.3:        # a retried record
                history += [(S.REQUESTED, 6 * SEC), (S.QUEUED, int(rng.integers(7, 9)) * SEC)]
            mine.append(InstanceRecord(f"i{i}", itype, status, history))
            pb = instance(instance_id=f"i{i}", instance_type=itype, status=status)
            for s, ts in history:
                pb.status_history.append(instance.StatusHistory(instance_status=s,
                                                                timestamp_ns=ts))
            theirs.append(pb)
        speed = [0.0, 0.5, 1.0, 2.5, 1000.0][case % 5]
        budget = [0, 1, 3, 10][case % 4]
        queued = {}
        for r in mine:
            if r.status == S.QUEUED:
                queued.setdefault(r.instance_type, []).append(r)
        running = {}
        for r in mine:
            if r.status == S.RAY_RUNNING:
                running[r.instance_type] = running.get(r.instance_type, 0) + 1
        got = compute_to_launch(queued, sum(r.status == S.REQUESTED for r in mine),
                                running, speed, budget)
        want = reconciler._compute_to_launch(
            [p for p in theirs if p.status == S.QUEUED],
            [p for p in theirs if p.status == S.REQUESTED],
            [p for p in theirs if p.status == S.RAY_RUNNING], speed, budget)
        assert {t: [r.instance_id for r in v] for t, v in got.items()} == \
            {t: [p.instance_id for p in v] for t, v in want.items()}


def test_launch_step_names_the_binding_limit():
    """What step 5 reports (LaunchStep): QUEUED records seen, promoted, and the ones left
    QUEUED by each limit; the left-over count is what the store still holds QUEUED."""
    store, _ = make_store(upscaling_speed=1000, max_concurrent_launches=4)
    store.apply_plan({"a": 3, "b": 3})
    tick = store.reconcile()
    step = tick.launch_step
    assert (step.queued, step.promoted) == (6, 4)
    assert (step.held_by_concurrency, step.held_by_speed) == (2, 0)   # b's last two
    assert store.count(S.QUEUED) == step.held == 2
    store2, _ = make_store(upscaling_speed=0.0, max_concurrent_launches=10)
    store2.apply_plan({"a": 3, "b": 2})          # speed 0: one launch per type and tick
    step2 = store2.reconcile().launch_step
    assert (step2.promoted, step2.held_by_concurrency, step2.held_by_speed) == (2, 0, 3)
    assert store2.count(S.QUEUED) == step2.held
    store3, _ = make_store(upscaling_speed=1.0, max_concurrent_launches=3)
    for i in range(4):
        bring(store3, f"run{i}", S.RAY_RUNNING)   # speed 1 x 4 running a: 4 allowed
    store3.apply_plan({"a": 6})
    step3 = store3.reconcile().launch_step       # the budget (3) binds before the speed
    assert (step3.promoted, step3.held_by_concurrency, step3.held_by_speed) == (3, 3, 0)
    assert store3.reconcile().launch_step == LaunchStep(3, 0, 3, 0)   # 3 in flight now
    empty, _ = make_store()
    assert empty.reconcile().launch_step == LaunchStep()


def test_held_counts_equal_rays_arithmetic():
    """compute_to_launch's ``held`` classification against Ray's own promotions: a type's
    left-overs are its QUEUED count minus what Ray's _compute_to_launch promotes."""
    _, instance, reconciler = _ray()
    rng = np.random.default_rng(3)
    for case in range(200):
        mine, theirs = [], []
        for i in range(int(rng.integers(1, 30))):
            status = [S.QUEUED, S.QUEUED, S.REQUESTED, S.RAY_RUNNING][rng.integers(4)]
            itype = "abc"[rng.integers(3)]
            mine.append(InstanceRecord(f"i{i}", itype, status, [(S.QUEUED, 0)]))
            pb = instance(instance_id=f"i{i}", instance_type=itype, status=status)
            pb.status_history.append(instance.StatusHistory(instance_status=S.QUEUED,
                                                            timestamp_ns=0))
            theirs.append(pb)
        speed, budget = [0.0, 0.5, 2.0, 1000.0][case % 4], [1, 4, 10][case % 3]
        queued, running = {}, {}
        for r in mine:
            if r.status == S.QUEUED:
                queued.setdefault(r.instance_type, []).append(r)
            elif r.status == S.RAY_RUNNING:
                running[r.instance_type] = running.get(r.instance_type, 0) + 1
        held: dict = {}
        compute_to_launch(queued, sum(r.status == S.REQUESTED for r in mine), running,
                          speed, budget, held)
        want = reconciler._compute_to_launch(
            [p for p in theirs if p.status == S.QUEUED],
            [p for p in theirs if p.status == S.REQUESTED],
            [p for p in theirs if p.status == S.RAY_RUNNING], speed, budget)
        left = {t: len(v) - len(want.get(t, [])) for t, v in queued.items()}
        assert {t: n for t, (n, _) in held.items()} == {t: n for t, n in left.items() if n}


def test_sim_cloud_counts_outcomes_by_type():
    cloud = SimCloud({"a": SimNodeType(capacity=1), "b": SimNodeType(launch_failure_rate=1.0)},
                     seed=0)
    assert cloud.launch("a")[0] == "accepted"
    assert cloud.launch("a")[0] == "stockout"     # the one slot is in flight
    assert cloud.launch("b")[0] == "failed"
    cloud.allocate("a", 0, owner="x")
    by = cloud.by_type()
    assert by["a"] == {"accepted": 1, "failed": 0, "stockout": 1, "lost": 0, "allocated": 1,
                       "orphaned": 0, "in_flight": 0}
    assert by["b"]["failed"] == 1 and by["b"]["allocated"] == 0
    assert sum(o["accepted"] + o["failed"] + o["stockout"] + o["lost"]
               for o in by.values()) == cloud.stats["launches"]


def test_upscaling_speed_for_mode():
    assert upscaling_speed_for_mode("Conservative") == 1
    assert upscaling_speed_for_mode("Default") == 1000
    assert upscaling_speed_for_mode("Aggressive") == 1000
    assert upscaling_speed_for_mode(None) == 1000
    with pytest.raises(ValueError, match="upscalingMode"):
        upscaling_speed_for_mode("Turbo")


def test_config_defaults_and_env():
    c = ReconcileConfig()
    assert (c.max_concurrent_launches, c.upscaling_speed) == (10, 0.0)
    env = {"AUTOSCALER_MAX_CONCURRENT_LAUNCHES": "4",
           "RAY_AUTOSCALER_RECONCILE_REQUEST_STATUS_TIMEOUT_S": "60"}
    c2 = ReconcileConfig.from_env(env, upscaling_speed=1.0)
    assert (c2.max_concurrent_launches, c2.request_status_timeout_s, c2.upscaling_speed) \
        == (4, 60, 1.0)


def test_config_defaults_equal_rays():
    _ray()
    from ray.autoscaler._private import constants
    from ray.autoscaler.v2.instance_manager.config import InstanceReconcileConfig
    theirs, mine = InstanceReconcileConfig(), ReconcileConfig()
    for name in ("request_status_timeout_s", "allocate_status_timeout_s",
                 "ray_install_status_timeout_s", "terminating_status_timeout_s",
                 "ray_stop_requested_status_timeout_s", "max_num_retry_request_to_allocate"):
        assert getattr(mine, name) == getattr(theirs, name), name
    assert mine.max_concurrent_launches == constants.AUTOSCALER_MAX_CONCURRENT_LAUNCHES
    assert mine.upscaling_speed == constants.DEFAULT_UPSCALING_SPEED


# ---- timeouts (§10.1 step 2) and terminations (step 4) ---------------------------------
@pytest.mark.parametrize("status, timeout_s, expected", [
    (S.REQUESTED, 600, S.QUEUED),
    (S.ALLOCATED, 3600, S.ALLOCATION_TIMEOUT),
    (S.RAY_INSTALLING, 1800, S.RAY_INSTALL_FAILED),
    (S.TERMINATING, 300, S.TERMINATION_FAILED),
    (S.RAY_STOP_REQUESTED, 300, S.RAY_RUNNING),
])
def test_timeouts(status, timeout_s, expected):
    store, clock = make_store()
    bring(store, "x", status)
    clock.ns += timeout_s * SEC                  # exactly the timeout: not yet
    assert store.handle_timeouts() == [] and store["x"].status == status
    clock.ns += 1
    assert [m.to_status for m in store.handle_timeouts()] == [expected]
    assert store["x"].status_history[-1] == (expected, timeout_s * SEC + 1)


@pytest.mark.parametrize("status", [S.QUEUED, S.RAY_STOPPING, S.RAY_RUNNING, S.RAY_STOPPED,
                                    S.TERMINATION_FAILED, S.TERMINATED])
def test_no_timeout(status):
    store, clock = make_store()
    bring(store, "x", status)
    clock.advance(10 * 3600)
    assert store.timeout_moves() == []


def test_requested_fails_after_more_than_three_requests():
    store, clock = make_store()
    store.apply_plan({"a": 1})
    for attempt in range(1, 5):
        assert [m.to_status for m in store.launch_queued()] == [S.REQUESTED]
        assert store["i-000000"].n_requests == attempt
        clock.advance(601)
        store.handle_timeouts()
        assert store["i-000000"].status == (S.QUEUED if attempt <= 3 else S.ALLOCATION_FAILED)


def test_timeout_counts_from_latest_entry():
    store, clock = make_store()
    bring(store, "x", S.TERMINATING)
    clock.advance(301)
    store.handle_timeouts()                      # -> TERMINATION_FAILED
    store.handle_terminations()                  # -> TERMINATING again, at 301 s
    clock.advance(300)
    assert store.timeout_moves() == []
    clock.ns += 1
    assert [m.to_status for m in store.timeout_moves()] == [S.TERMINATION_FAILED]


def test_timeouts_equal_rays():
    _, instance, reconciler = _ray()
    config, rng = ReconcileConfig(), np.random.default_rng(3)
    offsets_s = [1, 250, 350, 550, 650, 1700, 1900, 3500, 3700]   # far from every boundary
    now = time.time_ns()
    for _ in range(200):
        status = [S.REQUESTED, S.ALLOCATED, S.RAY_INSTALLING, S.TERMINATING,
                  S.RAY_STOP_REQUESTED][rng.integers(5)]
        n_req = int(rng.integers(1, 6)) if status == S.REQUESTED else 0
        t_last = now - offsets_s[rng.integers(len(offsets_s))] * SEC
        history = [(S.QUEUED, t_last - 10 * SEC)] + [(S.REQUESTED, t_last - k * SEC)
                                                     for k in range(n_req, 0, -1)]
        history.append((status, t_last))
        rec = InstanceRecord("x", "a", status, history, cloud_instance_id="c", node_id="n")
        pb = instance(instance_id="x", instance_type="a", status=status,
                      cloud_instance_id="c", node_id="n")
        for s, ts in history:
            pb.status_history.append(instance.StatusHistory(instance_status=s,
                                                            timestamp_ns=ts))
        if status == S.REQUESTED:
            event = reconciler._handle_stuck_requested_instance(
                pb, config.request_status_timeout_s, config.max_num_retry_request_to_allocate)
        else:
            timeout_s, to = {
                S.ALLOCATED: (config.allocate_status_timeout_s, S.ALLOCATION_TIMEOUT),
                S.RAY_INSTALLING: (config.ray_install_status_timeout_s, S.RAY_INSTALL_FAILED),
                S.TERMINATING: (config.terminating_status_timeout_s, S.TERMINATION_FAILED),
                S.RAY_STOP_REQUESTED: (config.ray_stop_requested_status_timeout_s,
                                       S.RAY_RUNNING)}[status]
            event = reconciler._handle_stuck_instance(pb, timeout_s, to)
        assert timeout_target(rec, now, config) == (event.new_instance_status if event
                                                    else None)


@pytest.mark.parametrize("status", [S.RAY_STOPPED, S.ALLOCATION_TIMEOUT,
                                    S.RAY_INSTALL_FAILED, S.TERMINATION_FAILED])
def test_stopped_and_failed_are_terminated(status):
    store, _ = make_store()
    bring(store, "x", status)
    bring(store, "ok", S.RAY_RUNNING)
    assert [(m.instance_id, m.to_status) for m in store.handle_terminations()] == \
        [("x", S.TERMINATING)]


def test_stale_stopped_row_is_retired_without_terminating_the_cloud():
    store, _ = make_store()
    bring(store, "old", S.RAY_STOPPED, cloud="c-shared")
    bring(store, "new", S.RAY_RUNNING, cloud="c-shared")
    store.handle_terminations()
    assert (store["old"].status, store["new"].status) == (S.TERMINATED, S.RAY_RUNNING)


def test_rejected_drain_returns_to_running():
    store, _ = make_store()
    bring(store, "x", S.RAY_STOP_REQUESTED)
    store.drain_rejected(["x"])
    assert store["x"].status == S.RAY_RUNNING and store["x"].node_id == "n-x"


def test_reconcile_runs_the_steps_in_order():
    store, clock = make_store()
    bring(store, "stuck", S.ALLOCATED)
    clock.advance(3601)
    seen = []

    def schedule(s):
        seen.append(s["stuck"].status)           # the scheduler sees the timeout applied
        return {"a": 2}, []
    tick = store.reconcile(schedule)
    assert seen == [S.ALLOCATION_TIMEOUT]
    assert [m.to_status for m in tick.timeouts] == [S.ALLOCATION_TIMEOUT]
    assert len(tick.plan) == 2
    assert [(m.instance_id, m.to_status) for m in tick.terminations] == \
        [("stuck", S.TERMINATING)]
    assert len(tick.launches) == 1               # speed 0: one of the two new records


# ---- the simulated provider ------------------------------------------------------------
def sim(types, seed=0, installs_ray=True, **config):
    store, clock = make_store(**config)
    return store, clock, SimProvider(store, types, seed, installs_ray=installs_ray)


def all_legal(store):
    for rec in store:
        hist = [s for s, _ in rec.status_history]
        assert hist[0] in CREATABLE
        for a, b in zip(hist, hist[1:]):
            assert can_transition(a, b), (rec, hist)
        times = [t for _, t in rec.status_history]
        assert times == sorted(times), rec
    return True


def test_provider_latencies():
    spec = SimNodeType(alloc_latency_s=30, install_latency_s=45)
    for installs in (True, False):
        store, clock, prov = sim({"a": spec}, installs_ray=installs)
        store.apply_plan({"a": 1})
        store.launch_queued()
        run(store, prov, clock, 200)
        rec = store["i-000000"]
        want = ([(S.QUEUED, 0), (S.REQUESTED, 0), (S.ALLOCATED, 30 * SEC)]
                + ([(S.RAY_INSTALLING, 30 * SEC)] if installs else [])
                + [(S.RAY_RUNNING, 75 * SEC)])
        assert rec.status_history == want
        assert rec.cloud_instance_id == "cloud-000000" and rec.node_id


def test_provider_drain_and_termination_path():
    store, clock, prov = sim({"a": SimNodeType(drain_latency_s=20, termination_latency_s=40)})
    store.apply_plan({"a": 2})
    run(store, prov, clock, 300)
    assert store.count(S.RAY_RUNNING) == 2
    store.apply_plan({}, [("i-000000", Cause.IDLE)])
    run(store, prov, clock, 300)
    hist = [s for s, _ in store["i-000000"].status_history]
    assert hist[-5:] == [S.RAY_STOP_REQUESTED, S.RAY_STOPPING, S.RAY_STOPPED,
                         S.TERMINATING, S.TERMINATED]
    assert prov.live("a") == 1 and all_legal(store)


def test_provider_rejected_drains_and_failed_terminations():
    store, clock, prov = sim({"a": SimNodeType(drain_reject_rate=1.0,
                                               termination_failure_rate=1.0)})
    bring(store, "x", S.RAY_RUNNING)
    store.apply_plan({}, [("x", Cause.IDLE)])
    prov.step(clock.advance(5))
    assert store["x"].status == S.RAY_RUNNING and prov.stats["drains_rejected"] == 1
    store.apply_plan({}, [("x", Cause.OUTDATED)])
    store.move("x", S.RAY_STOPPED)
    store.handle_terminations()
    run(store, prov, clock, 60)
    hist = [s for s, _ in store["x"].status_history]
    assert hist.count(S.TERMINATION_FAILED) >= 2 and store["x"].status != S.TERMINATED
    assert all_legal(store)


def test_lost_requests_are_retried_then_fail():
    store, clock, prov = sim({"a": SimNodeType(launch_lost_rate=1.0)})
    store.apply_plan({"a": 1})
    run(store, prov, clock, 3000)
    rec = store["i-000000"]
    assert rec.status == S.ALLOCATION_FAILED and rec.n_requests == 4
    assert prov.stats["lost"] == 4 and all_legal(store)


def test_stockouts_beyond_capacity():
    store, clock, prov = sim({"a": SimNodeType(capacity=5)}, upscaling_speed=1000,
                             max_concurrent_launches=100)
    store.apply_plan({"a": 20})
    store.launch_queued()
    run(store, prov, clock, 200)
    assert prov.stats["stockouts"] == 15 and store.count(S.ALLOCATION_FAILED) == 15
    assert store.count(S.RAY_RUNNING) == 5 and prov.live("a") == 5
    # Launches while the capacity is taken fail even if a termination is under way ...
    running = [r.instance_id for r in store.records(S.RAY_RUNNING)]
    store.apply_plan({"a": 1}, [(i, Cause.IDLE) for i in running[:2]])
    store.launch_queued()
    run(store, prov, clock, 100)
    assert prov.stats["stockouts"] == 16 and prov.live("a") == 3
    # ... and succeed once the terminated instances have left the cloud.
    store.apply_plan({"a": 3})
    store.launch_queued()
    run(store, prov, clock, 200)
    assert store.count(S.RAY_RUNNING) == 5 and prov.stats["stockouts"] == 17
    assert all_legal(store)


def test_launch_failures_at_the_configured_rate():
    store, clock, prov = sim({"a": SimNodeType(launch_failure_rate=0.25)}, seed=11,
                             upscaling_speed=1000, max_concurrent_launches=1000)
    store.apply_plan({"a": 800})
    store.launch_queued()
    run(store, prov, clock, 120)
    failed = store.count(S.ALLOCATION_FAILED)
    assert failed == prov.stats["launch_failures"]
    assert 0.19 < failed / 800 < 0.31
    assert failed + store.count(S.RAY_RUNNING) == 800


def test_preemptions_at_the_configured_rate():
    rate, n = 0.5, 300
    store, clock, prov = sim({"a": SimNodeType(alloc_latency_s=10, install_latency_s=10,
                                               preemption_rate_per_h=rate)},
                             seed=5, upscaling_speed=1000, max_concurrent_launches=1000)
    store.apply_plan({"a": n})
    store.launch_queued()
    run(store, prov, clock, 20, tick_s=20)       # all running at t = 20 s
    run(store, prov, clock, 3600, tick_s=60)     # one hour of exposure
    expected = n * (1 - math.exp(-rate))
    assert abs(prov.stats["preemptions"] - expected) < 0.25 * expected
    preempted = [r for r in store if S.RAY_STOPPED in [s for s, _ in r.status_history]]
    assert len(preempted) == prov.stats["preemptions"]
    run(store, prov, clock, 60)
    for rec in preempted:                        # RAY_STOPPED -> TERMINATING -> TERMINATED
        assert [s for s, _ in rec.status_history][-4:] == \
            [S.RAY_RUNNING, S.RAY_STOPPED, S.TERMINATING, S.TERMINATED]
    assert prov.live("a") == n - prov.stats["preemptions"] and all_legal(store)


def _churn(seed):
    """A busy mixed simulation: jitter, failures, losses, stock-outs, preemptions,
    rejected drains and failed terminations, with a scheduler that scales up and down."""
    spec = SimNodeType(alloc_latency_s=40, install_latency_s=60, latency_jitter=0.5,
                       capacity=12, launch_failure_rate=0.1, launch_lost_rate=0.05,
                       preemption_rate_per_h=2.0, drain_reject_rate=0.3,
                       termination_latency_s=30, termination_failure_rate=0.2)
    store, clock, prov = sim({"a": spec, "b": spec}, seed=seed, upscaling_speed=1.0)
    rng = np.random.default_rng(seed + 100)

    def schedule(s):
        running = [r.instance_id for r in s.records(S.RAY_RUNNING)]
        victims = [(i, Cause.IDLE) for i in running if rng.random() < 0.05]
        return {"a": int(rng.integers(0, 3)), "b": int(rng.integers(0, 2))}, victims
    run(store, prov, clock, 2 * 3600, tick_s=5, schedule=schedule)
    return store, prov


@pytest.mark.slow
def test_provider_is_deterministic_and_every_move_legal():
    a_store, a_prov = _churn(1)
    b_store, b_prov = _churn(1)
    assert a_store.histories() == b_store.histories() and a_prov.stats == b_prov.stats
    c_store, _ = _churn(2)
    assert c_store.histories() != a_store.histories()
    assert all_legal(a_store)
    for key in ("launch_failures", "stockouts", "lost", "preemptions", "drains_rejected",
                "termination_failures", "terminations"):
        assert a_prov.stats[key] > 0, key
    assert a_prov.live("a") <= 12 and a_prov.live("b") <= 12

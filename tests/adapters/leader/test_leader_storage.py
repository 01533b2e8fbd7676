"""The fenced storage: Ray's Storage semantics (against Ray's own InMemoryStorage),
Ray's InstanceManager on it, vecsched's instance records in it."""
from __future__ import annotations

import json
import random
import time

import numpy as np
import pytest
from ray.autoscaler.v2.instance_manager.instance_manager import InstanceManager
from ray.autoscaler.v2.instance_manager.storage import InMemoryStorage, Storage
from ray.core.generated.instance_manager_pb2 import (GetInstanceManagerStateRequest, Instance,
                                                     InstanceUpdateEvent, StatusCode,
                                                     UpdateInstanceManagerStateRequest)

from vecsched.adapters.leader import (FencedOut, FencedStorage, Keys, Lease, RedisLeaseBackend,
    Token, connect)
from vecsched.adapters.sim.ha.instance_table import CorruptState, FencedInstanceTable
from vecsched.adapters.leader.ray_storage import ray_instance_storage
from vecsched.adapters.sim.ha.instance_table import META
from vecsched.adapters.sim.lifecycle import (InstanceStore, ReconcileConfig, SimClock, SimNodeType,
                                SimProvider, run, sequential_ids)
from vecsched.engine.model.dtypes import Cause, Status
from tests.kits.ha_kit import redis_server  # noqa: F401 (fixture)

S = Status


def _leader(server, holder="A", cluster="c", ttl=30.0):
    lease = Lease(RedisLeaseBackend(connect(port=server.port, timeout_s=1.0), Keys(cluster)),
                  holder, ttl)
    assert lease.try_acquire()
    return lease


def _storage(server, lease, **kw):
    return FencedStorage(lease.backend.client, lease.backend.keys, lease, **kw)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_answers_as_rays_in_memory_storage(redis_server, seed):
    """Seeded random operations on both storages, every answer compared."""
    rng = random.Random(seed)
    ours = _storage(redis_server, _leader(redis_server, cluster=f"diff{seed}"))
    ray = InMemoryStorage()
    keys = [f"k{i}" for i in range(6)]
    tables = ["t1", "t2"]
    for step in range(400):
        table = rng.choice(tables)
        version = ray.get_version()
        expected = rng.choice([None, version, version, version - 1, version + 1])
        op = rng.choice(["batch", "batch", "update", "get", "get_all"])
        if op == "batch":
            mutation = {k: f"{step}-{k}".encode() for k in rng.sample(keys, rng.randint(0, 3))}
            deletion = rng.sample(keys, rng.randint(0, 2))
            got = ours.batch_update(table, mutation, deletion, expected)
            want = ray.batch_update(table, mutation, deletion, expected)
        elif op == "update":
            key = rng.choice(keys)
            entry = ray.get(table, [key])[0].get(key)
            entry_version = rng.choice([None, -1, entry[1] if entry else -1, 10_000])
            insert_only = rng.random() < 0.3
            value = f"u{step}".encode()
            got = ours.update(table, key, value, entry_version, expected, insert_only)
            want = ray.update(table, key, value, entry_version, expected, insert_only)
        elif op == "get":
            ks = rng.sample(keys, rng.randint(1, 3))
            got, want = ours.get(table, ks), ray.get(table, ks)
        else:
            got, want = ours.get_all(table), ray.get_all(table)
        assert tuple(got) == tuple(want), (step, op)
        assert ours.get_version() == ray.get_version()
    assert ours.get_version() > 50


def test_rays_instance_manager_runs_on_it_and_is_fenced(redis_server):
    """Ray's own InstanceStorage + InstanceManager, unchanged, on the fenced storage:
    updates work, and once a newer leader exists the old one's updates raise."""
    assert issubclass(FencedStorage, Storage)
    old = _leader(redis_server, "A", ttl=0.3)
    im = InstanceManager(ray_instance_storage("c1", _storage(redis_server, old)), [])
    reply = im.update_instance_manager_state(UpdateInstanceManagerStateRequest(
        expected_version=0, updates=[InstanceUpdateEvent(
            instance_id="i-1", new_instance_status=Instance.QUEUED, instance_type="w",
            upsert=True)]))
    assert reply.status.code == StatusCode.OK and reply.version == 1
    stale = UpdateInstanceManagerStateRequest(expected_version=1, updates=[InstanceUpdateEvent(
        instance_id="i-1", new_instance_status=Instance.REQUESTED, instance_type="w",
        launch_request_id="lr-1")])
    token = old.token()
    new = Lease(RedisLeaseBackend(connect(port=redis_server.port), Keys("c")), "B", 30.0)
    while not new.try_acquire():
        time.sleep(0.01)
    old_storage = _storage(redis_server, old)
    old_storage.lease = None                      # send the stale token regardless
    old_storage.batch_update = _with_token(old_storage.batch_update, token)
    im_old = InstanceManager(ray_instance_storage("c1", old_storage), [])
    with pytest.raises(FencedOut):
        im_old.update_instance_manager_state(stale)
    im_new = InstanceManager(ray_instance_storage("c1", _storage(redis_server, new)), [])
    state = im_new.get_instance_manager_state(GetInstanceManagerStateRequest()).state
    assert state.version == 1 and [i.status for i in state.instances] == [Instance.QUEUED]
    assert im_new.update_instance_manager_state(stale).status.code == StatusCode.OK


def _with_token(fn, token: Token):
    def call(*args, **kwargs):
        return fn(*args, token=token, **kwargs)
    return call


def test_claim_fences_older_epochs_for_an_outside_lease(redis_server):
    """With the lease kept elsewhere (a Kubernetes Lease), the leader claims its
    epoch in Redis; older epochs are then refused, and a claim never goes back."""
    s = FencedStorage(connect(port=redis_server.port), Keys("k8s"), live_lease=False)
    assert s.claim(5)
    assert s.batch_update("t", {"a": b"1"}, token=Token(5, "pod-a", 0)).success
    assert s.claim(6) and not s.claim(4)
    with pytest.raises(FencedOut) as e:
        s.batch_update("t", {"a": b"2"}, token=Token(5, "pod-a", 0))
    assert e.value.reason == "stale"
    with pytest.raises(FencedOut) as e:
        s.batch_update("t", {"a": b"2"}, token=Token(7, "pod-c", 0))
    assert e.value.reason == "unknown"
    assert s.batch_update("t", {"a": b"3"}, token=Token(6, "pod-b", 0)) == (True, 2)


def _churned_store(seed=3):
    """Many records in many statuses, through the lifecycle's own simulated cloud."""
    clock = SimClock()
    store = InstanceStore(clock, sequential_ids("i-"), ReconcileConfig(upscaling_speed=1.0),
                          request_id_factory=sequential_ids("lr-"))
    spec = SimNodeType(alloc_latency_s=40, install_latency_s=60, latency_jitter=0.5,
                       launch_failure_rate=0.1, launch_lost_rate=0.05,
                       preemption_rate_per_h=2.0, drain_reject_rate=0.3,
                       termination_failure_rate=0.2)
    prov = SimProvider(store, {"a": spec, "b": spec}, seed)
    rng = np.random.default_rng(seed)

    def schedule(s):
        running = [r.instance_id for r in s.records(S.RAY_RUNNING)]
        return ({"a": int(rng.integers(0, 3)), "b": int(rng.integers(0, 2))},
                [(i, Cause.IDLE) for i in running if rng.random() < 0.05])
    run(store, prov, clock, 3600, tick_s=5, schedule=schedule)
    return store


def test_instance_records_round_trip_through_the_fenced_table(redis_server):
    store = _churned_store()
    statuses = {r.status for r in store}
    assert len(statuses) >= 6 and len(store) > 50
    lease = _leader(redis_server)
    table = FencedInstanceTable(_storage(redis_server, lease))
    loaded = table.load(lambda: 0, ReconcileConfig())
    assert len(loaded.store) == 0 and loaded.version == 0
    # Hand the churned records to the table as if the loaded store had made them.
    loaded.store = store
    loaded.ids.next_n, loaded.requests.next_n = 777, 55
    assert table.commit(loaded, [r.instance_id for r in store], {"tick_done": 9}).success
    back = table.load(lambda: 0, ReconcileConfig())
    assert back.version == 1 and back.meta["tick_done"] == 9
    assert back.store.histories() == store.histories()
    assert [r.instance_id for r in back.store] == [r.instance_id for r in store]
    for r in store:
        b = back.store[r.instance_id]
        assert (b.instance_type, b.launch_request_id, b.cloud_instance_id, b.node_id,
                b.node_kind, b.termination_cause) == \
            (r.instance_type, r.launch_request_id, r.cloud_instance_id, r.node_id,
             r.node_kind, r.termination_cause)
    assert back.ids() == "i-000777" and back.requests() == "lr-000055"


def test_a_corrupt_record_is_refused_on_load(redis_server):
    lease = _leader(redis_server)
    storage = _storage(redis_server, lease)
    bad = {"seq": 0, "id": "i-1", "type": "a", "status": S.RAY_RUNNING,
           "history": [[S.QUEUED, 0], [S.RAY_RUNNING, 5]], "request": "", "cloud": "",
           "node": "n", "kind": 2, "cause": 0}
    storage.batch_update("vecsched_instances", {"i-1": json.dumps(bad).encode(),
                                                META: b"{}"})
    with pytest.raises(CorruptState, match="i-1"):
        FencedInstanceTable(storage).load(lambda: 0, ReconcileConfig())
    storage.batch_update("vecsched_instances", {"i-1": b"{not json"})
    with pytest.raises(CorruptState):
        FencedInstanceTable(storage).load(lambda: 0, ReconcileConfig())

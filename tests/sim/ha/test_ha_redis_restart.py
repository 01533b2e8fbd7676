"""A Redis that restarts empty under the autoscaler replicas (a real redis-server, its
files deleted; the world in process): no epoch is granted twice, the next leader
rebuilds the instance records from the cloud's list and goes on, and the cloud ends
exactly as in a run without the restart."""
from __future__ import annotations

import pytest

from vecsched.adapters.leader import (FencedStorage, Keys, Lease, NotLeader, RedisLeaseBackend,
                                      connect, holder_id)
from vecsched.adapters.sim.ha.instance_table import FencedInstanceTable
from vecsched.adapters.sim.ha.replay_link import make
from vecsched.adapters.sim.ha.replica_tick import Autoscaler, CloudRefused
from vecsched.adapters.sim.ha.run import DemoConfig, final_records, reference_run
from vecsched.adapters.sim.ha.world import SimConfig, World
from vecsched.adapters.sim.ha.world_server import LocalWorld
from tests.kits.ha_kit import redis_server  # noqa: F401 (fixture)

SMALL = SimConfig(pods=120, ticks=30)
# Long enough for scale-downs: drains at ticks 50, 52, 57, terminations at 52, 54, 59.
LONG = SimConfig(pods=120, ticks=80)


def _strip(record: dict) -> dict:
    return {i["cloud_id"]: (i["type"], i["created_tick"], i["times"])
            for i in record["instances"]}


class _Replicas:
    """Replicas in this process on one world and one Redis."""

    def __init__(self, server, world):
        self.client = connect(port=server.port, timeout_s=1.0)
        self.keys = Keys("restart")
        self.world = world

    def make(self, name, hook=None):
        lease = Lease(RedisLeaseBackend(self.client, self.keys), holder_id(name), 0.5)
        table = FencedInstanceTable(FencedStorage(self.client, self.keys, lease, audit=1000))
        return lease, Autoscaler(name, lease, table, self.world, make("baseline"), hook)


def _lead_to_end(lease: Lease, auto: Autoscaler) -> dict:
    """Drive one replica as the leader to the end of the run: acquire, step, and on a
    refusal remember the fence and step down (as the replica process does)."""
    refusals = []
    while True:
        if not lease.leading():
            assert lease.try_acquire()
        lease.renew()
        try:
            if auto.step() == "end":
                return {"refusals": refusals}
        except CloudRefused as e:
            refusals.append((e.epoch, e.fence))
            auto.drop()
            lease.observe(e.fence)
            lease.lose("fenced")


@pytest.mark.parametrize("newcomer,late", [(False, False), (True, False), (False, True)])
def test_empty_redis_restart_records_rebuilt_nothing_lost(redis_server, newcomer, late):
    """The leader records a tick that requests launches (or, `late`, tick 53, with
    nodes draining, stopped and terminating); Redis restarts empty before its cloud
    calls; it makes them (its lease still valid) and advances. The next leader is the
    passive replica that saw epoch 1 (granted 2 at once), or a newcomer that saw
    nothing (granted 1 by the empty Redis, refused by the cloud's fence, then
    granted 2): it rebuilds the records from the cloud and finishes the run."""
    sim = LONG if late else SMALL
    ref_world, ref_records = reference_run(redis_server, DemoConfig(sim=sim,
                                                                    scheduler="baseline"))
    world = LocalWorld(World(sim))
    reps = _Replicas(redis_server, world)
    at = {}

    def restart_after_launch_record(point, tick, **info):
        due = tick == 53 if late else info["requested"] and tick >= 2
        if point == "postwrite" and due and not at:
            at.update(tick=tick, states={i["state"] for i in world.world.instances.values()})
            redis_server.restart(empty=True)

    lease_a, a = reps.make("A", restart_after_launch_record)
    lease_b, b = reps.make("C" if newcomer else "B")
    assert lease_a.try_acquire()
    if not newcomer:
        assert not lease_b.try_acquire() and lease_b.max_epoch_seen == 1
    while not at:
        lease_a.renew()
        a.step()
    zombie = lease_a.token()                      # A's lease is still valid here
    assert not lease_a.renew()                    # the lease key is gone with Redis
    with pytest.raises(NotLeader):
        a.step()
    result = _lead_to_end(lease_b, b)
    assert lease_b.epoch == 2                     # never 1 again
    assert result["refusals"] == ([(1, 1)] if newcomer else [])
    assert b.counts["rebuilds"] == 1 and b.rebuilds[0]["tick"] == at["tick"] + 1
    if late:
        assert {"stopping", "terminating"} <= at["states"]
    assert world.world.launch(zombie.epoch, zombie.holder, "i-zombie", "lr-zombie",
                              world.world.types[1].name)["why"] == "stale"
    rec = world.world.record()
    assert _strip(rec) == _strip(ref_world)       # nothing lost, nothing twice
    assert rec["units"]["placed_at"] == ref_world["units"]["placed_at"]
    accepted = [c for c in rec["calls"] if c.get("result") not in ("stale",)]
    epochs = [c["epoch"] for c in accepted]
    assert epochs == sorted(epochs)
    assert {c["replica"] for c in accepted if c["epoch"] == 1} == {lease_a.holder}
    assert {c["replica"] for c in accepted if c["epoch"] == 2} == {lease_b.holder}
    got = final_records(FencedInstanceTable(FencedStorage(reps.client, reps.keys)))
    # Here the rebuilt histories are the recorded ones: every record the lost tick
    # held had reached the cloud (none was still QUEUED), and its cloud times are
    # the times the records were written with.
    assert got == ref_records


@pytest.mark.slow
def test_a_replica_process_refuses_a_volatile_redis(tmp_path):
    """The replica process checks Redis before anything else: against a server with
    neither appendonly nor save it reports the setting and exits 2; told to allow
    it, it goes on (to the world connection, absent here)."""
    import json
    import os
    import subprocess
    import sys

    from vecsched.adapters.sim.ha.world_server import AUTHKEY_ENV
    from vecsched.adapters.sim.redis_server import RedisServer

    env = dict(os.environ, **{AUTHKEY_ENV: os.urandom(16).hex()})
    with RedisServer(tmp_path / "volatile", persistent=False) as server:
        def replica(**extra):
            cfg = {"name": "A", "redis": [server.host, server.port],
                   "world": ["127.0.0.1", 1], "scheduler": "baseline", **extra}
            return subprocess.run([sys.executable, "-m", "vecsched.adapters.sim.ha.replica",
                                   json.dumps(cfg)], env=env, capture_output=True, text=True,
                                  timeout=120, stdin=subprocess.DEVNULL)
        refused = replica()
        events = [json.loads(line) for line in refused.stdout.splitlines()]
        assert refused.returncode == 2
        assert events[0]["ev"] == "error" and events[0]["kind"] == "VolatileRedis"
        assert events[0]["setting"] == "appendonly"
        allowed = replica(allow_volatile_redis=True)
        assert allowed.returncode != 0 and "VolatileRedis" not in allowed.stdout
        assert "WorldUnavailable" in allowed.stderr       # it got past the Redis check


@pytest.mark.slow
def test_ha_demo_redis_restart(tmp_path):
    """The redis-restart scenario end to end (replica processes, a real redis-server
    restarted with its files deleted): no epoch reused, the records rebuilt, nothing
    lost or launched twice, the run not stuck."""
    import json

    from vecsched.adapters.sim.ha.run import run_demo
    result = run_demo(tmp_path, DemoConfig(sim=SimConfig(ticks=30), scheduler="baseline",
                                           scenario="redis-restart"), log=lambda m: None)
    on_disk = json.loads((tmp_path / "ha.json").read_text())
    assert on_disk["scenario"] == "redis-restart"
    assert result["epoch_regressions"] == 0
    assert result["launches_lost"] == 0 and result["launches_duplicated"] == 0
    assert result["demand_lost"] == 0
    assert result["stuck_s"] is not None and result["stuck_s"] > 0
    assert len(result["detail"]["rebuilds"]) >= 1
    assert "WorldMismatch" not in result["detail"]["replica_errors"]
    assert result["detail"]["epochs_written"][-1] > result["detail"]["faults"][0]["epoch_before"]
    checks = dict(result["checks"])
    checks.pop("failover_within_ttl_plus_tick")   # timing: reported, not asserted here
    assert all(checks.values()), checks


def test_redis_back_from_an_old_snapshot_records_rebuilt(redis_server):
    """Redis comes back with the state of tick 3 (an old snapshot: the epoch key,
    the records and #meta of then) while the world is at tick 8 and the leader is
    gone. The next leader is granted above what it saw, finds the recorded tick
    behind the world, rebuilds from the cloud, deletes the stale entries, and the run
    ends as the failure-free one."""
    ref_world, ref_records = reference_run(redis_server, DemoConfig(sim=SMALL,
                                                                    scheduler="baseline"))
    world = LocalWorld(World(SMALL))
    reps = _Replicas(redis_server, world)
    lease_a, a = reps.make("A")
    lease_b, b = reps.make("B")
    assert lease_a.try_acquire() and not lease_b.try_acquire()
    snapshot = {}
    while world.world.tick < 8:
        lease_a.renew()
        a.step()
        if world.world.tick == 3 and not snapshot:
            snapshot = {k: reps.client.dump(k) for k in reps.client.keys("vecsched:{restart}:*")
                        if k != reps.keys.lease.encode()}
    reps.client.flushall()                        # A is gone; Redis restores tick 3
    for key, raw in snapshot.items():
        reps.client.restore(key, 0, raw)
    old = FencedInstanceTable(FencedStorage(reps.client, reps.keys)).load(
        lambda: 0, a.rc)
    assert old.meta["tick_done"] < 7 and len(old.store) < len(a.loaded.store)
    _lead_to_end(lease_b, b)
    assert lease_b.epoch == 2
    assert b.rebuilds[0]["recorded_tick"] == old.meta["tick_done"]
    assert b.rebuilds[0]["dropped"] == len(old.store)
    rec = world.world.record()
    assert _strip(rec) == _strip(ref_world)
    assert rec["units"]["placed_at"] == ref_world["units"]["placed_at"]
    got = final_records(FencedInstanceTable(FencedStorage(reps.client, reps.keys)))
    assert got == ref_records


def test_an_unknown_scenario_is_refused_by_name():
    with pytest.raises(ValueError, match="scenario"):
        DemoConfig(scenario="redis-resart")

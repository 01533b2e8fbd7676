"""`vecsched ha-demo`: two autoscaler replicas, a leader killed and a leader paused.

The run (everything on loopback, in `--out`):

1. a private `redis-server` (append-only, fsync always);
2. a **reference run** in this process: the same replay, world and autoscaler code, one
   replica, no faults - what the cloud should end up having been asked;
3. the **world** (simulated cloud + cluster, `world.py`) in its own process, and two
   replica processes started together: exactly one must win the lease;
4. the leader is held right after it recorded a tick that requests launches and
   before it calls the cloud, and **SIGKILLed** there (mid-scale-up); once the other
   replica has taken over (and made those calls), the killed one is restarted as a
   new passive replica (the new leader waits after its first tick's write meanwhile,
   so the fault ticks do not depend on how long a restart takes);
5. the new leader is held right after its lease check, before its record write, and
   **SIGSTOPped** there until the restarted replica has taken the lease over (the TTL
   passes) and is about to write; it is then **resumed**, its write goes out with its
   old epoch and must be rejected by the fence (the version check alone would have
   accepted it); the new leader then goes on;
6. the run ends at the configured tick; `ha.json` compares the world's own record of
   this run (calls, instances, where each demand unit is) with the reference run's.

`backend="kube"` keeps the replicas' lease in a `coordination.k8s.io/v1` Lease on the
Kubernetes API stand-in (started here, HTTPS on loopback: `kube_lease_api.py`)
instead of Redis; the instance records stay in the fenced Redis store, each new
leader claiming its epoch there (`lease_site.py`). The reference run keeps its lease
in Redis: it only fixes what the cloud should have been asked.

`scenario="redis-restart"` replaces steps 4-5 by a Redis that restarts empty under
the leader, `scenario="redis-old-snapshot"` by a Redis restored from a backup taken
before the replicas started, when its epoch key said 1 (`run_restart.py`). `allow_volatile_redis` runs the demo's Redis without
persistence and lets the replicas accept it (they refuse such a Redis otherwise).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vecsched.adapters.leader import (FencedStorage, Keys, Lease, LeaseKeeper,
    RedisLeaseBackend, connect)
from vecsched.adapters.sim.ha.instance_table import FencedInstanceTable, final_records
from vecsched.adapters.sim.redis_server import RedisServer

from .kube_lease_api import KubeLeaseApi
from .lease_site import check_backend
from .replica_tick import Autoscaler
from .run_restart import EVENTS, orchestrate_restart
from .procs import Child, DemoError, first_leader, start_replica, world_address
from .replay_link import make
from .run_report import summarize
from .world import SimConfig, World
from .world_server import LocalWorld, WorldClient


@dataclass(frozen=True)
class DemoConfig:
    sim: SimConfig = field(default_factory=SimConfig)
    ttl_s: float = 1.0
    tick_real_s: float = 0.2
    poll_s: float = 0.02
    scheduler: str = "engine"
    kill_from_tick: int = 2          # the fault at the first launching tick from here
    wait_s: float = 120.0            # the longest any one step may take (start-up: JIT)
    scenario: str = "kill-pause"     # or "redis-restart", "redis-old-snapshot"
    allow_volatile_redis: bool = False
    backend: str = "redis"           # where the replicas' lease lives: redis or kube

    def __post_init__(self):
        if self.scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, "
                             f"got {self.scenario!r}")
        check_backend(self.backend)
        if self.scenario == "redis-old-snapshot" and self.backend != "redis":
            # the snapshot takes the lease's epoch key back; a Kubernetes Lease is not
            # in Redis (its own restore is test_kube_lease.py's)
            raise ValueError(f"scenario 'redis-old-snapshot' needs backend 'redis', "
                             f"got {self.backend!r}")
        if self.backend == "kube" and self.ttl_s != int(self.ttl_s):
            # leaseDurationSeconds is whole seconds: the API's expiry would be later
            # than the holder's, and the failover bound (ttl + one tick) would not hold
            raise ValueError(f"ttl_s: a Kubernetes Lease lasts whole seconds, got "
                             f"{self.ttl_s!r} with backend 'kube'")


SCENARIOS = ("kill-pause", "redis-restart", "redis-old-snapshot")


def reference_run(server: RedisServer, dc: DemoConfig) -> tuple[dict, dict]:
    """The same replay with one replica and no faults: (world record, final records)."""
    client = connect(server.host, server.port, timeout_s=5.0)
    keys = Keys("reference")
    backend = RedisLeaseBackend(client, keys, allow_volatile=dc.allow_volatile_redis)
    lease = Lease(backend, "reference", ttl_s=30.0)
    table = FencedInstanceTable(FencedStorage(client, keys, lease))
    world = World(dc.sim)
    keeper = LeaseKeeper(lease, 1.0).start()
    try:
        deadline = time.monotonic() + 10
        while not lease.leading():
            if time.monotonic() > deadline:
                raise DemoError("reference run: could not take its lease")
            time.sleep(0.01)
        auto = Autoscaler("reference", lease, table, LocalWorld(world), make(dc.scheduler))
        while auto.step() != "end":
            pass
    finally:
        keeper.stop(release=True)
    return world.record(), final_records(table)


def run_demo(out: str | Path, dc: DemoConfig = DemoConfig(), log=print) -> dict:
    """Run the demo (module docstring); write `out/ha.json`; return its content."""
    out = Path(out)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    authkey = os.urandom(16)
    t0 = time.monotonic()
    children: list[Child] = []
    shutil.rmtree(out / "redis", ignore_errors=True)     # a fresh Redis every run
    orchestrate = _orchestrate if dc.scenario == "kill-pause" else orchestrate_restart
    kube_api = KubeLeaseApi(out / "kube-tls") if dc.backend == "kube" else None
    with RedisServer(out / "redis", persistent=not dc.allow_volatile_redis) as server, \
            (kube_api or contextlib.nullcontext()):
        try:
            log("reference run (one replica, no faults)...")
            ref_world, ref_records = reference_run(server, dc)
            t_ref = time.monotonic() - t0
            kube = kube_api.settings() if kube_api else None
            if kube:
                log(f"lease: a coordination.k8s.io/v1 Lease {kube['namespace']}/"
                    f"{kube['name']} on the Kubernetes API stand-in at {kube['url']}")
            result = orchestrate(server, dc, authkey, logs, children, log, kube=kube)
        finally:
            for c in children:
                c.close()
        lease_api = kube_api.summary() if kube_api else None
    result["reference_wall_s"] = t_ref
    summary = {"backend": dc.backend}
    summary.update(summarize(dc, result, ref_world, ref_records))
    summary["detail"]["kube_api"] = lease_api
    summary["wall_s"] = time.monotonic() - t0
    (out / "ha.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


@dataclass
class _Demo:
    """What every step of the kill-pause run shares: the Redis server, the settings,
    the children's authkey and log folder, the list every started child joins, the
    log function, the Kubernetes API settings (kube backend) and, once the world is
    up, its address."""
    server: object
    dc: DemoConfig
    authkey: bytes
    logs: Path
    children: list
    log: object
    kube: dict | None
    addr: tuple = ()

    def replica(self, name: str) -> Child:
        """Start a replica process named `name` against this run's Redis and world."""
        return start_replica(name, self.dc, self.server, self.addr, self.authkey,
                             self.logs, self.children, self.kube)


def _orchestrate(server, dc: DemoConfig, authkey: bytes, logs: Path, children: list,
                 log, kube: dict | None = None) -> dict:
    """Run steps 3-6 of the module docstring; the raw result `run_report` summarizes."""
    d = _Demo(server, dc, authkey, logs, children, log, kube)
    world = _start_world(d)
    first, other, together = _start_together(d)
    restarted, killed = _kill_leader(d, first, other)
    paused, fenced = _pause_leader(d, other, restarted)
    end = _finish(d, world, (other, restarted))
    return {
        "scenario": "kill-pause",
        "world": end["world"], "audit": end["audit"], "records": end["records"],
        "started_together": together,
        "faults": [killed, paused],
        "fenced_event": fenced,
        "leader_events": {c.name: c.seen("leader") for c in children if c is not world},
        "replica_events": {c.name: [e for e in c.events if e.get("ev") in EVENTS]
                           for c in children if c is not world},
        "replica_stats": end["stats"],
    }


def _start_world(d: _Demo) -> Child:
    """The world process; its address (the first line it prints, with "address" and
    no "ev") is kept in `d.addr`."""
    world = Child("world", "vecsched.adapters.sim.ha.world_server",
                  json.dumps(asdict(d.dc.sim)), d.authkey, d.logs)
    d.children.append(world)
    d.addr = world_address(world, d.dc.wait_s)
    return world


def _start_together(d: _Demo) -> tuple[Child, Child, dict]:
    """Replicas A and B started together; the first leader is armed to hold at its
    first launching write and both are told to start: (first, other, what was seen)."""
    dc, w = d.dc, d.dc.wait_s
    a = d.replica("A")
    b = d.replica("B")
    a.wait_for("ready", w)
    b.wait_for("ready", w)
    # Both keepers race for the lease from `ready` on: exactly one may win the first
    # epoch; the other must not lead while the winner keeps renewing.
    first_leader([a, b], 5 * dc.ttl_s + 5)
    time.sleep(2 * dc.ttl_s)
    leaders = [c.name for c in (a, b) if any(e["epoch"] == 1 for e in c.seen("leader"))]
    first = max((a, b), key=lambda c: max([e["epoch"] for e in c.seen("leader")] or [0]))
    other = b if first is a else a
    both_led = bool(other.seen("leader"))
    d.log(f"replicas A and B started together: {first.name} took the lease (epoch 1 "
          f"granted to {', '.join(leaders)}), {other.name} "
          f"{'ALSO LED' if both_led else 'stayed passive'}")
    first.send(f"hold postwrite {dc.kill_from_tick} launch")
    a.send("start")
    b.send("start")
    return first, other, {"replicas": ["A", "B"], "leaders": leaders, "both_led": both_led}


def _kill_leader(d: _Demo, first: Child, other: Child) -> tuple[Child, dict]:
    """Fault 1: SIGKILL the leader between its record write and its cloud calls, then
    restart it as a passive replica once `other` has taken over: (restarted, fault)."""
    w = d.dc.wait_s
    held = first.wait_for("hold", w)
    t_kill = first.signal(signal.SIGKILL)
    first.finish()
    d.log(f"SIGKILL {first.name} at tick {held['tick']}, mid-scale-up: it had just recorded "
          f"{held['requested']} new launch requests ({held['in_flight']} in flight, "
          f"{held['queued']} queued) and not yet called the cloud")
    # The next leader is held after its first tick's write while the killed replica
    # restarts (so the run does not race ahead of the restart: the ticks stay fixed).
    # The killed replica restarts once the other one has taken over (a restart racing
    # the takeover could win the lease itself; that is a fine failover, not this demo's).
    other.send("hold postwrite 0")
    took = other.wait_for("leader", w)
    acting = other.wait_for("acting", w)
    restarted = d.replica(first.name + "2")
    d.log(f"{other.name} took over (epoch {acting['epoch']}); {first.name} restarts as "
          f"{restarted.name}, passive")
    other.wait_for("hold", w)
    restarted.wait_for("ready", w)
    restarted.send("hold prewrite 0")           # its first write as a leader
    restarted.send("start")
    return restarted, {
        "kind": "SIGKILL", "replica": first.name, "at": t_kill, "tick": held["tick"],
        "point": "postwrite", "requested": held["requested"],
        "in_flight": held["in_flight"], "next": other.name,
        "next_acquired_at": took["t"], "hold_s": 0.0}


def _pause_leader(d: _Demo, other: Child, restarted: Child) -> tuple[dict, dict]:
    """Fault 2: SIGSTOP the new leader between its lease check and its write (its
    next tick, now that the restarted replica stands by), resume it once the restarted
    replica has taken the lease and is about to write: (fault, its `fenced` event)."""
    w, ttl_s = d.dc.wait_s, d.dc.ttl_s
    other.send("hold prewrite 0")
    other.send("go")
    held2 = other.wait_for("hold", w)
    t_stop = other.signal(signal.SIGSTOP)
    other.wait_stopped()
    other.send("go")                            # read when it runs again
    d.log(f"SIGSTOP {other.name} at tick {held2['tick']}, lease checked, write not sent")
    took2 = restarted.wait_for("leader", w + 5 * ttl_s)
    held3 = restarted.wait_for("hold", w)
    t_cont = other.signal(signal.SIGCONT)
    fenced = other.wait_for("fenced", w)
    d.log(f"SIGCONT {other.name} {t_cont - t_stop:.2f} s later: its write (epoch "
          f"{fenced['epoch']}) rejected, {fenced['reason']} (fence {fenced['fence']})")
    t_go = time.monotonic()
    restarted.send("go")
    return {
        "kind": "SIGSTOP", "replica": other.name, "at": t_stop, "tick": held2["tick"],
        "point": "prewrite", "resumed_after_s": t_cont - t_stop,
        "next": restarted.name, "next_acquired_at": took2["t"],
        "hold_s": t_go - held3["t"]}, fenced


def _finish(d: _Demo, world: Child, replicas: tuple[Child, Child]) -> dict:
    """Wait for the last tick, stop the replicas and the world, and collect the
    replicas' stats, the world's record, the store's audit and the final records."""
    dc, w = d.dc, d.dc.wait_s
    restarted = replicas[-1]
    restarted.wait_for("end", w + dc.sim.ticks * dc.tick_real_s * 3)
    d.log(f"tick {dc.sim.ticks} reached")
    for c in replicas:
        c.send("stop")
    stats = {}
    for c in replicas:
        s = c.wait_for("stats", w)
        stats[c.name] = {"lease": s["lease"], "counts": s["counts"], "step": s["step"]}
        c.finish()
    client = connect(d.server.host, d.server.port, timeout_s=5.0)
    storage = FencedStorage(client, Keys("ha-demo"))
    wc = WorldClient(d.addr, d.authkey)
    record = wc.call("record")
    wc.conn.send(("shutdown", ()))
    world.finish()
    return {"world": record, "audit": storage.audit(),
            "records": final_records(FencedInstanceTable(storage)), "stats": stats}

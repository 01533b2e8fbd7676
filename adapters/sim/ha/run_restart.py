"""`vecsched ha-demo --scenario redis-restart`: Redis loses its data mid-run.

The run (after the same reference run as the default scenario):

1. the world and two replica processes start together; exactly one takes the lease;
2. the leader is held right after it recorded a tick that requests launches, before
   its cloud calls; the store's audit so far is read (it is about to be lost);
3. Redis is **killed and restarted with its files deleted** (a Redis whose disk was
   lost: the lease, the epoch counter, every instance record and the audit are gone),
   and the leader is let go: it makes the recorded calls (its epoch is still the
   cloud's), then notices the restart (Redis's run id) and steps down;
4. the next leader (either replica) is granted an epoch above every epoch it has
   seen; the grant came from a Redis that lost its records, so it first waits out
   the old leader (renewing, not ticking: one ttl from its acquisition, by which
   time the old leader's own lease is over); then it claims its epoch at the
   cloud, finds no records and rebuilds them from the cloud's instance list, and
   the run goes on to its last tick.

`--scenario redis-old-snapshot` is the same run with another loss: before the replicas
start, a previous deployment held the lease once (epoch 1) and a backup of Redis's files
was taken then; the replicas are granted 2 and up; at step 3 Redis comes back **from
that backup** (its epoch key says 1, no lease, no records). The next leader, which saw
epoch 2, is granted 3 (above everything it saw: no regression), but the grant comes from
a Redis that forgot a grant, so it waits out the old leader as in step 4.

`ha.json` then has what the default scenario has (computed the same way, from the
world's record and the audit before and after the restart), and `epoch_regressions`,
`acted_during_reset`, `stuck_s` and `reset_wait_s` (`run_report.py`).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from vecsched.adapters.leader import (FencedStorage, Keys, Lease, RedisLeaseBackend,
                                      connect)
from vecsched.adapters.sim.ha.instance_table import FencedInstanceTable, final_records

from .procs import Child, DemoError, first_leader, start_replica, world_address
from .world_server import WorldClient

EVENTS = ("redis-restart", "rebuilt", "error", "fenced", "waiting")


def _audit(server) -> list[dict]:
    client = connect(server.host, server.port, timeout_s=5.0)
    try:
        return FencedStorage(client, Keys("ha-demo")).audit()
    finally:
        client.close()


def _wait_end(replicas: list[Child], timeout_s: float) -> Child:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in replicas:
            if c.seen("end"):
                return c
            if c.proc.poll() is not None:
                raise DemoError(f"{c.name} exited (code {c.proc.poll()}){c.stderr_tail()}")
        time.sleep(0.02)
    for c in replicas:
        c.dump_stacks()
    raise DemoError(f"the run did not reach its last tick within {timeout_s:.0f} s "
                    f"after the Redis restart")


def _next_leader(replicas: list[Child], after: float, epoch_before: int,
                 ev: str = "leader"):
    """The first `ev` event (leader: acting; waiting: granted but waiting out the
    old leader) of a new term after the restart: (replica, event)."""
    seen = [(e["t"], c, e) for c in replicas for e in c.seen(ev)
            if e["t"] > after and e["epoch"] > epoch_before]
    if not seen:
        return None, None
    _, c, e = min(seen, key=lambda x: x[0])
    return c, e


def _old_backup(server, dc, dest: Path) -> Path:
    """A previous deployment held the demo's lease once (epoch 1) and let it go; a
    backup of Redis's files is taken then (what `redis-old-snapshot` restores)."""
    client = connect(server.host, server.port, timeout_s=5.0)
    try:
        lease = Lease(RedisLeaseBackend(client, Keys("ha-demo"),
                                        allow_volatile=dc.allow_volatile_redis),
                      "previous-deployment", ttl_s=dc.ttl_s)
        if not lease.try_acquire() or lease.epoch != 1:
            raise DemoError(f"the previous deployment's lease: epoch {lease.epoch}, not 1")
        lease.release()
    finally:
        client.close()
    return server.snapshot(dest)


def orchestrate_restart(server, dc, authkey: bytes, logs: Path, children: list,
                        log, kube: dict | None = None) -> dict:
    """Run the scenario (module docstring); the raw result `run_report` summarizes."""
    w = dc.wait_s
    backup = _old_backup(server, dc, logs.parent / "redis-backup") \
        if dc.scenario == "redis-old-snapshot" else None
    world = Child("world", "vecsched.adapters.sim.ha.world_server",
                  json.dumps(asdict(dc.sim)), authkey, logs)
    children.append(world)
    addr = world_address(world, w)
    a = start_replica("A", dc, server, addr, authkey, logs, children, kube)
    b = start_replica("B", dc, server, addr, authkey, logs, children, kube)
    a.wait_for("ready", w)
    b.wait_for("ready", w)
    first = first_leader([a, b], 5 * dc.ttl_s + 5)
    time.sleep(2 * dc.ttl_s)
    first_epoch = 2 if backup else 1          # the previous deployment's was 1
    leaders = [c.name for c in (a, b)
               if any(e["epoch"] == first_epoch for e in c.seen("leader"))]
    other = b if first is a else a
    both_led = bool(other.seen("leader"))
    log(f"replicas A and B started together: {first.name} took the lease, {other.name} "
        f"{'ALSO LED' if both_led else 'stayed passive'}")
    first.send(f"hold postwrite {dc.kill_from_tick} launch")
    a.send("start")
    b.send("start")

    held = first.wait_for("hold", w)
    audit_before = _audit(server)
    epoch_before = held["epoch"]
    t_down = time.monotonic()
    server.restart(empty=backup is None, restore=backup)
    t_up = time.monotonic()
    first.send("go")
    log(f"Redis {'restored from the backup of epoch 1' if backup else 'restarted EMPTY'} "
        f"({t_up - t_down:.2f} s) while {first.name} (epoch {epoch_before}) held tick "
        f"{held['tick']}: {held['requested']} launches recorded, not yet called; lease, "
        f"records and audit gone, epoch counter {'back at 1' if backup else 'gone'}")

    ender = _wait_end([a, b], w + dc.sim.ticks * dc.tick_real_s * 3)
    nxt, took = _next_leader([a, b], t_down, epoch_before)
    _, waited = _next_leader([a, b], t_down, epoch_before, "waiting")
    log(f"tick {dc.sim.ticks} reached by {ender.name}; after the restart "
        f"{nxt.name if nxt else 'nobody'} led with epoch {took['epoch'] if took else '-'}")
    stats = {}
    for c in (a, b):
        c.send("stop")
    for c in (a, b):
        s = c.wait_for("stats", w)
        stats[c.name] = {"lease": s["lease"], "counts": s["counts"], "step": s["step"]}
        c.finish()
    wc = WorldClient(addr, authkey)
    record = wc.call("record")
    wc.conn.send(("shutdown", ()))
    world.finish()
    client = connect(server.host, server.port, timeout_s=5.0)
    storage = FencedStorage(client, Keys("ha-demo"))
    return {
        "scenario": dc.scenario,
        "world": record, "audit": audit_before + storage.audit(),
        "records": final_records(FencedInstanceTable(storage)),
        "started_together": {"replicas": ["A", "B"], "leaders": leaders,
                             "both_led": both_led},
        "faults": [{"kind": dc.scenario, "replica": first.name, "at": t_up,
                    "down_at": t_down, "tick": held["tick"], "point": "postwrite",
                    "requested": held["requested"], "in_flight": held["in_flight"],
                    "epoch_before": epoch_before, "min_epoch": epoch_before + 1,
                    "next": nxt.name if nxt else None,
                    "next_acquired_at": took["t"] if took else None,
                    "next_granted_waiting_at": waited["t"] if waited else None,
                    "next_wait_s": waited["wait_s"] if waited else None,
                    "hold_s": 0.0}],
        "fenced_event": None,
        "leader_events": {c.name: c.seen("leader") for c in (a, b)},
        "replica_events": {c.name: [e for e in c.events if e.get("ev") in EVENTS]
                           for c in (a, b)},
        "replica_stats": stats,
    }

"""The warm start of a replay: the work alive at the window's start (``window.py``) is
running at t = 0, on nodes the scheduler under test chose for it.

Before the first tick, the warm units arrive and are pending at t = 0; the scheduler is
called on that state (the head and no other node) and every launch it decides becomes
a node that is up at once: a cloud instance already there (``SimCloud.add``, as the
head's) whose record enters ALLOCATED then RAY_RUNNING at t = 0. The cluster places the
warm units on them. This repeats while the scheduler still launches something and warm
units are pending (a scheduler may bound one decision), at most ``MAX_ROUNDS`` times;
warm units still pending after that simply stay pending from t = 0, like any demand.

So the window opens on the cluster the scheduler under test would have built for the
work already there, without the boot wait that work did not have. What is not simulated:
the scheduler's own history before the window (its idle timers start at t = 0).

The warm nodes are not launches: the instance accounting counts them apart (they are
passed to it with the head), their node-hours and cost count from t = 0 like any
node's, and the warm units' zero waits are not pending times (the metrics' pending
percentiles are of the window's demand).
"""
from __future__ import annotations

from vecsched.engine.model.dtypes import Kind, Status

from vecsched.adapters.sim.lifecycle import Move, sequential_ids

MAX_ROUNDS = 8
PREFIX = "warm-"


def warm_start(replay) -> dict:
    """Place the replay's warm units at t = 0 (see the module docstring); returns
    ``{"units", "placed", "nodes", "nodes_by_type", "rounds"}`` and sets
    ``replay.warm_ids``."""
    trace, cluster = replay.trace, replay.cluster
    n_warm = trace.n_warm
    info = {"units": n_warm, "placed": 0, "nodes": 0, "nodes_by_type": {}, "rounds": 0}
    if not n_warm:
        return info
    while cluster.arrived < trace.n_units and trace.warm[cluster.arrived]:
        cluster.arrive(cluster.arrived)
        cluster.arrived += 1
    new_id = sequential_ids(PREFIX)
    waits_before = len(cluster.waits)
    for _ in range(MAX_ROUNDS):
        replay._sync(0.0)
        cluster.place(0.0)
        if not cluster.n_pending:
            break
        state = replay.state(0.0)
        decision = replay.sched.decide(state)
        replay.sched.after(state, decision)
        info["rounds"] += 1
        launched = 0
        for type_name, count in decision.launches:
            for _ in range(int(count)):
                _node_up(replay, new_id(), type_name)
                launched += 1
                by = info["nodes_by_type"]
                by[type_name] = by.get(type_name, 0) + 1
        if not launched:
            break
    replay._sync(0.0)
    cluster.place(0.0)
    info["nodes"] = len(replay.warm_ids)
    info["placed"] = len(cluster.waits) - waits_before
    del cluster.waits[waits_before:]          # already running: not pending time
    return info


def _node_up(replay, instance_id: str, type_name: str) -> None:
    """A node of ``type_name`` that is up at t = 0 (no launch, no boot)."""
    cloud = replay.provider.cloud.add(type_name, 0, owner=instance_id)
    replay.store.apply([Move(instance_id, Status.ALLOCATED, instance_type=type_name,
                             cloud_instance_id=cloud.cloud_instance_id,
                             node_kind=Kind.WORKER, create=True)])
    replay.store.apply([Move(instance_id, Status.RAY_RUNNING,
                             node_id=f"node-{cloud.cloud_instance_id}")])
    replay.warm_ids.append(instance_id)

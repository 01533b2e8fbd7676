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

from dataclasses import dataclass, field

from vecsched.engine.model.dtypes import Kind, Status

from vecsched.adapters.sim.lifecycle import Move, sequential_ids

MAX_ROUNDS = 8
PREFIX = "warm-"


@dataclass
class WarmStart:
    """What the warm start did: ``info`` (``{"units", "placed", "nodes", "nodes_by_type",
    "rounds"}``, the summary's ``warm_start``) and the ids of the nodes it started."""
    info: dict = field(default_factory=dict)
    ids: list = field(default_factory=list)


def warm_start(trace, world, view, scheduler) -> WarmStart:
    """Place ``trace``'s warm units at t = 0 (see the module docstring) in ``world``
    (``world.World``), deciding with ``scheduler`` on ``view``'s states (``view.TickView``)."""
    cluster = world.cluster
    n_warm = trace.n_warm
    out = WarmStart({"units": n_warm, "placed": 0, "nodes": 0, "nodes_by_type": {},
                     "rounds": 0})
    if not n_warm:
        return out
    while cluster.arrived < trace.n_units and trace.warm[cluster.arrived]:
        cluster.arrive(cluster.arrived)
        cluster.arrived += 1
    new_id = sequential_ids(PREFIX)
    waits_before = len(cluster.waits)
    for _ in range(MAX_ROUNDS):
        world.settle(0.0)
        if not cluster.n_pending:
            break
        state = view.state(0.0)
        decision = scheduler.decide(state)
        scheduler.after(state, decision)
        out.info["rounds"] += 1
        if not _nodes_up(world, out, new_id, decision.launches):
            break
    world.settle(0.0)
    out.info["nodes"] = len(out.ids)
    out.info["placed"] = len(cluster.waits) - waits_before
    del cluster.waits[waits_before:]          # already running: not pending time
    return out


def _nodes_up(world, out: WarmStart, new_id, launches) -> int:
    """A node up at t = 0 (no launch, no boot) per launch; returns how many."""
    launched = 0
    by = out.info["nodes_by_type"]
    for type_name, count in launches:
        for _ in range(int(count)):
            instance_id = new_id()
            cloud = world.provider.cloud.add(type_name, 0, owner=instance_id)
            world.store.apply([Move(instance_id, Status.ALLOCATED, instance_type=type_name,
                                    cloud_instance_id=cloud.cloud_instance_id,
                                    node_kind=Kind.WORKER, create=True)])
            world.store.apply([Move(instance_id, Status.RAY_RUNNING,
                                    node_id=f"node-{cloud.cloud_instance_id}")])
            out.ids.append(instance_id)
            by[type_name] = by.get(type_name, 0) + 1
            launched += 1
    return launched

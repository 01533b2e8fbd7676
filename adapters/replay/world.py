"""The simulated world of one replay: the clock, the cloud, Ray's instance store and the
cluster of raylets, built from the trace and the config, with no scheduler in it.

- ``clock`` (``SimClock``, ns): every part reads time from it; the driver sets it.
- ``provider`` (``DrainingProvider``, a ``SimProvider``; ``provider.cloud`` the
  ``SimCloud``): plays launches, boots, failures, preemptions and drains with the
  config's latencies and rates, seeded by ``config.seed``; ``drains`` ends the
  consolidation drains against the cluster (``draining.py``).
- ``store`` (``InstanceStore``): the instance records, reconciled once per tick.
- ``cluster`` (``Cluster``): the stand-in for the raylets and the placement group
  scheduler; it places pending units on the nodes that joined.
- ``sync(now)``: nodes whose ray came up (RAY_RUNNING, or draining) join the cluster,
  only RAY_RUNNING ones take new work, nodes that lost ray leave it (their units go
  back to pending). A no-op when the store has not changed since the last sync.
- ``settle(now)``: ``sync`` then one placement pass, i.e. the raylets acting on what
  the store says at ``now``.

A new cloud behaviour (capacity, stock-outs, spot) belongs to the provider built in
``World.build`` from ``ReplayConfig`` fields; the instance store and the scheduler
learn of it only through the records' statuses, as Ray's reconciler does.
"""
from __future__ import annotations

from dataclasses import dataclass

from vecsched.engine.model.dtypes import Kind, Status

from vecsched.adapters.sim.lifecycle import (InstanceStore, Move, ReconcileConfig, SimClock,
                                             SimNodeType, sequential_ids)
from .cluster import Cluster
from .config import ReplayConfig
from .draining import Drains, DrainingProvider
from .trace import HEAD_TYPE, LoadedTrace

NS = 1_000_000_000
_RAY_ALIVE = (Status.RAY_RUNNING, Status.RAY_STOP_REQUESTED, Status.RAY_STOPPING)


@dataclass
class World:
    clock: SimClock
    store: InstanceStore
    provider: DrainingProvider
    cluster: Cluster
    drains: Drains
    resources: dict                  # type name -> its resources (the nodes' totals)
    synced_version: int = -1         # the store version of the last ``sync``

    @classmethod
    def build(cls, trace: LoadedTrace, config: ReplayConfig,
              drain_deadline_s: float = 0.0) -> "World":
        """The world for ``trace`` under ``config``; ``drain_deadline_s``: the
        scheduler's (``ReplayScheduler.drain_deadline_s``)."""
        clock = SimClock()
        rc = ReconcileConfig(max_concurrent_launches=config.max_concurrent_launches,
                             upscaling_speed=float(config.upscaling_speed))
        store = InstanceStore(clock, sequential_ids("i-"), rc,
                              request_id_factory=sequential_ids("lr-"))
        sim = SimNodeType(alloc_latency_s=config.alloc_latency_s,
                          install_latency_s=config.install_latency_s,
                          latency_jitter=config.latency_jitter,
                          launch_failure_rate=config.launch_failure_rate,
                          preemption_rate_per_h=config.preemption_rate_per_h)
        provider = DrainingProvider(store, {}, seed=config.seed, default=sim,
                                    deadline_s=drain_deadline_s)
        cluster = Cluster(trace.columns, trace.shapes, trace.arrival_s, trace.duration_s,
                          trace.unit_shape, trace.gangs, avoid_gpu_nodes=config.avoid_gpu_nodes)
        return cls(clock, store, provider, cluster, Drains(provider, cluster),
                   {t.name: t.resources for t in trace.types})

    def start_head(self) -> None:
        """The head node (type ``head``), running from t = 0."""
        self.store.apply([Move("head", Status.ALLOCATED, instance_type=HEAD_TYPE,
                               cloud_instance_id="cloud-head", node_kind=Kind.HEAD,
                               create=True)])
        self.store.apply([Move("head", Status.RAY_RUNNING, node_id="node-head")])
        self.cluster.add_node("head", HEAD_TYPE, dict(self.resources[HEAD_TYPE]), 0.0)

    def sync(self, now: float) -> None:
        """Nodes whose ray came up join the cluster; nodes that lost ray leave it."""
        if self.store.version == self.synced_version:
            return
        c = self.cluster
        alive: set[str] = set()
        for rec in self.store:
            if rec.status not in _RAY_ALIVE:
                continue
            alive.add(rec.instance_id)
            slot = c.slot_of.get(rec.instance_id)
            if slot is None:
                joined = rec.entered_ns(Status.RAY_RUNNING)
                joined = now if joined is None else joined / NS
                slot = c.add_node(rec.instance_id, rec.instance_type,
                                  dict(self.resources[rec.instance_type]), joined)
            c.set_placeable(slot, rec.status == Status.RAY_RUNNING)
        for iid, slot in list(c.slot_of.items()):
            if iid not in alive:
                c.remove_node(slot, now)
        self.synced_version = self.store.version

    def settle(self, now: float) -> None:
        """``sync``, then one placement pass (a no-op when nothing changed)."""
        self.sync(now)
        self.cluster.place(now)


__all__ = ["World"]

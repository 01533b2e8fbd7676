"""The scheduler's view of a tick: the ``TickState`` built from the instance store and
the cluster, what Ray's reconciler sends its scheduler (as the protobuf
``SchedulingRequest`` that ``demand_specs.py`` makes of it):

- every instance whose status can still reach RAY_RUNNING, and the draining ones
  (RAY_STOPPING), in store order; RAY_RUNNING ones with the cluster's total, available
  and idle time and the ``_PG_`` labels of the bundles they host; schedulers leave the
  draining ones out of their nodes (the engine names them in ``Problem.skipped``, where
  consolidation's disruption budget counts them);
- pending independent demand grouped into shapes with counts, shapes in order of their
  oldest pending unit;
- pending placement groups in the GCS's encoding (``<pg>:<strategy>:PENDING``, bundles
  with their affinity / anti-affinity), oldest first;
- the config's idle timeouts and node cap.
"""
from __future__ import annotations

from vecsched.engine.model.build.builder import NodeSpec, RequestSpec
from vecsched.engine.model.dtypes import Status
from vecsched.engine.model.requests import GangSpec

from .config import ReplayConfig
from .interface import TickState
from .trace import LoadedTrace

# The records a tick's request holds: those that can still reach RAY_RUNNING, and the
# draining ones (RAY_STOPPING), which Ray's reconciler sends too (every record).
_IN_REQUEST = tuple(Status.SCHEDULABLE) + (Status.RAY_STOPPING,)


class TickView:
    """Builds the ``TickState`` of ``store`` and ``cluster`` at a time (``state``); keeps
    each placement group's spec, so a group is encoded once (``gang_spec``)."""

    def __init__(self, trace: LoadedTrace, store, cluster, config: ReplayConfig):
        self.trace, self.store, self.cluster, self.cfg = trace, store, cluster, config
        self._gang_specs: dict[int, GangSpec] = {}

    def state(self, now: float) -> TickState:
        nodes, ids = [], []
        c = self.cluster
        for rec in self.store:
            if rec.status not in _IN_REQUEST:
                continue
            ns = NodeSpec(rec.instance_type, status=rec.status, kind=rec.node_kind)
            slot = c.slot_of.get(rec.instance_id)
            if rec.status == Status.RAY_RUNNING and slot is not None:
                ns.total, ns.available, ns.idle_ms = c.view(slot, now)
                ns.labels = c.labels(slot) or None
                ns.ray_node_id = rec.node_id
            nodes.append(ns)
            ids.append(rec.instance_id)
        requests = [RequestSpec(dict(self.trace.shapes[s]), n) for s, n in c.pending_runs()]
        gangs = [self.gang_spec(g) for g in c.pending_gangs()]
        cfg = self.cfg
        return TickState(self.trace.types, nodes, ids, requests, cfg.idle_timeout_s,
                         cfg.max_num_nodes, gangs, cfg.pending_idle_timeout_s)

    def gang_spec(self, g: int) -> GangSpec:
        """A pending placement group as the GCS reports it: ``<pg>:<strategy>:PENDING``,
        each bundle with STRICT_PACK's affinity or STRICT_SPREAD's anti-affinity on the
        label ``_PG_<pg>`` (value "")."""
        spec = self._gang_specs.get(g)
        if spec is None:
            gangs = self.trace.gangs
            pg, strategy = gangs.pg_id[g], gangs.strategy[g]
            label = (f"_PG_{pg}", "")
            aff = label if strategy == "STRICT_PACK" else None
            anti = label if strategy == "STRICT_SPREAD" else None
            spec = self._gang_specs[g] = GangSpec(
                [RequestSpec(dict(self.trace.shapes[int(self.trace.unit_shape[u])]), 1,
                             affinity=aff, anti_affinity=anti)
                 for u in gangs.members(g)],
                name=f"{pg}:{strategy}:PENDING")
        return spec

    def gang_name(self, g: int) -> str:
        return self.gang_spec(g).name


__all__ = ["TickView"]

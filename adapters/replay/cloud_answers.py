"""The cloud's answers in a replay, as Ray's reconciler hands them over, and what the
capacity side of a replay measures (see ``capacity.py`` for the whole picture).

``CloudFeed.scan(store)`` runs inside the reconciler's scheduling step (after its
timeouts, as Ray's monitor is told of an update when it is applied). It returns the
records that *entered* ALLOCATION_FAILED, ALLOCATION_TIMEOUT or RAY_STOPPED since the
previous scan, as ``AutoscalerInstance`` messages with their status history and
details; they go into the tick's request beside the schedulable records (Ray's
reconciler sends every record; those three statuses are skipped by every scheduler as
nodes, and only sending the new ones keeps the request from growing with the replay's
history). It also feeds ``RayCloudMonitor`` (ALLOCATION_TIMEOUT, RAY_RUNNING), whose
maps ``availability_types`` writes into the tick's node types.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Optional

from vecsched.adapters.ray.availability import RayCloudMonitor
from vecsched.engine.model.dtypes import Status
from vecsched.engine.tick import COST, Limits
from vecsched.engine.tick import limits as lim

S = Status
_NEW_ANSWERS = (S.ALLOCATION_FAILED, S.ALLOCATION_TIMEOUT, S.RAY_STOPPED)
_ASKED = (S.QUEUED, S.REQUESTED, S.ALLOCATED, S.RAY_INSTALLING, S.RAY_RUNNING,
          S.RAY_STOP_REQUESTED)                # from QUEUED to running


def record_instance(rec):
    """An instance record as the ``AutoscalerInstance`` Ray's reconciler sends."""
    from ray.autoscaler.v2.schema import AutoscalerInstance
    from ray.core.generated.instance_manager_pb2 import Instance
    im = Instance(instance_id=rec.instance_id, instance_type=rec.instance_type,
                  status=int(rec.status), node_kind=int(rec.node_kind))
    last = len(rec.status_history) - 1
    for i, (status, ts) in enumerate(rec.status_history):
        im.status_history.add(instance_status=int(status), timestamp_ns=int(ts),
                              details=rec.details if i == last else "")
    return AutoscalerInstance(im_instance=im, cloud_instance_id=rec.cloud_instance_id or None)


def answers_to_wire(answers) -> list:
    """The tick's answers as (Instance wire bytes, cloud instance id) pairs: picklable."""
    return [(ai.im_instance.SerializeToString(), ai.cloud_instance_id) for ai in answers]


def answers_from_wire(wire) -> list:
    """``answers_to_wire`` undone."""
    if not wire:
        return []
    from ray.autoscaler.v2.schema import AutoscalerInstance
    from ray.core.generated.instance_manager_pb2 import Instance
    return [AutoscalerInstance(im_instance=Instance.FromString(b), cloud_instance_id=cid)
            for b, cid in wire]


class CloudFeed:
    """See the module docstring. ``monitor``: Ray's availability maps, derived."""

    def __init__(self, recovery_s: float = 600.0):
        self.monitor = RayCloudMonitor(recovery_s)
        self._seen: dict[str, int] = {}         # record -> history entries already read
        self._version = -1
        self._unread: list = []                 # sent to a tick that was lost

    def ack(self) -> None:
        """The scheduler decided the tick the last ``scan`` was for: its answers were
        read. Until then every ``scan`` sends them again (Ray's reconciler sends every
        record every tick, so a scheduler whose tick failed reads them next time)."""
        self._unread = []

    def scan(self, store) -> list:
        if store.version == self._version:
            return list(self._unread)
        self._version = store.version
        out = list(self._unread)
        for rec in store:
            n = len(rec.status_history)
            k = self._seen.get(rec.instance_id, 0)
            if k == n:
                continue
            self._seen[rec.instance_id] = n
            for status, ts in rec.status_history[k:]:
                if status == S.ALLOCATION_TIMEOUT:
                    self.monitor.timeout(rec.instance_type, ts / 1e9)
                elif status == S.RAY_RUNNING:
                    self.monitor.running(rec.instance_type)
            if rec.status in _NEW_ANSWERS and any(s == rec.status
                                                  for s, _ in rec.status_history[k:]):
                out.append(record_instance(rec))
        self._unread = out
        return list(out)

    def availability_types(self, types, now_s: float) -> list:
        """``types`` (NodeTypeSpec) with Ray's two availability scores of ``now_s``."""
        cloud = self.monitor.availabilities()
        rec = self.monitor.recoverable(now_s) if self.monitor.last else {}
        if not cloud and not rec:
            return list(types)
        return [replace(t, availability=cloud.get(t.name, 1.0),
                        recoverable=rec.get(t.name, 1.0)) for t in types]


class CapacityMetrics:
    """Peak asked per resource and the ticks a limit held demand back (module doc of
    ``capacity.py``)."""

    def __init__(self, types, prices: dict, limits: Optional[Limits]):
        self.res = {t.name: dict(t.resources) for t in types}
        names = sorted({r for res in self.res.values() for r in res})
        self.names = names + [COST]
        self.prices = {k: float(v) for k, v in (prices or {}).items() if v is not None}
        self.limits = limits
        self.peak: dict = dict.fromkeys(self.names, 0.0)
        self.limit_blocked_ticks = 0
        self.interrupted: Counter = Counter()

    def tick(self, store, plan=None) -> None:
        """After a tick's decision was applied: the totals asked for, and whether the
        decision (``plan``: the engine's, when it made one) held demand back."""
        tot = dict.fromkeys(self.names, 0.0)
        for rec in store:
            if rec.status not in _ASKED:
                continue
            for r, v in self.res.get(rec.instance_type, {}).items():
                tot[r] += float(v)
            tot[COST] += self.prices.get(rec.instance_type, 0.0)
        for r, v in tot.items():
            if v > self.peak[r]:
                self.peak[r] = v
        if plan is not None and plan.stats.get("limit_blocked", 0) > 0:
            self.limit_blocked_ticks += 1

    def violations(self) -> dict:
        """Limits the peak asked exceeded (cluster-wide ones; per group ones are
        checked by the engine's tests): limit name -> (limit, peak)."""
        if self.limits is None:
            return {}
        out = {}
        for group, res in self.limits.names():
            if group is None and res in self.peak:
                cap = self.limits.total[res]
                if self.peak[res] > cap * (1 + 1e-9) + 1e-9:
                    out[lim.label((group, res))] = (cap, self.peak[res])
        return out

    def summary(self, cloud_stats: dict) -> dict:
        return {
            "stockouts": int(cloud_stats.get("stockouts", 0)),
            "launch_failures": int(cloud_stats.get("launch_failures", 0)),
            "interruptions": int(cloud_stats.get("preemptions", 0)),
            "peak_asked": {r: v for r, v in self.peak.items() if v or r in ("CPU", "GPU", COST)},
            "limit_blocked_ticks": int(self.limit_blocked_ticks),
            "limit_violations": {k: list(v) for k, v in self.violations().items()},
        }


__all__ = ["CapacityMetrics", "CloudFeed", "CloudSide", "record_instance"]


class CloudSide:
    """What a replay does about the cloud's refusals, in the driver's few hooks
    (``simulation.Replay``): ``before(now)`` applies the capacity schedules,
    ``dress(state, now)`` adds the tick's answers and Ray's availability maps to the
    scheduler's view, ``after(plan)`` measures, ``summary()`` reports."""

    def __init__(self, trace, config, world):
        from .capacity import check_groups, limit_items, limits_of
        check_groups(config, trace)
        self.world = world
        self.config = config
        self.limits = limits_of(limit_items(config.limits), trace.prices)
        self.feed = CloudFeed()
        self.metrics = CapacityMetrics(trace.types, trace.prices, self.limits)

    def before(self, now_s: float) -> None:
        from .capacity import apply_schedules
        apply_schedules(self.world.provider.cloud, self.world.groups or {}, now_s)

    def dress(self, state, now_s: float):
        state.answers = self.feed.scan(self.world.store)
        state.types = self.feed.availability_types(state.types, now_s)
        return state

    def after(self, plan, decided: bool = True) -> None:
        """``decided``: the scheduler answered this tick (else its answers are sent
        again next tick)."""
        if decided:
            self.feed.ack()
        self.metrics.tick(self.world.store, plan)

    def summary(self) -> dict:
        out = self.metrics.summary(self.world.provider.cloud.stats)
        out["limits"] = dict(self.config.limits or {})
        out["capacity"] = {g: {"capacity": c.capacity, "schedule": [list(x) for x in c.schedule],
                               "launch_failure_rate": c.launch_failure_rate, "spot": c.spot,
                               "interruption_rate_per_h": c.interruption_rate_per_h}
                           for g, c in sorted((self.world.groups or {}).items())}
        return out

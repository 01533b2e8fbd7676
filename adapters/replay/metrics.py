"""What a replay measures, per tick and at the end.

Definitions (all times simulated, except the scheduler's and the replay's wall time):

- **pending time**: for every placement, the time from the unit becoming pending
  (its arrival, or its requeue after losing its node) to being placed. Units still
  pending at the end, other than the ones the scheduler calls infeasible, count with
  their wait so far (a lower bound), so leaving demand unplaced never looks fast.
- **node-hours** of an instance: from its cloud instance being allocated (ALLOCATED) to
  TERMINATED or the end of the replay, i.e. what a cloud bills, boot time included.
  **GPU-hours** = node-hours x the type's GPUs.
- **utilisation** (CPU, GPU): resource-hours held by running units / resource-hours of
  the allocated nodes (so boot time and idle time both lower it).
- **launches** / **terminations**: the scheduler's decisions the instance store applied
  (instances created QUEUED; terminations by cause).
- **never placed** = units pending at the end = **infeasible** (units of the last tick's
  infeasible list, and the members of the placement groups it called infeasible) +
  **still pending**; **placed** = every other unit. The replay asserts units in =
  placed + still pending + infeasible.
- **instances** (peak / mean, and the per-tick series by type): records not TERMINATED or
  ALLOCATION_FAILED, queued and booting ones included, the head included.
- **tick time**: wall time of the scheduler call proper (``scheduler.seconds``:
  ``EngineScheduler.schedule(request)`` for the engine, decode and encode included;
  Ray's ``schedule(request)``; the baseline's ``build_problem`` and packing). Building
  the request (Ray's reconciler's work) and the --check-ray call to Ray are not included.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from engine.dtypes import Cause, Status

_GONE = (Status.TERMINATED, Status.ALLOCATION_FAILED)


def _pct(x, q) -> float:
    return float(np.percentile(x, q)) if len(x) else 0.0


class Metrics:
    """Per-tick samples and applied-decision counters of one replay."""

    def __init__(self, type_names):
        self.type_names = list(type_names)
        self.type_index = {t: i for i, t in enumerate(self.type_names)}
        self.t: list[float] = []
        self.pending: list[int] = []
        self.tick_s: list[float] = []
        self.nodes: list[np.ndarray] = []
        self.launches = 0
        self.launches_by_type: Counter = Counter()
        self.terminations: Counter = Counter()        # by cause name
        self.rejected_ticks = 0
        self.rejections: list[str] = []

    def applied(self, moves) -> None:
        for m in moves:
            if m.create:
                self.launches += 1
                self.launches_by_type[m.instance_type] += 1
            elif m.cause is not None:
                self.terminations[Cause.NAMES.get(m.cause, str(m.cause))] += 1

    def rejected(self, now: float, why: str) -> None:
        self.rejected_ticks += 1
        if len(self.rejections) < 5:
            self.rejections.append(f"t={now:.0f}s: {why}")

    def tick(self, now: float, pending: int, seconds: float, store) -> None:
        counts = np.zeros(len(self.type_names), dtype=np.int32)
        for rec in store:
            if rec.status not in _GONE:
                counts[self.type_index[rec.instance_type]] += 1
        self.t.append(now)
        self.pending.append(int(pending))
        self.tick_s.append(float(seconds))
        self.nodes.append(counts)

    def series(self) -> dict:
        return {"t_s": np.asarray(self.t), "pending": np.asarray(self.pending),
                "tick_s": np.asarray(self.tick_s),
                "nodes": (np.vstack(self.nodes) if self.nodes
                          else np.zeros((0, len(self.type_names)), dtype=np.int32))}


def _node_seconds(store, end_ns: int) -> Counter:
    out: Counter = Counter()
    for rec in store:
        alloc = rec.times_ns(Status.ALLOCATED)
        if not alloc:
            continue
        start = min(alloc)
        stop = rec.times_ns(Status.TERMINATED)
        stop = min(stop) if stop else end_ns
        out[rec.instance_type] += max(0, stop - start) / 1e9
    return out


def summarize(replay, end_s: float, wall_s: float) -> dict:
    """The end-of-replay metrics of a ``simulation.Replay`` (see the module docstring)."""
    c = replay.cluster
    trace = replay.trace
    U = trace.n_units
    if replay._next_unit != U:
        raise AssertionError(f"replay ended with {U - replay._next_unit} units not arrived")
    pending = c.n_pending
    # infeasible: the last tick's infeasible units (the state has not changed since)
    infeasible = 0
    infeasible_of: dict[int, int] = {}
    infeasible_gangs: set[int] = set()
    if replay.last is not None and pending:
        from .schedulers import bundle_key
        left = replay.last.infeasible
        for s, n in c.pending_runs():
            k = min(n, int(left.get(bundle_key(trace.shapes[s]), 0)))
            infeasible += k
            infeasible_of[s] = k
        named = replay.last.infeasible_gangs
        for g in c.pending_gangs():
            if named.get(replay._gang_spec(g).name, 0):
                infeasible_gangs.add(g)
                infeasible += len(trace.gangs.members(g))
    still = pending - infeasible
    placed = c.n_running + c.n_done
    queued = sum(len(q) for q in c.queues) + sum(len(trace.gangs.members(g))
                                                 for g in c.gang_pending)
    if not (U == placed + still + infeasible and placed + pending == U
            and pending == queued and 0 <= infeasible <= pending):
        raise AssertionError(f"demand not conserved: in {U}, placed {placed}, still pending "
                             f"{still}, infeasible {infeasible}")
    waits = list(c.waits)
    for s, q in enumerate(c.queues):          # still pending: their wait so far
        n_still = len(q) - infeasible_of.get(s, 0)
        waits.extend(end_s - c.pending_since[u] for u in list(q)[:n_still])
    for g in c.gang_pending:
        if g not in infeasible_gangs:
            waits.extend(end_s - c.pending_since[u] for u in trace.gangs.members(g))
    node_s = _node_seconds(replay.store, int(round(end_s * 1e9)))
    types = {t.name: t for t in replay.types}
    node_h = {k: v / 3600 for k, v in sorted(node_s.items()) if v > 0}
    gpu_h = {k: v * float(types[k].resources.get("GPU", 0.0))
             for k, v in node_h.items() if types[k].resources.get("GPU", 0.0) > 0}
    cap = {r: sum(v * float(types[k].resources.get(r, 0.0)) for k, v in node_s.items())
           for r in ("CPU", "GPU")}
    used = {r: float(c.used_seconds[c.col[r]]) if r in c.col else 0.0 for r in ("CPU", "GPU")}
    m = replay.metrics
    ticks = np.asarray(m.tick_s)
    nodes = np.vstack(m.nodes).sum(axis=1) if m.nodes else np.zeros(1)
    check = replay.sched.check
    return {
        "units_in": U,
        "placed": placed,
        "still_pending": still,
        "infeasible": infeasible,
        "never_placed": pending,
        "oversized_units": trace.oversized,
        "requeued": c.requeued,
        "pending_p50_s": _pct(waits, 50),
        "pending_p95_s": _pct(waits, 95),
        "pending_p99_s": _pct(waits, 99),
        "node_hours": sum(node_h.values()),
        "gpu_hours": sum(gpu_h.values()),
        "node_hours_by_type": node_h,
        "gpu_hours_by_type": gpu_h,
        "util_cpu": used["CPU"] / cap["CPU"] if cap["CPU"] else 0.0,
        "util_gpu": used["GPU"] / cap["GPU"] if cap["GPU"] else 0.0,
        "launches": m.launches,
        "launches_by_type": dict(sorted(m.launches_by_type.items())),
        "terminations": sum(m.terminations.values()),
        "terminations_by_cause": dict(sorted(m.terminations.items())),
        "peak_nodes": int(nodes.max()),
        "mean_nodes": float(nodes.mean()),
        "ticks": len(m.t),
        "rejected_ticks": m.rejected_ticks,
        "rejections": list(m.rejections),
        "tick_p50_ms": _pct(ticks, 50) * 1e3,
        "tick_p99_ms": _pct(ticks, 99) * 1e3,
        "tick_max_ms": float(ticks.max() * 1e3) if ticks.size else 0.0,
        "scheduler_s": float(ticks.sum()),
        "check_ray_s": check.seconds if check is not None else 0.0,
        "wall_s": wall_s,
        "sim_end_s": end_s,
        "provider": dict(replay.provider.stats),
        "placement_groups": trace.gangs.G,
        "placement_group_units": int(trace.gangs.units.size),
        "infeasible_placement_groups": len(infeasible_gangs),
    }

"""What disrupting running nodes cost in a replay (issue 23's honest accounting).

- **restarts**: units that lost their node while running (``Cluster.requeued``: a
  preemption, a stop, a drain that hit its deadline) and restarted from scratch.
- (``lost_cpu_hours`` / ``lost_gpu_hours``, what those runs had done, are the replay's
  own metrics: ``metrics.summarize`` and ``pending_demand``.)
- **drained**: consolidation drains that ended (the node stopped); **drain_deadline_hit**:
  those ended by their deadline with work still running (its work restarted).
- **disrupted_max_concurrent**: the most nodes, over the ticks, being stopped for a
  cause other than idleness (RAY_STOP_REQUESTED or RAY_STOPPING with a non-IDLE
  cause: consolidation, outdated, a cap), sampled at every tick;
  ``disrupted_max_by_cause`` the same per cause; ``disrupted_series`` per tick.
- **relaunch_after_consolidation**: consolidations followed, within
  ``RELAUNCH_WINDOW_S``, by a launch of the consolidated node's type (each launch
  matched to at most one consolidation): the churn loop of a node consolidated and
  provisioned again. ``consolidations``: CONSOLIDATE terminations applied.
"""
from __future__ import annotations

from collections import Counter

from vecsched.engine.model.dtypes import Cause, Status

RELAUNCH_WINDOW_S = 600.0
_STOPPING = (Status.RAY_STOP_REQUESTED, Status.RAY_STOPPING)


class DisruptionMetrics:
    """Per tick: nodes being disrupted; per applied plan: consolidations and launches."""

    def __init__(self):
        self.series: list[int] = []
        self.max_by_cause: Counter = Counter()
        self.consolidated: list[tuple[float, str]] = []    # (time, type)
        self.launched: list[tuple[float, str]] = []

    def applied(self, now: float, moves, store) -> None:
        for m in moves:
            if m.create:
                self.launched.append((now, m.instance_type))
            elif m.cause == Cause.CONSOLIDATE:
                self.consolidated.append((now, store[m.instance_id].instance_type))

    def tick(self, store) -> None:
        by = Counter(Cause.NAMES.get(r.termination_cause, str(r.termination_cause))
                     for r in store if r.status in _STOPPING
                     and r.termination_cause not in (0, Cause.IDLE))
        self.series.append(sum(by.values()))
        for k, v in by.items():
            self.max_by_cause[k] = max(self.max_by_cause[k], v)

    def relaunches(self) -> int:
        """Consolidations matched to a later launch of their type within the window."""
        used = set()
        n = 0
        for t, typ in self.consolidated:
            for j, (tl, tt) in enumerate(self.launched):
                if j not in used and tt == typ and t <= tl <= t + RELAUNCH_WINDOW_S:
                    used.add(j)
                    n += 1
                    break
        return n


def disruption_summary(cluster, drains, disruption: DisruptionMetrics) -> dict:
    """The summary fields above, from the replay's cluster, its ``draining.Drains`` and
    its ``DisruptionMetrics``."""
    d = disruption
    return {
        "restarts": int(cluster.requeued),
        "drained": drains.drained,
        "drain_deadline_hit": drains.deadline_hit,
        "consolidations": len(d.consolidated),
        "disrupted_max_concurrent": max(d.series, default=0),
        "disrupted_max_by_cause": dict(sorted(d.max_by_cause.items())),
        "relaunch_after_consolidation": d.relaunches(),
    }

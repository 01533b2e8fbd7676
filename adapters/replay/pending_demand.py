"""The demand side of a replay's end: units in = placed + still pending + infeasible
(asserted every replay), and every unit's pending time (``metrics.py`` defines both)."""
from __future__ import annotations

from typing import Callable, Optional

from .interface import Decision, bundle_key


def demand_summary(trace, cluster, last: Optional[Decision], gang_name: Callable[[int], str],
                   end_s: float) -> tuple[dict, list]:
    """(the demand counts of ``summarize``, the pending times of every placement and of
    every unit still pending other than the infeasible ones). ``last``: the last tick's
    decision (None if its scheduler call failed); ``gang_name``: a pending placement
    group's name as the scheduler saw it (``TickView.gang_name``)."""
    c = cluster
    U = trace.n_units
    if c.arrived != U:
        raise AssertionError(f"replay ended with {U - c.arrived} units not arrived")
    pending = c.n_pending
    # infeasible: the last tick's infeasible units (the state has not changed since)
    infeasible = 0
    infeasible_of: dict[int, int] = {}
    infeasible_gangs: set[int] = set()
    if last is not None and pending:
        left = last.infeasible
        for s, n in c.pending_runs():
            k = min(n, int(left.get(bundle_key(trace.shapes[s]), 0)))
            infeasible += k
            infeasible_of[s] = k
        named = last.infeasible_gangs
        for g in c.pending_gangs():
            if named.get(gang_name(g), 0):
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
    return {
        "units_in": U,
        "placed": placed,
        "still_pending": still,
        "infeasible": infeasible,
        "never_placed": pending,
        "oversized_units": trace.oversized,
        "requeued": c.requeued,
        "lost_gpu_hours": (float(c.lost_seconds[c.col["GPU"]]) / 3600 if "GPU" in c.col
                           else 0.0),
        "placement_groups": trace.gangs.G,
        "placement_group_units": int(trace.gangs.units.size),
        "infeasible_placement_groups": len(infeasible_gangs),
    }, waits

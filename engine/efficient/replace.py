"""Consolidation's replace move (opt-in, ``EfficientOptions.consolidate_replace``):
launch one cheaper node that holds the work of one or more under-used nodes, and drain
them.

Karpenter replaces as well as deletes: a node none of whose neighbours has room for its
work can still go if a smaller, cheaper node holds that work. Here the replacement is
launched and the victims are drained on the same tick (cause CONSOLIDATE with the drain
deadline, as the delete move's): a draining victim takes no new work and stops when its
work ends, and what still runs at the deadline is restarted and finds the replacement,
which has booted by then if the deadline is longer than a boot. (Launching first and
draining only once the replacement runs was tried: on the openb replay the disruption
budget was taken by other drains when the replacement came up, so it idled and was
stopped unused; 5 extra launches, no drain.) A replacement left unused is stopped by
idle termination like any node.

The move, simulated with the same resource arithmetic as the delete move (every real
column of what a victim's work holds must fit; the label selectors of running work are
not in Ray's request, as for the delete move), is chosen on a tick where consolidation
runs, the delete move drained nothing, the disruption budget leaves room, and no node is
booting or queued (a replacement already on its way is not doubled):

- for every configured type t with launch room, cheapest first: the victims (least
  used first, as the delete move orders them; at most what the budget and
  ``consolidate_per_tick`` leave) whose work fits in what is left of a fresh node of t
  are packed onto it first fit, skipping victims of type t (the churn guard: a node is
  never replaced by its own type);
- the move is worth it when the packed victims cost more per hour than t; the best
  move saves the most per hour (ties: the cheaper type, then the lower type index).

Deterministic: no randomness, ties broken by index.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.dtypes import Status

_EPS = 1e-9
_BOOTING = (Status.QUEUED, Status.REQUESTED, Status.ALLOCATED, Status.RAY_INSTALLING)


def nothing_on_its_way(st, p) -> bool:
    """No node of the tick is queued or booting (a replacement may be on its way)."""
    booting = np.isin(p.node_status, _BOOTING) & st.alive[:p.N]
    return not booting.any()


def best_replacement(st, price: np.ndarray, victims: np.ndarray, used: np.ndarray,
                     real: np.ndarray, most: int) -> tuple[int, list]:
    """(type, victims it takes) of the move that saves the most, or (-1, []).
    ``victims`` in the delete move's order; ``used`` (N, R) what each node's work
    holds; ``real`` (R,) bool the columns that count."""
    p = st.p
    best = (0.0, -1, [])
    order = np.lexsort((np.arange(p.T), price))
    for t in order.tolist():
        if not p.type_configured[t] or not st.can_launch(t):
            continue
        room = np.where(real, p.type_free[t], 0.0)
        took = []
        for v in victims.tolist():
            if len(took) >= most:
                break
            if int(p.node_type[v]) == t:
                continue                            # never replaced by its own type
            need = used[v]
            if np.all(need <= room + _EPS * np.maximum(1.0, np.abs(room))):
                room -= need
                took.append(v)
        if not took:
            continue
        saves = float(price[p.node_type[took]].sum() - price[t])
        if saves > best[0] + _EPS:
            best = (saves, t, took)
    return best[1], best[2]

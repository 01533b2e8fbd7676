"""Termination rules the policies share: which nodes a plan may name, the
outdated nodes the builder already emptied, each type's idle timeout, and the
orders victims and idle nodes are taken in.

Ray-compat applies them through its own node list (``engine/raycompat/phases``);
the baseline and the efficient mode read them from here.
"""
from __future__ import annotations

import numpy as np

from .dtypes import Cause, Kind, Status
from .problem import Problem


def terminable(p: Problem) -> np.ndarray:
    """(N,) bool: nodes a plan may terminate. Never the head; never a REQUESTED or
    RAY_STOP_REQUESTED instance (its termination is an illegal lifecycle move,
    quirk Q13: it is left for a later tick)."""
    return (p.node_kind != Kind.HEAD) & ~np.isin(p.node_status, Status.UNTERMINABLE)


def outdated_terms(p: Problem, may_go: np.ndarray) -> list[tuple[int, int, int]]:
    """(node, OUTDATED, 0) for each node the builder marked outdated (and
    emptied) that ``may_go`` ((N,) bool) allows, in node order."""
    return [(n, Cause.OUTDATED, 0) for n in np.flatnonzero(p.node_outdated & may_go).tolist()]


def type_idle_timeouts(p: Problem) -> np.ndarray:
    """(T,) f8 idle timeout in seconds per type: a configured type's own, else
    the cluster's (NaN: never idle-terminated)."""
    return np.where(p.type_configured & ~np.isnan(p.type_idle_timeout_s),
                    p.type_idle_timeout_s, p.idle_timeout_s)


def longest_idle_first(p: Problem, nodes: np.ndarray) -> np.ndarray:
    """``nodes`` longest idle first, ties to the lowest index."""
    nodes = np.asarray(nodes)
    return nodes[np.lexsort((nodes, -p.node_idle_ms[nodes]))]


def cap_victims(p: Problem, cand: np.ndarray, k: int, util: np.ndarray | None = None
                ) -> np.ndarray:
    """The first ``k`` of ``cand`` (terminable nodes) to terminate for a cap:
    pending nodes first (nothing runs there yet), then the longest idle, then,
    given ``util`` (one value per candidate), the least used, then the lowest
    index."""
    cand = np.asarray(cand)
    if k <= 0 or not len(cand):
        return cand[:0]
    keys = (cand,) + (() if util is None else (util,)) + (-p.node_idle_ms[cand],
                                                          p.node_has_ray[cand])
    return cand[np.lexsort(keys)][:k]

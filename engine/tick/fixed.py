"""The fixed phases every policy has, in Ray's order (docs/ray-semantics.md §3):
outdated nodes, ``min_worker_nodes`` launches, groups above ``max_worker_nodes``
and the cluster above ``max_num_nodes``, idle termination.

The rules are here once:

- ``hash_outdated``: a node is outdated when its type is no longer configured,
  or its config has a launch hash the node's differs from (§3.1);
- victims of a cap: pending nodes first, then the longest idle, then the least
  used, then the lowest index; never the head, never a REQUESTED or
  RAY_STOP_REQUESTED instance (``model.termination.cap_victims``, quirk Q13);
- idle termination: running ray nodes that received nothing, idle past their
  type's timeout, longest idle first, never below ``min_worker_nodes``.

Ray-compat applies the rules through its own node list, whose order and aliasing
are Ray's and decide its victims (``engine/raycompat/phases.py`` calls
``hash_outdated`` and the shared timeouts); the efficient mode and the baseline run
the phase functions below over their tick state, which provides:

    p, alive (M,) bool, terminable (N,) bool, free (M, R), terms (list),
    terminate(n, cause, value), can_launch(t), launch_many(t, k) -> slot,
    type_count(t), keeps_min(n)
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from vecsched.engine.model.dtypes import Cause, Status
from vecsched.engine.model.problem import Problem
from vecsched.engine.model.termination import (cap_victims, longest_idle_first, outdated_terms,
                                               type_idle_timeouts)


def hash_outdated(p: Problem, t: int, node_hash: str) -> bool:
    """The node of type ``t`` with launch hash ``node_hash`` is outdated (§3.1)."""
    want = p.type_launch_hash[t]
    return not p.type_configured[t] or bool(want and want != node_hash)


def outdated(st, may: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> None:
    """Outdated nodes go: the builder's (already out of the cluster) and, with the
    launch-config check on, running nodes ``hash_outdated`` names. ``may(nodes)``
    returns the ones allowed to go this tick (default: all)."""
    p = st.p
    built = np.flatnonzero(p.node_outdated & st.terminable[:p.N])
    stale = [n for n in range(p.N if not p.disable_launch_config_check else 0)
             if st.alive[n] and st.terminable[n] and p.node_status[n] == Status.RAY_RUNNING
             and hash_outdated(p, int(p.node_type[n]), p.node_launch_hash[n])]
    every = np.union1d(built, np.asarray(stale, np.int64))
    go = np.zeros(p.N, bool)
    go[every if may is None else may(every)] = True
    st.terms += outdated_terms(p, go & st.terminable[:p.N])
    for n in stale:
        if go[n]:
            st.terminate(n, Cause.OUTDATED, 0)


def min_workers(st) -> None:
    """Launch until every configured group has ``min_worker_nodes`` (within its
    launch room and ``max_num_nodes``), in type order."""
    p = st.p
    for t in np.flatnonzero(p.type_configured).tolist():
        while st.type_count(t) < p.type_min[t] and st.can_launch(t):
            st.launch_many(t, 1)


def _victims(st, cand: np.ndarray, k: int) -> np.ndarray:
    p = st.p
    cand = cand[st.terminable[cand]]
    if k <= 0 or not len(cand):
        return cand[:0]
    total = np.where(p.node_total[cand] > 0, p.node_total[cand], 1.0)
    util = ((p.node_total[cand] - st.free[cand]) / total).mean(axis=1)
    return cap_victims(p, cand, k, util)


def caps(st) -> None:
    """Groups above ``max_worker_nodes``, then the cluster above ``max_num_nodes``,
    lose victims (module docstring)."""
    p = st.p
    for t in np.flatnonzero(p.type_configured).tolist():
        members = np.flatnonzero(st.alive[:p.N] & (p.node_type == t))
        extra = len(members) - int(p.type_max[t])
        for n in _victims(st, members, extra).tolist():
            st.terminate(n, Cause.MAX_NUM_NODE_PER_TYPE, int(p.type_max[t]))
    if p.max_num_nodes > 0:
        members = np.flatnonzero(st.alive[:p.N])
        extra = len(members) - p.max_num_nodes
        for n in _victims(st, members, extra).tolist():
            st.terminate(n, Cause.MAX_NUM_NODES, int(p.max_num_nodes))


def idle(st, received: np.ndarray) -> None:
    """Running ray nodes that received nothing ((N,) ``received``), idle past their
    type's timeout, are terminated longest idle first, never taking a group below
    ``min_worker_nodes``."""
    p = st.p
    N = p.N
    timeout = type_idle_timeouts(p)[p.node_type]
    with np.errstate(invalid="ignore"):
        cand = (st.alive[:N] & st.terminable & ~received[:N] & p.node_has_ray
                & (p.node_status == Status.RAY_RUNNING) & ~np.isnan(timeout)
                & (p.node_idle_ms > timeout * 1000.0))
    for n in longest_idle_first(p, np.flatnonzero(cand)).tolist():
        if not st.keeps_min(n):
            st.terminate(n, Cause.IDLE, int(p.node_idle_ms[n]))

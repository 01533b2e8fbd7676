"""The mutable state of one baseline tick, and its fixed phases.

The phases every policy has (outdated nodes, groups above their max,
``min_worker_nodes`` launches, idle termination) follow the shared rules of
``vecsched.engine.model.termination``; the packing phases (``ffd_gangs``,
``ffd_runs``) read and change the budgets, free resources and opened nodes kept
here.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.dtypes import CNT, QTY, Cause
from vecsched.engine.model.problem import Problem
from vecsched.engine.model.termination import (cap_victims, longest_idle_first, outdated_terms,
                                               terminable, type_idle_timeouts)

# "No cap" for the global node budget (max_num_nodes = -1).
NO_CAP = 1 << 62


class NewNodes:
    """The nodes this tick opens: their types and free resources, in slot order."""

    def __init__(self, R: int):
        self.types: list[int] = []
        self.free = np.zeros((0, R), dtype=QTY)

    def open(self, t: int, free_rows: np.ndarray) -> int:
        """Open ``len(free_rows)`` nodes of type t; returns the first new index j."""
        j = len(self.types)
        self.types.extend([t] * len(free_rows))
        self.free = np.concatenate([self.free, free_rows])
        return j


class FfdTick:
    """One tick's decisions so far. ``gone``: existing nodes not in the cluster
    after the tick; ``alive``: those kept by the cap phases (packing uses them);
    ``type_left`` / ``global_left``: launches each configured type and the
    cluster may still make; ``cap``: the free row of a brand-new node per type."""

    def __init__(self, p: Problem):
        self.p = p
        self.configured = np.flatnonzero(p.type_configured)
        self.cap = p.type_free
        self.terms: list[tuple[int, int, int]] = []      # (node, cause, value) in reply order
        self.gone = p.node_outdated.copy()
        self.terminable = terminable(p)
        self.free = p.node_free.copy()
        self.new = NewNodes(p.R)
        self.alive = ~self.gone
        self.type_count = np.zeros(p.T, CNT)
        self.type_left = np.zeros(p.T, CNT)
        self.global_left = NO_CAP

    def cut_outdated(self) -> None:
        """Outdated nodes (already emptied by the builder) are terminated."""
        self.terms += outdated_terms(self.p, self.terminable)

    def cut_caps(self) -> None:
        """Groups above max_worker_nodes lose victims (pending first, then the
        longest idle, ties to the lowest index); then the launch budgets are set
        from the nodes kept."""
        p = self.p
        for t in self.configured:
            members = np.flatnonzero(~self.gone & (p.node_type == t))
            excess = len(members) - int(p.type_max[t])
            victims = cap_victims(p, members[self.terminable[members]], excess)
            for n in victims.tolist():
                self.terms.append((n, Cause.MAX_NUM_NODE_PER_TYPE, int(p.type_max[t])))
            self.gone[victims] = True
        self.alive = ~self.gone
        self.type_count = np.bincount(p.node_type[self.alive], minlength=p.T).astype(CNT)
        self.type_left = np.where(p.type_configured,
                                  np.maximum(p.type_max - self.type_count, 0), 0)
        self.global_left = NO_CAP if p.max_num_nodes < 0 else \
            max(p.max_num_nodes - int(self.alive.sum()), 0)

    def open_new(self, t: int, free_rows: np.ndarray) -> int:
        """Open one new node of type t per row of ``free_rows`` within the budgets
        (the caller has checked them); returns the first new index j."""
        m = len(free_rows)
        self.type_left[t] -= m
        self.global_left -= m
        return self.new.open(int(t), free_rows)

    def open_min_workers(self) -> None:
        """Launch until every group has min_worker_nodes, in type order."""
        p = self.p
        for t in self.configured:
            m = min(int(p.type_min[t] - self.type_count[t]), int(self.type_left[t]),
                    self.global_left)
            if m > 0:
                self.open_new(int(t), np.repeat(self.cap[t:t + 1], m, axis=0))

    def cut_idle(self, received: np.ndarray) -> None:
        """Idle running nodes that received nothing ((N,) ``received``) are
        terminated, longest idle first, never taking a group below
        min_worker_nodes."""
        p = self.p
        kept = self.type_count + np.bincount(np.asarray(self.new.types, np.int64),
                                             minlength=p.T)
        timeout_s = type_idle_timeouts(p)
        idle = (self.alive & p.node_has_ray & ~received & self.terminable
                & (p.node_idle_ms > timeout_s[p.node_type] * 1000.0))   # NaN timeout: never
        for n in longest_idle_first(p, np.flatnonzero(idle)).tolist():
            t = p.node_type[n]
            if kept[t] - 1 >= p.type_min[t]:
                kept[t] -= 1
                self.gone[n] = True
                self.terms.append((n, Cause.IDLE, int(p.node_idle_ms[n])))

"""The mutable state of one baseline tick, and its fixed phases.

The phases every policy has (outdated nodes, ``min_worker_nodes`` launches,
groups above their max, idle termination) are ``vecsched.engine.tick.fixed``'s,
run over this state; the packing phases (``ffd_gangs``, ``ffd_runs``) read and
change the budgets, free resources and opened nodes kept here.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.dtypes import CNT, QTY
from vecsched.engine.model.problem import Problem
from vecsched.engine.model.termination import terminable

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
    after the tick (``alive`` is its complement); ``type_left`` / ``global_left``:
    launches each configured type and the cluster may still make; ``cap``: the
    free row of a brand-new node per type. The fixed phases
    (``vecsched.engine.tick.fixed``) run over it through ``terminate``,
    ``can_launch``, ``launch_many``, ``type_count`` and ``keeps_min``."""

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
        self.type_left = np.zeros(p.T, CNT)
        self.global_left = NO_CAP
        self._budgets()

    def _budgets(self) -> None:
        p = self.p
        have = np.bincount(p.node_type[self.alive], minlength=p.T) + self._new_counts()
        self.type_left = np.where(p.type_configured, np.maximum(p.type_max - have, 0), 0)
        self.global_left = NO_CAP if p.max_num_nodes < 0 else \
            max(p.max_num_nodes - int(self.alive.sum()) - len(self.new.types), 0)

    def terminate(self, n: int, cause: int, value: int) -> None:
        self.gone[n] = True
        self.alive[n] = False
        self.terms.append((int(n), int(cause), int(value)))
        self._budgets()

    def type_count(self, t: int) -> int:
        """Nodes of type t after the tick so far: existing ones kept, new ones."""
        return int((self.alive & (self.p.node_type == t)).sum() + self.new.types.count(t))

    def _new_counts(self) -> np.ndarray:
        return np.bincount(np.asarray(self.new.types, np.int64), minlength=self.p.T)

    def keeps_min(self, n: int) -> bool:
        """Terminating node n would leave its configured type below min_worker_nodes."""
        t = int(self.p.node_type[n])
        return bool(self.p.type_configured[t]) and self.type_count(t) - 1 < self.p.type_min[t]

    def can_launch(self, t: int) -> bool:
        return self.type_left[t] > 0 and self.global_left != 0

    def launch_many(self, t: int, k: int) -> int:
        """``k`` brand-new nodes of type t; returns the first one's new index j."""
        return self.open_new(t, np.repeat(self.cap[t:t + 1], k, axis=0))

    def open_new(self, t: int, free_rows: np.ndarray) -> int:
        """Open one new node of type t per row of ``free_rows`` within the budgets
        (the caller has checked them); returns the first new index j."""
        m = len(free_rows)
        self.type_left[t] -= m
        self.global_left -= m
        return self.new.open(int(t), free_rows)

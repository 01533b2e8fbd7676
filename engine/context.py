"""The mutable state of one tick: scheduling-node slots as arrays, and their order.

Ray keeps a list of node objects and deep-copies it in every phase. Here each
node is a slot (a row in every array); a phase rewrites ``order`` (the list
Ray would hold, as slot ids) and edits rows in place. Slots < N are the
Problem's nodes; later slots are nodes the tick adds (min workers, launches)
or trial templates that were never chosen (not in ``order``).
"""
from __future__ import annotations

import numpy as np

from .dtypes import CNT, IDX, QTY, Kind, Sched, Status
from .problem import Problem

_ROWS = ("total", "order", "free", "present", "placed_res", "label")
_VECS = ("type", "status", "kind", "idle", "has_ray", "prio", "rec", "avail", "sched",
         "cause", "cause_value", "placed_any", "placed_gpu", "cplaced_any")


class Context:
    def __init__(self, p: Problem):
        self.p = p
        N, R, L = p.N, p.R, len(p.label_keys)
        cap = max(16, 2 * N)
        self.M = N
        self.total = np.zeros((cap, R), QTY); self.total[:N] = p.node_total
        self.order = np.full((cap, R), -1, IDX); self.order[:N] = p.node_order
        self.free = np.zeros((cap, R), QTY); self.free[:N] = p.node_free
        self.present = np.zeros((cap, R), bool); self.present[:N] = p.node_free_present
        self.placed_res = np.zeros((cap, R), bool)
        self.label = np.full((cap, L), -1, IDX); self.label[:N] = p.node_label
        self.type = np.zeros(cap, IDX); self.type[:N] = p.node_type
        self.status = np.full(cap, Status.NONE, np.int8); self.status[:N] = p.node_status
        self.kind = np.full(cap, Kind.WORKER, np.int8); self.kind[:N] = p.node_kind
        self.idle = np.zeros(cap, CNT); self.idle[:N] = p.node_idle_ms
        self.has_ray = np.zeros(cap, bool); self.has_ray[:N] = p.node_has_ray
        # Tie-breakers of the pick key come from the type; unknown types get Ray's defaults.
        self.prio = np.zeros(cap, CNT)
        self.rec = np.ones(cap, QTY)
        self.avail = np.ones(cap, QTY)
        t = p.node_type
        self.prio[:N] = np.where(p.type_configured[t], p.type_priority[t], 0)
        self.rec[:N] = p.type_recoverable[t]
        self.avail[:N] = p.type_availability[t]
        self.sched = np.full(cap, Sched.SCHEDULABLE, np.int8)
        self.cause = np.zeros(cap, np.int8)
        self.cause_value = np.zeros(cap, CNT)
        self.sched[:N][p.node_outdated] = Sched.TO_TERMINATE
        self.cause[:N][p.node_outdated] = 4   # Cause.OUTDATED, set when the node was built
        self.placed_any = np.zeros(cap, bool)
        self.placed_gpu = np.zeros(cap, bool)
        self.cplaced_any = np.zeros(cap, bool)
        self.nodes = np.arange(N, dtype=IDX)   # Ray's node list, as slot ids

    # ---- slots -----------------------------------------------------------------------
    def _grow(self, need: int) -> None:
        cap = self.type.shape[0]
        if need <= cap:
            return
        new = max(need, 2 * cap)
        for name in _ROWS + _VECS:
            a = getattr(self, name)
            b = np.empty((new,) + a.shape[1:], a.dtype)
            b[:cap] = a
            fill = {"order": -1, "label": -1, "status": Status.NONE, "kind": Kind.WORKER,
                    "rec": 1.0, "avail": 1.0}.get(name, 0)
            b[cap:] = fill
            setattr(self, name, b)

    def new_slots(self, t: int, k: int, sched: int = Sched.TO_LAUNCH) -> np.ndarray:
        """k fresh nodes of configured type t, built from its config (kind WORKER)."""
        p = self.p
        m0 = self.M
        self._grow(m0 + k)
        sl = slice(m0, m0 + k)
        self.total[sl] = p.type_cap[t]
        self.order[sl] = p.type_order[t]
        self.free[sl] = p.type_cap[t]
        self.present[sl] = False
        cols = p.type_order[t][p.type_order[t] >= 0]
        for m in range(m0, m0 + k):
            self.present[m, cols] = True
        self.free[sl][:, p.implicit] = np.where(self.present[sl][:, p.implicit],
                                                 self.free[sl][:, p.implicit], 1.0)
        self.placed_res[sl] = False
        self.label[sl] = p.type_label[t]
        self.type[sl] = t
        self.status[sl] = Status.NONE
        self.kind[sl] = Kind.WORKER
        self.idle[sl] = 0
        self.has_ray[sl] = False
        self.prio[sl] = p.type_priority[t]
        self.rec[sl] = p.type_recoverable[t]
        self.avail[sl] = p.type_availability[t]
        self.sched[sl] = sched
        self.cause[sl] = 0
        self.cause_value[sl] = 0
        self.placed_any[sl] = False
        self.placed_gpu[sl] = False
        self.cplaced_any[sl] = False
        self.M = m0 + k
        return np.arange(m0, m0 + k, dtype=IDX)

    # ---- views -----------------------------------------------------------------------
    def live(self) -> np.ndarray:
        """Slots in the list that are not being terminated."""
        n = self.nodes
        return n[self.sched[n] != Sched.TO_TERMINATE]

    def type_counts(self) -> np.ndarray:
        """(T,) nodes per type that are not being terminated (Ray's cluster shape)."""
        return np.bincount(self.type[self.live()], minlength=self.p.T).astype(CNT)

    def type_available(self) -> np.ndarray:
        """(T,) max_worker_nodes minus every node of the type in the list (§2.1)."""
        p = self.p
        every = np.bincount(self.type[self.nodes], minlength=p.T).astype(CNT)
        return np.where(p.type_configured, p.type_max - every, 0)

    def terminate(self, m: int, cause: int, value: int) -> None:
        self.sched[m] = Sched.TO_TERMINATE
        self.cause[m] = cause
        self.cause_value[m] = value

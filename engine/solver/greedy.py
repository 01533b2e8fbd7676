"""A first-fit-decreasing packing of an ``Instance``: the solver's default hint,
and a quick feasible answer without OR-Tools. Pure numpy.

Gangs largest first (by their summed dominant share over the kept columns),
each all or nothing; then plain runs largest first, as many units as fit. A unit
goes to the first bin with room in class order (existing nodes, forced launches,
then new bins already opened), else opens a bin of the cheapest new-node class
that holds it (lowest class index on ties), within the budgets.
"""
from __future__ import annotations

import numpy as np

from .instance import NEW, Instance


class _Bins:
    def __init__(self, inst: Instance):
        self.inst = inst
        self.free = {}            # (k, j) -> (R',) remaining capacity
        self.groups = {}          # (k, j) -> anti-affinity groups on it
        self.opened = np.zeros(inst.K, np.int64)      # bins in use per class (a prefix)
        self.launched = 0
        for k in range(inst.K):
            if inst.kind[k] != NEW:
                self.opened[k] = int(inst.bins[k])
        for k in range(inst.K):
            for j in range(int(inst.bins[k])):
                self.free[k, j] = inst.cap[k].copy()
                self.groups[k, j] = set()

    def snapshot(self):
        return ({key: v.copy() for key, v in self.free.items()},
                {key: set(v) for key, v in self.groups.items()},
                self.opened.copy(), self.launched)

    def restore(self, snap) -> None:
        self.free, self.groups, self.opened, self.launched = snap

    def _fits(self, i: int, k: int, j: int) -> int:
        inst = self.inst
        g = int(inst.spread[i])
        if g >= 0 and g in self.groups[k, j]:
            return 0
        q = inst.qty[i]
        pos = q > 0
        n = int((self.free[k, j][pos] // q[pos]).min()) if pos.any() else int(inst.mult[i])
        return min(n, int(inst.fitmax[i, k]))

    def place(self, i: int, want: int, out: list) -> int:
        """Place up to ``want`` units of item i; returns the units placed."""
        inst = self.inst
        order = [k for k in range(inst.K) if inst.kind[k] != NEW] + \
            [k for k in range(inst.K) if inst.kind[k] == NEW]
        left = want
        for k in order:
            if not inst.compat[i, k]:
                continue
            for j in range(int(self.opened[k])):
                if left == 0:
                    return want
                n = min(left, self._fits(i, k, j))
                if n > 0:
                    self._take(i, k, j, n, out)
                    left -= n
        while left > 0:
            k = self._cheapest_new(i)
            if k < 0:
                break
            j = int(self.opened[k])
            self.opened[k] += 1
            self.launched += 1
            n = min(left, self._fits(i, k, j))
            self._take(i, k, j, n, out)
            left -= n
        return want - left

    def _cheapest_new(self, i: int) -> int:
        inst = self.inst
        if 0 <= inst.global_budget <= self.launched:
            return -1
        best = -1
        for k in np.flatnonzero((inst.kind == NEW) & inst.compat[i]).tolist():
            if self.opened[k] >= inst.bins[k]:
                continue
            if best < 0 or inst.cost[k] < inst.cost[best]:
                best = k
        return best

    def _take(self, i, k, j, n, out) -> None:
        self.free[k, j] = self.free[k, j] - n * self.inst.qty[i]
        if self.inst.spread[i] >= 0:
            self.groups[k, j].add(int(self.inst.spread[i]))
        out.append((i, k, j, n))


def _size(inst: Instance) -> np.ndarray:
    """(I,) dominant share of one unit over the largest capacity per column."""
    top = np.maximum(inst.cap.max(axis=0) if inst.K else np.ones(inst.qty.shape[1]), 1)
    return (inst.qty / top).max(axis=1) if inst.qty.shape[1] else np.zeros(inst.I)


def greedy_assignment(inst: Instance) -> np.ndarray:
    """(A, 4) rows (item, class, bin, units) of the first-fit-decreasing packing."""
    bins = _Bins(inst)
    size = _size(inst)
    out: list = []
    G = len(inst.gangs)
    gsize = np.asarray([float((size * inst.mult)[inst.gang == g].sum()) for g in range(G)])
    for g in sorted(range(G), key=lambda g: (-gsize[g], g)):
        snap, mark = bins.snapshot(), len(out)
        items = sorted(np.flatnonzero(inst.gang == g).tolist(), key=lambda i: (-size[i], i))
        for i in items:
            if bins.place(i, int(inst.mult[i]), out) < inst.mult[i]:
                bins.restore(snap)
                del out[mark:]
                break
    runs = sorted(np.flatnonzero(inst.run >= 0).tolist(), key=lambda i: (-size[i], i))
    for i in runs:
        bins.place(i, int(inst.mult[i]), out)
    return np.asarray(out, np.int64).reshape(-1, 4)

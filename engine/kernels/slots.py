"""Slot-level steps shared by the packing kernels (kernels/gangs.py,
kernels/loop.py): a commit that marks stale what it changed, a clone, a
change mark. Records: kernels/records.py.
"""
import numpy as np

from ._jit import njit_inner
from .pack import _commit
from .pick import _invalidate


@njit_inner
def _win(m, i, cs, n, ps, runs, left, scratch, changed):
    """Commit candidate i (slot m) of cs[:n] and mark stale what its pick
    changed: ``left`` is lowered in place by the units taken. scratch,
    changed: (K,) room."""
    _commit(m, ps, runs, left, scratch)
    cs.alive[i] = False
    nc = np.int64(0)
    for k in range(left.shape[0]):
        if cs.taken[i, k] != 0:
            changed[nc] = k
            nc += 1
    for k in range(left.shape[0]):     # scratch now holds the old counts
        scratch[k] = left[k]
        left[k] -= cs.taken[i, k]
    _invalidate(cs, n, changed, nc, scratch, left)


@njit_inner
def _clone(s, m, ps):
    """Slot s becomes a copy of slot m (the rows packing reads and writes)."""
    sl, src = ps.slots, ps.src
    for r in range(sl.total.shape[1]):
        sl.total[s, r], src.free[s, r] = sl.total[m, r], src.free[m, r]
        src.present[s, r], src.placed_res[s, r] = src.present[m, r], src.placed_res[m, r]
    for j in range(sl.order.shape[1]):
        sl.order[s, j] = sl.order[m, j]
    for j in range(sl.label.shape[1]):
        sl.label[s, j] = sl.label[m, j]
    for j in range(src.hist.shape[1]):
        src.hist[s, j] = src.hist[m, j]
    sl.type[s], sl.status[s], sl.kind[s] = sl.type[m], sl.status[m], sl.kind[m]
    sl.rec[s], sl.prio[s], sl.avail[s] = sl.rec[m], sl.prio[m], sl.avail[m]
    src.placed_gpu[s], src.placed_any[s], src.nhist[s] = (src.placed_gpu[m], src.placed_any[m],
                                                          src.nhist[m])


@njit_inner
def _copy_demand(s, m, ps):
    """Slot s takes slot m's availability, placements and labels (a strict twin
    that wins with m)."""
    sl, src = ps.slots, ps.src
    for r in range(src.free.shape[1]):
        src.free[s, r], src.present[s, r] = src.free[m, r], src.present[m, r]
        src.placed_res[s, r] = src.placed_res[m, r]
    for j in range(src.hist.shape[1]):
        src.hist[s, j] = src.hist[m, j]
    for j in range(sl.label.shape[1]):
        sl.label[s, j] = sl.label[m, j]
    src.placed_gpu[s], src.placed_any[s], src.nhist[s] = (src.placed_gpu[m], src.placed_any[m],
                                                          src.nhist[m])


@njit_inner(hot=True)
def _mark(m, marks):
    """Slot m changes: it leaves its classes and its cached key digest."""
    marks.rcls[m] = -1
    marks.crcls[m] = -1
    marks.lcls[m] = -2
    marks.clcls[m] = -2
    marks.ghash[m] = np.nan

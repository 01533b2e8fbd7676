"""Slot-level steps shared by the packing kernels (kernels/gangs.py,
kernels/loop.py): one pick over cached walks, a commit, a clone, a change mark.

Array groups, as tuples:
  slots  (total, order, label, type, status, kind, rec, prio, avail)
  src    (free, present, placed_res, placed_gpu, placed_any, hist, nhist)
  marks  (rcls, crcls, lcls, clcls)  class caches a changed slot leaves
"""
import numpy as np

from ._jit import njit
from .pack import _commit
from .pick import _invalidate, _refresh_pick


@njit
def _pick_loop(cands, nc, alive, valid, tk, did, ks, cls, ncls, slots, src, implicit, exact,
               runs, left, rq, gpu_col, conserve_gpu):
    """One pick of the loop: the position of the best candidate, or -1."""
    total, order, label, rec, prio, avail = (slots[0], slots[1], slots[2], slots[6], slots[7],
                                             slots[8])
    free, present, placed_res, placed_gpu, hist, nhist = (src[0], src[1], src[2], src[3],
                                                          src[5], src[6])
    return _refresh_pick(cands[:nc], alive[:nc], valid[:nc], cls, ncls, total, order, free,
                         present, placed_res, placed_gpu, label, hist, nhist, rec, prio, avail,
                         implicit, exact, runs, left, rq, gpu_col, conserve_gpu, tk[:nc],
                         did[:nc], ks[0][:nc], ks[1][:nc], ks[2][:nc], ks[3][:nc], ks[4][:nc])


@njit
def _win(m, i, alive, valid, tk, nc, src, slots, implicit, exact, runs, left, rq, scratch):
    """Commit candidate i (slot m) and mark stale what its pick changed;
    returns the new remaining counts."""
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    label = slots[2]
    tau = tk[i].copy()
    _commit(m, free, present, placed_res, placed_gpu, placed_any, label, hist, nhist,
            implicit, exact, runs, left, rq, scratch)
    new_left = left - tau
    alive[i] = False
    changed = np.flatnonzero(left != new_left)
    _invalidate(valid[:nc], tk[:nc], changed, left, new_left)
    return new_left


@njit
def _clone(s, m, slots, src):
    total, order, label, typ, status, kind, rec, prio, avail = slots
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    total[s], order[s], label[s] = total[m], order[m], label[m]
    typ[s], status[s], kind[s], rec[s], prio[s], avail[s] = (typ[m], status[m], kind[m],
                                                             rec[m], prio[m], avail[m])
    free[s], present[s], placed_res[s] = free[m], present[m], placed_res[m]
    placed_gpu[s], placed_any[s], hist[s], nhist[s] = (placed_gpu[m], placed_any[m], hist[m],
                                                      nhist[m])


@njit
def _mark(m, marks, ghash):
    """Slot m changes: it leaves its classes and its cached key digest."""
    marks[0][m] = -1
    marks[1][m] = -1
    marks[2][m] = -2
    marks[3][m] = -2
    ghash[m] = np.nan

"""Slot-level steps shared by the packing kernels (kernels/gangs.py,
kernels/loop.py): one pick over cached walks, a commit, a clone, a change mark.

Array groups, as tuples:
  slots  (total, order, label, type, status, kind, rec, prio, avail)
  src    (free, present, placed_res, placed_gpu, placed_any, hist, nhist)
  marks  (rcls, crcls, lcls, clcls)  class caches a changed slot leaves
"""
import numpy as np

from ._jit import njit_leaf
from .pack import _commit
from .pick import _invalidate, _pick_core


@njit_leaf
def _pick_loop(cands, nc, alive, valid, tk, did, ks, cls, ncls, slots, src, implicit, exact,
               runs, left, rq, gpu_col, conserve_gpu, scr):
    """One pick of the loop: the position of the best candidate, or -1.
    scr: pick.py's ``_pick_scratch``, with room for ncls classes."""
    total, order, label, rec, prio, avail = (slots[0], slots[1], slots[2], slots[6], slots[7],
                                             slots[8])
    free, present, placed_res, placed_gpu, hist, nhist = (src[0], src[1], src[2], src[3],
                                                          src[5], src[6])
    return _pick_core(cands[:nc], alive[:nc], valid[:nc], cls, ncls, total, order, free,
                      present, placed_res, placed_gpu, label, hist, nhist, rec, prio, avail,
                      implicit, exact, runs, left, rq, gpu_col, conserve_gpu, tk[:nc],
                      did[:nc], ks[0][:nc], ks[1][:nc], ks[2][:nc], ks[3][:nc], ks[4][:nc],
                      scr[0], scr[1], scr[2], scr[3], scr[4], scr[5])


@njit_leaf
def _win(m, i, alive, valid, tk, nc, src, slots, implicit, exact, runs, left, rq, scratch,
         changed):
    """Commit candidate i (slot m) and mark stale what its pick changed: ``left``
    is lowered in place by the units taken. scratch, changed: (K,) room."""
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    label = slots[2]
    _commit(m, free, present, placed_res, placed_gpu, placed_any, label, hist, nhist,
            implicit, exact, runs, left, rq, scratch)
    alive[i] = False
    n = 0
    for k in range(left.shape[0]):
        if tk[i, k] != 0:
            changed[n] = k
            n += 1
    for k in range(left.shape[0]):     # scratch now holds the old counts
        scratch[k] = left[k]
        left[k] -= tk[i, k]
    _invalidate(valid[:nc], tk[:nc], changed[:n], scratch, left)


@njit_leaf
def _clone(s, m, slots, src):
    total, order, label, typ, status, kind, rec, prio, avail = slots
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    for r in range(total.shape[1]):
        total[s, r], free[s, r] = total[m, r], free[m, r]
        present[s, r], placed_res[s, r] = present[m, r], placed_res[m, r]
    for j in range(order.shape[1]):
        order[s, j] = order[m, j]
    for j in range(label.shape[1]):
        label[s, j] = label[m, j]
    for j in range(hist.shape[1]):
        hist[s, j] = hist[m, j]
    typ[s], status[s], kind[s], rec[s], prio[s], avail[s] = (typ[m], status[m], kind[m],
                                                             rec[m], prio[m], avail[m])
    placed_gpu[s], placed_any[s], nhist[s] = placed_gpu[m], placed_any[m], nhist[m]


@njit_leaf
def _mark(m, marks, ghash):
    """Slot m changes: it leaves its classes and its cached key digest."""
    marks[0][m] = -1
    marks[1][m] = -1
    marks[2][m] = -2
    marks[3][m] = -2
    ghash[m] = np.nan

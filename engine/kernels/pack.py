"""Trial packing of candidates and the pick of the best one (§4.6, §4.7).

``_walk`` is Ray's greedy walk of the (sorted) request runs over one node, on
scratch rows. ``_best_node`` walks every candidate, scores it and keeps the best
by the key (label score, gpu_ok, matching types, min util, mean util,
recoverable availability, priority, cloud availability), compared
lexicographically; the first candidate wins exact ties (Ray's stable sort).
Nodes in one equivalence class (``cls`` >= 0, Ray's NodeStateCache) are tried
once per call.
"""
import numpy as np

from ._jit import njit
from .fit import _fit_count, _take
from .score import _score


@njit
def _walk(free, present, res, implicit, exact, run_shape, run_left,
          qty, cols, ncols, gpu_key, taken):
    """Place runs in order on one node's scratch rows (free, present, res modified).

    Returns (units placed, whether a placed request names GPU). taken (K,) out.
    """
    placed = 0
    gpu = False
    for k in range(run_shape.shape[0]):
        s = run_shape[k]
        n = _fit_count(free, present, implicit, exact, qty[s], cols[s], ncols[s], run_left[k])
        taken[k] = n
        if n > 0:
            _take(free, present, exact, qty[s], cols[s], ncols[s], n)
            placed += n
            if gpu_key[s]:
                gpu = True
            for j in range(ncols[s]):
                res[cols[s, j]] = True
    return placed, gpu


@njit
def _better(a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7):
    """Whether key a is strictly greater than key b, lexicographically."""
    if a0 != b0:
        return a0 > b0
    if a1 != b1:
        return a1 > b1
    if a2 != b2:
        return a2 > b2
    if a3 != b3:
        return a3 > b3
    if a4 != b4:
        return a4 > b4
    if a5 != b5:
        return a5 > b5
    if a6 != b6:
        return a6 > b6
    return a7 > b7


@njit
def _best_node(cands, cls, ncls, total, order, free, present, placed_res, placed_gpu,
               lscore, rec, prio, avail, implicit, exact, run_shape, run_left,
               qty, cols, ncols, gpu_key, gpu_col, conserve_gpu, out_taken):
    """Index into cands of the best candidate (-1 if none places anything).

    Slot arrays are (M, R) / (M,); cands (C,) slot ids in list order; runs (K,);
    shapes (S, R). out_taken (K,) receives the winner's units per run.
    """
    R = free.shape[1]
    K = run_shape.shape[0]
    seen = np.zeros(max(ncls, 1), dtype=np.bool_)
    f = np.empty(R)
    p = np.empty(R, dtype=np.bool_)
    res = np.empty(R, dtype=np.bool_)
    taken = np.empty(K, dtype=np.int64)
    best = -1
    b0 = 0; b1 = 0; b2 = 0; b3 = 0.0; b4 = 0.0; b5 = 0.0; b6 = 0; b7 = 0.0
    for ci in range(cands.shape[0]):
        m = cands[ci]
        c = cls[m]
        if c >= 0:
            if seen[c]:
                continue
            seen[c] = True
        f[:] = free[m]
        p[:] = present[m]
        res[:] = placed_res[m]
        placed, gpu = _walk(f, p, res, implicit, exact, run_shape, run_left,
                            qty, cols, ncols, gpu_key, taken)
        if placed == 0:
            continue
        gpu_ok, match, lo, mean = _score(total[m], order[m], f, p, res,
                                         placed_gpu[m] or gpu, gpu_col, conserve_gpu)
        k0 = lscore[m]
        if best < 0 or _better(k0, gpu_ok, match, lo, mean, rec[m], prio[m], avail[m],
                               b0, b1, b2, b3, b4, b5, b6, b7):
            best = ci
            b0 = k0; b1 = gpu_ok; b2 = match; b3 = lo; b4 = mean
            b5 = rec[m]; b6 = prio[m]; b7 = avail[m]
            out_taken[:] = taken
    return best


@njit
def _commit(m, free, present, placed_res, placed_gpu, placed_any, implicit, exact,
            run_shape, taken, qty, cols, ncols, gpu_key):
    """Apply a winner's taken units (K,) to slot m's rows, in place."""
    for k in range(run_shape.shape[0]):
        n = taken[k]
        if n <= 0:
            continue
        s = run_shape[k]
        _take(free[m], present[m], exact, qty[s], cols[s], ncols[s], n)
        placed_any[m] = True
        if gpu_key[s]:
            placed_gpu[m] = True
        for j in range(ncols[s]):
            placed_res[m, cols[s, j]] = True

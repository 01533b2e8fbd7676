"""Trial packing of candidates and the pick of the best one (§4.6, §4.7).

``_walk`` is Ray's greedy walk of the (sorted) request runs over one node.
``_best_node`` walks every candidate on scratch rows, scores it and keeps the
best by the key (label score, gpu_ok, matching types, min util, mean util,
recoverable availability, priority, cloud availability), compared
lexicographically; the first candidate wins exact ties (Ray's stable sort).
Nodes of one equivalence class (``cls`` >= 0, Ray's NodeStateCache) are tried
once per call.

``rq`` is the request-table tuple (engine.requests_view.Requests.kernel):
(qty (Q,R), cols (Q,R), ncols (Q,), gpu_key (Q,), anti (Q,2), sel_lo (Q,), sel_hi (Q,),
sel_con_ptr, con_key, con_op, con_val_ptr, con_vals, has_sel (Q,)).
"""
import numpy as np

from ._jit import njit
from .fit import _fit_count, _take
from .labels import _first_selector, _label_score
from .score import _score


@njit
def _walk(free, present, res, label, hist, nh, implicit, exact, run_req, run_left, rq, taken):
    """Place runs in order on one node's rows (free, present, res, label, hist
    are modified). Returns (units placed, whether a placed request names GPU,
    new hist length). taken (K,) out."""
    qty, cols, ncols, gpu_key, anti, has_sel = rq[0], rq[1], rq[2], rq[3], rq[4], rq[12]
    placed = 0
    gpu = False
    for k in range(run_req.shape[0]):
        q = run_req[k]
        taken[k] = 0
        if has_sel[q] and _first_selector(label, q, rq) < 0:
            continue
        ak = anti[q, 0]
        if ak >= 0 and label[ak] == anti[q, 1]:
            continue
        n = _fit_count(free, present, implicit, exact, qty[q], cols[q], ncols[q], run_left[k])
        if ak >= 0 and n > 1:
            n = 1                       # the first unit's label repels the next
        taken[k] = n
        if n == 0:
            continue
        _take(free, present, exact, qty[q], cols[q], ncols[q], n)
        placed += n
        if gpu_key[q]:
            gpu = True
        for j in range(ncols[q]):
            res[cols[q, j]] = True
        if ak >= 0:
            label[ak] = anti[q, 1]
        if has_sel[q]:
            seen = False
            for j in range(nh):
                if hist[j] == q:
                    seen = True
                    break
            if not seen:
                hist[nh] = q
                nh += 1
    return placed, gpu, nh


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
               label, hist, nhist, rec, prio, avail, implicit, exact, run_req, run_left, rq,
               gpu_col, conserve_gpu, out_taken):
    """Index into cands of the best candidate (-1 if none places anything).

    Slot arrays are (M, R) / (M, L) / (M, H) / (M,); cands (C,) slot ids in list
    order; runs (K,). out_taken (K,) receives the winner's units per run.
    """
    R = free.shape[1]
    K = run_req.shape[0]
    seen = np.zeros(max(ncls, 1), dtype=np.bool_)
    f = np.empty(R)
    p = np.empty(R, dtype=np.bool_)
    res = np.empty(R, dtype=np.bool_)
    lab = np.empty(label.shape[1], dtype=label.dtype)
    hst = np.empty(hist.shape[1], dtype=hist.dtype)
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
        lab[:] = label[m]
        hst[:] = hist[m]
        placed, gpu, nh = _walk(f, p, res, lab, hst, nhist[m], implicit, exact,
                                run_req, run_left, rq, taken)
        if placed == 0:
            continue
        gpu_ok, match, lo, mean = _score(total[m], order[m], f, p, res,
                                         placed_gpu[m] or gpu, gpu_col, conserve_gpu)
        k0 = _label_score(lab, hst, nh, rq)
        if best < 0 or _better(k0, gpu_ok, match, lo, mean, rec[m], prio[m], avail[m],
                               b0, b1, b2, b3, b4, b5, b6, b7):
            best = ci
            b0 = k0; b1 = gpu_ok; b2 = match; b3 = lo; b4 = mean
            b5 = rec[m]; b6 = prio[m]; b7 = avail[m]
            out_taken[:] = taken
    return best


@njit
def _commit(m, free, present, placed_res, placed_gpu, placed_any, label, hist, nhist,
            implicit, exact, run_req, run_left, rq, taken):
    """Walk the winner's real rows (slot m) in place; same result as its trial."""
    placed, gpu, nh = _walk(free[m], present[m], placed_res[m], label[m], hist[m], nhist[m],
                            implicit, exact, run_req, run_left, rq, taken)
    nhist[m] = nh
    if placed > 0:
        placed_any[m] = True
    if gpu:
        placed_gpu[m] = True
    return placed

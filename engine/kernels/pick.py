"""The best-node pick (§4.6) with per-candidate caching (DESIGN.md §4 item 3).

Every candidate is walked on scratch rows (pack._walk), scored, and the best by
the key (label score, gpu_ok, matching types, min util, mean util, recoverable
availability, priority, cloud availability) wins, compared lexicographically;
the first candidate wins exact ties (Ray's stable sort). A candidate's trial
walk and score are kept between picks of one packing loop and recomputed only
when stale: a
pick lowers the remaining counts of the runs the winner took, and a cached
walk stays exact as long as, for each such run, the candidate did not take
every remaining unit and still takes no more than now remain (its count was
capped by its own room, not by the demand).
"""
import numpy as np

from ._jit import njit, njit_leaf
from .labels import _label_score
from .pack import _better, _walk
from .score import _score


@njit
def _pick_scratch(ncls, R, K, H, hist_dtype, label_dtype):
    """Scratch rows of a pick (seen classes, free, present, resources, history,
    saved labels); ``ncls``: room for that many classes."""
    return (np.zeros(max(ncls, 1), dtype=np.bool_), np.empty(R), np.empty(R, dtype=np.bool_),
            np.empty(R, dtype=np.bool_), np.empty(H, dtype=hist_dtype),
            np.empty(max(K, 1), dtype=label_dtype))


@njit
def _refresh_pick(cands, alive, valid, cls, ncls, total, order, free, present, placed_res,
                  placed_gpu, label, hist, nhist, rec, prio, avail, implicit, exact,
                  run_req, run_left, rq, gpu_col, conserve_gpu,
                  tk, did, k0, k1, k2, k3, k4):
    """Index into cands of the best candidate, walking only stale ones.

    cands (C,) slot ids in list order; alive (C,) still candidates; valid (C,)
    cache fresh; tk (C, K) cached units per run; did (C,) placed anything;
    k0..k4 (C,) cached score tuple. Non-running twins (cls >= 0) are
    represented by their first alive member, as Ray's NodeStateCache does.
    """
    scr = _pick_scratch(ncls, free.shape[1], run_req.shape[0], hist.shape[1], hist.dtype,
                        label.dtype)
    return _pick_core(cands, alive, valid, cls, ncls, total, order, free, present, placed_res,
                      placed_gpu, label, hist, nhist, rec, prio, avail, implicit, exact,
                      run_req, run_left, rq, gpu_col, conserve_gpu, tk, did, k0, k1, k2, k3,
                      k4, scr[0], scr[1], scr[2], scr[3], scr[4], scr[5])


@njit_leaf
def _pick_core(cands, alive, valid, cls, ncls, total, order, free, present, placed_res,
               placed_gpu, label, hist, nhist, rec, prio, avail, implicit, exact,
               run_req, run_left, rq, gpu_col, conserve_gpu, tk, did, k0, k1, k2, k3, k4,
               seen, f, p, res, hst, was):
    """_refresh_pick on caller-owned scratch (``_pick_scratch``, seen with room
    for ncls classes), allocating nothing."""
    R = free.shape[1]
    K = run_req.shape[0]
    anti = rq[4]
    for c in range(ncls):
        seen[c] = False
    best = -1
    for i in range(cands.shape[0]):
        if not alive[i]:
            continue
        m = cands[i]
        c = cls[m]
        if c >= 0:
            if seen[c]:
                continue
            seen[c] = True
        if not valid[i]:
            for r in range(R):
                f[r] = free[m, r]
                p[r] = present[m, r]
                res[r] = placed_res[m, r]
            nh0 = nhist[m]
            for j in range(nh0):            # the walk only appends after these
                hst[j] = hist[m, j]
            # The walk writes labels only at anti-affinity keys: it runs on the
            # node's own label row, and those entries are put back afterwards.
            lab = label[m]
            for k in range(K):
                if anti[run_req[k], 0] >= 0:
                    was[k] = lab[anti[run_req[k], 0]]
            placed, gpu, nh = _walk(f, p, res, lab, hst, nh0, implicit, exact,
                                    run_req, run_left, rq, tk[i])
            did[i] = placed > 0
            if placed > 0:
                gpu_ok, match, lo, mean = _score(total[m], order[m], f, p, res,
                                                 placed_gpu[m] or gpu, gpu_col, conserve_gpu)
                k0[i] = _label_score(lab, hst, nh, rq)
                k1[i] = gpu_ok
                k2[i] = match
                k3[i] = lo
                k4[i] = mean
            for k in range(K - 1, -1, -1):
                if anti[run_req[k], 0] >= 0:
                    lab[anti[run_req[k], 0]] = was[k]
            valid[i] = True
        if not did[i]:
            continue
        if best < 0:
            best = i
            continue
        b = cands[best]
        if _better(k0[i], k1[i], k2[i], k3[i], k4[i], rec[m], prio[m], avail[m],
                   k0[best], k1[best], k2[best], k3[best], k4[best], rec[b], prio[b], avail[b]):
            best = i
    return best


@njit_leaf
def _invalidate(valid, tk, changed, old_left, new_left):
    """Mark stale the cached walks that the lower counts of ``changed`` runs alter."""
    for i in range(valid.shape[0]):
        if not valid[i]:
            continue
        for j in range(changed.shape[0]):
            k = changed[j]
            t = tk[i, k]
            if new_left[k] < t or (t == old_left[k] and new_left[k] != old_left[k]):
                valid[i] = False
                break

"""The best-node pick (§4.6) with per-candidate caching (docs/design.md §4 item 3).

Every candidate is walked on scratch rows (pack._walk), scored, and the best by
the key (label score, gpu_ok, matching types, min util, mean util, recoverable
availability, priority, cloud availability) wins, compared lexicographically;
the first candidate wins exact ties (Ray's stable sort). A candidate's trial
walk and score are kept between picks of one packing loop and recomputed only
when stale: a pick lowers the remaining counts of the runs the winner took, and
a cached walk stays exact as long as, for each such run, the candidate did not
take every remaining unit and still takes no more than now remain (its count
was capped by its own room, not by the demand).
"""
import numpy as np

from ._jit import njit, njit_inner
from .labels import _label_score
from .pack import _better, _walk
from .records import PickScratch
from .score import _score


@njit
def _pick_scratch(ncls, R, K, H):
    """Scratch rows of a pick (records.PickScratch) with room for ncls classes,
    R columns, K runs and H history entries."""
    return PickScratch(np.zeros(max(ncls, 1), dtype=np.bool_), np.empty(R, dtype=np.float64),
                       np.empty(R, dtype=np.bool_), np.empty(R, dtype=np.bool_),
                       np.empty(max(H, 1), dtype=np.int32), np.empty(max(K, 1), dtype=np.int32))


@njit_inner
def _pick_core(cs, n, cl, ps, runs, left, scr):
    """The position (< n) of the best candidate of cs (records.Cands), or -1,
    walking only the ones whose cached walk is stale. cl: records.Classes -
    a non-running class is represented by its first alive member, as Ray's
    NodeStateCache does; ps: records.PackState; runs/left (K,) the runs in
    order and their units wanted; scr: records.PickScratch."""
    slots, src, rq = ps.slots, ps.src, ps.rq
    R = src.free.shape[1]
    K = runs.shape[0]
    seen = scr.seen
    for c in range(cl.n):
        seen[c] = False
    best = np.int64(-1)
    for i in range(n):
        if not cs.alive[i]:
            continue
        m = cs.slot[i]
        c = cl.of[m]
        if c >= 0:
            if seen[c]:
                continue
            seen[c] = True
        if not cs.fresh[i]:
            f, p, res, hst = scr.free, scr.present, scr.res, scr.hist
            for r in range(R):
                f[r] = src.free[m, r]
                p[r] = src.present[m, r]
                res[r] = src.placed_res[m, r]
            nh0 = src.nhist[m]
            for j in range(nh0):            # the walk only appends after these
                hst[j] = src.hist[m, j]
            # The walk writes labels only at anti-affinity keys: it runs on the
            # node's own label row, and those entries are put back afterwards.
            lab = slots.label[m]
            for k in range(K):
                if rq.anti[runs[k], 0] >= 0:
                    scr.was[k] = lab[rq.anti[runs[k], 0]]
            placed, gpu, nh = _walk(f, p, res, lab, hst, nh0, ps.rules.exact, runs, left, rq,
                                    cs.taken[i])
            cs.placed[i] = placed > 0
            if placed > 0:
                gpu_ok, match, lo, mean = _score(slots.total[m], slots.order[m], f, p, res,
                                                 src.placed_gpu[m] or gpu, ps.rules.gpu_col,
                                                 ps.rules.conserve_gpu)
                cs.label_score[i] = _label_score(lab, hst, nh, rq)
                cs.gpu_ok[i] = gpu_ok
                cs.match[i] = match
                cs.util_min[i] = lo
                cs.util_mean[i] = mean
            for k in range(K - 1, -1, -1):
                if rq.anti[runs[k], 0] >= 0:
                    lab[rq.anti[runs[k], 0]] = scr.was[k]
            cs.fresh[i] = True
        if not cs.placed[i]:
            continue
        if best < 0 or _better(cs, i, best, slots):
            best = i
    return best


@njit_inner(hot=True)
def _invalidate(cs, n, changed, nchanged, old_left, new_left):
    """Mark stale the cached walks of cs[:n] that the lower counts of the runs
    changed[:nchanged] alter (old_left -> new_left)."""
    for i in range(n):
        if not cs.fresh[i]:
            continue
        for j in range(nchanged):
            k = changed[j]
            t = cs.taken[i, k]
            if new_left[k] < t or (t == old_left[k] and new_left[k] != old_left[k]):
                cs.fresh[i] = False
                break

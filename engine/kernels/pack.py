"""Ray's greedy walk of the sorted request runs over one node (§4.7), the
lexicographic key comparison of the pick (§4.6), and the commit of a winner.
The pick itself is kernels/pick.py; the records are kernels/records.py.
"""

from ._jit import njit_inner
from .fit import _fit_count, _take
from .labels import _first_selector


@njit_inner(hot=True)
def _walk(free, present, res, label, hist, nh, exact, runs, left, rq, taken):
    """Place runs in order on one node's rows (free, present, res, label, hist
    are modified): runs (K,) request rows, left (K,) units wanted, rq the
    request table. Returns (units placed, whether a placed request names GPU,
    new hist length). taken (K,) out."""
    placed = 0
    gpu = False
    for k in range(runs.shape[0]):
        q = runs[k]
        taken[k] = 0
        if rq.has_sel[q] and _first_selector(label, q, rq) < 0:
            continue
        ak = rq.anti[q, 0]
        if ak >= 0 and label[ak] == rq.anti[q, 1]:
            continue
        n = _fit_count(free, exact, rq.qty[q], rq.cols[q], rq.ncols[q], left[k])
        if ak >= 0 and n > 1:
            n = 1                       # the first unit's label repels the next
        taken[k] = n
        if n == 0:
            continue
        _take(free, present, exact, rq.qty[q], rq.cols[q], rq.ncols[q], n)
        placed += n
        if rq.gpu_key[q]:
            gpu = True
        for j in range(rq.ncols[q]):
            res[rq.cols[q, j]] = True
        if ak >= 0:
            label[ak] = rq.anti[q, 1]
        if rq.has_sel[q]:
            seen = False
            for j in range(nh):
                if hist[j] == q:
                    seen = True
                    break
            if not seen:
                hist[nh] = q
                nh += 1
    return placed, gpu, nh


@njit_inner(hot=True)
def _better(cs, i, j, slots):
    """Whether candidate i's pick key is strictly greater than candidate j's,
    lexicographically: (label score, gpu_ok, matching types, min util, mean
    util) from their cached walks, then (recoverable availability, priority,
    cloud availability) of their slots. cs: records.Cands."""
    if cs.label_score[i] != cs.label_score[j]:
        return cs.label_score[i] > cs.label_score[j]
    if cs.gpu_ok[i] != cs.gpu_ok[j]:
        return cs.gpu_ok[i] > cs.gpu_ok[j]
    if cs.match[i] != cs.match[j]:
        return cs.match[i] > cs.match[j]
    if cs.util_min[i] != cs.util_min[j]:
        return cs.util_min[i] > cs.util_min[j]
    if cs.util_mean[i] != cs.util_mean[j]:
        return cs.util_mean[i] > cs.util_mean[j]
    a, b = cs.slot[i], cs.slot[j]
    if slots.rec[a] != slots.rec[b]:
        return slots.rec[a] > slots.rec[b]
    if slots.prio[a] != slots.prio[b]:
        return slots.prio[a] > slots.prio[b]
    return slots.avail[a] > slots.avail[b]


@njit_inner(hot=True)
def _commit(m, ps, runs, left, taken):
    """Walk the winner's real rows (slot m) in place; same result as its trial.
    ps: records.PackState. Returns the units placed; taken (K,) out."""
    src = ps.src
    placed, gpu, nh = _walk(src.free[m], src.present[m], src.placed_res[m], ps.slots.label[m],
                            src.hist[m], src.nhist[m], ps.rules.exact, runs, left, ps.rq,
                            taken)
    src.nhist[m] = nh
    if placed > 0:
        src.placed_any[m] = True
    if gpu:
        src.placed_gpu[m] = True
    return placed

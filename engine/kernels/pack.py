"""Ray's greedy walk of the sorted request runs over one node (§4.7), the
lexicographic key comparison of the pick (§4.6), and the commit of a winner.
The pick itself is kernels/pick.py.

``rq`` is the request-table tuple (engine.requests_view.Requests.kernel):
(qty (Q,R), cols (Q,R), ncols (Q,), gpu_key (Q,), anti (Q,2), sel_lo (Q,), sel_hi (Q,),
sel_con_ptr, con_key, con_op, con_val_ptr, con_vals, has_sel (Q,)).
"""

from ._jit import njit_leaf
from .fit import _fit_count, _take
from .labels import _first_selector


@njit_leaf
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


@njit_leaf
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


@njit_leaf
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

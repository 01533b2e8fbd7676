"""How many units of one request run fit on one node, and taking them.

Ray places units one at a time: a unit fits when every positive entry ``v`` of
its bundle satisfies ``v <= free`` and then ``free -= v`` per entry. Columns are
independent, so the number of units that fit is the minimum over the columns of
the per-column count. On an *exact* column (values on a dyadic grid, see
vecsched.engine.model.build.builder) k single subtractions equal one ``k * v`` subtraction and the
count is a corrected floor division; elsewhere the subtraction is replayed unit
by unit so the rounding is Ray's.
"""
import math

import numpy as np

from ._jit import njit, njit_inner


@njit_inner(hot=True)
def _col_count(a, v, exact, limit):
    """Units of size v (> 0) that fit in a, at most limit."""
    if exact:
        q = a / v
        k = limit if q >= limit else np.int64(math.floor(q))
        while k > 0 and k * v > a:
            k -= 1
        while k < limit and (k + 1) * v <= a:
            k += 1
        return k
    k = np.int64(0)
    while k < limit and v <= a:
        a -= v
        k += 1
    return k


@njit_inner(hot=True)
def _fit_count(free, exact, qty, cols, ncols, limit):
    """Units of one run that fit on one node.

    free (R,) effective free (absent implicit columns hold 1.0), exact (R,),
    qty (R,) the run's bundle, cols (R,) its positive columns (first ncols
    valid), limit the units still wanted.
    """
    k = limit
    for j in range(ncols):
        r = cols[j]
        kr = _col_count(free[r], qty[r], exact[r], k)
        if kr < k:
            k = kr
            if k == 0:
                return k
    return k


@njit_inner(hot=True)
def _take(free, present, exact, qty, cols, ncols, k):
    """Subtract k units of one run from a node's free row, in place."""
    if k <= 0:
        return
    for j in range(ncols):
        r = cols[j]
        v = qty[r]
        if exact[r]:
            free[r] = free[r] - k * v
        else:
            a = free[r]
            for _ in range(k):
                a -= v
            free[r] = a
        present[r] = True   # an absent implicit column appears once used


@njit_inner(hot=True)
def _holds(free, m, q, rq):
    """Whether slot m's free row holds one unit of request row q (§4.2)."""
    for j in range(rq.ncols[q]):
        r = rq.cols[q, j]
        if free[m, r] < rq.qty[q, r]:
            return False
    return True


@njit_inner(hot=True)
def _fits_rows(free, m, rows, rq):
    """Whether slot m's free row holds one unit of any request row in ``rows``."""
    for q in rows:
        if _holds(free, m, q, rq):
            return True
    return False


@njit
def _fits_any(free, nodes, qs, rq):
    """(len(nodes),) whether each node's free row holds one unit of any request
    row in qs (Ray's pre-filter, §4.2). free (M, R); rq: records.Reqs."""
    out = np.zeros(nodes.shape[0], dtype=np.bool_)
    for i in range(nodes.shape[0]):
        out[i] = _fits_rows(free, np.int64(nodes[i]), qs, rq)
    return out


@njit
def _minimal_rows(qty, rows):
    """The rows of ``rows`` that no other row is at or below in every column (of
    equal rows, the first): a free row holds one unit of some row in ``rows``
    exactly when it holds one of these, since needing more of every resource
    never fits where needing less does not. Cuts the pre-filter's work when many
    shapes are live."""
    n = rows.shape[0]
    keep = np.full(n, True, dtype=np.bool_)
    for a in range(n):
        for b in range(n):
            if b == a or not keep[b]:
                continue
            below, same = True, True
            for r in range(qty.shape[1]):
                vb, va = qty[rows[b], r], qty[rows[a], r]
                if vb > va:
                    below = False
                    break
                if vb != va:
                    same = False
            if below and (not same or b < a):
                keep[a] = False
                break
    return rows[keep]

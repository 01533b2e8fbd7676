"""The efficient mode's first fit of one request row over existing nodes
(vecsched.engine.efficient.place.on_existing).

The nodes come in a given order (the caller's: nodes without GPUs first for
demand without GPUs, then the most advanced, then the lowest slot), each with
a bucket key that is equal exactly for nodes the order only tells apart by
slot. A row's units go on the nodes in that order, on each as many as fit (one
for a row with anti-affinity) and are still wanted. With ``tight``, inside a
bucket the node left with the least normalised room after taking its units
comes first (best fit), then the lowest slot. Counts are fits.fit_count's; a
node's room never goes below zero.
"""
import math

import numpy as np

from ._jit import njit, njit_inner
from .effp_fill import BIG_COUNT, FIT_SLACK
from .sort import _sort_by


@njit_inner(hot=True)
def _node_fit(view, m, q, anti):
    """Units of bundle q (R,) that fit in view[m] (at most one with anti-affinity)."""
    ratio = math.inf
    for r in range(q.shape[0]):
        v = q[r]
        if v > 0:
            x = view[m, r] / v
            if x < ratio:
                ratio = x
    if ratio == math.inf:
        k = np.int64(BIG_COUNT)
    else:
        x = math.floor(ratio * (1.0 + FIT_SLACK))
        k = np.int64(0) if x < 0 else (np.int64(BIG_COUNT) if x > BIG_COUNT else np.int64(x))
    if anti and k > 1:
        k = np.int64(1)
    return k


@njit_inner(hot=True)
def _take_units(view, m, q, n):
    """view[m] -= n * q, floored at zero per column."""
    for r in range(q.shape[0]):
        x = view[m, r] - n * q[r]
        view[m, r] = x if (x >= 0.0 or x != x) else 0.0


@njit_inner
def _room_after(view, m, q, n, inv_ref):
    """Normalised room of view[m] after n units of q: sum of max(free - n q, 0) / ref."""
    s = 0.0
    for r in range(q.shape[0]):
        x = view[m, r] - n * q[r]
        if x < 0.0:
            x = 0.0
        s += x * inv_ref[r]
    return s


@njit
def _fill_row(view, order, bucket, ok, q, want, anti, tight, inv_ref, slots, counts):
    """Place up to ``want`` units of bundle q on the nodes of ``order`` (module
    docstring), updating ``view`` (slots, R) in place. ok (slots,) bool: the
    node may take the row at all; bucket (slots,) i8. Writes the nodes used and
    their units into slots / counts (each at least len(order) long); returns
    how many."""
    n = 0
    if want <= 0:
        return n
    if not tight:
        left = want
        for j in range(order.shape[0]):
            m = order[j]
            if not ok[m]:
                continue
            k = _node_fit(view, m, q, anti)
            if k <= 0:
                continue
            take = k if k < left else left
            _take_units(view, m, q, take)
            slots[n] = m
            counts[n] = take
            n += 1
            left -= take
            if left == 0:
                break
        return n
    # tight: every candidate's fit first, then by (bucket, room after, slot)
    cand = np.empty(order.shape[0], np.int64)
    fit = np.empty(view.shape[0], np.int64)
    c = 0
    for j in range(order.shape[0]):
        m = order[j]
        if not ok[m]:
            continue
        k = _node_fit(view, m, q, anti)
        if k > 0:
            fit[m] = k
            cand[c] = m
            c += 1
    room = np.empty(view.shape[0])
    for j in range(c):
        m = cand[j]
        room[m] = _room_after(view, m, q, min(fit[m], want), inv_ref)
    tmp = np.empty(c, np.int64)
    lo = 0
    while lo < c:
        hi = lo + 1
        while hi < c and bucket[cand[hi]] == bucket[cand[lo]]:
            hi += 1
        _sort_by(cand[lo:hi], room, tmp[: hi - lo])     # stable: slot order on ties
        lo = hi
    left = want
    for j in range(c):
        m = cand[j]
        take = fit[m] if fit[m] < left else left
        _take_units(view, m, q, take)
        slots[n] = m
        counts[n] = take
        n += 1
        left -= take
        if left == 0:
            break
    return n

"""The efficient mode's first fit of one request row over existing nodes
(vecsched.engine.efficient.place.on_existing).

Nodes are offered in buckets, lowest first, and by slot inside a bucket: a
node's bucket is 6 - its readiness (the most advanced first), plus 8 for a GPU
node when GPU nodes are spared for GPU work. The caller gives the slots below
``N`` that can hold the row at all, already in that order (``cand_old``); the
slots from ``N`` to ``M`` (nodes this tick launched, all equally ready) are
merged in here. A row's units go on the nodes in that order, on each as many
as fit (one for a row with anti-affinity) and are still wanted. With
``tight``, inside a bucket the node left with the least normalised room after
taking its units comes first (best fit), then the lowest slot. Counts are
fits.fit_count's; a node's room never goes below zero.
"""
import math

import numpy as np

from ._jit import njit, njit_inner
from .effp_fill import BIG_COUNT, FIT_SLACK
from .sort import _sort_by


@njit_inner(hot=True)
def _node_fit(view, m, q, cols, ncols, anti):
    """Units of bundle q that fit in view[m] (at most one with anti-affinity);
    cols: q's positive columns (the first ncols)."""
    if ncols == 0:
        return np.int64(1) if anti else np.int64(BIG_COUNT)
    ratio = math.inf
    for j in range(ncols):
        r = cols[j]
        x = view[m, r] / q[r]
        if x < ratio:
            ratio = x
    x = math.floor(ratio * (1.0 + FIT_SLACK))
    k = np.int64(0) if x < 0 else (np.int64(BIG_COUNT) if x > BIG_COUNT else np.int64(x))
    if anti and k > 1:
        k = np.int64(1)
    return k


@njit_inner(hot=True)
def _take_units(view, m, q, n, saved, at):
    """Keep view[m] in saved[at], then view[m] -= n * q, floored at zero."""
    for r in range(q.shape[0]):
        saved[at, r] = view[m, r]
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


@njit_inner(hot=True)
def _bucket(ready, gpu, spare, m):
    b = 6 - np.int64(ready[m])
    if spare and gpu[m]:
        b += 8
    return b


@njit
def _walk_order(cand_old, ready, gpu, spare, N, M):
    """The slots offered, in order: cand_old (bucketed, then by slot) merged
    with the slots N..M-1 (module docstring)."""
    out = np.empty(cand_old.shape[0] + (M - N), np.int64)
    n = 0
    i = 0
    for phase in range(2):
        if phase == 1 and not spare:
            break
        b_new = 5 + 8 * phase if spare else 5
        while i < cand_old.shape[0] and _bucket(ready, gpu, spare, cand_old[i]) <= b_new:
            out[n] = cand_old[i]
            n += 1
            i += 1
        for m in range(N, M):
            if not spare or (gpu[m] == (phase == 1)):
                out[n] = m
                n += 1
    while i < cand_old.shape[0]:
        out[n] = cand_old[i]
        n += 1
        i += 1
    return out


@njit
def _fill_row(view, order, ready, gpu, spare, ok, label, anti_key, anti_val, q, want, tight,
              inv_ref, slots, counts, saved):
    """Place up to ``want`` units of bundle q on the nodes of ``order``
    (``_walk_order``), updating ``view`` in place. ok (M,) bool: the node may take
    the row (alive, selectors); anti_key >= 0: the row's anti-affinity label,
    which a node must not carry yet. Writes the nodes used, their units and
    their rows as they were before into slots / counts / saved (each at least
    len(order) long); returns how many."""
    n = 0
    if want <= 0:
        return n
    R = q.shape[0]
    cols = np.empty(R, np.int64)
    ncols = 0
    for r in range(R):
        if q[r] > 0:
            cols[ncols] = r
            ncols += 1
    anti = anti_key >= 0
    check_label = anti and anti_key < label.shape[1]
    if not tight:
        left = want
        for j in range(order.shape[0]):
            m = order[j]
            if not ok[m] or (check_label and label[m, anti_key] == anti_val):
                continue
            k = _node_fit(view, m, q, cols, ncols, anti)
            if k <= 0:
                continue
            take = k if k < left else left
            _take_units(view, m, q, take, saved, n)
            slots[n] = m
            counts[n] = take
            n += 1
            left -= take
            if left == 0:
                break
        return n
    # tight: every candidate's fit first, then by (bucket, room after, slot)
    c = 0
    cand = np.empty(order.shape[0], np.int64)
    fit = np.empty(order.shape[0], np.int64)
    for j in range(order.shape[0]):
        m = order[j]
        if not ok[m] or (check_label and label[m, anti_key] == anti_val):
            continue
        k = _node_fit(view, m, q, cols, ncols, anti)
        if k > 0:
            fit[c] = k
            cand[c] = m
            c += 1
    room = np.empty(c)
    pos = np.arange(c)
    for j in range(c):
        room[j] = _room_after(view, cand[j], q, min(fit[j], want), inv_ref)
    tmp = np.empty(c, np.int64)
    lo = 0
    while lo < c:
        hi = lo + 1
        b = _bucket(ready, gpu, spare, cand[lo])
        while hi < c and _bucket(ready, gpu, spare, cand[hi]) == b:
            hi += 1
        _sort_by(pos[lo:hi], room, tmp[: hi - lo])     # stable: slot order on ties
        lo = hi
    left = want
    for j in range(c):
        m = cand[pos[j]]
        f = fit[pos[j]]
        take = f if f < left else left
        _take_units(view, m, q, take, saved, n)
        slots[n] = m
        counts[n] = take
        n += 1
        left -= take
        if left == 0:
            break
    return n

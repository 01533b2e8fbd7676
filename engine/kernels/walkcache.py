"""Trial walks kept across the gangs of one kernels/gangs.py call.

A gang of one run (n equal bundles, the usual placement group) walks each
candidate with one request row: the units it takes are its fit count capped by
the units left (and by 1 under anti-affinity), and its score follows from the
slot's rows and that count alone when the row has no label selector and the
slot holds no selector history (label score 0). Such a walk is kept as
(slot, slot version, walk class, units) -> score and reused by a later gang
with a row of the same walk class that takes as many units on the same slot
version. The gang kernel bumps a slot's version whenever it changes the slot.

Walk class of a row: its resource shape, whether it names GPU and whether it
has an anti-affinity key; -1 when not kept (selectors, or several runs).

Cache, as a tuple ``wc``: (version (M,) per slot, then a direct-mapped table of
_W entries: slot (-1 empty), version, walk class, units, gpu_ok, match, lo,
mean). A newer walk overwrites the entry it maps to; a miss just walks.
"""
import numpy as np

from ._jit import njit, njit_leaf
from .fit import _fit_count


_W = 8192          # entries: a few per running holder and shape of a 1,000-group tick


@njit
def _walk_cache(M):
    """Per slot a version (bumped when it changes); a direct-mapped table of
    (slot, version, class, units) -> score."""
    z = np.zeros
    return (z(M, dtype=np.int64), np.full(_W, -1, dtype=np.int64), z(_W, dtype=np.int64),
            z(_W, dtype=np.int64), z(_W, dtype=np.int64), z(_W, dtype=np.int64),
            z(_W, dtype=np.int64), z(_W), z(_W))


@njit_leaf
def _at(m, e, n):
    """The table entry of (slot, walk class, units)."""
    return ((m * 1000003 + e * 7919 + n * 31) ^ (m >> 7)) & (_W - 1)


@njit_leaf
def _walk_class(runs, shape, rq):
    """The walk class of a gang's runs (shape: the resource shape of its one run)."""
    if runs.shape[0] != 1:
        return -1
    q = runs[0]
    if rq[12][q]:
        return -1
    return shape * 4 + 2 * np.int64(rq[3][q]) + np.int64(rq[4][q, 0] >= 0)


@njit_leaf
def _units(m, q, lim, free, present, label, implicit, exact, rq):
    """Units of row q one walk places on slot m (the one run wants lim)."""
    ak = rq[4][q, 0]
    if ak >= 0 and label[m, ak] == rq[4][q, 1]:
        return 0
    n = _fit_count(free[m], present[m], implicit, exact, rq[0][q], rq[1][q], rq[2][q], lim)
    if ak >= 0 and n > 1:
        n = 1
    return n


@njit_leaf
def _prefill(fc, nf, valid, tk, did, ks, e, q, lim, slots, src, implicit, exact, rq, wc):
    """Mark fresh, with the kept walk, every candidate (each one a pick would
    walk) whose kept walk applies; q: the gang's one row, lim: its units left."""
    label, free, present, nhist = slots[2], src[0], src[1], src[6]
    for i in range(nf):
        m = fc[i]
        if nhist[m] != 0:
            continue
        n = _units(m, q, lim, free, present, label, implicit, exact, rq)
        if n == 0:
            continue
        w = _at(m, e, n)
        if wc[1][w] != m or wc[2][w] != wc[0][m] or wc[3][w] != e or wc[4][w] != n:
            continue
        valid[i] = True
        did[i] = True
        tk[i, 0] = n
        ks[0][i] = 0
        ks[1][i], ks[2][i], ks[3][i], ks[4][i] = wc[5][w], wc[6][w], wc[7][w], wc[8][w]


@njit_leaf
def _keep(fc, nf, valid, tk, did, ks, e, src, wc):
    """Keep the fresh walks of the candidates (before any of them changes)."""
    nhist = src[6]
    for i in range(nf):
        if valid[i] and did[i]:
            m = fc[i]
            if nhist[m] == 0:
                n = tk[i, 0]
                w = _at(m, e, n)
                wc[1][w], wc[2][w], wc[3][w], wc[4][w] = m, wc[0][m], e, n
                wc[5][w], wc[6][w], wc[7][w], wc[8][w] = ks[1][i], ks[2][i], ks[3][i], ks[4][i]

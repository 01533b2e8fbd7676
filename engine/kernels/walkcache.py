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

The cache is a ``WalkCache``: a version per slot, then a direct-mapped table
of _W entries. A newer walk overwrites the entry it maps to; a miss just walks.
"""
from typing import NamedTuple

import numpy as np

from ._jit import njit_inner
from .fit import _fit_count


_W = 8192          # entries: a few per running holder and shape of a 1,000-group tick


class WalkCache(NamedTuple):
    version: np.ndarray     # (M,) i8 per slot, bumped when it changes
    slot: np.ndarray        # (_W,) i8 entry's slot, -1 empty
    slot_version: np.ndarray  # (_W,) i8 the slot's version when kept
    walk_class: np.ndarray  # (_W,) i8
    units: np.ndarray       # (_W,) i8 units the walk took
    gpu_ok: np.ndarray      # (_W,) i8 its score
    match: np.ndarray       # (_W,) i8
    util_min: np.ndarray    # (_W,) f8
    util_mean: np.ndarray   # (_W,) f8


@njit_inner(alloc=True)
def _walk_cache(M):
    """An empty cache for M slots."""
    z, i8, f8 = np.zeros, np.int64, np.float64
    return WalkCache(z(M, dtype=i8), np.full(_W, -1, dtype=i8), z(_W, dtype=i8),
                     z(_W, dtype=i8), z(_W, dtype=i8), z(_W, dtype=i8), z(_W, dtype=i8),
                     z(_W, dtype=f8), z(_W, dtype=f8))


@njit_inner(hot=True)
def _at(m, e, n):
    """The table entry of (slot, walk class, units)."""
    return ((m * 1000003 + e * 7919 + n * 31) ^ (m >> 7)) & (_W - 1)


@njit_inner(hot=True)
def _walk_class(runs, shape, rq):
    """The walk class of a gang's runs (shape: the resource shape of its one run)."""
    if runs.shape[0] != 1:
        return -1
    q = runs[0]
    if rq.has_sel[q]:
        return -1
    return shape * 4 + 2 * np.int64(rq.gpu_key[q]) + np.int64(rq.anti[q, 0] >= 0)


@njit_inner(hot=True)
def _units(m, q, lim, ps):
    """Units of row q one walk places on slot m (the one run wants lim)."""
    rq = ps.rq
    ak = rq.anti[q, 0]
    if ak >= 0 and ps.slots.label[m, ak] == rq.anti[q, 1]:
        return 0
    n = _fit_count(ps.src.free[m], ps.rules.exact, rq.qty[q], rq.cols[q], rq.ncols[q], lim)
    if ak >= 0 and n > 1:
        n = 1
    return n


@njit_inner
def _prefill(cs, nf, e, q, lim, ps, wc):
    """Mark fresh, with the kept walk, every candidate of cs[:nf] (each one a
    pick would walk) whose kept walk applies; q: the gang's one row, lim: its
    units left."""
    for i in range(nf):
        m = cs.slot[i]
        if ps.src.nhist[m] != 0:
            continue
        n = _units(m, q, lim, ps)
        if n == 0:
            continue
        w = _at(m, e, n)
        if (wc.slot[w] != m or wc.slot_version[w] != wc.version[m] or wc.walk_class[w] != e
                or wc.units[w] != n):
            continue
        cs.fresh[i] = True
        cs.placed[i] = True
        cs.taken[i, 0] = n
        cs.label_score[i] = 0
        cs.gpu_ok[i], cs.match[i] = wc.gpu_ok[w], wc.match[w]
        cs.util_min[i], cs.util_mean[i] = wc.util_min[w], wc.util_mean[w]


@njit_inner
def _keep(cs, nf, e, ps, wc):
    """Keep the fresh walks of the candidates cs[:nf] (before any of them changes)."""
    for i in range(nf):
        if cs.fresh[i] and cs.placed[i]:
            m = cs.slot[i]
            if ps.src.nhist[m] == 0:
                n = cs.taken[i, 0]
                w = _at(m, e, n)
                wc.slot[w], wc.slot_version[w], wc.walk_class[w], wc.units[w] = (m, wc.version[m],
                                                                                 e, n)
                wc.gpu_ok[w], wc.match[w] = cs.gpu_ok[i], cs.match[i]
                wc.util_min[w], wc.util_mean[w] = cs.util_min[i], cs.util_mean[i]

"""Ray's NodeStateCache classes of non-running slots inside a kernel: slots
whose (type, kind, listed totals, availability, labels) are equal share one
class, tried once per pick by its first member (engine/raycompat/packer.py ``classes``
is the twin; the tests compare the kernels that use these with it).

A class keeps a copy of its key, so it outlives the slot that founded it;
classes are found by a digest (an open-addressing index of digests, in
arrays, so that no helper here needs numba's reference counting) and
confirmed by comparing the whole key.
"""
import math
from typing import NamedTuple

import numpy as np

from ._jit import njit_inner


class ClassTable(NamedTuple):
    """Classes of non-running slots, each with a copy of its key (entry c < n),
    and an index of their digests (P entries, a power of two >= 2n)."""
    digest: np.ndarray      # (P,) f8 index: a digest,
    first: np.ndarray       # (P,) i8 the first class with it, -1 empty entry
    nxt: np.ndarray         # (n,) i8 next class of equal digest, -1 none
    type: np.ndarray        # (n,) i8
    kind: np.ndarray        # (n,) i8
    listed: np.ndarray      # (n, R) b1 columns in the totals
    total: np.ndarray       # (n, R) f8
    present: np.ndarray     # (n, R) b1 columns in the availability
    free: np.ndarray        # (n, R) f8
    label: np.ndarray       # (n, L) i4
    used: np.ndarray        # (1,) i8 classes founded


@njit_inner(hot=True)
def _listed(order_row, out):
    """out (R,): whether each column is in the slot's totals (its dict order)."""
    for r in range(out.shape[0]):
        out[r] = False
    for j in range(order_row.shape[0]):
        if order_row[j] >= 0:
            out[order_row[j]] = True


@njit_inner(hot=True)
def _loose_hash(m, ps, lm):
    """A digest of slot m's loose key: equal keys give equal digests (a float
    chain over the columns, an integer sum over the labels, which is wide)."""
    sl, src = ps.slots, ps.src
    h = sl.type[m] * 31.0 + sl.kind[m]
    for r in range(sl.total.shape[1]):
        h = h * 1.0000001 + (sl.total[m, r] + 0.5 if lm[r] else 0.25)
        h = h * 1.0000003 + (src.free[m, r] + 0.5 if src.present[m, r] else 0.25)
    acc = np.int64(0)
    for j in range(sl.label.shape[1]):
        acc += (np.int64(sl.label[m, j]) + 2) * (2 * j + 1)
    return h * 1.0000007 + (acc % 1000003)


@njit_inner(alloc=True)
def _class_table(n, R, L):
    """Room for n classes (records: ClassTable)."""
    P = 16
    while P < 2 * n:
        P *= 2
    f8, b1, i8 = np.float64, np.bool_, np.int64
    return ClassTable(np.zeros(P, dtype=f8), np.full(P, -1, dtype=i8),
                      np.full(n, -1, dtype=i8), np.empty(n, dtype=i8), np.empty(n, dtype=i8),
                      np.empty((n, R), dtype=b1), np.empty((n, R), dtype=f8),
                      np.empty((n, R), dtype=b1), np.empty((n, R), dtype=f8),
                      np.empty((n, L), dtype=np.int32), np.zeros(1, dtype=i8))


@njit_inner(hot=True)
def _entry(tab, h):
    """The index entry of digest h: where it is, or the empty entry it would take."""
    mask = tab.first.shape[0] - 1
    mant, ex = math.frexp(h)
    k = np.int64((abs(mant) - 0.5) * 9007199254740992.0) + ex    # the mantissa's bits
    e = (k ^ (k >> 17) ^ (k >> 31)) & mask
    while tab.first[e] >= 0 and tab.digest[e] != h:
        e = (e + 1) & mask
    return e


@njit_inner
def _copy_class(a, c, b, d):
    """Class c of table a into entry d of table b."""
    b.nxt[d], b.type[d], b.kind[d] = a.nxt[c], a.type[c], a.kind[c]
    for r in range(a.total.shape[1]):
        b.listed[d, r], b.total[d, r] = a.listed[c, r], a.total[c, r]
        b.present[d, r], b.free[d, r] = a.present[c, r], a.free[c, r]
    for j in range(a.label.shape[1]):
        b.label[d, j] = a.label[c, j]


@njit_inner(alloc=True)
def _room_for(tab, k):
    """The class table, grown (doubled) when it has no room for k more classes."""
    n = tab.nxt.shape[0]
    used = tab.used[0]
    if used + k <= n:
        return tab
    new = _class_table(max(2 * n, used + k), tab.total.shape[1], tab.label.shape[1])
    for e in range(tab.first.shape[0]):
        if tab.first[e] >= 0:
            f = _entry(new, tab.digest[e])
            new.digest[f], new.first[f] = tab.digest[e], tab.first[e]
    for c in range(used):
        _copy_class(tab, c, new, c)
    new.used[0] = used
    return new


@njit_inner(hot=True)
def _same_key(c, m, tab, ps, lm):
    """Whether slot m's loose key equals class c's: type, kind, listed totals,
    availability and labels."""
    sl, src = ps.slots, ps.src
    if tab.type[c] != sl.type[m] or tab.kind[c] != sl.kind[m]:
        return False
    for r in range(sl.total.shape[1]):
        if tab.listed[c, r] != lm[r] or tab.present[c, r] != src.present[m, r]:
            return False
        if lm[r] and tab.total[c, r] != sl.total[m, r]:
            return False
        if src.present[m, r] and tab.free[c, r] != src.free[m, r]:
            return False
    for j in range(sl.label.shape[1]):
        if tab.label[c, j] != sl.label[m, j]:
            return False
    return True


@njit_inner
def _class_of(m, tab, ps, lm):
    """Slot m's class (Ray's NodeStateCache key, compared exactly), founding a
    new one when no class has its key (the table has room: ``_room_for``).
    lm (R,) scratch."""
    sl, src, ghash = ps.slots, ps.src, ps.marks.ghash
    _listed(sl.order[m], lm)
    if np.isnan(ghash[m]):
        ghash[m] = _loose_hash(m, ps, lm)
    h = ghash[m]
    e = _entry(tab, h)
    c = tab.first[e]
    last = -1
    while c >= 0:
        if _same_key(c, m, tab, ps, lm):
            return c
        last = c
        c = tab.nxt[c]
    c = tab.used[0]
    tab.used[0] = c + 1
    if last < 0:
        tab.digest[e], tab.first[e] = h, c
    else:
        tab.nxt[last] = c
    tab.type[c], tab.kind[c] = sl.type[m], sl.kind[m]
    for r in range(lm.shape[0]):
        tab.listed[c, r], tab.total[c, r] = lm[r], sl.total[m, r]
        tab.present[c, r], tab.free[c, r] = src.present[m, r], src.free[m, r]
    for j in range(sl.label.shape[1]):
        tab.label[c, j] = sl.label[m, j]
    return c

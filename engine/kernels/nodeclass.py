"""Ray's NodeStateCache classes of non-running slots inside a kernel: slots
whose (type, kind, listed totals, availability, labels) are equal share one
class, tried once per pick by its first member (engine/packer.py ``classes``
is the twin; the tests compare the kernels that use these with it).

A class keeps a copy of its key, so it outlives the slot that founded it;
classes are found by a digest and confirmed by comparing the whole key.
"""
import numpy as np
from numba import types
from numba.typed import Dict

from ._jit import njit, njit_leaf


@njit_leaf
def _listed(order_row, out):
    """out (R,): whether each column is in the slot's totals (its dict order)."""
    for r in range(out.shape[0]):
        out[r] = False
    for j in range(order_row.shape[0]):
        if order_row[j] >= 0:
            out[order_row[j]] = True


@njit_leaf
def _loose_hash(m, slots, src, lm):
    """A digest of slot m's loose key: equal keys give equal digests (a float
    chain over the columns, an integer sum over the labels, which is wide)."""
    total, label, typ, kind = slots[0], slots[2], slots[3], slots[5]
    free, present = src[0], src[1]
    h = typ[m] * 31.0 + kind[m]
    for r in range(total.shape[1]):
        h = h * 1.0000001 + (total[m, r] + 0.5 if lm[r] else 0.25)
        h = h * 1.0000003 + (free[m, r] + 0.5 if present[m, r] else 0.25)
    acc = np.int64(0)
    row = label[m]
    for j in range(row.shape[0]):
        acc += (np.int64(row[j]) + 2) * (2 * j + 1)
    return h * 1.0000007 + (acc % 1000003)


@njit
def _class_table(n, R, L, label_dtype):
    """Room for n classes: each keeps a copy of its key, so a class outlives the
    slot that founded it. (digest -> first class, next class of equal digest,
    type, kind, listed, totals, present, free, labels, [classes used])."""
    head = Dict.empty(key_type=types.float64, value_type=types.int64)
    return (head, np.full(n, -1, dtype=np.int64), np.empty(n, dtype=np.int64),
            np.empty(n, dtype=np.int64), np.empty((n, R), dtype=np.bool_), np.empty((n, R)),
            np.empty((n, R), dtype=np.bool_), np.empty((n, R)),
            np.empty((n, L), dtype=label_dtype), np.zeros(1, dtype=np.int64))


@njit
def _room_for(tab, k):
    """The class table, grown (doubled) when it has no room for k more classes."""
    n = tab[1].shape[0]
    used = tab[9][0]
    if used + k <= n:
        return tab
    new = _class_table(max(2 * n, used + k), tab[4].shape[1], tab[8].shape[1], tab[8].dtype)
    for key, c in tab[0].items():
        new[0][key] = c
    new[1][:used], new[2][:used], new[3][:used] = tab[1][:used], tab[2][:used], tab[3][:used]
    new[4][:used], new[5][:used], new[6][:used] = tab[4][:used], tab[5][:used], tab[6][:used]
    new[7][:used], new[8][:used] = tab[7][:used], tab[8][:used]
    new[9][0] = used
    return new


@njit
def _same_key(c, m, tab, slots, src, lm):
    """Whether slot m's loose key equals class c's: type, kind, listed totals,
    availability and labels."""
    total, label, typ, kind = slots[0], slots[2], slots[3], slots[5]
    free, present = src[0], src[1]
    if tab[2][c] != typ[m] or tab[3][c] != kind[m]:
        return False
    for r in range(total.shape[1]):
        if tab[4][c, r] != lm[r] or tab[6][c, r] != present[m, r]:
            return False
        if lm[r] and tab[5][c, r] != total[m, r]:
            return False
        if present[m, r] and tab[7][c, r] != free[m, r]:
            return False
    for j in range(label.shape[1]):
        if tab[8][c, j] != label[m, j]:
            return False
    return True


@njit
def _class_of(m, tab, slots, src, ghash, lm):
    """Slot m's class (Ray's NodeStateCache key, compared exactly), founding a
    new one when no class has its key. lm (R,) scratch."""
    _listed(slots[1][m], lm)
    if np.isnan(ghash[m]):
        ghash[m] = _loose_hash(m, slots, src, lm)
    h = ghash[m]
    head, nxt = tab[0], tab[1]
    c = head[h] if h in head else -1
    last = -1
    while c >= 0:
        if _same_key(c, m, tab, slots, src, lm):
            return c
        last = c
        c = nxt[c]
    c = tab[9][0]
    tab[9][0] = c + 1
    if last < 0:
        head[h] = c
    else:
        nxt[last] = c
    tab[2][c], tab[3][c] = slots[3][m], slots[5][m]
    tab[4][c], tab[5][c] = lm, slots[0][m]
    tab[6][c], tab[7][c] = src[1][m], src[0][m]
    tab[8][c] = slots[2][m]
    return c

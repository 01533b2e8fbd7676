"""Running nodes that no placement group can tell apart, for kernels/gangs.py:
equal in everything a trial walk, a score and a pick key read (type, kind,
totals in dict order, availability, labels, priority and availability scores)
and untouched this tick (nothing placed on them yet). Ray scores every running
node; two such nodes score alike every time, so the first in list order wins
any pick the other could, and the other can only win after it, where the first
stood no longer. So only the first member of a class is a candidate of a
gang's picks, and when it wins the next one takes its place, at its own
position (as kernels/pendclass.py does for Ray's classes of non-running
nodes). In a saturated 50,000-node cluster the ~500 running nodes that hold a
1-CPU bundle are ~10 such classes.

Members keep their order in Ray's list: two of them hold the same shapes, so
every gang visits both or neither (kernels/listorder.py keeps the relative
order of the nodes a gang visits and of those it does not). A member leaves
its class, for good, when it wins in a placed gang; the winners of one class in
one gang are its first members, in order. Classes are found once per call, by
a digest of the rows, and confirmed by comparing the rows with the first
member's.
"""
import math
from typing import NamedTuple

import numpy as np

from ._jit import njit_inner

_SIZE_MIN = 64


class RunClasses(NamedTuple):
    of: np.ndarray        # (Mcap,) i8 class of each running slot, -1 alone
    head: np.ndarray      # (C,) i8 first member still in the class
    nxt: np.ndarray       # (Mcap,) i8 next member, -1 none


@njit_inner(hot=True)
def _digest(m, ps):
    sl, src = ps.slots, ps.src
    h = sl.type[m] * 31.0 + sl.kind[m] + sl.prio[m] * 7.0 + sl.rec[m] * 3.0 + sl.avail[m]
    for r in range(sl.total.shape[1]):
        h = h * 1.0000001 + sl.total[m, r] + 0.5 * sl.order[m, r]
        h = h * 1.0000003 + (src.free[m, r] + 0.5 if src.present[m, r] else 0.25)
    acc = np.int64(0)
    for j in range(sl.label.shape[1]):
        acc += (np.int64(sl.label[m, j]) + 2) * (2 * j + 1)
    return h * 1.0000007 + (acc % 1000003)


@njit_inner
def _untouched(m, ps):
    src = ps.src
    if src.placed_any[m] or src.placed_gpu[m] or src.nhist[m] != 0:
        return False
    for r in range(src.placed_res.shape[1]):
        if src.placed_res[m, r]:
            return False
    return True


@njit_inner
def _alike(a, b, ps):
    """Whether running slots a and b are equal in every row a walk or a score reads."""
    sl, src = ps.slots, ps.src
    if (sl.type[a] != sl.type[b] or sl.kind[a] != sl.kind[b] or sl.prio[a] != sl.prio[b]
            or sl.rec[a] != sl.rec[b] or sl.avail[a] != sl.avail[b]):
        return False
    for r in range(sl.total.shape[1]):
        if (sl.total[a, r] != sl.total[b, r] or sl.order[a, r] != sl.order[b, r]
                or src.present[a, r] != src.present[b, r] or src.free[a, r] != src.free[b, r]):
            return False
    for j in range(sl.label.shape[1]):
        if sl.label[a, j] != sl.label[b, j]:
            return False
    return True


@njit_inner(alloc=True)
def _run_classes(running, ps, Mcap):
    """The classes of the untouched running slots ``running`` (in list order)."""
    n = running.shape[0]
    P = _SIZE_MIN
    while P < 2 * n:
        P *= 2
    dig = np.zeros(P, dtype=np.float64)
    first = np.full(P, -1, dtype=np.int64)      # a class's first member, by digest slot
    cls_at = np.full(P, -1, dtype=np.int64)
    of = np.full(Mcap, -1, dtype=np.int64)
    nxt = np.full(Mcap, -1, dtype=np.int64)
    head = np.empty(max(n, 1), dtype=np.int64)
    tail = np.empty(max(n, 1), dtype=np.int64)
    size = np.zeros(max(n, 1), dtype=np.int64)
    C = 0
    for i in range(n):
        m = running[i]
        if not _untouched(m, ps):
            continue
        h = _digest(m, ps)
        mant, ex = math.frexp(h)
        e = (np.int64((abs(mant) - 0.5) * 9007199254740992.0) + ex) & (P - 1)
        c = -1
        while first[e] >= 0:
            if dig[e] == h and _alike(first[e], m, ps):
                c = cls_at[e]
                break
            e = (e + 1) & (P - 1)
        if c < 0:
            c = C
            C += 1
            dig[e], first[e], cls_at[e] = h, m, c
            head[c] = m
        else:
            nxt[tail[c]] = m
        tail[c] = m
        of[m] = c
        size[c] += 1
    for i in range(n):                 # a class of one is no class
        m = running[i]
        if of[m] >= 0 and size[of[m]] == 1:
            of[m] = -1
    return RunClasses(of, head[:max(C, 1)].copy(), nxt)


@njit_inner
def _firsts_only(hs, rc, out):
    """The slots of hs (in list order) that are alone or first in their class,
    into out (in order); returns how many."""
    k = 0
    for m in hs:
        c = rc.of[m]
        if c < 0 or rc.head[c] == m:
            out[k] = m
            k += 1
    return k


@njit_inner
def _left(won, nw, rc):
    """The running winners won[:nw] of a placed gang leave their classes (each
    its class's first member when it leaves, in pick order)."""
    for i in range(nw):
        m = won[i]
        c = rc.of[m]
        if c >= 0:
            rc.head[c] = rc.nxt[m]
            rc.of[m] = -1

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
one gang are its first members, in order. Classes are found once per call, for the
running nodes that hold a shape of some gang (the fit index's), in
the gang kernel's table of Ray's node-state classes (kernels/nodeclass.py), and
split by the totals' dict order, which those classes do not compare: the order
of the terms a score can sum as non-zero (kernels/score.py). A term is zero
while the resource is unused (free = total) and no gang asks for it, and adding
0.0 changes neither Python's plain sum nor its compensated one (3.12), so two
nodes whose dict orders differ only in where such resources stand sum alike.
Each node's map of totals holds its own ``node:<ip>`` key, and upb's map order
shifts with it: the 50,000 nodes of the bench's largest decoded request list
their totals in 31 orders, the same nodes built without protobuf in 13.

A class is one unit of the gang kernel's work: the fit index lists it once per
shape (kernels/fitindex.py ``UnitIndex``, never checked again: its members' free
rows do not change) and the list order re-keys it as one, by its zone key
``base[c]`` (kernels/listorder.py). Only its first member's key is kept up to
date; a member's key is written from ``base`` when it becomes first or is
inserted behind a winner (``_materialize``), and every member's at the end
(``_all_keys``).
"""
from typing import NamedTuple

import numpy as np

from ._jit import njit_inner
from .fitindex import _depart
from .nodeclass import _class_of


class RunClasses(NamedTuple):
    of: np.ndarray        # (Mcap,) i8 class of each running slot, -1 alone
    head: np.ndarray      # (C,) i8 first member still in the class
    nxt: np.ndarray       # (Mcap,) i8 next member, -1 none


@njit_inner
def _untouched(m, ps):
    src = ps.src
    if src.placed_any[m] or src.placed_gpu[m] or src.nhist[m] != 0:
        return False
    for r in range(src.placed_res.shape[1]):
        if src.placed_res[m, r]:
            return False
    return True


@njit_inner(hot=True)
def _live(r, m, need, ps):
    """Whether column r can give slot m a non-zero utilisation term in a gang's
    trial: in the node's maps, used already, or asked for by some gang."""
    total = ps.slots.total[m, r]
    return (total != 0.0 and ps.src.present[m, r]
            and (need[r] or ps.src.free[m, r] < total))


@njit_inner
def _same_sums(f, m, need, ps):
    """Whether slots f and m (equal totals, availability and listed columns)
    list their live columns (``_live``) in the same order."""
    order = ps.slots.order
    R = order.shape[1]
    i, j = 0, 0
    while True:
        while i < R and order[f, i] >= 0 and not _live(order[f, i], f, need, ps):
            i += 1
        while j < R and order[m, j] >= 0 and not _live(order[m, j], m, need, ps):
            j += 1
        a = order[f, i] if i < R else -1
        b = order[m, j] if j < R else -1
        if a != b:
            return False
        if a < 0:
            return True
        i += 1
        j += 1


@njit_inner(alloc=True)
def _run_classes(running, ps, Mcap, tab, lm, need):
    """The classes of the untouched running slots ``running`` (in list order).
    A class is a NodeStateCache class of kernels/nodeclass.py (type, kind, listed
    totals, availability, labels: ``tab`` must have room for one per slot; lm
    (R,) scratch) whose members also list their live totals (``need`` (R,): the
    columns some gang asks for; ``_live``) in the same dict order: one class per
    such order (ids past the table's, chained by ``alt``); for a running slot the
    type decides the pick key's tie-breakers (priority, recoverable and cloud
    availability)."""
    C = tab.nxt.shape[0] + running.shape[0]
    of = np.full(Mcap, -1, dtype=np.int64)
    nxt = np.full(Mcap, -1, dtype=np.int64)
    head = np.full(C, -1, dtype=np.int64)
    tail = np.full(C, -1, dtype=np.int64)
    size = np.zeros(C, dtype=np.int64)
    alt = np.full(C, -1, dtype=np.int64)      # the class of the next order
    nid = tab.nxt.shape[0]
    for i in range(running.shape[0]):
        m = running[i]
        if not _untouched(m, ps):
            continue
        c = _class_of(m, tab, ps, lm)
        while head[c] >= 0 and not _same_sums(head[c], m, need, ps):
            if alt[c] < 0:
                alt[c] = nid
                nid += 1
            c = alt[c]
        if head[c] < 0:
            head[c] = m
        else:
            nxt[tail[c]] = m
        tail[c] = m
        of[m] = c
        size[c] += 1
    for i in range(running.shape[0]):          # a class of one is no class
        m = running[i]
        if of[m] >= 0 and size[of[m]] == 1:
            of[m] = -1
    return RunClasses(of, head[:nid], nxt)


@njit_inner(hot=True)
def _materialize(m, c, base, key, one):
    """Member m of class c takes its class's zone key (kernels/listorder.py):
    its key, kept only for the first member, before it is read."""
    key[m] = base[c] + key[m] % one


@njit_inner
def _left(won, nw, rc, base, key, one, ux, free, rq):
    """The running winners won[:nw] of a placed gang leave their classes (a
    class's winners are its first members, in pick order); the member then
    first takes its class's key (not before: it may be a winner too, keyed
    already), and each winner is listed alone in the unit index ux
    (kernels/fitindex.py) for the shapes it still holds."""
    for i in range(nw):
        m = won[i]
        if rc.of[m] >= 0:
            rc.head[rc.of[m]] = rc.nxt[m]
    for i in range(nw):
        m = won[i]
        c = rc.of[m]
        if c >= 0:
            rc.of[m] = -1
            if rc.head[c] >= 0:
                _materialize(rc.head[c], c, base, key, one)
            _depart(ux, c, m, free, rq)


@njit_inner
def _all_keys(rc, base, key, one):
    """Every member still in a class takes its class's key (at the end)."""
    for c in range(rc.head.shape[0]):
        m = rc.head[c]
        if m < 0 or rc.of[m] != c:
            continue                            # no class (a class of one is none)
        while m >= 0:
            _materialize(m, c, base, key, one)
            m = rc.nxt[m]

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
split by the totals' dict order, which those classes do not compare.
"""
from typing import NamedTuple

import numpy as np

from ._jit import njit_inner
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


@njit_inner(alloc=True)
def _run_classes(running, ps, Mcap, tab, lm):
    """The classes of the untouched running slots ``running`` (in list order).
    A class is a NodeStateCache class of kernels/nodeclass.py (type, kind, listed
    totals, availability, labels: ``tab`` must have room for one per slot; lm
    (R,) scratch) whose members also list their totals in the same dict order;
    for a running slot the type decides the pick key's tie-breakers (priority,
    recoverable and cloud availability). A slot whose order differs from its
    class's first member's stays alone."""
    order = ps.slots.order
    C = tab.nxt.shape[0]
    of = np.full(Mcap, -1, dtype=np.int64)
    nxt = np.full(Mcap, -1, dtype=np.int64)
    head = np.full(C, -1, dtype=np.int64)
    tail = np.full(C, -1, dtype=np.int64)
    size = np.zeros(C, dtype=np.int64)
    for i in range(running.shape[0]):
        m = running[i]
        if not _untouched(m, ps):
            continue
        c = _class_of(m, tab, ps, lm)
        if head[c] < 0:
            head[c] = m
        else:
            f = head[c]
            same = True
            for r in range(order.shape[1]):
                if order[f, r] != order[m, r]:
                    same = False
                    break
            if not same:
                continue
            nxt[tail[c]] = m
        tail[c] = m
        of[m] = c
        size[c] += 1
    for i in range(running.shape[0]):          # a class of one is no class
        m = running[i]
        if of[m] >= 0 and size[of[m]] == 1:
            of[m] = -1
    return RunClasses(of, head, nxt)


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

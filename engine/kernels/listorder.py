"""Ray's node list across the placement groups of one kernels/gangs.py call, as
an order key per slot, rewritten in time proportional to what a gang visits.

After a placed gang Ray's list is: the gang's winners (in pick order), the other
nodes it visited (its candidates: every non-running node and the running nodes
holding a unit of one of its shapes) in their old order, the nodes it did not
visit in their old order, then its launches. Every non-running node is visited
by every gang, so the list is kept in three segments of keys:

- the front (keys < ``ZONE_B``): the last placed gang's candidates. Its winners
  take keys below every other (``FRONT`` counts down), and nodes that join the
  front from behind take keys above every front key (``MID`` counts up);
- the back (``ZONE_B`` <= key < ``ZONE_L``): running nodes no recent gang visited.
  A front running node the next gang does not visit goes to the head of the back
  (``BHEAD`` counts down), in its order;
- behind it, the launches of the last placed gang (``TAIL`` counts up), which
  the next placed gang moves to the front like any other non-running node.

A placed gang then re-keys only its winners, the running nodes of the front it
does not visit (at most the previous gang's holders), the nodes it brings in from
behind (its holders from the back, the last gang's launches) and its launches:
not the non-running nodes of the front, which keep their keys and their order.
At the start every node is behind the front (keys ``ZONE_B`` + position) and
every non-running node is outside it (``out``). The slow readable twin is
``move_to_front`` (the list as Python lists); tests/engine/kernels compares them.

A key is ``zone key * ONE + position at the start`` (``ONE``: the power of two
above the list's length; a launch's position is 0). A move re-keys a run of
nodes with equal zone keys to one new zone key, so nodes that every gang so
far moved together share one and keep their order by position: the running
classes of kernels/runclass.py (nodes that hold the same shapes, always
visited together) are re-keyed as one, by their zone key ``base[c]``, not
member by member. ``lo.run`` lists such a class as ``-1 - c``; ``hs`` (the
visited holders) lists it by its first member at the gang's start, whose key is
kept up to date (``base[c] + position``); the other members' keys are written
when they become first (kernels/runclass.py ``_materialize``) and at the end.
The counters step by ``ONE``: ``MID`` has 2**58 / ONE steps before the back's
keys (2**42 at 50,000 nodes), and a placed gang takes at most one per node it
moves.
"""
from typing import NamedTuple

import numpy as np

from ._jit import njit_inner

_RUNNING = 5                  # Status.RAY_RUNNING
ZONE_F = np.int64(1) << 58    # FRONT counts down and MID up from here
ZONE_B = np.int64(1) << 59    # keys below: the front
_BACK = np.int64(1) << 60     # the initial list, and BHEAD counting down from it
ZONE_L = np.int64(1) << 61    # launches of the last placed gang, TAIL counting up
START = _BACK                 # the zone key of every node at the start
FRONT, MID, BHEAD, TAIL, NRUN, NOUT, ONE = 0, 1, 2, 3, 4, 5, 6


class ListOrder(NamedTuple):
    key: np.ndarray     # (Mcap,) i8 list order key of every slot in the list
    run: np.ndarray     # running slots of the front (-1 - c: class c), in list order
    out: np.ndarray     # non-running slots behind the back, in list order (ctr[NOUT])
    ctr: np.ndarray     # (7,) i8 FRONT, MID, BHEAD, TAIL, NRUN, NOUT, ONE


@njit_inner(alloc=True)
def _list_order(nodes, status, Mcap, cap):
    """The order of the node list ``nodes`` (slot ids) with room for ``cap``
    list entries: every node behind the front, in list order."""
    key = np.zeros(Mcap, dtype=np.int64)
    out = np.empty(cap, dtype=np.int64)
    n = np.int64(0)
    one = np.int64(1)
    while one <= nodes.shape[0]:
        one *= 2
    for i in range(nodes.shape[0]):
        m = nodes[i]
        key[m] = _BACK + i
        if status[m] != _RUNNING:
            out[n] = m
            n += 1
    ctr = np.zeros(7, dtype=np.int64)
    ctr[FRONT], ctr[MID], ctr[BHEAD], ctr[TAIL], ctr[NOUT] = ZONE_F, ZONE_F, _BACK, ZONE_L, n
    ctr[ONE] = one
    return ListOrder(key, np.empty(cap, dtype=np.int64), out, ctr)


@njit_inner(hot=True)
def _zone(k, one):
    """The zone key part of key k."""
    return k - k % one


@njit_inner
def _placed(lo, won, nw, hs, g, mark, won_in, status, new, nnew, rc, base, markc):
    """Gang g was placed: its winners won[:nw] (pick order) go first, the
    running holders it visited hs (in list order; ``mark[m] == g``, or
    ``markc[c] == g`` for the first member of class c at the gang's start) and
    every non-running node follow in their order, the front's running nodes it
    did not visit go to the head of the back, and its launches new[:nnew] go
    last. ``won_in[m] == g`` marks its winners; rc (runclass.RunClasses) and
    ``base`` (each class's zone key) as before the winners leave their classes."""
    key, c = lo.key, lo.ctr
    one = c[ONE]
    last = np.int64(-1)
    for i in range(c[NRUN] - 1, -1, -1):      # not visited: to the head of the back
        u = lo.run[i]
        if u >= 0:
            if mark[u] == g:
                continue
            z = _zone(key[u], one)
        else:
            if markc[-1 - u] == g:
                continue
            z = base[-1 - u]
        if z != last:
            c[BHEAD] -= one
            last = z
        if u >= 0:
            key[u] = c[BHEAD] + key[u] % one
        else:
            base[-1 - u] = c[BHEAD]
            h = rc.head[-1 - u]
            if h >= 0:
                key[h] = c[BHEAD] + key[h] % one  # the first member's key is kept
    a, b, nh, nout = 0, 0, hs.shape[0], c[NOUT]
    last = np.int64(-1)
    while a < nh or b < nout:                 # visited, from behind: to the front's end
        if b >= nout or (a < nh and key[hs[a]] < key[lo.out[b]]):
            m = hs[a]
            a += 1
            if key[m] < ZONE_B:
                continue                      # in the front already
        else:
            m = lo.out[b]
            b += 1
        cl = rc.of[m]
        if won_in[m] == g and cl < 0:
            continue
        z = _zone(key[m], one)
        if z != last:
            c[MID] += one
            last = z
        key[m] = c[MID] + key[m] % one        # a winner's is written again below
        if cl >= 0:
            base[cl] = c[MID]                 # the class moves as one
    for i in range(nw - 1, -1, -1):           # winners before everything
        c[FRONT] -= one
        key[won[i]] = c[FRONT] + key[won[i]] % one
    k = 0
    for i in range(nw):
        if status[won[i]] == _RUNNING:
            lo.run[k] = won[i]
            k += 1
    for m in hs:
        cl = rc.of[m]
        if cl >= 0:                           # the class, if a member did not win
            x = m
            while x >= 0 and won_in[x] == g:
                x = rc.nxt[x]
            if x >= 0:
                lo.run[k] = -1 - cl
                k += 1
        elif won_in[m] != g:
            lo.run[k] = m
            k += 1
    c[NRUN] = k
    for j in range(nnew):
        key[new[j]] = c[TAIL]
        c[TAIL] += one
        lo.out[j] = new[j]
    c[NOUT] = nnew

"""The non-running nodes of Ray's list grouped by NodeStateCache class
(kernels/nodeclass.py), each class's members kept in list order, and per
resource shape the classes that hold a unit of it: what a placement group of
kernels/gangs.py needs from the non-running nodes (the first member of each
class that holds one of its shapes) without visiting them all.

A member's class changes only when its rows do, which in the gang kernel is
when it wins in a placed gang: it then leaves its class and joins the head of
its new one (winners go first in the list); a launch joins the tail of its class
(launches go last). Other moves of the list keep the order among non-running
nodes (kernels/listorder.py). A class with no member stays in the table and
leaves a shape's list the next time that list is read.

Members are a doubly linked list per class (``head``, ``tail``; ``nxt``, ``prv``
per slot). ``by_shape[s, :nby[s]]`` lists the classes that hold a unit of shape s
(``listed[c, s]``: class c is in it). The slow readable twin is in
tests/engine/kernels (per class, the members of a Python list in list order).
"""
from typing import NamedTuple

import numpy as np

from ._jit import njit_inner
from .fit import _holds


class PendClasses(NamedTuple):
    head: np.ndarray      # (C,) i8 first member in list order, -1 none
    tail: np.ndarray      # (C,) i8 last member
    nxt: np.ndarray       # (Mcap,) i8 next member of the slot's class, -1 none
    prv: np.ndarray       # (Mcap,) i8 previous member, -1 none
    by_shape: np.ndarray  # (S, W) i8 classes that hold a unit of each shape
    nby: np.ndarray       # (S,) i8 entries of by_shape in use
    listed: np.ndarray    # (C, S) b1 class c is in by_shape[s]
    stamp: np.ndarray     # (C,) i8 the last gang that took the class's first member


@njit_inner(alloc=True)
def _pend_classes(C, Mcap, S):
    """Room for C classes, Mcap slots and S shapes; no members."""
    W = 16
    return PendClasses(np.full(C, -1, dtype=np.int64), np.full(C, -1, dtype=np.int64),
                       np.full(Mcap, -1, dtype=np.int64), np.full(Mcap, -1, dtype=np.int64),
                       np.empty((S, W), dtype=np.int64), np.zeros(S, dtype=np.int64),
                       np.zeros((C, S), dtype=np.bool_), np.full(C, -1, dtype=np.int64))


@njit_inner(alloc=True)
def _pend_room(pc, C, k):
    """pc with room for C classes and k more entries in every shape's list."""
    C0, S, W = pc.head.shape[0], pc.by_shape.shape[0], pc.by_shape.shape[1]
    need = k
    for s in range(S):
        need = max(need, pc.nby[s] + k)
    if C <= C0 and need <= W:
        return pc
    C1, W1 = max(C, C0), max(W, need, 2 * W if need > W else W)
    head, tail = np.full(C1, -1, dtype=np.int64), np.full(C1, -1, dtype=np.int64)
    listed = np.zeros((C1, S), dtype=np.bool_)
    stamp = np.full(C1, -1, dtype=np.int64)
    for c in range(C0):
        head[c], tail[c], stamp[c] = pc.head[c], pc.tail[c], pc.stamp[c]
        for s in range(S):
            listed[c, s] = pc.listed[c, s]
    by_shape = np.empty((S, W1), dtype=np.int64)
    for s in range(S):
        for j in range(pc.nby[s]):
            by_shape[s, j] = pc.by_shape[s, j]
    return PendClasses(head, tail, pc.nxt, pc.prv, by_shape, pc.nby, listed, stamp)


@njit_inner
def _list_class(pc, c, tab, rep, rq):
    """Class c (just given a member) into the list of every shape it holds a
    unit of that does not list it yet; rep (S,) a request row of each shape."""
    for s in range(rep.shape[0]):
        if not pc.listed[c, s] and _holds(tab.free, c, rep[s], rq):
            pc.by_shape[s, pc.nby[s]] = c
            pc.nby[s] += 1
            pc.listed[c, s] = True


@njit_inner
def _only(pc, c, m, tab, rep, rq):
    """Slot m becomes the one member of the empty class c."""
    pc.head[c], pc.tail[c] = m, m
    pc.nxt[m], pc.prv[m] = -1, -1
    _list_class(pc, c, tab, rep, rq)


@njit_inner
def _join_head(pc, c, m, tab, rep, rq):
    """Slot m joins class c as its first member."""
    if pc.head[c] < 0:
        _only(pc, c, m, tab, rep, rq)
        return
    h = pc.head[c]
    pc.nxt[m], pc.prv[m] = h, -1
    pc.prv[h] = m
    pc.head[c] = m


@njit_inner
def _join_tail(pc, c, m, tab, rep, rq):
    """Slot m joins class c as its last member."""
    if pc.head[c] < 0:
        _only(pc, c, m, tab, rep, rq)
        return
    t = pc.tail[c]
    pc.prv[m], pc.nxt[m] = t, -1
    pc.nxt[t] = m
    pc.tail[c] = m


@njit_inner
def _leave(pc, c, m):
    """Slot m leaves class c."""
    a, b = pc.prv[m], pc.nxt[m]
    if a >= 0:
        pc.nxt[a] = b
    else:
        pc.head[c] = b
    if b >= 0:
        pc.prv[b] = a
    else:
        pc.tail[c] = a
    pc.nxt[m], pc.prv[m] = -1, -1


@njit_inner
def _firsts(pc, shapes, g, out):
    """The first member of every class with members that holds a unit of one
    of ``shapes``, each once (gang g stamps them), into out; returns how many.
    Classes found empty leave the lists read."""
    n = 0
    for a in range(shapes.shape[0]):
        s = shapes[a]
        w = 0
        for j in range(pc.nby[s]):
            c = pc.by_shape[s, j]
            if pc.head[c] < 0:
                pc.listed[c, s] = False
                continue
            pc.by_shape[s, w] = c
            w += 1
            if pc.stamp[c] != g:
                pc.stamp[c] = g
                out[n] = pc.head[c]
                n += 1
        pc.nby[s] = w
    return n

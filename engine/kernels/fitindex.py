"""Which running nodes hold one unit of each resource shape of the tick's gangs
(kernels/gangs.py), so a gang's pre-filter visits its candidates, not every node.

A running node's free row only shrinks while gangs are packed (a commit takes,
an undo puts back only what its own gang took), so a node that stops holding a
shape never holds it again: each shape keeps the list of running nodes that
held it at the start, and drops the ones found not to hold it any more.

The index is a ``FitIndex``; the gang kernel reads it by unit (``UnitIndex``:
the classes of kernels/runclass.py listed once).
"""
from typing import NamedTuple

import numpy as np

from ._jit import njit_inner
from .fit import _holds, _minimal_rows


class FitIndex(NamedTuple):
    rep: np.ndarray         # (S,) i4 a request row of each shape
    mem: np.ndarray         # the member slots of every shape, in one array
    ptr: np.ndarray         # (S + 1,) i8 where each shape's members start
    cnt: np.ndarray         # (S,) i8 how many are still listed
    some: np.ndarray        # the slots that held any shape at the start, in their order


@njit_inner(alloc=True)
def _fit_index(rep, running, free, rq):
    """The index of the running slots ``running`` for shapes ``rep``."""
    S = rep.shape[0]
    # A node holding none of the minimal shapes holds none at all (fit.py).
    mins = _minimal_rows(rq.qty, rep)
    some = np.empty(running.shape[0], dtype=np.int64)
    n = 0
    for m in running:
        for q in mins:
            if _holds(free, m, q, rq):
                some[n] = m
                n += 1
                break
    running = some[:n]
    cnt = np.zeros(S, dtype=np.int64)
    for s in range(S):
        for m in running:
            if _holds(free, m, rep[s], rq):
                cnt[s] += 1
    ptr = np.zeros(S + 1, dtype=np.int64)
    for s in range(S):
        ptr[s + 1] = ptr[s] + cnt[s]
    mem = np.empty(ptr[S], dtype=np.int64)
    for s in range(S):
        k = ptr[s]
        for m in running:
            if _holds(free, m, rep[s], rq):
                mem[k] = m
                k += 1
    return FitIndex(rep, mem, ptr, cnt, running)


class UnitIndex(NamedTuple):
    """The fit index by unit: per shape, the running nodes alone in no class
    (``m``) and the classes of kernels/runclass.py (``-1 - c``) that hold one
    unit of it. A class's members hold the same shapes and their free rows do
    not change while they stay in it, so a class is listed once and never
    checked again; a member that wins leaves it and is listed on its own for
    the shapes of its class it still holds (``_depart``)."""
    rep: np.ndarray         # (S,) i4 a request row of each shape
    mem: np.ndarray         # every shape's units, in one array
    ptr: np.ndarray         # (S + 1,) i8 where each shape's room starts
    cnt: np.ndarray         # (S,) i8 units listed
    cptr: np.ndarray        # (C + 1,) i8 where each class's shapes start
    cshape: np.ndarray      # the shapes each class holds


@njit_inner(alloc=True)
def _unit_index(ix, rc):
    """The unit index of fit index ix (at the start of the call: every class
    member untouched) and its classes rc."""
    S, C = ix.rep.shape[0], rc.head.shape[0]
    ncls = np.zeros(S, dtype=np.int64)
    per = np.zeros(C + 1, dtype=np.int64)
    for s in range(S):
        for j in range(ix.ptr[s], ix.ptr[s] + ix.cnt[s]):
            c = rc.of[ix.mem[j]]
            if c >= 0 and rc.head[c] == ix.mem[j]:
                ncls[s] += 1
                per[c + 1] += 1
    ptr = np.zeros(S + 1, dtype=np.int64)
    for s in range(S):          # room: each member may be listed alone, once
        ptr[s + 1] = ptr[s] + ix.cnt[s] + ncls[s]
    for c in range(C):
        per[c + 1] += per[c]
    mem = np.empty(ptr[S], dtype=np.int64)
    cnt = np.zeros(S, dtype=np.int64)
    cshape = np.empty(per[C], dtype=np.int64)
    at = per[:C].copy()
    for s in range(S):
        for j in range(ix.ptr[s], ix.ptr[s] + ix.cnt[s]):
            m = ix.mem[j]
            c = rc.of[m]
            if c < 0:
                mem[ptr[s] + cnt[s]] = m
                cnt[s] += 1
            elif rc.head[c] == m:
                mem[ptr[s] + cnt[s]] = -1 - c
                cnt[s] += 1
                cshape[at[c]] = s
                at[c] += 1
    return UnitIndex(ix.rep, mem, ptr, cnt, per, cshape)


@njit_inner
def _unit_holders(ux, shapes, free, rq, rc, mark, markc, stamp, out):
    """The running nodes alone that hold one unit of any of ``shapes`` now and
    the first member of every class that does, each once (``mark``, ``markc``
    per class, ``stamp`` dedupe), into ``out``; returns how many."""
    n = 0
    for a in range(shapes.shape[0]):
        s = shapes[a]
        w = ux.ptr[s]
        for j in range(ux.ptr[s], ux.ptr[s] + ux.cnt[s]):
            u = ux.mem[j]
            if u < 0:                         # a class, by its first member
                seen, k, first = markc, -1 - u, rc.head[-1 - u]
                if first < 0:
                    continue                  # every member left: the class is gone
            elif _holds(free, u, ux.rep[s], rq):
                seen, k, first = mark, u, u
            else:
                continue
            ux.mem[w] = u
            w += 1
            if seen[k] != stamp:
                seen[k] = stamp
                out[n] = first
                n += 1
        ux.cnt[s] = w - ux.ptr[s]
    return n


@njit_inner
def _depart(ux, c, m, free, rq):
    """Member m left class c (it won): list it alone for the class's shapes it
    still holds."""
    for j in range(ux.cptr[c], ux.cptr[c + 1]):
        s = ux.cshape[j]
        if _holds(free, m, ux.rep[s], rq):
            ux.mem[ux.ptr[s] + ux.cnt[s]] = m
            ux.cnt[s] += 1

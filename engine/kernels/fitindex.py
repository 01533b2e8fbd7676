"""Which running nodes hold one unit of each resource shape of the tick's gangs
(kernels/gangs.py), so a gang's pre-filter visits its candidates, not every node.

A running node's free row only shrinks while gangs are packed (a commit takes,
an undo puts back only what its own gang took), so a node that stops holding a
shape never holds it again: each shape keeps the list of running nodes that
held it at the start, and drops the ones found not to hold it any more.

Index, as a tuple ``ix``: (rep (S,) a request row of each shape, mem the member
slots of every shape in one array, ptr (S + 1,) where each shape's members
start, cnt (S,) how many are still listed).
"""
import numpy as np

from ._jit import njit, njit_leaf
from .fit import _holds, _minimal_rows


@njit
def _fit_index(rep, running, free, qty, cols, ncols):
    """The index of the running slots ``running`` for shapes ``rep``."""
    S = rep.shape[0]
    # A node holding none of the minimal shapes holds none at all (fit.py).
    mins = _minimal_rows(qty, rep)
    some = np.empty(running.shape[0], dtype=np.int64)
    n = 0
    for m in running:
        for q in mins:
            if _holds(free, m, q, qty, cols, ncols):
                some[n] = m
                n += 1
                break
    running = some[:n]
    cnt = np.zeros(S, dtype=np.int64)
    for s in range(S):
        for m in running:
            if _holds(free, m, rep[s], qty, cols, ncols):
                cnt[s] += 1
    ptr = np.zeros(S + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(cnt)
    mem = np.empty(ptr[S], dtype=np.int64)
    for s in range(S):
        k = ptr[s]
        for m in running:
            if _holds(free, m, rep[s], qty, cols, ncols):
                mem[k] = m
                k += 1
    return rep, mem, ptr, cnt


@njit_leaf
def _holders(ix, shapes, free, qty, cols, ncols, mark, stamp, out):
    """Running slots that hold one unit of any of ``shapes`` now, each once
    (``mark``/``stamp`` dedupe), into ``out``; returns how many."""
    rep, mem, ptr, cnt = ix
    n = 0
    for a in range(shapes.shape[0]):
        s = shapes[a]
        w = ptr[s]
        for j in range(ptr[s], ptr[s] + cnt[s]):
            m = mem[j]
            if _holds(free, m, rep[s], qty, cols, ncols):
                mem[w] = m
                w += 1
                if mark[m] != stamp:
                    mark[m] = stamp
                    out[n] = m
                    n += 1
        cnt[s] = w - ptr[s]
    return n

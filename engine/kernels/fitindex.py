"""Which running nodes hold one unit of each resource shape of the tick's gangs
(kernels/gangs.py), so a gang's pre-filter visits its candidates, not every node.

A running node's free row only shrinks while gangs are packed (a commit takes,
an undo puts back only what its own gang took), so a node that stops holding a
shape never holds it again: each shape keeps the list of running nodes that
held it at the start, and drops the ones found not to hold it any more.

The index is a ``FitIndex``.
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


@njit_inner
def _holders(ix, shapes, free, rq, mark, stamp, out):
    """Running slots that hold one unit of any of ``shapes`` now, each once
    (``mark``/``stamp`` dedupe), into ``out``; returns how many."""
    n = 0
    for a in range(shapes.shape[0]):
        s = shapes[a]
        w = ix.ptr[s]
        for j in range(ix.ptr[s], ix.ptr[s] + ix.cnt[s]):
            m = ix.mem[j]
            if _holds(free, m, ix.rep[s], rq):
                ix.mem[w] = m
                w += 1
                if mark[m] != stamp:
                    mark[m] = stamp
                    out[n] = m
                    n += 1
        ix.cnt[s] = w - ix.ptr[s]
    return n

"""Ray's utilisation score of one node (docs/ray-semantics.md §4.8), and the
victim-order utilisation (§3.5).

The float arithmetic is CPython's, term by term: ``u = (total - free) / total``,
``term = total * u ** 3`` (``pow``), min of the terms, and their ``sum()`` over
the node's resources in dict order divided by the count. ``sum()`` of floats is
the interpreter's: a plain left-to-right sum up to Python 3.11, Neumaier's
compensated sum from 3.12 on (CPython's builtin_sum); Ray runs in the same
interpreter as the engine, so the kernels follow the one they run in (numba
caches a kernel per Python version).
"""
import math

import numpy as np

from .pysum import COMPENSATED as COMPENSATED_SUM    # this interpreter's float sum()
from ._jit import njit, njit_inner


@njit_inner(hot=True)
def _sum_step(s, c, x):
    """Python's sum() of floats, one item after the first: (new sum, new
    compensation). Finish with ``_sum_end``."""
    t = s + x
    if COMPENSATED_SUM:
        if abs(s) >= abs(x):
            c += (s - t) + x
        else:
            c += (x - t) + s
    return t, c


@njit_inner(hot=True)
def _sum_end(s, c):
    if COMPENSATED_SUM and c != 0.0 and math.isfinite(c):
        return s + c
    return s


@njit_inner(hot=True)
def _util_terms(total, order, free, present):
    """(min, mean) of total * u**3 over the node's resources in dict order.

    total (R,), order (R,) columns in dict order (-1 padded), free (R,),
    present (R,) whether the column is in the availability map.
    """
    n = 0
    s, c = 0.0, 0.0
    lo = 0.0
    for j in range(order.shape[0]):
        r = order[j]
        if r < 0:
            break
        v = total[r]
        if v == 0.0 or not present[r]:
            continue
        u = (v - free[r]) / v
        if u < 0.0:
            u = 0.0      # available > total: Ray asserts (quirk Q12); clamp instead
        term = v * math.pow(u, 3.0)
        if n == 0:
            lo = term
            s = term
        else:
            if term < lo:
                lo = term
            s, c = _sum_step(s, c, term)
        n += 1
    if n == 0:
        return 0.0, 0.0
    return lo, _sum_end(s, c) / n


@njit_inner(hot=True)
def _score(total, order, free, present, placed_res, placed_gpu, gpu_col, conserve_gpu):
    """(gpu_ok, matching resource types, min util term, mean util term) of one node.

    placed_res (R,) resources with a positive amount in any request placed on the
    node; placed_gpu whether any placed request names "GPU" (even with 0).
    """
    gpu_ok = 1
    if conserve_gpu and gpu_col >= 0 and total[gpu_col] > 0.0 and not placed_gpu:
        gpu_ok = 0
    match = 0
    for j in range(order.shape[0]):
        r = order[j]
        if r < 0:
            break
        if placed_res[r]:
            match += 1
    lo, mean = _util_terms(total, order, free, present)
    return gpu_ok, match, lo, mean


@njit
def _victim_util(total, order, free, present, slots):
    """(len(slots),) mean of (total - free) / total over resources with total > 0,
    dict order, of each slot; a resource missing from the availability map
    counts as fully used."""
    out = np.zeros(slots.shape[0], dtype=np.float64)
    for i in range(slots.shape[0]):
        m = slots[i]
        n = 0
        s, c = 0.0, 0.0
        for j in range(order.shape[1]):
            r = order[m, j]
            if r < 0:
                break
            v = total[m, r]
            if v <= 0.0:
                continue
            a = free[m, r] if present[m, r] else 0.0
            u = (v - a) / v
            if n == 0:
                s = u
            else:
                s, c = _sum_step(s, c, u)
            n += 1
        out[i] = _sum_end(s, c) / n if n else 0.0
    return out

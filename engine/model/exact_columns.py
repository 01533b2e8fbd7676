"""Which resource columns hold only values on one dyadic grid.

On such a column k single subtractions of a request's value equal one k-fold
subtraction, so the packing kernels may take runs of identical units at once
(engine/kernels/fit.py); elsewhere they subtract unit by unit, as Ray does.
"""
from __future__ import annotations

import numpy as np

MAX_G = 30                   # finest grid: 2**-30
TOP = 2.0 ** 51              # k * 2**-G needs |k| < 2**51 (sums stay exact)


def exact_columns(R: int, *mats: np.ndarray) -> np.ndarray:
    """(R,) bool: every value of the column (over all ``mats``, each (n, R)) is
    k * 2**-G for one G <= 30 with |k| < 2**51, so sums and k-fold products of
    them are exact in binary64. Multiplying by a power of two is exact, so a
    value is on the 2**-g grid exactly when ``v * 2**g`` is an integer."""
    mats = [m.reshape(-1, R) for m in mats if m.size]
    on_grid = np.ones(R, dtype=bool)
    top = np.zeros(R)
    for m in mats:
        on_grid &= _down(np.logical_and, m, lambda b: _whole(b * 2.0 ** MAX_G))
        top = np.maximum(top, _down(np.maximum, m, np.abs))
    exact = on_grid & (top * 2.0 ** MAX_G < TOP)
    # Large values (memory in bytes) need a coarser grid to keep |k| < 2**51:
    # the finest one they are on, searched from whole numbers down.
    cols = np.flatnonzero(on_grid & ~exact)
    for g in range(MAX_G + 1):
        if not cols.size:
            break
        cols = cols[top[cols] * 2.0 ** g < TOP]
        ok = np.ones(cols.size, dtype=bool)
        for m in mats if cols.size else ():
            ok &= _down(np.logical_and, m, lambda b: _whole(b[:, cols] * 2.0 ** g))
        exact[cols[ok]] = True
        cols = cols[~ok]
    return exact


def _whole(scaled: np.ndarray) -> np.ndarray:
    """Which values are whole numbers (in place of ``scaled``'s floor)."""
    return scaled == np.floor(scaled, out=np.empty_like(scaled))


def _down(ufunc, m: np.ndarray, f, k: int = 64, rows: int = 4096) -> np.ndarray:
    """``ufunc.reduce(f(m), axis=0)`` for an (n, R) ``m`` of few columns (``f``
    maps rows to rows of at least one column), ``rows``
    rows at a time (the temporaries stay in cache) and k rows as one wide row
    (numpy reduces n/k rows of k*R values, not n short ones: several times
    faster). For an exact, order-free ufunc only (logical and; the maximum of
    values without -0.0) and an elementwise ``f``."""
    n = m.shape[0]
    if n < 2 * k:
        return ufunc.reduce(f(m), axis=0)
    out = None
    for lo in range(0, n - n % k, rows):
        fb = f(m[lo: min(lo + rows, n - n % k)])
        part = ufunc.reduce(fb.reshape(-1, k * fb.shape[1]), axis=0).reshape(k, -1)
        out = part if out is None else ufunc(out, part)
    if n % k:
        out = np.concatenate([out, f(m[n - n % k:])])
    return ufunc.reduce(out, axis=0)


def exact_columns_loop(R: int, *mats: np.ndarray) -> np.ndarray:
    """The slow readable twin of ``exact_columns`` (tests): try each grid."""
    exact = np.ones(R, dtype=bool)
    for r in range(R if any(m.size for m in mats) else 0):
        vals = np.concatenate([m[:, r].ravel() for m in mats if m.size])
        vals = vals[vals != 0]
        if vals.size == 0:
            continue
        top = float(np.abs(vals).max())
        ok = False
        for g in range(MAX_G + 1):
            scaled = vals * float(2 ** g)
            if top * 2 ** g >= TOP:
                break
            if np.all(scaled == np.floor(scaled)):
                ok = True
                break
        exact[r] = ok
    return exact

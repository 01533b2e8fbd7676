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
        scaled = m * 2.0 ** MAX_G
        on_grid &= (scaled == np.floor(scaled)).all(axis=0)
        top = np.maximum(top, np.abs(m).max(axis=0))
    exact = on_grid & (top * 2.0 ** MAX_G < TOP)
    # Large values (memory in bytes) need a coarser grid to keep |k| < 2**51:
    # the finest one they are on, searched from whole numbers down.
    cols = np.flatnonzero(on_grid & ~exact)
    for g in range(MAX_G + 1):
        if not cols.size:
            break
        cols = cols[top[cols] * 2.0 ** g < TOP]
        ok = np.ones(cols.size, dtype=bool)
        for m in mats:
            scaled = m[:, cols] * 2.0 ** g
            ok &= (scaled == np.floor(scaled)).all(axis=0)
        exact[cols[ok]] = True
        cols = cols[~ok]
    return exact


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

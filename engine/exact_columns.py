"""Which resource columns hold only values on one dyadic grid.

On such a column k single subtractions of a request's value equal one k-fold
subtraction, so the packing kernels may take runs of identical units at once
(engine/kernels/fit.py); elsewhere they subtract unit by unit, as Ray does.
"""
from __future__ import annotations

import numpy as np


def exact_columns(R: int, *mats: np.ndarray) -> np.ndarray:
    """(R,) bool: every value of the column (over all ``mats``, each (n, R)) is
    k * 2**-G for one G <= 30 with |k| < 2**51, so sums and k-fold products of
    them are exact in binary64."""
    exact = np.ones(R, dtype=bool)
    for r in range(R):
        vals = np.concatenate([m[:, r].ravel() for m in mats if m.size])
        vals = vals[vals != 0]
        if vals.size == 0:
            continue
        top = float(np.abs(vals).max())
        ok = False
        for g in range(31):
            scaled = vals * float(2 ** g)
            if top * 2 ** g >= 2.0 ** 51:
                break
            if np.all(scaled == np.floor(scaled)):
                ok = True
                break
        exact[r] = ok
    return exact

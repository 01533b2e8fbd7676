"""Field checks of the engine's boundary: every quantity, count, timeout and
fraction of a tick passes one of these once, and bad input raises a
`ProblemError` naming the offending field (docs/ray-compat.md D6)."""
from __future__ import annotations

import math

import numpy as np

from vecsched.engine.model.errors import ProblemError

MAX_COUNT = 1 << 40          # larger request counts or caps are rejected as absurd
MAX_QTY = 1e18               # larger quantities are rejected (memory in bytes is ~1e12)


def qty(value, where: str) -> float:
    """A resource quantity: a finite number in [0, MAX_QTY]."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ProblemError(where, f"quantity must be a number, got {value!r}") from None
    if math.isnan(v):
        raise ProblemError(where, "quantity is NaN")
    if v < 0:
        raise ProblemError(where, f"quantity is negative ({v})")
    if v > MAX_QTY or math.isinf(v):
        raise ProblemError(where, f"quantity is too large ({v})")
    return v


def count(value, where: str, lo: int = 0) -> int:
    """An integer count in [lo, MAX_COUNT] (a bool is not a count)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ProblemError(where, f"must be an integer, got {value!r}")
    v = int(value)
    if v < lo:
        raise ProblemError(where, f"must be >= {lo}, got {v}")
    if v > MAX_COUNT:
        raise ProblemError(where, f"is too large ({v} > {MAX_COUNT})")
    return v


def integer(value, where: str) -> int:
    """Any integer (a priority); a bool is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ProblemError(where, f"must be an integer, got {value!r}")
    return int(value)


def timeout(value, where: str) -> float:
    """A timeout in seconds; None (not set) is NaN."""
    return math.nan if value is None else qty(value, where)


def fraction(value, where: str) -> float:
    """A number in [0, 1] (a cloud availability score)."""
    v = qty(value, where)
    if v > 1.0:
        raise ProblemError(where, f"must be within [0, 1], got {v}")
    return v


def checked(values: list, where, check=qty) -> np.ndarray:
    """``values`` as float64, every one passing ``check(value, field)`` (which
    raises ProblemError); ``where(j)`` names entry j. One vector check; only
    when something is wrong is the offending entry located and named."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is not None and arr.ndim == 1:
        bad = ~np.isfinite(arr) | (arr < 0) | (arr > MAX_QTY)
        if not bad.any():
            return arr
        j = int(np.argmax(bad))
        check(values[j], where(j))
    for j, v in enumerate(values):          # a non-number somewhere: find and name it
        check(v, where(j))
    raise AssertionError("unreachable: a bad value passed the check")

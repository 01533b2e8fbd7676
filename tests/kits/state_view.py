"""Comparing an efficient-mode ``State`` before and after an undone step: every
array up to its used slots, its scalars and lists (the journal's own
bookkeeping and scratch buffers left out)."""
from __future__ import annotations

import numpy as np

from vecsched.engine.efficient.state import State

# bookkeeping of the journal itself and scratch buffers, not the State's content
_BOOKKEEPING = {"_floor", "_log", "_scratch"}


def state_view(st: State) -> dict:
    """Every array of the State up to its used slots, and its scalars and lists."""
    out = {}
    for k, v in vars(st).items():
        if k in _BOOKKEEPING:
            continue
        if isinstance(v, np.ndarray):
            out[k] = v[:st.M].copy() if v.shape[:1] == st.free.shape[:1] else v.copy()
        elif isinstance(v, (int, float, list, tuple)):
            out[k] = list(v) if isinstance(v, list) else v
    return out


def assert_same(a: dict, b: dict, where) -> None:
    assert a.keys() == b.keys(), where
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes(), (where, k)
        else:
            assert a[k] == b[k], (where, k)

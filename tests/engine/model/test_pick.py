"""node_columns.pick: every path (item getter, consecutive slice, object array)
gives ``[items[j] for j in idx]``, errors included."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine.model.node_columns import pick


@pytest.mark.parametrize("seed", range(20))
def test_pick_equals_the_comprehension(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    items = [f"x{i}" if i % 3 else (i, "t") for i in range(n)]
    for kind in (list, tuple):
        seq = kind(items)
        for _ in range(30):
            lo = int(rng.integers(0, n))
            hi = int(rng.integers(lo, n + 1))
            choices = [np.arange(lo, hi), rng.integers(0, n, int(rng.integers(0, 2 * n))),
                       rng.permutation(n), np.arange(lo, hi)[::-1],
                       -np.arange(1, min(n, 40) + 1)[::-1]]
            for idx in choices:
                idx = np.asarray(idx, np.int64)
                got = pick(seq, idx)
                assert type(got) is list
                assert got == [seq[j] for j in idx.tolist()]
                assert all(a is b for a, b in zip(got, (seq[j] for j in idx.tolist())))


def test_pick_out_of_range_raises():
    items = list(range(30))
    for idx in (np.arange(10, 31), np.arange(0, 100), np.r_[np.arange(29), 45]):
        with pytest.raises(IndexError):
            pick(items, idx)

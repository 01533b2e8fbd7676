"""engine/kernels/eff_items.add_items (the gang packing's placements put on its dense
slots at once) against its readable twin: ``Packing._add`` one placement at a time."""
from __future__ import annotations

import numpy as np

from vecsched.engine.kernels.eff_items import add_items


def add_items_twin(free, label, slots, qty, counts, akey, aval):
    for s, q, n, k, v in zip(slots.tolist(), qty, counts.tolist(), akey.tolist(), aval.tolist()):
        free[s] = np.maximum(free[s] - n * q, 0.0)
        if k >= 0:
            label[s, k] = v


def test_add_items_matches_twin():
    rng = np.random.default_rng(41)
    for case in range(300):
        S, R, L, P = (int(rng.integers(1, 9)), int(rng.integers(1, 6)), int(rng.integers(1, 4)),
                      int(rng.integers(0, 30)))
        free = np.round(rng.random((S, R)) * 16, 3)
        if case % 5 == 0:
            free[0, 0] = np.nan                          # a NaN stays NaN
        label = rng.integers(-1, 3, (S, L)).astype(np.int32)
        slots = rng.integers(0, S, P).astype(np.int64)
        qty = np.round(rng.random((P, R)) * 3, 3) * (rng.random((P, R)) < 0.7)
        counts = rng.integers(1, 4, P).astype(np.int64)
        akey = np.where(rng.random(P) < 0.4, rng.integers(0, L, P), -1).astype(np.int64)
        aval = rng.integers(0, 5, P).astype(np.int64)
        want_f, want_l = free.copy(), label.copy()
        add_items_twin(want_f, want_l, slots, qty, counts, akey, aval)
        add_items(free, label, slots, qty, counts, akey, aval)
        assert free.tobytes() == want_f.tobytes(), case
        assert label.tobytes() == want_l.tobytes(), case
        assert (free[~np.isnan(free)] >= 0).all(), case

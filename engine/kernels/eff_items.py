"""Putting placed units on the dense slots of the efficient mode's gang packing
(engine/efficient/improve.py ``Packing``): one kernel call for a whole packing
instead of a few numpy calls per placement.

Placement j puts ``counts[j]`` units of bundle ``qty[j]`` on slot ``slots[j]``, in
order: the slot's free room loses count x bundle, clipped at 0 after each
placement (a NaN stays), and a placement whose request row has an anti-affinity
label (``akey[j]`` >= 0) sets it on the slot (``label[slot, akey] = aval``).
"""
import numpy as np

from ._jit import njit


@njit
def add_items(free, label, slots, qty, counts, akey, aval):
    """Apply the placements (module docstring) to ``free`` (S, R) and ``label``
    (S, L) in place."""
    R = free.shape[1]
    for j in range(slots.shape[0]):
        s = slots[j]
        n = float(counts[j])
        for r in range(R):
            x = free[s, r] - n * qty[j, r]
            free[s, r] = x if (x >= 0.0 or x != x) else 0.0
        if akey[j] >= 0:
            label[s, akey[j]] = aval[j]


@njit
def seg_sums(ptr, x):
    """(K, R): row k the sum of x[ptr[k]:ptr[k + 1]] (rows of x (E, R)), added left
    to right from 0.0, as Python's ``0 + x[a] + x[a + 1] + ...`` rounds (an empty
    segment: zeros)."""
    K, R = ptr.shape[0] - 1, x.shape[1]
    out = np.zeros((K, R))
    for k in range(K):
        for e in range(ptr[k], ptr[k + 1]):
            for r in range(R):
                out[k, r] += x[e, r]
    return out

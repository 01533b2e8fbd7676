"""Putting placed units on the dense slots of the efficient mode's gang packing
(engine/efficient/improve.py ``Packing``): one kernel call for a whole packing
instead of a few numpy calls per placement.

Placement j puts ``counts[j]`` units of bundle ``qty[j]`` on slot ``slots[j]``, in
order: the slot's free room loses count x bundle, clipped at 0 after each
placement (a NaN stays), and a placement whose request row has an anti-affinity
label (``akey[j]`` >= 0) sets it on the slot (``label[slot, akey] = aval``).
"""
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

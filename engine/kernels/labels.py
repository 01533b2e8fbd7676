"""Label selectors (docs/ray-semantics.md §4.9) and the label score (§4.8 item 1).

``rq`` is the request table (records.Reqs); here only its selector arrays
are read.
"""
import numpy as np

from ._jit import njit, njit_inner

IN = 1


@njit_inner(hot=True)
def _first_selector(label, q, rq):
    """Index (within request q's list) of the first selector the node's labels
    satisfy, -1 if none. label (L,) value id per key, -1 absent."""
    for i in range(rq.sel_lo[q], rq.sel_hi[q]):
        ok = True
        for c in range(rq.sel_con_ptr[i], rq.sel_con_ptr[i + 1]):
            v = label[rq.con_key[c]]
            found = False
            if v >= 0:
                for j in range(rq.con_val_ptr[c], rq.con_val_ptr[c + 1]):
                    if rq.con_vals[j] == v:
                        found = True
                        break
            ok = found if rq.con_op[c] == IN else not found
            if not ok:
                break
        if ok:
            return i - rq.sel_lo[q]
    return -1


@njit_inner(hot=True)
def _label_score(label, hist, nh, rq):
    """For the first placed request (in placement order) with a satisfied
    selector: its number of selectors minus that selector's index; else 0.
    hist (H,) the node's placed requests that have selectors, first nh valid."""
    for j in range(nh):
        q = hist[j]
        i = _first_selector(label, q, rq)
        if i >= 0:
            return (rq.sel_hi[q] - rq.sel_lo[q]) - i
    return 0


@njit
def _labels_held(label, slots):
    """The labels each slot has (entries >= 0), as (ptr (n + 1,), (column, value)
    pairs (k, 2)): slot slots[i]'s are pairs[ptr[i]:ptr[i + 1]], by column."""
    n = slots.shape[0]
    ptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        c = 0
        for j in range(label.shape[1]):
            if label[slots[i], j] >= 0:
                c += 1
        ptr[i + 1] = ptr[i] + c
    pairs = np.empty((ptr[n], 2), dtype=np.int64)
    for i in range(n):
        k = ptr[i]
        if ptr[i + 1] == k:
            continue                    # no labels: nothing to list
        for j in range(label.shape[1]):
            v = label[slots[i], j]
            if v >= 0:
                pairs[k, 0] = j
                pairs[k, 1] = v
                k += 1
    return ptr, pairs

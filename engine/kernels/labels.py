"""Label selectors (RAY_V2_SEMANTICS.md §4.9) and the label score (§4.8 item 1).

``rq`` is the request-table tuple built by engine.requests_view.Requests; here only
its selector arrays are read: rq[5] sel_lo, rq[6] sel_hi (row q's selectors are
sel_lo[q]..sel_hi[q]), rq[7] sel_con_ptr, rq[8] con_key, rq[9] con_op,
rq[10] con_val_ptr, rq[11] con_vals.
"""
import numpy as np

from ._jit import njit, njit_leaf

IN = 1


@njit_leaf
def _first_selector(label, q, rq):
    """Index (within request q's list) of the first selector the node's labels
    satisfy, -1 if none. label (L,) value id per key, -1 absent."""
    sel_lo, sel_hi, sel_con_ptr, con_key, con_op, con_val_ptr, con_vals = (
        rq[5], rq[6], rq[7], rq[8], rq[9], rq[10], rq[11])
    for i in range(sel_lo[q], sel_hi[q]):
        ok = True
        for c in range(sel_con_ptr[i], sel_con_ptr[i + 1]):
            v = label[con_key[c]]
            found = False
            if v >= 0:
                for j in range(con_val_ptr[c], con_val_ptr[c + 1]):
                    if con_vals[j] == v:
                        found = True
                        break
            ok = found if con_op[c] == IN else not found
            if not ok:
                break
        if ok:
            return i - sel_lo[q]
    return -1


@njit_leaf
def _label_score(label, hist, nh, rq):
    """For the first placed request (in placement order) with a satisfied
    selector: its number of selectors minus that selector's index; else 0.
    hist (H,) the node's placed requests that have selectors, first nh valid."""
    sel_lo, sel_hi = rq[5], rq[6]
    for j in range(nh):
        q = hist[j]
        i = _first_selector(label, q, rq)
        if i >= 0:
            return (sel_hi[q] - sel_lo[q]) - i
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

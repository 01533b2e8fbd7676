"""The efficient mode's packing trial: how many units of each row one fresh node
takes, filled by the dot-product rule (vecsched.engine.efficient.place).

While some row still has units and one more unit of it fits the node's room,
the unit whose bundle, normalised by the node's capacity, points most along
the normalised room left is taken next (Panigrahy et al. 2011). A row in an
anti-affinity group takes one unit and closes its group on the node; any other
row takes an eighth of what it could (at least one) per step, so a trial over
many units stays short. Sums run left to right over the columns, so the result
does not depend on a BLAS build.
"""
import math

import numpy as np

from ._jit import njit, njit_inner

FIT_SLACK = 1e-12        # vecsched.engine.model.fits.FIT_SLACK (kernels import no model)
BIG_COUNT = 1 << 40      # vecsched.engine.model.fits.BIG_COUNT: fits without bound


@njit_inner(hot=True)
def _units_fit(rem, qty, i):
    """Units of row i that fit in ``rem``, as fits.fit_count counts them."""
    ratio = math.inf
    for r in range(rem.shape[0]):
        v = qty[i, r]
        if v > 0:
            x = rem[r] / v
            if x < ratio:
                ratio = x
    if ratio == math.inf:
        return np.int64(BIG_COUNT)
    if ratio < 0.0:
        ratio = 0.0
    return np.int64(math.floor(ratio * (1.0 + FIT_SLACK)))


@njit_inner
def _fill_into(free0, qty, avail, groups, k, rem, inv, w, taken):
    """The trial of one node (free room free0 (R,)) into k (S,) (zeroed here);
    rem, inv, w (R,) and taken (groups,) are scratch."""
    S, R = qty.shape
    for i in range(S):
        k[i] = 0
    for g in range(taken.shape[0]):
        taken[g] = False
    for r in range(R):
        rem[r] = free0[r]
        inv[r] = 1.0 / free0[r] if free0[r] > 0 else 0.0
    while True:
        for r in range(R):
            w[r] = rem[r] * inv[r]
        best, best_score, best_fit = -1, -math.inf, np.int64(0)
        for i in range(S):
            if avail[i] <= k[i]:
                continue
            if groups[i] >= 0 and taken[groups[i]]:
                continue
            fit = _units_fit(rem, qty, i)
            if fit < 1:
                continue
            score = 0.0
            for r in range(R):
                score += (qty[i, r] * inv[r]) * w[r]
            if best < 0 or score > best_score:
                best, best_score, best_fit = i, score, fit
        if best < 0:
            return
        if groups[best] >= 0:
            take = np.int64(1)
            taken[groups[best]] = True
        else:
            take = max(np.int64(1), min(avail[best] - k[best], best_fit) // 8)
        k[best] += take
        for r in range(R):
            x = rem[r] - take * qty[best, r]
            rem[r] = x if (x >= 0.0 or x != x) else 0.0


@njit
def _dot_fill(free0, qty, avail, groups):
    """(S,) units of each row one fresh node takes (module docstring). free0 (R,)
    the node's room, qty (S, R) bundles, avail (S,) i8 units each row may give,
    groups (S,) i8 anti-affinity group of each row (-1 none)."""
    S, R = qty.shape
    ng = 0
    for i in range(S):
        if groups[i] + 1 > ng:
            ng = groups[i] + 1
    k = np.zeros(S, np.int64)
    rem, inv, w = np.empty(R), np.empty(R), np.empty(R)
    _fill_into(free0, qty, avail, groups, k, rem, inv, w, np.zeros(ng, np.bool_))
    return k


@njit
def _dot_fills(type_free, types, qty, avail, groups):
    """``_dot_fill`` for a fresh node of each type in ``types`` (n,): row j of
    the (n, S) result uses type_free[types[j]] and avail[j] (n, S)."""
    S, R = qty.shape
    ng = 0
    for i in range(S):
        if groups[i] + 1 > ng:
            ng = groups[i] + 1
    out = np.zeros((types.shape[0], S), np.int64)
    rem, inv, w = np.empty(R), np.empty(R), np.empty(R)
    taken = np.zeros(ng, np.bool_)
    for j in range(types.shape[0]):
        _fill_into(type_free[types[j]], qty, avail[j], groups, out[j], rem, inv, w, taken)
    return out


@njit_inner(alloc=True)
def _row_classes(qty, allowed):
    """Rows with equal bundles (compared with ==, so -0.0 and 0.0 alike) and the
    same allowed types form a class: in every trial they fit and score alike, so
    only the first of a class that can still give a unit competes (the others
    have higher indices, and a trial's ties go to the lowest). Returns (C, each
    class's rows ascending as (C + 1,) offsets and (S,) rows)."""
    S, R = qty.shape
    T = allowed.shape[1]
    size = 16
    while size < 2 * S:
        size *= 2
    table = np.full(size, -1, np.int64)
    reps = np.empty(S, np.int64)
    cls = np.empty(S, np.int64)
    C = 0
    for i in range(S):
        h = np.int64(1469598103934665603)
        for r in range(R):
            h = (h ^ hash(qty[i, r] + 0.0)) * np.int64(1099511628211)
        for t in range(T):
            if allowed[i, t]:
                h = (h ^ np.int64(t + 1)) * np.int64(1099511628211)
        at = h & (size - 1)
        while True:
            c = table[at]
            if c < 0:
                table[at] = C
                reps[C] = i
                cls[i] = C
                C += 1
                break
            j = reps[c]
            same = True
            for r in range(R):
                if qty[i, r] != qty[j, r]:
                    same = False
            for t in range(T):
                if allowed[i, t] != allowed[j, t]:
                    same = False
            if same:
                cls[i] = c
                break
            at = (at + 1) & (size - 1)
    cptr = np.zeros(C + 1, np.int64)
    for i in range(S):
        cptr[cls[i] + 1] += 1
    for c in range(C):
        cptr[c + 1] += cptr[c]
    fill = cptr[:C].copy()
    crow = np.empty(S, np.int64)
    for i in range(S):
        crow[fill[cls[i]]] = i
        fill[cls[i]] += 1
    return C, cptr, crow


@njit_inner
def _fill_classes(free0, t, qty, left, groups, allowed, C, cptr, crow, cstart, k, rem, inv,
                  w, taken, act, ptr, took, shut):
    """``_fill_into`` of one fresh node of type t over the rows with units
    ``left`` that t may take, by classes (``_row_classes``; ``cstart``: each
    class's first row that may still have units): per step only each class's
    first row that can still give a unit competes; the best score wins, a tie
    the lower row, as in ``_fill_into``. A class leaves the trial when its rows
    are spent or one more unit no longer fits (the room only shrinks). k (S,)
    must be zero on entry; returns how many rows took units (``took``, in the
    order first taken) with their units in k. act, ptr (C,), shut (groups)
    and rem, inv, w (R,) are scratch; taken (groups,) is all False on entry and
    on return."""
    R = qty.shape[1]
    na = 0
    for c in range(C):
        if cstart[c] < cptr[c + 1] and allowed[crow[cptr[c]], t]:
            act[na] = c
            ptr[c] = cstart[c]
            na += 1
    for r in range(R):
        rem[r] = free0[r]
        inv[r] = 1.0 / free0[r] if free0[r] > 0 else 0.0
    nt, ns = 0, 0
    while True:
        for r in range(R):
            w[r] = rem[r] * inv[r]
        best, best_score, best_fit = -1, -math.inf, np.int64(0)
        kept = 0
        for a in range(na):
            c = act[a]
            at, end = ptr[c], cptr[c + 1]
            while at < end:
                i = crow[at]
                if left[i] > k[i] and not (groups[i] >= 0 and taken[groups[i]]):
                    break
                at += 1
            ptr[c] = at
            if at == end:
                continue
            i = crow[at]
            fit = _units_fit(rem, qty, i)
            if fit < 1:
                continue
            act[kept] = c
            kept += 1
            score = 0.0
            for r in range(R):
                score += (qty[i, r] * inv[r]) * w[r]
            if best < 0 or score > best_score or (score == best_score and i < best):
                best, best_score, best_fit = i, score, fit
        na = kept
        if best < 0:
            break
        if groups[best] >= 0:
            take = np.int64(1)
            taken[groups[best]] = True
            shut[ns] = groups[best]
            ns += 1
        else:
            take = max(np.int64(1), min(left[best] - k[best], best_fit) // 8)
        if k[best] == 0:
            took[nt] = best
            nt += 1
        k[best] += take
        for r in range(R):
            x = rem[r] - take * qty[best, r]
            rem[r] = x if (x >= 0.0 or x != x) else 0.0
    for j in range(ns):
        taken[shut[j]] = False
    return nt

"""The efficient mode's choice of new nodes for what existing nodes could not
take (vecsched.engine.efficient.place.on_new), one launch decision after another.

While some row has units left and some type with launch room may take one:

- each candidate type's **demand mix** is what is left of the rows it may take,
  plus what already runs on nodes of its kind (GPU or not);
- its **capacity-equivalent** is the fluid scale of that mix one node holds
  (the least capacity / demand over the columns both have) times the mix's
  normalised size; per price, relative to the best candidate, that is its
  **fit** (vecsched.engine.efficient.cost);
- one fresh node of each candidate is filled by the dot-product rule
  (``effp_fill``); a type is scored fit x (credit + (1 - credit) x the share of
  its capacity-equivalent the trial fills), then the filled size, then the lower
  type index;
- the best type's trial is repeated on as many identical nodes as every row's
  remaining units allow (at least one; within the type's and the cluster's launch
  room), and the rooms shrink as ``State.launch_many`` shrinks them.

The decisions come back in order, as (type, count, units per row of each node);
the caller launches them. Sums run left to right, so the result does not depend
on a BLAS build.
"""
import math

import numpy as np

from ._jit import njit, njit_inner
from .effp_fill import _fill_classes, _row_classes


@njit_inner
def _candidates(room, glob, allowed, cptr, crow, cstart, C, cand):
    """Into ``cand``: the types with launch room that may take a unit still left
    (some class, ``effp_fill._row_classes``, has a row with units from
    ``cstart``); returns how many."""
    nc = 0
    if glob == 0:
        return nc
    T = allowed.shape[1]
    for t in range(T):
        if room[t] <= 0:
            continue
        for c in range(C):
            if cstart[c] < cptr[c + 1] and allowed[crow[cptr[c]], t]:
                cand[nc] = t
                nc += 1
                break
    return nc


@njit_inner
def _fits(cand, nc, type_free, allowed, left, qty, running, type_gpu, inv_ref, price,
          ceq, per_price, D, live, nlive):
    """Each candidate's capacity-equivalent (``ceq``) and its value per price
    (``per_price``); returns the best value per price (``top``). Only the rows
    with units left (``live[:nlive]``, ascending) are summed: a row without adds
    +0.0, which changes no sum."""
    R = qty.shape[1]
    top = 0.0
    for j in range(nc):
        t = cand[j]
        g = 1 if type_gpu[t] else 0
        for r in range(R):
            D[r] = 0.0
        for a in range(nlive):
            i = live[a]
            if allowed[i, t]:
                x = float(left[i])
                for r in range(R):
                    D[r] += x * qty[i, r]
        for r in range(R):
            D[r] = D[r] + running[g, r]
        alpha = math.inf
        any_col = False
        dot = 0.0
        for r in range(R):
            if D[r] > 0 and type_free[t, r] > 0 and inv_ref[r] > 0:
                x = type_free[t, r] / D[r]
                if x < alpha:
                    alpha = x
                any_col = True
                dot += D[r] * inv_ref[r]
        c = alpha * dot if any_col else 0.0
        ceq[j] = c
        per_price[j] = c / price[t]
        if j == 0 or per_price[j] > top:
            top = per_price[j]
    return top


@njit_inner
def _best_type(cand, nc, ceq, per_price, top, type_free, qty, allowed, left, groups, size,
               fill_credit, classes, k, best_k, best_rows, scratch):
    """The candidate with the best (score, filled size, lower index), its trial
    node's units in ``best_k`` on the rows ``best_rows`` (returned: the type, -1
    when no trial fills anything, and how many rows), zero on every other row.
    Each trial is ``effp_fill._fill_classes``; its filled size sums the rows'
    sizes in row order, as a sum over every row would."""
    C, cptr, crow, cstart = classes
    rem, inv, w, taken, act, ptr, took, shut = scratch
    best, nb = -1, 0
    best_score, best_filled = 0.0, 0.0
    for j in range(nc):
        t = cand[j]
        n = _fill_classes(type_free[t], t, qty, left, groups, allowed, C, cptr, crow, cstart,
                          k, rem, inv, w, taken, act, ptr, took, shut)
        for a in range(1, n):           # the rows in order (few: one node's)
            x = took[a]
            b = a - 1
            while b >= 0 and took[b] > x:
                took[b + 1] = took[b]
                b -= 1
            took[b + 1] = x
        filled = 0.0
        for a in range(n):
            filled += float(k[took[a]]) * size[took[a]]
        if filled > 0:
            fit = per_price[j] / top if top > 0 else per_price[j]
            fill = min(1.0, filled / ceq[j]) if ceq[j] > 0 else 1.0
            score = fit * (fill_credit + (1.0 - fill_credit) * fill)
            # types come in increasing order: on a full tie the earlier (lower) one stays
            if best < 0 or score > best_score or (score == best_score and filled > best_filled):
                best, best_score, best_filled = t, score, filled
                for a in range(nb):
                    best_k[best_rows[a]] = 0
                for a in range(n):
                    best_rows[a] = took[a]
                    best_k[took[a]] = k[took[a]]
                nb = n
        for a in range(n):
            k[took[a]] = 0
    return best, nb


@njit_inner
def _repeats(best_k, best_rows, nb, left, room_t, glob):
    """How many nodes take the trial's units (on the rows ``best_rows[:nb]``): as
    many as every row's units left allow (at least one), within the type's and
    the cluster's launch room."""
    m = np.int64(-1)
    for a in range(nb):
        i = best_rows[a]
        if best_k[i] > 0:
            x = left[i] // best_k[i]
            if m < 0 or x < m:
                m = x
    if m < 1:
        m = np.int64(1)
    if room_t < m:
        m = room_t
    if glob >= 0 and glob < m:
        m = np.int64(glob)
    return m


@njit
def _choose_launches(type_free, type_room, global_room, allowed, left, qty, groups, size,
                     price, running, type_gpu, inv_ref, fill_credit):
    """Launch decisions for the units ``left`` (S,) i8 of rows with bundles ``qty``
    (S, R) (module docstring). ``allowed`` (S, T) bool: a new node of the type may
    take a unit of the row (the caller's ``allowed_types``); ``groups`` (S,)
    anti-affinity groups; ``size`` (S,) the rows' normalised sizes; ``price`` (T,);
    ``running`` (2, R): what runs on nodes without / with GPUs; ``type_gpu`` (T,);
    ``inv_ref`` (R,) the size reference's inverse. ``type_room`` (T,) i8 and
    ``global_room`` (-1: no limit) are not changed. Returns (n, types (n,), counts
    (n,), units (n, S)) and ``left`` after them (a copy)."""
    S, R = qty.shape
    T = type_free.shape[0]
    left = left.copy()
    room = type_room.copy()
    glob = np.int64(global_room)
    ng = 0
    for i in range(S):
        if groups[i] + 1 > ng:
            ng = groups[i] + 1
    out_t = np.zeros(4, np.int64)
    out_m = np.zeros(4, np.int64)
    out_k = np.zeros((4, S), np.int64)
    n = 0
    cand = np.empty(T, np.int64)
    ceq, per_price, D = np.empty(T), np.empty(T), np.empty(R)
    k, best_k = np.zeros(S, np.int64), np.zeros(S, np.int64)
    best_rows = np.empty(S, np.int64)
    C, cptr, crow = _row_classes(qty, allowed)
    cstart = cptr[:C].copy()
    scratch = (np.empty(R), np.empty(R), np.empty(R), np.zeros(ng, np.bool_),
               np.empty(C, np.int64), np.empty(C, np.int64), np.empty(S, np.int64),
               np.empty(ng, np.int64))
    classes = (C, cptr, crow, cstart)
    live = np.flatnonzero(left > 0)         # the rows with units left, ascending
    nlive = live.shape[0]
    while True:
        for c in range(C):
            while cstart[c] < cptr[c + 1] and left[crow[cstart[c]]] <= 0:
                cstart[c] += 1
        nc = _candidates(room, glob, allowed, cptr, crow, cstart, C, cand)
        if nc == 0:
            break
        top = _fits(cand, nc, type_free, allowed, left, qty, running, type_gpu, inv_ref, price,
                    ceq, per_price, D, live, nlive)
        best, nb = _best_type(cand, nc, ceq, per_price, top, type_free, qty, allowed, left,
                              groups, size, fill_credit, classes, k, best_k, best_rows, scratch)
        if best < 0:
            break
        m = _repeats(best_k, best_rows, nb, left, room[best], glob)
        if n == out_t.shape[0]:
            out_t = np.concatenate((out_t, np.zeros(n, np.int64)))
            out_m = np.concatenate((out_m, np.zeros(n, np.int64)))
            grown = np.zeros((2 * n, S), np.int64)
            grown[:n] = out_k
            out_k = grown
        out_t[n], out_m[n] = best, m
        for a in range(nb):
            i = best_rows[a]
            kk = best_k[i] if best_k[i] < left[i] else left[i]
            out_k[n, i] = kk
            left[i] -= m * kk
            best_k[i] = 0
        kept = 0
        for a in range(nlive):
            if left[live[a]] > 0:
                live[kept] = live[a]
                kept += 1
        nlive = kept
        n += 1
        room[best] -= m
        if glob > 0:
            glob = max(glob - m, 0)
    return n, out_t, out_m, out_k, left

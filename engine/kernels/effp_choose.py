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
from .effp_fill import _fill_into


@njit_inner
def _candidates(room, glob, allowed, left, cand):
    """Into ``cand``: the types with launch room that may take a unit still left;
    returns how many."""
    nc = 0
    if glob == 0:
        return nc
    S, T = allowed.shape
    for t in range(T):
        if room[t] <= 0:
            continue
        for i in range(S):
            if allowed[i, t] and left[i] > 0:
                cand[nc] = t
                nc += 1
                break
    return nc


@njit_inner
def _fits(cand, nc, type_free, allowed, left, qty, running, type_gpu, inv_ref, price,
          ceq, per_price, D):
    """Each candidate's capacity-equivalent (``ceq``) and its value per price
    (``per_price``); returns the best value per price (``top``)."""
    S, R = qty.shape
    top = 0.0
    for j in range(nc):
        t = cand[j]
        g = 1 if type_gpu[t] else 0
        for r in range(R):
            acc = 0.0
            for i in range(S):
                if allowed[i, t]:
                    acc += float(left[i]) * qty[i, r]
            D[r] = acc + running[g, r]
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
               fill_credit, avail, k, best_k, rem, inv, w, taken):
    """The candidate with the best (score, filled size, lower index), its trial
    node's units in ``best_k``; -1 when no trial fills anything."""
    S = qty.shape[0]
    best = -1
    best_score, best_filled = 0.0, 0.0
    for j in range(nc):
        t = cand[j]
        for i in range(S):
            avail[i] = left[i] if allowed[i, t] else 0
        _fill_into(type_free[t], qty, avail, groups, k, rem, inv, w, taken)
        filled = 0.0
        for i in range(S):
            filled += float(k[i]) * size[i]
        if filled <= 0:
            continue
        fit = per_price[j] / top if top > 0 else per_price[j]
        fill = min(1.0, filled / ceq[j]) if ceq[j] > 0 else 1.0
        score = fit * (fill_credit + (1.0 - fill_credit) * fill)
        # types come in increasing order: on a full tie the earlier (lower) one stays
        if best < 0 or score > best_score or (score == best_score and filled > best_filled):
            best, best_score, best_filled = t, score, filled
            for i in range(S):
                best_k[i] = k[i]
    return best


@njit_inner
def _repeats(best_k, left, room_t, glob):
    """How many nodes take the trial's units: as many as every row's units left
    allow (at least one), within the type's and the cluster's launch room."""
    m = np.int64(-1)
    for i in range(best_k.shape[0]):
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
    avail, k, best_k = np.empty(S, np.int64), np.empty(S, np.int64), np.empty(S, np.int64)
    rem, inv, w = np.empty(R), np.empty(R), np.empty(R)
    taken = np.zeros(ng, np.bool_)
    while True:
        nc = _candidates(room, glob, allowed, left, cand)
        if nc == 0:
            break
        top = _fits(cand, nc, type_free, allowed, left, qty, running, type_gpu, inv_ref, price,
                    ceq, per_price, D)
        best = _best_type(cand, nc, ceq, per_price, top, type_free, qty, allowed, left, groups,
                          size, fill_credit, avail, k, best_k, rem, inv, w, taken)
        if best < 0:
            break
        m = _repeats(best_k, left, room[best], glob)
        if n == out_t.shape[0]:
            out_t = np.concatenate((out_t, np.zeros(n, np.int64)))
            out_m = np.concatenate((out_m, np.zeros(n, np.int64)))
            grown = np.zeros((2 * n, S), np.int64)
            grown[:n] = out_k
            out_k = grown
        out_t[n], out_m[n] = best, m
        for i in range(S):
            kk = best_k[i] if best_k[i] < left[i] else left[i]
            out_k[n, i] = kk
            left[i] -= m * kk
        n += 1
        room[best] -= m
        if glob > 0:
            glob = max(glob - m, 0)
    return n, out_t, out_m, out_k, left

"""Readable twins of the efficient mode's placement kernels (engine/kernels/effp_*.py)
and the random rows their tests draw.

Plain Python over the model's ``fit_count``: ``dot_fill`` (the packing trial of one
fresh node), ``fill_row`` (one request row first-fit, or best-fit with ``tight``, over
existing nodes), ``walk_order`` (the order ``fill_row`` visits nodes in) and
``ReadablePlace`` (the placement of ``vecsched.engine.efficient.place`` written as it
was before the kernels, node by node, for whole-tick comparisons). Sums run left to
right over the columns in both, so results match bit for bit.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.efficient.place import _anti_groups, _order, _put, allowed_types
from vecsched.engine.model.fits import fit_count, selector_mask

R = 5


# ---- the readable twins ---------------------------------------------------------------

def dot_fill(free0, qty, avail, groups) -> list[int]:
    """Units of each row one fresh node with room free0 takes: while a row has
    units left that fit, take from the row whose capacity-normalised bundle
    points most along the normalised room left (first such row on a tie); a row
    of an anti-affinity group takes one unit and closes its group, any other an
    eighth of what it could (at least one)."""
    S, width = qty.shape
    k = [0] * S
    rem = [float(x) for x in free0]
    inv = [1.0 / x if x > 0 else 0.0 for x in free0]
    taken: set = set()
    while True:
        best = None
        for i in range(S):
            if avail[i] <= k[i] or (groups[i] >= 0 and groups[i] in taken):
                continue
            fit = int(fit_count(np.asarray(rem)[None, :], qty[i])[0])
            if fit < 1:
                continue
            score = 0.0
            for r in range(width):
                score += (qty[i, r] * inv[r]) * (rem[r] * inv[r])
            if best is None or score > best[0]:
                best = (score, i, fit)
        if best is None:
            return k
        _, i, fit = best
        if groups[i] >= 0:
            take = 1
            taken.add(groups[i])
        else:
            take = max(1, min(int(avail[i]) - k[i], fit) // 8)
        k[i] += take
        rem = [max(x - take * qty[i, r], 0.0) for r, x in enumerate(rem)]


def room_after(row, q, n, inv_ref) -> float:
    """Normalised room of a node's free row after n units of q."""
    s = 0.0
    for r in range(len(q)):
        s += max(row[r] - n * q[r], 0.0) * inv_ref[r]
    return s


def fill_row(view, ok, ready, gpu, spare_gpu, q, want, anti, tight, inv_ref):
    """Units of q on existing nodes (view (M, R) updated): nodes that take at
    least one unit, without GPUs first when ``spare_gpu``, the most advanced
    next, then (``tight``) the least room left after, then the lowest slot;
    returns [(slot, units)]. ``ok``: the nodes allowed (alive, labels)."""
    fit = np.where(ok, fit_count(view, q), 0)
    if anti:
        fit = np.minimum(fit, 1)
    cand = np.flatnonzero(fit > 0)
    mismatch = gpu[cand] & spare_gpu
    if tight:
        k = np.minimum(fit[cand], want)
        room = np.asarray([room_after(view[m], q, n, inv_ref) for m, n in zip(cand, k)])
        order = np.lexsort((cand, room, -ready[cand].astype(int), mismatch))
    else:
        order = np.lexsort((cand, -ready[cand].astype(int), mismatch))
    out, left = [], want
    for m in cand[order].tolist():
        if left == 0:
            break
        n = int(min(fit[m], left))
        view[m] = np.maximum(view[m] - n * q, 0.0)
        out.append((m, n))
        left -= n
    return out


class ReadablePlace:
    """``on_existing`` / ``on_new`` of the efficient placement, node by node in
    Python (what the module was before its kernels), for whole-tick comparisons."""

    def __init__(self):
        self.calls = 0

    def on_existing(self, st, costs, rows, qty, want, source, keep_gpu, out, tight=False):
        self.calls += 1
        p = st.p
        left = np.asarray(want, np.int64).copy()
        view = st.view(source)
        g = p.gpu_col
        for i in _order(costs, qty, g).tolist():
            if left[i] == 0:
                continue
            M, q, r = st.M, qty[i], int(rows[i])
            key, val = st.anti[r]          # the State's label column of the row's key
            ok = st.alive[:M] & selector_mask(p, r, st.label[:M])
            if 0 <= key < st.label.shape[1]:
                ok &= st.label[:M, key] != val
            anti = key >= 0
            spare = bool(keep_gpu and g >= 0 and not q[g] > 0)
            for m, n in fill_row(view[:M].copy(), ok, st.ready[:M], st.gpu[:M], spare, q,
                                 int(left[i]), anti, tight, costs.inv_ref):
                st.keep_rows(np.asarray([m]), source)          # for State.restore
                view[m] = np.maximum(view[m] - n * q, 0.0)
                st.received[m] = True
                if anti:
                    st.label[m, key] = val
                out.append((m, i, n))
                left[i] -= n
        return left

    def on_new(self, st, costs, rows, qty, want, source, keep_gpu, fill_credit, out):
        self.calls += 1
        p = st.p
        left = np.asarray(want, np.int64).copy()
        if not left.any():
            return left
        allowed = allowed_types(st, costs, rows, qty, keep_gpu)
        groups = _anti_groups(p, rows)
        size = costs.size(qty)
        while left.any():
            types = [t for t in range(p.T) if st.can_launch(t) and (allowed[:, t] & (left > 0)).any()]
            if not types:
                break
            demand = np.stack([(allowed[:, t] * left) @ qty for t in types])
            ceq, fit_rel = costs.fit(np.asarray(types, np.int64), demand)
            best = None
            for j, t in enumerate(types):
                k = np.asarray(dot_fill(p.type_free[t], qty, np.where(allowed[:, t], left, 0),
                                        groups), np.int64)
                filled = float(k @ size)
                if filled <= 0:
                    continue
                fill = min(1.0, filled / ceq[j]) if ceq[j] > 0 else 1.0
                key = (fit_rel[j] * (fill_credit + (1.0 - fill_credit) * fill), filled, -t)
                if best is None or key > best[0]:
                    best = (key, t, k)
            if best is None:
                break
            _, t, k = best
            on = k > 0
            m = max(1, int((left[on] // k[on]).min()))
            m = min(m, int(st.type_room[t]))
            if st.global_room >= 0:
                m = min(m, st.global_room)
            for _ in range(m):
                kk = np.minimum(k, left)
                if not kk.any():
                    break
                slot = st.launch(t)
                for i in np.flatnonzero(kk).tolist():
                    r = int(rows[i])
                    _put(st, source, slot, i, int(kk[i]), qty[i], r, p.req.anti[r, 0] >= 0, out)
                left -= kk
        return left


# ---- random inputs --------------------------------------------------------------------

def rand_rows(rng, n, grid: bool, zero_share=0.4):
    vals = rng.integers(0, 33, (n, R)) / 4.0 if grid else np.round(rng.random((n, R)) * 8, 3)
    return vals * (rng.random((n, R)) >= zero_share)


def walk_order(cand_old, ready, gpu, spare, N, M):
    """Slots cand_old and N..M-1 by bucket (6 - readiness, + 8 for a spared GPU
    node), then slot."""
    slots = np.concatenate([cand_old, np.arange(N, M)]).astype(np.int64)
    bucket = 6 - ready[slots].astype(np.int64) + (8 * gpu[slots] if spare else 0)
    return slots[np.lexsort((slots, bucket))]

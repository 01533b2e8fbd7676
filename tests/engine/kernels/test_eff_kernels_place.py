"""The efficient mode's placement kernels (engine/kernels/effp_*.py) against their
slow readable twins, on seeded random inputs and edge cases.

The twins are plain Python over the model's ``fit_count``: ``dot_fill`` (the
packing trial of one fresh node), ``fill_row`` (one request row first-fit, or
best-fit with ``tight``, over existing nodes) and ``ReadablePlace`` (the
placement of ``vecsched.engine.efficient.place`` written as it was before the
kernels, node by node; test_place_speed_equivalence runs whole ticks on it).
Sums run left to right over the columns in both, so results match bit for bit.
"""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine.efficient import place
from vecsched.engine.efficient.place import _anti_groups, _order, _put, allowed_types
from vecsched.engine.kernels.effp_existing import _fill_row, _walk_order
from vecsched.engine.kernels import effp_fill
from vecsched.engine.kernels.effp_fill import _dot_fill, _dot_fills
from vecsched.engine.model import fits
from vecsched.engine.model.fits import anti_mask, fit_count, selector_mask

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
            ok = st.alive[:M] & selector_mask(p, r, st.label[:M]) & anti_mask(p, r, st.label[:M])
            anti = p.req.anti[r, 0] >= 0
            spare = bool(keep_gpu and g >= 0 and not q[g] > 0)
            for m, n in fill_row(view[:M].copy(), ok, st.ready[:M], st.gpu[:M], spare, q,
                                 int(left[i]), anti, tight, costs.inv_ref):
                st.keep_rows(np.asarray([m]), source)          # for State.restore
                view[m] = np.maximum(view[m] - n * q, 0.0)
                st.received[m] = True
                if anti:
                    key, val = (int(x) for x in p.req.anti[r])
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

def _rand_rows(rng, n, grid: bool, zero_share=0.4):
    vals = rng.integers(0, 33, (n, R)) / 4.0 if grid else np.round(rng.random((n, R)) * 8, 3)
    return vals * (rng.random((n, R)) >= zero_share)


def test_constants_are_the_models():
    assert effp_fill.FIT_SLACK == fits.FIT_SLACK and effp_fill.BIG_COUNT == fits.BIG_COUNT


@pytest.mark.parametrize("grid", [True, False])
def test_dot_fill_matches_twin(grid):
    rng = np.random.default_rng(11 if grid else 12)
    for case in range(400):
        S = int(rng.integers(1, 9))
        free0 = _rand_rows(rng, 1, grid, 0.2)[0] * int(rng.integers(1, 6))
        qty = _rand_rows(rng, S, grid)
        if case % 7 == 0:
            qty[int(rng.integers(S))] = qty[0]            # equal rows: the first wins ties
        if case % 11 == 0:
            qty[int(rng.integers(S))] = 0.0               # fits without bound
        avail = rng.integers(0, 60, S).astype(np.int64)
        groups = np.where(rng.random(S) < 0.3, rng.integers(0, 3, S), -1).astype(np.int64)
        want = dot_fill(free0, qty, avail, groups)
        got = _dot_fill(free0, qty, avail, groups)
        assert got.tolist() == want, case
        assert (got <= avail).all()


def test_dot_fills_is_dot_fill_per_type():
    rng = np.random.default_rng(5)
    type_free = _rand_rows(rng, 4, True, 0.1) * 4
    qty = _rand_rows(rng, 6, True)
    types = np.asarray([3, 0, 2], np.int64)
    avail = rng.integers(0, 30, (3, 6)).astype(np.int64)
    groups = np.asarray([-1, 0, -1, 0, 1, -1], np.int64)
    got = _dot_fills(type_free, types, qty, avail, groups)
    for j, t in enumerate(types.tolist()):
        assert got[j].tolist() == dot_fill(type_free[t], qty, avail[j], groups)


def test_dot_fill_edge_cases():
    none = np.full(2, -1, np.int64)
    q = np.asarray([[1.0, 0, 0, 0, 0], [0, 2.0, 0, 0, 0]])
    assert _dot_fill(np.zeros(R), q, np.asarray([5, 5]), none).tolist() == [0, 0]  # no room
    assert _dot_fill(np.full(R, 4.0), q, np.zeros(2, np.int64), none).tolist() == [0, 0]
    # one anti-affinity group: one unit of it per node, however much room (the
    # larger bundle points more along the room: 2/64 against 1/64)
    assert _dot_fill(np.full(R, 64.0), q, np.asarray([9, 9]),
                     np.asarray([0, 0])).tolist() == [0, 1]
    # a bundle with no positive entry fits without bound: it takes all it may
    assert _dot_fill(np.full(R, 1.0), np.zeros((1, R)), np.asarray([100]),
                     np.full(1, -1)).tolist() == [100]


def walk_order(cand_old, ready, gpu, spare, N, M):
    """Slots cand_old and N..M-1 by bucket (6 - readiness, + 8 for a spared GPU
    node), then slot."""
    slots = np.concatenate([cand_old, np.arange(N, M)]).astype(np.int64)
    bucket = 6 - ready[slots].astype(np.int64) + (8 * gpu[slots] if spare else 0)
    return slots[np.lexsort((slots, bucket))]


def _walk_inputs(rng, grid, M, N):
    view = _rand_rows(rng, M, grid, 0.2) * 2
    ready = rng.integers(0, 7, M).astype(np.int8)
    ready[N:] = 1                              # nodes the tick launched: equally ready
    gpu = rng.random(M) < 0.3
    ok = rng.random(M) < 0.8
    label = rng.integers(-1, 3, (M, 2)).astype(np.int32)
    return view, ready, gpu, ok, label


def _kernel_row(view, ready, gpu, spare, ok, label, key, val, q, want, tight, inv_ref, N,
                cand_old=None):
    M = view.shape[0]
    if cand_old is None:
        cand_old = walk_order(np.arange(N), ready, gpu, spare, N, N)
    order = _walk_order(cand_old, ready, gpu, spare, N, M)
    slots, counts, saved = np.empty(M, np.int64), np.empty(M, np.int64), np.empty((M, R))
    before = view.copy()
    n = _fill_row(view, order, ready, gpu, spare, ok, label, key, val, q, want, tight, inv_ref,
                  slots, counts, saved)
    assert saved[:n].tobytes() == before[slots[:n]].tobytes()      # the rows as they were
    return list(zip(slots[:n].tolist(), counts[:n].tolist()))


def test_walk_order_matches_twin():
    rng = np.random.default_rng(31)
    for case in range(300):
        M = int(rng.integers(1, 40))
        N = int(rng.integers(0, M + 1))
        _, ready, gpu, _, _ = _walk_inputs(rng, True, M, N)
        spare = bool(rng.random() < 0.5)
        cand = np.flatnonzero(rng.random(N) < 0.6)
        cand_old = walk_order(cand, ready, gpu, spare, N, N)
        got = _walk_order(cand_old, ready, gpu, spare, N, M)
        assert got.tolist() == walk_order(cand, ready, gpu, spare, N, M).tolist(), case


@pytest.mark.parametrize("grid", [True, False])
@pytest.mark.parametrize("tight", [False, True])
def test_fill_row_matches_twin(grid, tight):
    rng = np.random.default_rng(21 + 2 * grid + tight)
    inv_ref = 1.0 / np.asarray([8.0, 16.0, 3.0, 8.0, 0.5])
    for case in range(300):
        M = int(rng.integers(1, 40))
        N = int(rng.integers(0, M + 1))
        view, ready, gpu, ok, label = _walk_inputs(rng, grid, M, N)
        if case % 5 == 0:
            view[M // 2:] = view[0]                        # identical nodes: slot order decides
            ready[M // 2:N] = ready[0]
        q = _rand_rows(rng, 1, grid, 0.5)[0] / 2
        want = int(rng.integers(0, 30))
        key, val = (int(rng.integers(0, 2)), int(rng.integers(0, 3))) if rng.random() < 0.3 \
            else (-1, -1)
        spare = bool(rng.random() < 0.5)
        got_view = view.copy()
        got = _kernel_row(got_view, ready, gpu, spare, ok, label, key, val, q, want, tight,
                          inv_ref, N)
        want_view = view.copy()
        allowed = ok & ((label[:, key] != val) if key >= 0 else True)
        expect = fill_row(want_view, allowed, ready, gpu, spare, q, want, key >= 0, tight, inv_ref)
        assert got == expect, case
        assert got_view.tobytes() == want_view.tobytes(), case      # bit for bit


def test_fill_row_edge_cases():
    view = np.asarray([[4.0, 0, 0, 0, 0], [4.0, 0, 0, 0, 0], [1.0, 0, 0, 0, 0]])
    ready = np.asarray([1, 6, 6], np.int8)
    gpu = np.asarray([False, True, False])
    label = np.full((3, 1), -1, np.int32)
    q = np.asarray([1.0, 0, 0, 0, 0])
    inv = np.ones(R)
    ok = np.ones(3, bool)

    def row(spare, want, tight=False, key=-1):
        return _kernel_row(view.copy(), ready, gpu, spare, ok, label, key, 0, q, want, tight,
                           inv, 3)
    assert row(True, 6) == [(2, 1), (0, 4), (1, 1)]     # without GPUs: the GPU node last
    assert row(False, 6) == [(1, 4), (2, 1), (0, 1)]    # most advanced first, then lowest slot
    assert row(False, 1, tight=True) == [(2, 1)]        # tight: least room left first
    assert row(False, 9, key=0) == [(1, 1), (2, 1), (0, 1)]   # anti-affinity: one per node
    assert row(False, 0) == []
    label[1, 0] = 0                                     # node 1 carries the label already
    assert row(False, 9, key=0) == [(2, 1), (0, 1)]
    # a node left out of the walk (it could not hold the bundle at the start) is not offered
    assert _kernel_row(view.copy(), ready, gpu, False, ok, label, -1, 0, q, 6, False, inv, 3,
                       cand_old=np.asarray([2, 0], np.int64)) == [(2, 1), (0, 4)]


def test_trial_entry_point_is_the_kernel():
    q = np.asarray([[1.0, 1.0, 0, 0, 0], [2.0, 0, 0, 0, 0]])
    free0 = np.asarray([8.0, 4.0, 1.0, 0, 0])
    avail, groups = np.asarray([10, 10]), np.full(2, -1)
    assert place.trial(free0, q, avail, groups).tolist() == dot_fill(free0, q, avail, groups)

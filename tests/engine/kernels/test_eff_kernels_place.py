"""The efficient mode's placement kernels (engine/kernels/effp_*.py) against their
slow readable twins (tests/kits/twins_place.py), on seeded random inputs and edge
cases."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine.efficient import place
from vecsched.engine.kernels.effp_existing import _fill_row, _walk_order
from vecsched.engine.kernels import effp_fill
from vecsched.engine.kernels.effp_fill import _dot_fill, _dot_fills
from vecsched.engine.model import fits

from tests.kits.twins_place import R, dot_fill, fill_row, rand_rows, walk_order

def test_constants_are_the_models():
    assert effp_fill.FIT_SLACK == fits.FIT_SLACK and effp_fill.BIG_COUNT == fits.BIG_COUNT


@pytest.mark.parametrize("grid", [True, False])
def test_dot_fill_matches_twin(grid):
    rng = np.random.default_rng(11 if grid else 12)
    for case in range(400):
        S = int(rng.integers(1, 9))
        free0 = rand_rows(rng, 1, grid, 0.2)[0] * int(rng.integers(1, 6))
        qty = rand_rows(rng, S, grid)
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
    type_free = rand_rows(rng, 4, True, 0.1) * 4
    qty = rand_rows(rng, 6, True)
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



def _walk_inputs(rng, grid, M, N):
    view = rand_rows(rng, M, grid, 0.2) * 2
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
        q = rand_rows(rng, 1, grid, 0.5)[0] / 2
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

"""Each numba kernel against its slow twin (tests/kits/twins.py), on seeded random
inputs and on edge cases."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine.model.build.builder import _exact_columns
from vecsched.engine.kernels.pick import _pick_scratch
from vecsched.engine.kernels.records import (Classes, Marks, PackState, Reqs, Rules, Slots, Source,
                                    cands as new_cands)
from vecsched.engine.kernels.score import _victim_util
from vecsched.engine.kernels.steps import (fit_count_once, invalidate_once, pick_once, score_once,
                                  take_once)

from tests.kits import twins

R = 5


def _cols(q):
    c = np.flatnonzero(q > 0).astype(np.int32)
    out = np.full(len(q), -1, np.int32)
    out[: c.size] = c
    return out, np.int32(c.size)


def _rand_row(rng, grid: bool, n=R):
    if grid:
        return rng.integers(0, 33, n) / 4.0
    return np.round(rng.random(n) * 8, 3)     # thousandths: not exact in binary


@pytest.mark.parametrize("grid", [True, False])
def test_fit_and_take_match_twin(grid):
    rng = np.random.default_rng(1 if grid else 2)
    implicit = np.zeros(R, bool)
    implicit[-1] = True
    for _ in range(1500):
        free = _rand_row(rng, grid)
        qty = _rand_row(rng, grid) * (rng.random(R) < 0.5)
        if rng.random() < 0.1:
            qty[:] = 0                         # zero shape: fits without limit
        present = rng.random(R) < 0.85
        free[implicit & ~present] = 1.0
        exact = _exact_columns(R, free[None], qty[None])
        limit = int(rng.integers(0, 40))
        cols, nc = _cols(qty)
        k = fit_count_once(free, exact, qty, cols, nc, limit)
        kr, fr, pr = twins.fit_count_ref(free, present, implicit, qty, limit)
        assert k == kr
        f2, p2 = free.copy(), present.copy()
        take_once(f2, p2, exact, qty, cols, nc, k)
        assert f2.tolist() == fr and p2.tolist() == pr     # bit-for-bit


def test_fit_edge_cases():
    implicit = np.array([False, False, True])
    exact = np.ones(3, bool)
    q = np.array([4.0, 0.0, 0.0]); c, n = _cols(q)
    assert fit_count_once(np.zeros(3), exact, q, c, n, 5) == 0  # zero capacity
    q = np.array([1e6, 0.0, 0.0]); c, n = _cols(q)
    assert fit_count_once(np.full(3, 64.0), exact, q, c, n, 5) == 0  # huge
    q = np.array([0.0, 0.0, 0.5]); c, n = _cols(q)
    free = np.array([1.0, 1.0, 1.0])            # an absent implicit column holds 1.0
    assert twins.fit_count_ref(free, np.array([True, True, False]), implicit, q, 9)[0] == 2
    assert fit_count_once(free, exact, q, c, n, 9) == 2
    q = np.array([0.1, 0.0, 0.0]); c, n = _cols(q)        # replayed subtraction, not 1.0 // 0.1
    want = twins.fit_count_ref(np.ones(3), np.ones(3, bool), implicit, q, 20)[0]
    assert fit_count_once(np.ones(3), np.zeros(3, bool), q, c, n, 20) == want
    q = np.array([0.1, 0.0, 0.0]); c, n = _cols(q)        # 1.5 // 0.1 == 15 but Ray fits 14
    free = np.array([1.5, 0.0, 0.0])
    assert twins.fit_count_ref(free, np.ones(3, bool), implicit, q, 99)[0] == 14
    assert fit_count_once(free, np.zeros(3, bool), q, c, n, 99) == 14


def _rand_node(rng, grid):
    total = np.where(rng.random(R) < 0.8, _rand_row(rng, grid) + 1, 0.0)
    free = np.minimum(total, _rand_row(rng, grid))
    order = rng.permutation(R).astype(np.int32)
    order[rng.random(R) < 0.15] = -1
    order = np.concatenate([order[order >= 0], order[order < 0]])
    present = rng.random(R) < 0.85
    return total, order, free, present


@pytest.mark.parametrize("grid", [True, False])
def test_score_matches_twin(grid):
    rng = np.random.default_rng(3)
    for _ in range(1500):
        total, order, free, present = _rand_node(rng, grid)
        res = rng.random(R) < 0.4
        pg = bool(rng.random() < 0.5)
        for conserve in (True, False):
            got = score_once(total, order, free, present, res, pg, 0, conserve)
            want = twins.score_ref(total, order, free, present, res, pg, 0, conserve)
            assert tuple(got) == want


def test_victim_util_matches_twin():
    rng = np.random.default_rng(4)
    rows = [_rand_node(rng, False) for _ in range(300)]
    total, order, free, present = (np.array([r[i] for r in rows]) for i in range(4))
    assert _victim_util(total, order, free, present, np.arange(len(rows))).tolist() == \
        twins.victim_util_ref(total, order, free, present)
    some = rng.permutation(len(rows))[:100]            # a subset, in any order
    assert _victim_util(total, order, free, present, some).tolist() == \
        twins.victim_util_ref(total[some], order[some], free[some], present[some])


def _rand_requests(rng, grid, S, L, V):
    """Random requests with selectors and anti-affinity, as twin dicts and as the
    kernel's rq tuple."""
    reqs, sel_lo, sel_hi, sel_con_ptr, con_key, con_op, con_val_ptr, con_vals = \
        [], [], [], [0], [], [], [0], []
    anti = np.full((S, 2), -1, np.int32)
    for q in range(S):
        qty = _rand_row(rng, grid) * (rng.random(R) < 0.5)
        sels = []
        if L and rng.random() < 0.4:
            for _ in range(int(rng.integers(1, 3))):
                sel = []
                for _ in range(int(rng.integers(1, 3))):
                    key = int(rng.integers(L))
                    op = int(rng.integers(1, 3))
                    vals = sorted(set(rng.integers(0, V, int(rng.integers(1, 3))).tolist()))
                    sel.append((key, op, vals))
                sels.append(sel)
        a = None
        if L and rng.random() < 0.2:
            a = (int(rng.integers(L)), int(rng.integers(V)))
            anti[q] = a
        sel_lo.append(len(sel_con_ptr) - 1)
        for sel in sels:
            for key, op, vals in sel:
                con_key.append(key); con_op.append(op)
                con_vals.extend(vals); con_val_ptr.append(len(con_vals))
            sel_con_ptr.append(len(con_key))
        sel_hi.append(len(sel_con_ptr) - 1)
        reqs.append({"qty": qty, "sel": sels, "anti": a})
    qty = np.array([r["qty"] for r in reqs])
    cols = np.full((S, R), -1, np.int32)
    ncols = np.zeros(S, np.int32)
    for q in range(S):
        cols[q], ncols[q] = _cols(qty[q])
    gpu_key = rng.random(S) < 0.3
    i32 = lambda x: np.asarray(x, np.int32)  # noqa: E731
    rq = Reqs(qty, cols, ncols, gpu_key, anti, i32(sel_lo), i32(sel_hi), i32(sel_con_ptr),
              i32(con_key), np.asarray(con_op, np.int8), i32(con_val_ptr), i32(con_vals),
              np.array([bool(r["sel"]) for r in reqs]))
    return reqs, rq, gpu_key


@pytest.mark.parametrize("grid", [True, False])
def test_best_node_matches_twin(grid):
    rng = np.random.default_rng(5 if grid else 6)
    implicit = np.zeros(R, bool)
    L, V, H = 3, 3, 8
    for case in range(400):
        M = int(rng.integers(0, 12))            # M == 0: empty cluster
        nodes = [_rand_node(rng, grid) for _ in range(M)]
        if case % 7 == 0 and M > 1:
            nodes[1] = tuple(a.copy() for a in nodes[0])     # twins: NodeStateCache
        total = np.array([n[0] for n in nodes]).reshape(M, R)
        order = np.array([n[1] for n in nodes], dtype=np.int32).reshape(M, R)
        free = np.array([n[2] for n in nodes]).reshape(M, R)
        present = np.array([n[3] for n in nodes], dtype=bool).reshape(M, R)
        placed_res = rng.random((M, R)) < 0.2
        placed_gpu = rng.random(M) < 0.3
        label = np.where(rng.random((M, L)) < 0.6, rng.integers(0, V, (M, L)), -1).astype(np.int32)
        rec = rng.choice([0.0, 0.5, 1.0], M)
        prio = rng.integers(-1, 2, M)
        av = rng.choice([0.5, 1.0], M)
        cls = np.where(rng.random(M) < 0.5, rng.integers(0, 3, M), -1).astype(np.int32)
        S = int(rng.integers(1, 6))
        reqs, rq, gpu_key = _rand_requests(rng, grid, S, L, V)
        if case % 11 == 0:
            rq.qty[0] = 1e6                       # bigger than any node
            rq.cols[0], rq.ncols[0] = _cols(rq.qty[0])
            reqs[0]["qty"] = rq.qty[0]
        hist = np.full((M, H), -1, np.int32)
        nhist = np.zeros(M, np.int64)
        sel_reqs = [q for q in range(S) if reqs[q]["sel"]]
        for m in range(M):                       # requests placed by an earlier phase
            for q in sel_reqs:
                if rng.random() < 0.3 and nhist[m] < H:
                    hist[m, nhist[m]] = q
                    nhist[m] += 1
        runs = rng.permutation(S).astype(np.int32)
        left = rng.integers(1, 6, S).astype(np.int64)
        exact = _exact_columns(R, total, free, rq.qty)
        cands = rng.permutation(M).astype(np.int32)
        want, taken = twins.best_node_ref(
            cands, cls, total, order, free, present, placed_res, placed_gpu, label,
            [hist[m, : nhist[m]].tolist() for m in range(M)], rec, prio, av, implicit, runs,
            left, reqs, gpu_key, 0, True)
        # A fresh pick equals Ray's, and stays equal after a pick lowered the counts
        # (cached walks marked stale exactly when needed).
        C = len(cands)
        cs = new_cands(max(C, 1), S)
        cs.slot[:C] = cands
        cs.alive[:C] = True
        z = np.zeros
        ps = PackState(
            Slots(total, order, label, z(M, np.int32), z(M, np.int8), z(M, np.int8), rec, prio, av),
            Source(free, present, placed_res, placed_gpu, z(M, bool), hist, nhist),
            Marks(*(z(M, np.int32) for _ in range(4)), z(M)), rq, Rules(implicit, exact, 0, True))
        cl = Classes(cls, 3, 3)
        scr = _pick_scratch(3, R, S, H)
        got2 = pick_once(cs, C, cl, ps, runs, left, scr)
        assert got2 == want, case
        if want < 0:
            continue
        assert cs.taken[got2].tolist() == taken, case
        new_left = left - cs.taken[got2]
        cs.alive[got2] = False
        changed = np.flatnonzero(new_left != left)
        invalidate_once(cs, C, changed, len(changed), left, new_left)
        got3 = pick_once(cs, C, cl, ps, runs, new_left, scr)
        alive = cs.alive[:C]
        want3, taken3 = twins.best_node_ref(
            cands[alive], cls, total, order, free, present, placed_res, placed_gpu, label,
            [hist[m, : nhist[m]].tolist() for m in range(M)], rec, prio, av, implicit, runs,
            new_left, reqs, gpu_key, 0, True)
        alive_pos = np.flatnonzero(alive)
        assert (got3 < 0 and want3 < 0) or got3 == alive_pos[want3], case
        if want3 >= 0:
            assert cs.taken[got3].tolist() == taken3, case


def test_row_ids_match_unique_rows():
    from vecsched.engine.kernels.rows import row_ids
    rng = np.random.default_rng(9)
    for _ in range(200):
        n, w = int(rng.integers(0, 40)), int(rng.integers(1, 6))
        key = rng.integers(0, 3, (n, w)).astype(float)
        key[rng.random((n, w)) < 0.1] = -0.0       # -0.0 equals 0.0, as in Python sets
        ids, k = row_ids(key)
        if n == 0:
            assert k == 0
            continue
        _, inv = np.unique(key + 0.0, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        assert k == inv.max() + 1
        for i in range(n):                          # same partition of the rows
            assert ((ids == ids[i]) == (inv == inv[i])).all()


def test_minimal_rows_keep_the_prefilter_answer():
    """The pre-filter over the rows no other row is below gives the same answer as
    over every row, and equal rows keep exactly one."""
    from vecsched.engine.kernels.fit import _fits_any, _minimal_rows
    rng = np.random.default_rng(11)
    for _ in range(300):
        Q = int(rng.integers(1, 30))
        qty = rng.integers(0, 4, (Q, R)).astype(float) * (rng.random((Q, R)) < 0.4)
        qty[rng.integers(0, Q)] = qty[rng.integers(0, Q)]          # a duplicate row
        cols = np.full((Q, R), -1, np.int32)
        ncols = np.zeros(Q, np.int32)
        for q in range(Q):
            c = np.flatnonzero(qty[q] > 0)
            cols[q, : c.size] = c
            ncols[q] = c.size
        rows = rng.permutation(Q).astype(np.int32)
        free = rng.integers(0, 4, (40, R)).astype(float)
        nodes = np.arange(40, dtype=np.int32)
        mins = _minimal_rows(qty, rows)
        assert len(mins) <= len(rows)
        assert len({tuple(qty[q]) for q in mins}) == len(mins)
        rq = Reqs(qty, cols, ncols, *(np.zeros(0, np.int32),) * 10)
        assert (_fits_any(free, nodes, mins, rq) == _fits_any(free, nodes, rows, rq)).all()


def test_sort_by_matches_stable_argsort():
    from vecsched.engine.kernels.steps import sort_once
    rng = np.random.default_rng(12)
    for n in [0, 1, 2, 3, 7, 8, 9, 100, 1000]:
        key = rng.integers(-5, 20, 40 + n).astype(np.int64)       # many equal keys
        idx = rng.permutation(40 + n)[:n].astype(np.int64)
        want = idx[np.argsort(key[idx], kind="stable")]
        sort_once(idx, key, np.empty(n, np.int64))
        assert idx.tolist() == want.tolist(), n


def test_sort_by_merges_the_runs_it_is_given():
    """Inputs that are already sorted, sorted in reverse, or a few ascending runs
    (the natural merge sort's cases) come out as a stable argsort orders them."""
    from vecsched.engine.kernels.steps import sort_once
    rng = np.random.default_rng(13)
    for n in [2, 3, 5, 64, 65, 500, 2049]:
        for shape in ["sorted", "reversed", "runs", "runs_ties", "one_moved"]:
            key = np.arange(n, dtype=np.int64) * 3
            if shape == "reversed":
                key = key[::-1].copy()
            elif shape.startswith("runs"):
                cuts = np.sort(rng.choice(np.arange(1, n), min(n - 1, 6), replace=False))
                key = np.concatenate([np.sort(rng.integers(0, 4 * n if shape == "runs" else 5,
                                                           len(part)))
                                      for part in np.split(key, cuts)]).astype(np.int64)
            elif shape == "one_moved":
                key[rng.integers(n)] = -1
            idx = np.arange(n, dtype=np.int64)
            want = idx[np.argsort(key[idx], kind="stable")]
            sort_once(idx, key, np.empty(n, np.int64))
            assert idx.tolist() == want.tolist(), (n, shape)


def test_inner_helpers_refuse_python_calls():
    """Helpers compiled without a Python entry point (_jit.njit_inner) raise
    instead of jumping to a missing one."""
    from vecsched.engine.kernels.pick import _pick_core
    with pytest.raises(TypeError, match="runs inside kernels only"):
        _pick_core(None, 0, None, None, None, None, None)

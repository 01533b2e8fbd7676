"""engine/kernels/effp_choose._choose_launches (the choice of new nodes in the efficient
placement's ``on_new``) against its slow readable twin, on seeded random inputs.

The twin is the loop ``on_new`` ran before the kernel, written plainly: per round the
candidate types, each one's demand mix and capacity-equivalent (``Costs.fit``'s rule),
a trial node filled by the dot-product rule (the tests' ``dot_fill``), the score, and
the repeat count. Its sums run left to right, as the kernel's do, so the two agree
bit for bit; whole ticks against the numpy version of the loop are
test_place_speed_equivalence's."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vecsched.engine.kernels.effp_choose import _choose_launches

from tests.kits.twins_place import R, dot_fill, rand_rows


def _lsum(xs) -> float:
    acc = 0.0
    for x in xs:
        acc += x
    return acc


def choose_launches(type_free, type_room, global_room, allowed, left, qty, groups, size,
                    price, running, type_gpu, inv_ref, credit):
    """The twin: a list of (type, count, units per row) and the units left."""
    S, T = allowed.shape
    left = [int(x) for x in left]
    room = [int(x) for x in type_room]
    glob = int(global_room)
    out = []
    while True:
        types = [t for t in range(T) if room[t] > 0 and glob != 0
                 and any(allowed[i, t] and left[i] > 0 for i in range(S))]
        if not types:
            break
        ceq, per_price = [], []
        for t in types:
            mix = running[1 if type_gpu[t] else 0]
            D = [_lsum(float(left[i]) * qty[i, r] for i in range(S) if allowed[i, t]) + mix[r]
                 for r in range(qty.shape[1])]
            cols = [r for r in range(len(D)) if D[r] > 0 and type_free[t, r] > 0 and inv_ref[r] > 0]
            c = 0.0
            if cols:
                c = min(type_free[t, r] / D[r] for r in cols) * _lsum(D[r] * inv_ref[r] for r in cols)
            ceq.append(c)
            per_price.append(c / price[t])
        top = max(per_price)
        best = None
        for j, t in enumerate(types):
            avail = np.asarray([left[i] if allowed[i, t] else 0 for i in range(S)], np.int64)
            k = dot_fill(type_free[t], qty, avail, groups)
            filled = _lsum(float(k[i]) * size[i] for i in range(S))
            if filled <= 0:
                continue
            fit = per_price[j] / top if top > 0 else per_price[j]
            fill = min(1.0, filled / ceq[j]) if ceq[j] > 0 else 1.0
            key = (fit * (credit + (1.0 - credit) * fill), filled, -t)
            if best is None or key > best[0]:
                best = (key, t, k)
        if best is None:
            break
        _, t, k = best
        m = max(1, min(left[i] // k[i] for i in range(S) if k[i] > 0))
        m = min(m, room[t])
        if glob >= 0:
            m = min(m, glob)
        kk = [min(k[i], left[i]) for i in range(S)]
        out.append((t, m, kk))
        left = [left[i] - m * kk[i] for i in range(S)]
        room[t] -= m
        if glob > 0:
            glob = max(glob - m, 0)
    return out, left


def _case(rng, grid: bool):
    S, T = int(rng.integers(1, 7)), int(rng.integers(1, 6))
    type_free = rand_rows(rng, T, grid, 0.15) * int(rng.integers(1, 5))
    qty = rand_rows(rng, S, grid)
    allowed = rng.random((S, T)) < 0.8
    left = rng.integers(0, 40, S).astype(np.int64)
    room = rng.integers(0, 6, T).astype(np.int64)
    room[rng.random(T) < 0.3] = 1 << 30                 # without a cap
    glob = int(rng.choice([-1, -1, 0, 3, 50]))
    groups = np.where(rng.random(S) < 0.3, rng.integers(0, 2, S), -1).astype(np.int64)
    inv_ref = np.where(rng.random(R) < 0.9, 1.0 / (1.0 + rng.integers(0, 64, R)), 0.0)
    size = qty @ inv_ref
    price = 0.5 + rng.random(T) * 4
    running = rand_rows(rng, 2, grid, 0.5) * float(rng.integers(0, 30))
    type_gpu = rng.random(T) < 0.5
    credit = float(rng.choice([1.0, 0.5, 0.0]))
    return (type_free, room, glob, allowed, left, qty, groups, size, price, running,
            type_gpu, inv_ref, credit)


@pytest.mark.parametrize("grid", [True, False])
def test_choose_launches_matches_twin(grid):
    rng = np.random.default_rng(31 if grid else 32)
    launched, several = 0, 0
    for case in range(300):
        args = _case(rng, grid)
        room0 = args[1].copy()
        want, want_left = choose_launches(*args)
        n, types, counts, units, left = _choose_launches(*args)
        got = [(int(types[j]), int(counts[j]), units[j].tolist()) for j in range(n)]
        assert got == want, case
        assert left.tolist() == want_left, case
        assert (args[1] == room0).all(), case           # the caller's rooms are not changed
        launched += n
        several += n >= 2
    assert launched > 200 and several > 40      # the cases launch, many of them several rounds


def _case_alike(rng):
    """Many rows drawn from a few bundles and a few allowed-type patterns (the
    kernel's classes, ``effp_fill._row_classes``), in shuffled order, some with
    -0.0 where another row of the bundle has 0.0, anti-affinity groups across
    classes."""
    args = list(_case(rng, True))
    S, T = int(rng.integers(8, 60)), len(args[0])
    shapes = rand_rows(rng, int(rng.integers(1, 4)), True)
    patterns = rng.random((int(rng.integers(1, 3)), T)) < 0.8
    qty = shapes[rng.integers(0, len(shapes), S)]
    qty = np.where((qty == 0) & (rng.random(qty.shape) < 0.3), -0.0, qty)
    args[3] = patterns[rng.integers(0, len(patterns), S)]
    args[4] = rng.integers(0, 12, S).astype(np.int64)
    args[5] = qty
    args[6] = np.where(rng.random(S) < 0.4, rng.integers(0, 4, S), -1).astype(np.int64)
    args[7] = qty @ args[11]
    return tuple(args)


def test_choose_launches_alike_rows_match_twin():
    """Rows that fit and score alike (one class in the kernel) still split their
    ties by row, and groups close across classes, as the twin's row-by-row fill."""
    rng = np.random.default_rng(34)
    launched = 0
    for case in range(300):
        args = _case_alike(rng)
        want, want_left = choose_launches(*args)
        n, types, counts, units, left = _choose_launches(*args)
        got = [(int(types[j]), int(counts[j]), units[j].tolist()) for j in range(n)]
        assert got == want, case
        assert left.tolist() == want_left, case
        launched += n
    assert launched > 300


def test_choose_launches_bounds():
    """Counts stay within each type's room and the cluster's; nothing is placed
    that was not left; a row no type may take stays."""
    rng = np.random.default_rng(33)
    for case in range(200):
        args = list(_case(rng, True))
        args[2] = int(rng.choice([-1, 2]))
        n, types, counts, units, left = _choose_launches(*args)
        per_type = np.bincount(types[:n], weights=counts[:n], minlength=len(args[1]))
        assert (per_type <= args[1]).all(), case
        if args[2] >= 0:
            assert counts[:n].sum() <= args[2], case
        assert (left >= 0).all() and (left <= args[4]).all(), case
        taken = (counts[:n, None] * units[:n]).sum(axis=0)
        assert (args[4] - left == taken).all(), case
        nobody = ~args[3].any(axis=1)
        assert (left[nobody] == args[4][nobody]).all(), case
        assert all(math.isfinite(x) for x in args[7])

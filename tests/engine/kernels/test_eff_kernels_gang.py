"""The efficient mode's gang-packing kernels (engine/kernels/eff_empty.py, eff_merge.py)
against slow readable twins written here from their docstrings, on seeded random
inputs (fractional bundles that are not exact in binary, zero bundles, anti-affinity
labels, selector masks, launch room, ties in price) and on edge cases."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine.kernels.eff_empty import BLOCK, block_max, empty_node
from vecsched.engine.kernels.eff_merge import cheapest_type, merge_rounds
from tests.kits.merge_reference import first_merge
from vecsched.engine.model.fits import FIT_SLACK, fit_count

SLACK = 1.0 + FIT_SLACK


# ---- twins ------------------------------------------------------------------------------

def empty_node_twin(free, label, live, m, uq, ukey, uval, masks, mask_of):
    """First fit of each unit over the live slots but m, on copies; (ok, targets,
    free, label) with the inputs' arrays as they were when a unit fits nowhere."""
    free, label = free.copy(), label.copy()
    out = []
    for u in range(len(uq)):
        for s in range(len(free)):
            if s == m or not live[s] or fit_count(free[s][None, :], uq[u])[0] < 1:
                continue
            if mask_of[u] >= 0 and not masks[mask_of[u], s]:
                continue
            if 0 <= ukey[u] < label.shape[1] and label[s, ukey[u]] == uval[u]:
                continue
            free[s] = np.maximum(free[s] - uq[u], 0.0)
            if 0 <= ukey[u] < label.shape[1]:
                label[s, ukey[u]] = uval[u]
            out.append(s)
            break
        else:
            return False, None, None, None
    return True, out, free, label


def cheapest_twin(load, ok_rows, tsort, price, conf, room, freed, cap, below):
    """The first type by ascending price below ``below`` with launch room (the freed
    nodes' types given back) whose capacity (with 1e-9 relative slack) holds the
    load and whose labels every row allows."""
    best, best_price = -1, below
    for t in tsort.tolist():
        if price[t] >= best_price or not conf[t]:
            continue
        if room[t] + sum(1 for f in freed if f == t) <= 0:
            continue
        if np.any(load > cap[t] + 1e-9 * np.abs(cap[t])):
            continue
        if all(ok[t] for ok in ok_rows):
            best, best_price = t, price[t]
    return best


def first_merge_twin(order, ntype, items, ok, anti, tsort, price, conf, room, cap):
    """items[a]: node a's (units x bundle) vectors in order; anti[a]: its anti-affinity
    label ids, one per unit."""
    for x, a in enumerate(order.tolist()):
        for b in order[x + 1:].tolist():
            labels = anti[a] + anti[b]
            if len(set(labels)) < len(labels):
                continue
            load = sum(items[a] + items[b])
            t = cheapest_twin(load, [ok[a], ok[b]], tsort, price, conf, room,
                              (ntype[a], ntype[b]), cap, price[ntype[a]] + price[ntype[b]])
            if t >= 0:
                return a, b, t
    return -1, -1, -1


# ---- empty_node -------------------------------------------------------------------------

def _frac(rng, shape, scale):
    return np.round(rng.random(shape) * scale, 1) * (rng.random(shape) < 0.7)


@pytest.mark.parametrize("seed", range(6))
def test_empty_node_matches_twin(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        S, R, L, U = int(rng.integers(1, 12)), int(rng.integers(1, 5)), 3, int(rng.integers(1, 6))
        free = _frac(rng, (S, R), 4.0)
        if rng.random() < 0.3:
            free[:, 0] = 0.3                      # 0.3 / 0.1: the slack decides
        label = rng.integers(-1, 3, (S, L)).astype(np.int32)
        live = rng.random(S) < 0.85
        m = int(rng.integers(S))
        uq = _frac(rng, (U, R), 1.5)
        if rng.random() < 0.3:
            uq[:, 0] = 0.1
        if rng.random() < 0.1:
            uq[0] = 0.0                           # no positive column: fits anywhere
        ukey = np.where(rng.random(U) < 0.4, rng.integers(0, L, U), -1).astype(np.int64)
        uval = rng.integers(0, 3, U).astype(np.int32)
        masks = rng.random((2, S)) < 0.7
        mask_of = rng.integers(-1, 2, U).astype(np.int64)
        want = empty_node_twin(free, label, live, m, uq, ukey, uval, masks, mask_of)
        f, lab = free.copy(), label.copy()
        ok, tgt = empty_node(f, lab, live, m, uq, ukey, uval, masks, mask_of, SLACK,
                             block_max(free))
        assert ok == want[0]
        if ok:
            assert tgt.tolist() == want[1]
            assert f.tobytes() == want[2].tobytes() and np.array_equal(lab, want[3])
        else:                                     # restored bit for bit
            assert f.tobytes() == free.tobytes() and np.array_equal(lab, label)


def test_empty_node_edges():
    free = np.array([[0.3, 1.0], [1.0, 1.0], [5.0, 5.0]])
    label = np.full((3, 1), -1, np.int32)
    live = np.array([True, True, True])
    none = np.ones((0, 3), bool)
    q = np.array([[0.1, 0.0]] * 3 + [[0.0, 0.0]])
    ok, tgt = empty_node(free, label, live, 2, q, np.full(4, -1, np.int64),
                         np.zeros(4, np.int32), none, np.full(4, -1, np.int64), SLACK,
                         block_max(free))
    assert ok and tgt.tolist() == [0, 0, 0, 0]    # 0.3 holds three 0.1s, then a zero bundle
    # anti-affinity: one unit of a label per slot; the third finds no slot and all undo
    free = np.ones((3, 1)) * 4
    before = free.copy()
    ok, _ = empty_node(free, label, live, 2, np.ones((3, 1)), np.zeros(3, np.int64),
                       np.full(3, 7, np.int32), none, np.full(3, -1, np.int64), SLACK,
                       block_max(free))
    assert not ok and np.array_equal(free, before) and (label == -1).all()


# ---- the type search ----------------------------------------------------------------------

def _types(rng, T, R):
    cap = np.round(rng.random((T, R)) * 8, 1) + 0.1 * (rng.random((T, R)) < 0.9)
    price = rng.choice([1.0, 2.0, 3.0, 5.0], T)             # ties
    return (cap, price, np.argsort(price, kind="stable").astype(np.int64),
            rng.random(T) < 0.9, rng.integers(-1, 3, T).astype(np.int64))


@pytest.mark.parametrize("seed", range(4))
def test_first_merge_and_cheapest_type_match_twins(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(150):
        T, R, P = int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.integers(0, 9))
        cap, price, tsort, conf, room = _types(rng, T, R)
        cap_tol = cap + 1e-9 * np.abs(cap)
        ntype = rng.integers(0, T, P).astype(np.int64)
        items = [[np.round(rng.random(R) * 3, 1) * int(rng.integers(1, 3))
                  for _ in range(int(rng.integers(1, 4)))] for _ in range(P)]
        anti = [[int(x) for x in rng.integers(0, 6, int(rng.integers(0, 3)))] for _ in range(P)]
        ok = rng.random((P, T)) < 0.8
        load = np.zeros((P, R))
        for a in range(P):
            acc = 0
            for v in items[a]:
                acc = acc + v
            load[a] = acc
        ptr = np.cumsum([0] + [len(x) for x in items]).astype(np.int64)
        nq = np.asarray([v for x in items for v in x], float).reshape(-1, R)
        aptr = np.cumsum([0] + [len(set(x)) for x in anti]).astype(np.int64)
        aids = np.asarray([v for x in anti for v in sorted(set(x))], np.int64)
        adup = np.asarray([len(set(x)) < len(x) for x in anti], bool)
        order = rng.permutation(P).astype(np.int64)
        got = first_merge(order, ntype, load, ptr, nq, ok, aptr, aids, adup, tsort, price,
                          conf, room, cap_tol)
        assert tuple(int(x) for x in got) == first_merge_twin(order, ntype, items, ok, anti,
                                                              tsort, price, conf, room, cap)
        for a in range(P):
            below = float(price[ntype[a]])
            t = cheapest_type(load, ok, a, tsort, price, conf, room, -1, -1, cap_tol, below)
            assert t == cheapest_twin(load[a], [ok[a]], tsort, price, conf, room, (), cap, below)


def test_first_merge_edges():
    """Two half-full nodes of a dear type merge into one cheap node that holds both;
    not when they share an anti-affinity label, nor when the cheap type has no room
    (but the pair's own type, given back, has)."""
    cap = np.array([[4.0], [8.0]])
    price = np.array([3.0, 4.0])
    tsort = np.array([0, 1], np.int64)
    conf = np.array([True, True])
    load = np.array([[2.0], [2.0]])
    args = (np.array([0, 1], np.int64), np.array([1, 1], np.int64), load,
            np.array([0, 1, 2], np.int64), load.copy(), np.ones((2, 2), bool))
    tol = cap + 1e-9 * cap
    free_labels = (np.array([0, 0, 0], np.int64), np.zeros(0, np.int64), np.zeros(2, bool))
    got = first_merge(*args, *free_labels, tsort, price, conf, np.array([1, 0]), tol)
    assert tuple(got) == (0, 1, 0)
    shared = (np.array([0, 1, 2], np.int64), np.array([5, 5], np.int64), np.zeros(2, bool))
    assert tuple(first_merge(*args, *shared, tsort, price, conf, np.array([1, 0]), tol)) == \
        (-1, -1, -1)
    # no room for type 0; type 1 (price 4 < 8) has room once the pair gives one back
    assert tuple(first_merge(*args, *free_labels, tsort, price, conf, np.array([0, 0]),
                             tol)) == (0, 1, 1)


def test_empty_node_blocks_skip_only_what_cannot_fit():
    """Many slots over several blocks, mostly full: first fit as the twin finds it,
    with the block bounds taken on the free room before earlier moves (still bounds)."""
    rng = np.random.default_rng(7)
    S, R = 5 * BLOCK + 3, 3
    for _ in range(60):
        free = np.where(rng.random((S, R)) < 0.97, 0.0, np.round(rng.random((S, R)) * 4, 1))
        bound = block_max(free)
        free[rng.random(S) < 0.5] *= 0.5           # shrunk since the bound was taken
        label = np.full((S, 1), -1, np.int32)
        live = rng.random(S) < 0.9
        U = int(rng.integers(1, 5))
        uq = np.round(rng.random((U, R)) * 1.5, 1)
        none, no = np.ones((0, S), bool), np.full(U, -1, np.int64)
        want = empty_node_twin(free, label, live, 0, uq, no, np.zeros(U, np.int32), none, no)
        f = free.copy()
        ok, tgt = empty_node(f, label.copy(), live, 0, uq, no, np.zeros(U, np.int32), none, no,
                             SLACK, bound)
        assert ok == want[0] and (not ok or (tgt.tolist() == want[1] and
                                             f.tobytes() == want[2].tobytes()))


def merge_rounds_twin(ntype, rank, items, ok, anti, tsort, price, conf, room, cap, rounds):
    """first_merge_twin again and again, each merge applied (a holds both, b gone,
    room back for the old types and taken for the new one), order rebuilt each time."""
    ntype, items, ok = list(ntype), [list(x) for x in items], ok.copy()
    anti, room, alive, out = [list(x) for x in anti], room.copy(), set(range(len(items))), []
    for _ in range(rounds):
        order = np.asarray(sorted(alive, key=lambda j: (-price[ntype[j]], rank[j])), np.int64)
        a, b, t = first_merge_twin(order, np.asarray(ntype), items, ok, anti, tsort, price,
                                   conf, room, cap)
        if a < 0:
            break
        out.append((a, b, t))
        items[a] += items[b]
        ok[a] &= ok[b]
        anti[a] += anti[b]
        room[ntype[a]] += 1
        room[ntype[b]] += 1
        room[t] -= 1
        ntype[a] = t
        alive.remove(b)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_merge_rounds_matches_twin(seed):
    """Many small nodes of dear types, cheap big types with little launch room: merges
    chain (a merged node merges again), room runs out, labels block some pairs."""
    rng = np.random.default_rng(300 + seed)
    chains = 0
    for _ in range(150):
        T, R, P = int(rng.integers(2, 5)), int(rng.integers(1, 3)), int(rng.integers(2, 26))
        cap = np.round(rng.random((T, R)) * 8, 1) + 1.0
        price = np.round(cap.sum(axis=1) * rng.choice([0.5, 1.0, 1.5], T), 1)
        tsort = np.argsort(price, kind="stable").astype(np.int64)
        conf = rng.random(T) < 0.95
        room = rng.integers(0, 2, T).astype(np.int64)
        cap_tol = cap + 1e-9 * np.abs(cap)
        ntype = rng.integers(0, T, P).astype(np.int64)
        items = [[np.round(rng.random(R) * 1.5, 1) for _ in range(int(rng.integers(1, 3)))]
                 for _ in range(P)]
        anti = [[int(x) for x in rng.integers(0, 8, int(rng.integers(0, 2)))] for _ in range(P)]
        ok = rng.random((P, T)) < 0.9
        load = np.zeros((P, R))
        for a in range(P):
            acc = 0
            for v in items[a]:
                acc = acc + v
            load[a] = acc
        ptr = np.cumsum([0] + [len(x) for x in items]).astype(np.int64)
        nq = np.asarray([v for x in items for v in x], float).reshape(-1, R)
        aptr = np.cumsum([0] + [len(set(x)) for x in anti]).astype(np.int64)
        aids = np.asarray([v for x in anti for v in sorted(set(x))], np.int64)
        adup = np.asarray([len(set(x)) < len(x) for x in anti], bool)
        rank = rng.permutation(P).astype(np.int64)
        order = np.lexsort((rank, -price[ntype])).astype(np.int64)
        rounds = int(rng.integers(1, 30))
        got = merge_rounds(order, ntype, rank, load, ptr, nq, ok, aptr, aids, adup, tsort, price,
                           conf, room, cap_tol, rounds)
        want = merge_rounds_twin(ntype, rank, items, ok, anti, tsort, price, conf, room, cap,
                                 rounds)
        assert [tuple(x) for x in got.tolist()] == want
        chains += any(a in {x[0] for x in want[:k]} for k, (a, _, _) in enumerate(want))
    assert chains >= 3

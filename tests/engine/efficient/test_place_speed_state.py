"""engine/efficient/state.State's journaled snapshots: after any mix of placements,
launches and nested snapshots, ``restore`` gives back every array of the State
up to its slots exactly as a full copy taken at the snapshot would; and the
walk lists (``State.walk``) hold every node that can take a bundle later."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.cost import Costs
from vecsched.engine.efficient.gang_place import gang_batch
from vecsched.engine.efficient.place import place_batch
from vecsched.engine.efficient.state import State
from vecsched.engine.model.fits import fit_count

from tests.kits.ganggen import gang_tick

ARRAYS = ("free", "cfree", "label", "received", "alive", "type", "gpu", "ready")


def _copy(st: State) -> dict:
    out = {k: getattr(st, k)[:st.M].copy() for k in ARRAYS}
    out.update(M=st.M, new_types=list(st.new_types), type_room=st.type_room.copy(),
               global_room=st.global_room)
    return out


def _same(st: State, want: dict, where) -> None:
    got = _copy(st)
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            assert got[k].tobytes() == v.tobytes(), (where, k)
        else:
            assert got[k] == v, (where, k)


def _batch(p, rng):
    g = int(rng.integers(p.G))
    rows, qty, want, _ = gang_batch(p, g)
    return rows, qty, want


@pytest.mark.parametrize("seed", range(5))
def test_nested_restores_give_back_the_copies(seed):
    p = gang_tick(seed, bundles=60, plain=True)
    st = State(p)
    costs = Costs(p, EfficientOptions())
    rng = np.random.default_rng(seed)
    stack = []
    for step in range(60):
        act = rng.random()
        if act < 0.3 or not stack:
            stack.append((st.snapshot(), _copy(st)))
        elif act < 0.5:
            snap, want = stack.pop()
            st.restore(snap)
            _same(st, want, (seed, step))
        else:
            rows, qty, want = _batch(p, rng)
            source = int(rng.random() < 0.2)           # the constraint's totals now and then
            place_batch(st, costs, rows, qty, want, source, True, 1.0, [],
                        tight=bool(rng.random() < 0.5))
    while stack:
        snap, want = stack.pop()
        st.restore(snap)
        _same(st, want, (seed, "end"))


def test_a_restore_of_an_undone_snapshot_is_refused():
    p = gang_tick(0, bundles=40)
    st = State(p)
    costs = Costs(p, EfficientOptions())
    old = st.snapshot()
    rows, qty, want = gang_batch(p, 0)[:3]
    place_batch(st, costs, rows, qty, want, 0, True, 1.0, [])
    newer = st.snapshot()
    place_batch(st, costs, rows, qty, want, 0, True, 1.0, [])
    st.restore(old)
    with pytest.raises(ValueError, match="undone"):
        st.restore(newer)


def test_walk_holds_every_node_that_can_take_the_bundle_later():
    rng = np.random.default_rng(3)
    for seed in range(4):
        p = gang_tick(seed, bundles=60, plain=True)
        st = State(p)
        costs = Costs(p, EfficientOptions())
        for _ in range(20):
            rows, qty, want = _batch(p, rng)
            place_batch(st, costs, rows, qty, want, 0, True, 1.0, [])
            for q in qty:
                listed = set(st.walk(0, q, False).tolist())
                can = np.flatnonzero(fit_count(st.free[:st.N], q) >= 1)
                assert set(can.tolist()) <= listed, seed

"""engine/efficient/gang_place._Undo: undoing a trial packing from place_batch's own
report restores every array of the State (whatever fields it has) as a full snapshot
would, and a committed trial is the base the next rollback returns to."""
from __future__ import annotations

import numpy as np

from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.cost import Costs
from vecsched.engine.efficient.gang_place import _Undo, gang_batch
from vecsched.engine.efficient.place import place_batch
from vecsched.engine.efficient.state import State

from tests.kits.ganggen import gang_tick


def _view(st: State) -> dict:
    """Every array of the State up to its used slots, and its scalars and lists."""
    out = {}
    for k, v in vars(st).items():
        if isinstance(v, np.ndarray):
            out[k] = v[:st.M].copy() if v.shape[:1] == st.free.shape[:1] else v.copy()
        elif isinstance(v, (int, float, list, tuple)):
            out[k] = list(v) if isinstance(v, list) else v
    return out


def _same(a: dict, b: dict, where):
    assert a.keys() == b.keys(), where
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes(), (where, k)
        else:
            assert a[k] == b[k], (where, k)


def test_rollback_restores_the_state_and_commit_moves_the_base():
    for seed in range(6):
        p = gang_tick(seed, bundles=40)
        st = State(p)
        costs = Costs(p, EfficientOptions())
        log = _Undo(st)
        changed = 0
        for g in range(p.G):
            rows, qty, want, _ = gang_batch(p, g)
            before = _view(st)
            out: list = []
            place_batch(st, costs, rows, qty, want, 0, True, 1.0, out)
            moved = st.M != before["M"] or any(
                not np.array_equal(st.free[m], before["free"][m]) for m, _, _ in out if m < before["M"])
            log.rollback(out)
            _same(_view(st), before, (seed, g, "rollback"))
            changed += moved
            if g % 2 == 0:                  # keep every other group: the base moves on
                out = []
                place_batch(st, costs, rows, qty, want, 0, True, 1.0, out)
                log.commit(out)
        assert changed and st.M > p.N, seed     # trials changed things; launches committed

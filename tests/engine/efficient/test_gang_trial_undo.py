"""Undoing a trial packing of the gang passes (engine/efficient/gang_place._pass): a
State snapshot taken before the trial and restored after it puts every array of the
State back as it was (whatever fields it has), a trial that is kept is the state the
next restore returns to, and an outer snapshot still undoes the whole pass."""
from __future__ import annotations

import numpy as np

from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.cost import Costs
from vecsched.engine.efficient.gang_place import gang_batch
from vecsched.engine.efficient.place import place_batch
from vecsched.engine.efficient.state import State

from tests.kits.ganggen import gang_tick
from tests.kits.state_view import assert_same as _same, state_view as _view


def test_restore_undoes_a_trial_and_kept_trials_are_the_new_base():
    for seed in range(6):
        p = gang_tick(seed, bundles=40)
        st = State(p)
        costs = Costs(p, EfficientOptions())
        start = _view(st)
        outer = st.snapshot()
        changed = kept = 0
        for g in range(p.G):
            rows, qty, want, _ = gang_batch(p, g)
            before = _view(st)
            snap = st.snapshot()
            place_batch(st, costs, rows, qty, want, 0, True, 1.0, [])
            moved = st.M != before["M"] or not np.array_equal(st.free[:before["M"]],
                                                             before["free"])
            st.restore(snap)
            _same(_view(st), before, (seed, g, "trial undone"))
            changed += moved
            if g % 2 == 0:                  # keep every other group: the base moves on
                place_batch(st, costs, rows, qty, want, 0, True, 1.0, [])
                kept += 1
        assert changed and kept and st.M > p.N, seed    # trials changed things; launches kept
        st.restore(outer)
        _same(_view(st), start, (seed, "whole pass undone"))

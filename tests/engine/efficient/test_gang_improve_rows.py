"""engine/efficient/improve.Packing leaves out the existing nodes with room for no
item of the tick's gangs (``_may_take``): existing nodes only take units in the
moves, so the packing and the plan are the same as with every node in it."""
from __future__ import annotations

import numpy as np

from vecsched.engine import schedule
from vecsched.engine.efficient import improve as improve_mod

from bench.benchmarks import common
from tests.kits.plan_digest import digest
from tests.kits.ganggen import gang_tick


def _problems():
    for seed in range(3):
        yield f"gang_tick/{seed}", gang_tick(seed, bundles=40)
    for n, k, g, seed in ((200, 1000, 20, 0), (500, 3000, 60, 1), (1000, 1000, 50, 0)):
        yield f"v2/{n}/{k}/{g}/s{seed}", common.engine_problem(
            common.cluster_v2(nodes=n, units=k, seed=seed, gangs=g))


def test_leaving_out_nodes_without_room_changes_no_plan(monkeypatch):
    left_out = 0
    real = improve_mod._may_take

    def counting(free, item_qty):
        nonlocal left_out
        got = real(free, item_qty)
        left_out += int((~got).sum())
        return got

    for name, p in _problems():
        monkeypatch.setattr(improve_mod, "_may_take", counting)
        fast = digest(schedule(p, mode="efficient"))
        monkeypatch.setattr(improve_mod, "_may_take",
                            lambda free, item_qty: np.ones(len(free), bool))
        assert digest(schedule(p, mode="efficient")) == fast, name
    assert left_out > 1000              # the filter did leave nodes out


def test_may_take_uses_the_moves_fit_test():
    q = np.asarray([[2.0, 1.0, 0.0]])
    free = np.asarray([[2.0, 1.0, 0.0],        # exactly one unit
                       [1.999, 5.0, 9.0],      # short of the first column
                       [0.0, 0.0, 0.0],
                       [9.0, 0.5, 0.0]])
    assert improve_mod._may_take(free, q).tolist() == [True, False, False, False]
    assert improve_mod._may_take(free, np.zeros((1, 3))).all()   # an empty bundle fits anywhere

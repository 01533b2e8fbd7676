"""The efficient mode's per-group set-up in bulk (engine/efficient/gang_place.py):
``gang_batches`` (groups of n equal bundles read at once), ``strict_gangs``
(engine/model/fits.py) and ``gang_order`` must give exactly what their group-by-group
twins give."""
from __future__ import annotations

import numpy as np

from bench.benchmarks import common
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.cost import Costs
from vecsched.engine.efficient.gang_place import (_distinct, _prepare, _variants, gang_batch,
                                                  gang_batches, gang_order)
from vecsched.engine.model.fits import gang_strategy, strict_gangs

from tests.kits.ganggen import gang_tick


def _problems():
    for seed in range(8):
        yield gang_tick(seed, bundles=60, plain=bool(seed % 2))
    for seed in range(3):        # GCS-encoded groups: strategy in the name, shared bundles
        yield common.engine_problem(common.cluster_v2(nodes=60, units=200, gangs=80,
                                                      seed=seed))


def _order_twin(p, costs) -> list:
    """``gang_order`` group by group, as it was written first."""
    strict = np.asarray([gang_strategy(p, g).startswith("STRICT") for g in range(p.G)], bool)
    size = np.asarray([float(costs.size(p.req.qty[p.gang_req[p.gang_ptr[g]:p.gang_ptr[g + 1]]])
                             .sum()) for g in range(p.G)], float)
    return np.lexsort((np.arange(p.G), -size, ~strict)).tolist()


def test_bulk_set_up_equals_the_twins():
    fast = kinds = 0
    for p in _problems():
        strict = strict_gangs(p)
        assert strict.tolist() == [gang_strategy(p, g).startswith("STRICT") for g in range(p.G)]
        kinds += len(set(strict.tolist())) == 2
        bulk = gang_batches(p)
        assert len(bulk) == p.G
        for g in range(p.G):
            got, want = bulk[g], gang_batch(p, g)
            for a, b in zip(got[:3], want[:3]):
                assert a.dtype == b.dtype and a.shape == b.shape, g
                assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), g
            assert got[3] == want[3], g
            rows = p.gang_req[p.gang_ptr[g]:p.gang_ptr[g + 1]]
            fast += len(rows) > 1 and len(got[0]) == 1 and len(got[3][0]) == len(rows)
        for opts in (EfficientOptions(), EfficientOptions(fill_credit=0.0)):
            costs = Costs(p, opts)
            assert gang_order(p, costs) == _order_twin(p, costs)
            got = _prepare(bulk, costs, opts)
            for (order, variants), (_, qty, _, _) in zip(got, bulk):
                want_order = np.argsort(-costs.size(qty), kind="stable")
                assert order.dtype == want_order.dtype
                assert order.tolist() == want_order.tolist()
                assert variants == _distinct(_variants(opts), qty, want_order)
    assert fast > 50 and kinds >= 5        # equal-bundle groups met; strict and other groups


def test_strict_gangs_reads_the_name_when_no_bundle_is_constrained():
    p = common.engine_problem(common.cluster_v2(nodes=20, units=20, gangs=40, seed=4))
    names = [n.split(":")[1] if n.count(":") >= 1 else "" for n in p.gang_names]
    strict = strict_gangs(p)
    for g, name in enumerate(names):
        rows = p.gang_req[p.gang_ptr[g]:p.gang_ptr[g + 1]]
        constrained = bool((p.req.aff[rows, 0] >= 0).any() or (p.req.anti[rows, 0] >= 0).any())
        if not constrained:
            assert strict[g] == name.startswith("STRICT"), (g, name)


def _rows_twin(place: list, batches) -> np.ndarray:
    """``_rows`` unit by unit: each unit takes its item's next bundles."""
    members = {g: [list(m) for m in b[3]] for g, b in enumerate(batches)}
    out = []
    for g, i, slot, n, _ in place:
        for _ in range(n):
            out.extend((g, b, slot) for b in members[g][i].pop(0))
    return np.asarray(sorted(out), np.int64).reshape(-1, 3)


def test_placement_rows_equal_the_twin(monkeypatch):
    from vecsched.engine import schedule
    from vecsched.engine.efficient import gang_place

    seen = []
    real = gang_place._rows

    def spy(place, batches):
        got = real(place, batches)
        seen.append((got, _rows_twin(place, batches), len(place)))
        return got

    monkeypatch.setattr(gang_place, "_rows", spy)
    for p in _problems():
        schedule(p, mode="efficient")
    assert len(seen) >= 10 and sum(n for _, _, n in seen) > 100
    for got, want, _ in seen:
        assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
        assert np.array_equal(got, want)


def test_item_sizes_equal_each_items_own_product():
    from vecsched.engine.efficient.improve import Base
    from vecsched.engine.efficient.state import State

    checked = 0
    for p in _problems():
        batches = gang_batches(p)
        costs = Costs(p, EfficientOptions())
        got = Base(State(p), batches).item_size(costs)
        want = [float(costs.size(q)[0]) for b in batches for q in b[1]]
        assert np.array_equal(np.asarray(got).view(np.uint64), np.asarray(want).view(np.uint64))
        checked += len(want)
    assert checked > 300

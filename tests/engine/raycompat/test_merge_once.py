"""STRICT_PACK merges made once per distinct bundle list (engine/raycompat/requests_view.py):
the request table must be what merging every group on its own makes, bit for bit, on
groups that share request rows (one spec object per distinct bundle, as the Ray
adapter's decode makes them) and on groups whose equal bundles are rows of their own."""
from __future__ import annotations

import numpy as np

from bench.benchmarks import common
from vecsched.engine.raycompat.requests_view import Requests

from tests.kits.ganggen import gang_tick


class _EachOnItsOwn(Requests):
    """The twin: every merge made from its members."""

    def _merge(self, members):
        if len(members) == 1:
            return members[0]
        qty, present, s = self._merged_row(members)
        first = members[0]
        t = self.table
        return t.append(qty, present, s, t.aff[first], t.sel_lo[first], t.sel_hi[first],
                        t.sel_key[first])


def _problems():
    for seed in range(6):
        yield gang_tick(seed, bundles=80)
    for seed in range(3):
        spec = common.cluster_v2(nodes=50, units=100, gangs=120, seed=seed)
        yield common.engine_problem(spec)
        yield common.engine_problem(spec, shared_bundles=True)


def test_merged_rows_equal_merging_each_group_alone():
    merged = shared = 0
    for p in _problems():
        got, want = Requests(p), _EachOnItsOwn(p)
        for name in ("qty", "present", "sum", "aff", "sel_lo", "sel_hi", "n_pc", "anti"):
            a, b = getattr(got.table, name), getattr(want.table, name)
            assert a.dtype == b.dtype and a.shape == b.shape, name
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), name
        assert got.table.sel_key == want.table.sel_key
        assert [got.gang_requests(g) for g in range(p.G)] == \
               [want.gang_requests(g) for g in range(p.G)]
        made = got.table.qty.shape[0] - p.req.Q
        merged += made
        shared += made - len(got._merged)
    assert merged > 100 and shared > 30     # merges happened, and some reused one made before

"""Placement-group churn: one EngineScheduler across ticks of a cluster whose groups
come and go (bench/churn.py, as a real GCS reports them). The resource columns are what each tick names, so the width stays
bounded however long the autoscaler lives, no bundle resource gets a column
unless a request names it, and the decisions stay Ray's. (The 2,000-tick soak at
1,000 nodes with its timings is bench/soak_pg.py; no time is asserted here.)"""
from __future__ import annotations

import copy

import pytest

pytest.importorskip("ray")
from ray.autoscaler.v2.scheduler import ResourceDemandScheduler  # noqa: E402

from vecsched.adapters.ray import EngineScheduler  # noqa: E402
from vecsched.adapters.ray.codec import decode  # noqa: E402

from bench.churn import PgChurn  # noqa: E402
from tests.kits.compare import diff  # noqa: E402


@pytest.mark.slow
def test_width_stays_bounded_under_group_churn():
    churn = PgChurn(nodes=150, groups=40, replace=5, seed=1)
    sched = EngineScheduler(new_id=lambda: "id", now_ns=lambda: 0)
    widths, compared, group_names = [], 0, 0
    for tick in range(120):
        req = churn.request()
        want = ResourceDemandScheduler().schedule(copy.deepcopy(req)) if tick % 20 == 19 else None
        got = sched.schedule(req)
        widths.append(sched.last_shape["resources"])
        if want is not None:
            assert not diff(want, got), (tick, diff(want, got))
            compared += 1
        if tick % 10 == 0:
            # the columns of the tick: bundle resources only where a request names them
            requested = {k for r in req.resource_requests for k in r.request.resources_bundle}
            names = decode(req).problem.resources
            bundles = {k for k in names if "_group_" in k}
            assert bundles <= requested, sorted(bundles - requested)[:5]
            group_names += sum("_group_" in k for x in req.current_instances
                               for k in x.ray_node.total_resources)
        churn.advance()
    assert compared == 6 and group_names > 1000     # the nodes did carry bundle resources
    # 600 groups came and went: with names kept from tick to tick the width grew by
    # about ten columns a tick; it now stays within the first ticks' range
    early, late = max(widths[:40]), max(widths[40:])
    assert late <= early + 8, (early, late, widths)
    assert churn.serial == 40 + 5 + 5 * 120 and churn.dropped < 10   # groups made, placed

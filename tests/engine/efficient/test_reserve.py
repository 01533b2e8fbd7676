"""The efficient mode's reserve (vecsched.engine.efficient.reserve): room for one
more unit of each pending plain bundle - which bundles count, an idle node that holds
one is kept, a launch is made where no node has the room, nothing of it shows as a
placement, plans stay legal and deterministic, and it is on by default."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.reserve import reserve_shapes
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import IMPLICIT_PREFIX, Kind, Status
from vecsched.engine.model.validate import check_plan

GPU8 = {"CPU": 64.0, "GPU": 8.0}
CPU16 = {"CPU": 16.0}
TYPES = [NodeTypeSpec("gpu", GPU8, max_workers=10), NodeTypeSpec("cpu", CPU16, max_workers=10)]
FRAC = {"CPU": 4.0, "GPU": 0.5}


def _running(t, total, free, idle_ms=0, i=0):
    return NodeSpec(t, Status.RAY_RUNNING, Kind.WORKER, dict(total), dict(free),
                    idle_ms=idle_ms, ray_node_id=f"n{i}")


def _efficient(p, **kw):
    plan = schedule(p, mode="efficient", options=EfficientOptions(**kw))
    assert check_plan(p, plan) == []
    return plan


def test_reserve_shapes_are_the_pending_plain_uncapped_rows():
    cap = {"CPU": 2.0, f"{IMPLICIT_PREFIX}app": 0.5}
    reqs = [RequestSpec(FRAC, count=3),
            RequestSpec({"CPU": 1.0}, count=1, label_selectors=[[("zone", "in", ("a",))]]),
            RequestSpec(CPU16, count=1, anti_affinity=("app", "x")),
            RequestSpec(cap, count=2),
            RequestSpec({"CPU": 2.0}, count=1)]
    p = build_problem(TYPES, [], reqs)
    rows = reserve_shapes(p)
    got = sorted(tuple(sorted((p.resources[j], float(p.shape_qty[s, j]))
                              for j in np.flatnonzero(p.shape_qty[s] > 0))) for s in rows)
    assert got == [(("CPU", 2.0),), (("CPU", 4.0), ("GPU", 0.5))]
    assert reserve_shapes(build_problem(TYPES, [], [])).size == 0


def test_a_pending_bundle_keeps_an_idle_node_that_holds_one_more_unit():
    """The pending unit fits the running node's last room; the one after it would fit
    only the idle node, which is therefore kept rather than stopped."""
    busy = _running("gpu", GPU8, {"CPU": 4.0, "GPU": 0.5}, i=0)
    idle = _running("gpu", GPU8, GPU8, idle_ms=120_000, i=1)
    p = build_problem(TYPES, [busy, idle], [RequestSpec(FRAC, count=1)], idle_timeout_s=60.0)
    plan = _efficient(p)
    assert plan.terminations() == [] and plan.launches() == {}
    assert plan.place_slot.tolist() == [0] and plan.stats["reserve"] == 1
    assert _efficient(p, reserve=False).terminations() == [(1, "IDLE")]


def test_an_idle_node_is_stopped_when_nothing_waits():
    idle = _running("gpu", GPU8, GPU8, idle_ms=120_000)
    p = build_problem(TYPES, [idle], [], idle_timeout_s=60.0)
    plan = _efficient(p)
    assert plan.terminations() == [(0, "IDLE")] and plan.stats["reserve"] == 0


def test_no_room_for_one_more_unit_launches_a_node():
    """One pending 16-CPU unit: one CPU node holds it exactly; the unit after it needs
    a second node. The plan places the one real unit only."""
    p = build_problem(TYPES, [], [RequestSpec(CPU16, count=1)])
    plan = _efficient(p)
    assert plan.launches() == {"cpu": 2}
    assert plan.place_count.sum() == 1 and plan.infeasible.sum() == 0
    assert plan.stats["reserve"] == 1
    assert _efficient(p, reserve=False).launches() == {"cpu": 1}


def test_on_by_default_and_off_with_reserve_false():
    p = build_problem(TYPES, [], [RequestSpec(CPU16, count=1)])
    plan = schedule(p, mode="efficient")
    assert plan.launches() == {"cpu": 2} and plan.stats["reserve"] == 1
    off = schedule(p, mode="efficient", options=EfficientOptions(reserve=False))
    assert off.launches() == {"cpu": 1} and "reserve" not in off.stats


def test_room_left_by_real_demand_serves_the_reserve():
    """Four 0.5-GPU units leave room on the GPU node launched for them: the reserve
    adds no node, and the plan places the four real units only."""
    p = build_problem(TYPES, [], [RequestSpec(FRAC, count=4)])
    plan = _efficient(p)
    assert plan.launches() == {"gpu": 1} == _efficient(p, reserve=False).launches()
    assert plan.place_count.sum() == 4
    again = _efficient(p)
    assert np.array_equal(again.new_type, plan.new_type)
    assert np.array_equal(again.place_slot, plan.place_slot)


def test_a_reserve_that_is_not_a_bool_is_a_typed_error():
    with pytest.raises(ValueError, match="options.reserve"):
        EfficientOptions(reserve="yes")

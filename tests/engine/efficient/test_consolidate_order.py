"""A caller may rank consolidation's victims itself (``EfficientOptions.consolidate_order``:
node indices, e.g. from a memory of how long each node's work has run); every other
rule still holds, and a node left out of the order is no victim and may host work."""
from __future__ import annotations

import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
from vecsched.engine.model.dtypes import Kind, Status
from vecsched.engine.model.validate import check_plan

TYPES = [NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, max_workers=10)]


def _node(gpu_free, i, cpu_free=16.0):
    return NodeSpec("gpu8", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                    {"CPU": cpu_free, "GPU": gpu_free}, ray_node_id=f"n{i}")


# 0: 1 GPU in use, 1: 2 GPUs in use (both victims at share 0.25), 2: room for both
NODES = [_node(7.0, 0), _node(6.0, 1), _node(4.0, 2, cpu_free=32.0)]


def _terms(nodes, **kw):
    p = build_problem(TYPES, nodes, [], idle_timeout_s=60.0)
    plan = schedule(p, mode="efficient", options=EfficientOptions(consolidate=0.25, **kw))
    assert check_plan(p, plan) == []
    return plan.terminations()


def test_the_callers_order_decides_who_goes_first():
    assert _terms(NODES) == [(0, "CONSOLIDATE")]                        # least used
    assert _terms(NODES, consolidate_order=(1, 0)) == [(1, "CONSOLIDATE")]
    assert _terms(NODES, consolidate_order=(1, 1, 0), consolidate_budget=2,  # once each
                  consolidate_per_tick=2) == [(1, "CONSOLIDATE"), (0, "CONSOLIDATE")]


def test_nodes_left_out_are_no_victims_and_the_rules_still_hold():
    assert _terms(NODES, consolidate_order=()) == []
    assert _terms(NODES, consolidate_order=(2,)) == []                   # not low: no victim
    assert _terms(NODES, consolidate_order=(7, 0)) == [(0, "CONSOLIDATE")]   # beyond N
    # only node 1 has room for node 0's work (16 CPUs): left out of the order, it hosts
    nodes = [_node(7.0, 0), _node(6.0, 1), _node(4.0, 2, cpu_free=8.0)]
    assert _terms(nodes, consolidate_order=(0,)) == [(0, "CONSOLIDATE")]
    assert _terms(nodes) == []                                           # 1 a victim too
    # the budget: a node draining already leaves no room
    stop = NodeSpec("gpu8", Status.RAY_STOP_REQUESTED, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                    {"CPU": 32.0, "GPU": 8.0}, ray_node_id="s")
    assert _terms(NODES + [stop], consolidate_order=(1, 0)) == []


@pytest.mark.parametrize("bad", [[0, 1], (0, -1), (0, 1.0), (True,), "01"])
def test_bad_order_names_the_field(bad):
    with pytest.raises(ValueError, match="options.consolidate_order:"):
        EfficientOptions(consolidate_order=bad)

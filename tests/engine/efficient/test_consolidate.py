"""The efficient mode's opt-in consolidation (engine/efficient/consolidate.py):
which nodes it stops and which it never does, and the plans stay legal. How the cause
reaches Ray is tests/adapters/ray/test_consolidation_codec.py; the trade of restarted
work for GPU-hours on a short openb replay, tests/adapters/replay/
test_efficient_short_replays.py."""
from __future__ import annotations

import pytest

from vecsched.engine import schedule
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import Kind, Status
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.model.requests import GangSpec
from vecsched.engine.model.validate import check_plan

TYPES = [NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, max_workers=10),
         NodeTypeSpec("cpu", {"CPU": 16.0}, max_workers=10)]


def _node(gpu_free, cpu_free=16.0, t="gpu8", i=0, labels=None, idle_ms=0):
    total = {"CPU": 32.0, "GPU": 8.0} if t == "gpu8" else {"CPU": 16.0}
    avail = {"CPU": cpu_free, "GPU": gpu_free} if t == "gpu8" else {"CPU": cpu_free}
    ns = NodeSpec(t, Status.RAY_RUNNING, Kind.WORKER, total, avail, idle_ms=idle_ms,
                  ray_node_id=f"n{i}")
    ns.labels = labels
    return ns


def _plan(nodes, requests=(), gangs=(), types=TYPES, **kw):
    p = build_problem(types, nodes, list(requests), gangs=list(gangs), idle_timeout_s=60.0)
    plan = schedule(p, mode="efficient", options=EfficientOptions(**kw) if kw else None)
    assert check_plan(p, plan) == []
    return plan


def test_low_use_gpu_node_goes_when_its_work_fits_on_another():
    # node 0 uses 1 of 8 GPUs and 16 CPUs; node 1 has 4 GPUs and 16 CPUs free
    nodes = [_node(7.0, i=0), _node(4.0, i=1)]
    assert _plan(nodes, consolidate=0.25).terminations() == [(0, "CONSOLIDATE")]
    # off by default, and with 0
    assert _plan(nodes).terminations() == []
    assert _plan(nodes, consolidate=0.0).terminations() == []
    # more than the share in use: kept (2 of 8 = 0.25 is at the limit, 3 of 8 is over)
    assert _plan([_node(6.0, i=0), _node(4.0, i=1)], consolidate=0.25).terminations() \
        == [(0, "CONSOLIDATE")]
    assert _plan([_node(5.0, i=0), _node(4.0, i=1)], consolidate=0.25).terminations() == []


def test_kept_when_no_single_node_has_the_room():
    # 1 GPU and 16 CPUs in use; the other node has the GPU but not the CPUs
    assert _plan([_node(7.0, i=0), _node(4.0, cpu_free=8.0, i=1)],
                 consolidate=0.25).terminations() == []
    # spread over two nodes (7 of 8 GPUs in use: no victims) it would fit, but the raylet
    # could not be sure to: kept
    assert _plan([_node(7.0, i=0), _node(1.0, cpu_free=8.0, i=1),
                  _node(1.0, cpu_free=8.0, i=2)], consolidate=0.25).terminations() == []
    # a node without GPUs can take work that holds no GPU (a CPU-only task on a GPU node)
    assert _plan([_node(8.0, cpu_free=24.0, i=0), _node(0.0, cpu_free=16.0, t="cpu", i=1)],
                 consolidate=0.25).terminations() == [(0, "CONSOLIDATE")]


def test_never_while_anything_is_pending():
    nodes = [_node(7.0, i=0), _node(4.0, i=1)]
    assert _plan(nodes, [RequestSpec({"CPU": 1.0})], consolidate=0.25).terminations() == []
    gang = GangSpec([RequestSpec({"CPU": 1.0})] * 2)
    assert _plan(nodes, gangs=[gang], consolidate=0.25).terminations() == []


def test_never_a_placement_group_host_an_idle_node_or_below_min_workers():
    # a node hosting a bundle, as Ray's GCS reports it (bundle resources, _PG_ label)
    host = _node(7.0, i=0, labels={"_PG_abc": ""})
    host.total = dict(host.total, CPU_group_abc=4.0, CPU_group_0_abc=4.0,
                      bundle_group_abc=1000.0, bundle_group_0_abc=1000.0)
    host.available = dict(host.available, bundle_group_abc=999.999,
                          bundle_group_0_abc=999.999)
    assert _plan([host, _node(4.0, i=1)], consolidate=0.25).terminations() == []
    # idle nodes are idle termination's (not yet past the timeout here)
    idle = [_node(8.0, cpu_free=32.0, i=0, idle_ms=10_000), _node(4.0, i=1)]
    assert _plan(idle, consolidate=0.25).terminations() == []
    types = [NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, min_workers=2, max_workers=10)]
    assert _plan([_node(7.0, i=0), _node(4.0, i=1)], types=types,
                 consolidate=0.25).terminations() == []


def test_least_used_first_per_tick_limit_and_room_reserved():
    # nodes 0-2 use 2, 1 and 1 GPUs (16 CPUs each); node 3 uses 6 GPUs, no CPUs
    nodes = [_node(6.0, i=0), _node(7.0, i=1), _node(7.0, i=2), _node(2.0, cpu_free=32.0, i=3)]
    # node 3 (6 GPUs in use) is no victim at 0.5; it holds 32 CPUs: room for two victims
    assert _plan(nodes, consolidate=0.5).terminations() == [(1, "CONSOLIDATE")]
    assert _plan(nodes, consolidate=0.5, consolidate_per_tick=3, consolidate_budget=3).terminations() \
        == [(1, "CONSOLIDATE"), (2, "CONSOLIDATE")]
    # same input, same output
    a = _plan(nodes, consolidate=0.5, consolidate_per_tick=3, consolidate_budget=3)
    b = _plan(nodes, consolidate=0.5, consolidate_per_tick=3, consolidate_budget=3)
    assert a.terminations() == b.terminations()


def test_options_are_checked():
    for bad in (dict(consolidate=1.0), dict(consolidate=-0.1), dict(consolidate=float("nan")),
                dict(consolidate_per_tick=0), dict(consolidate_per_tick=True)):
        with pytest.raises(ValueError, match="options.consolidate"):
            EfficientOptions(**bad)

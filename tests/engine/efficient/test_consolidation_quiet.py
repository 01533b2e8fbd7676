"""Consolidation's cluster-wide quiet window (``consolidate_quiet_s``, ``quiet.py``):
nothing is consolidated until nothing has been pending and no node's use has risen for
that long; a rise on the tick one of the engine's own drains ended (its work
restarting) does not end the quiet."""
from __future__ import annotations

import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.quiet import QuietWindow
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import Kind, Status
from vecsched.engine.model.validate import check_plan

TYPES = [NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, max_workers=10)]
OPTS = EfficientOptions(consolidate=0.25, consolidate_quiet_s=120.0)


def _node(gpu_free, i):
    return NodeSpec("gpu8", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                    {"CPU": 16.0, "GPU": gpu_free}, ray_node_id=f"n{i}")


class Ticks:
    def __init__(self, opts=OPTS):
        self.w = QuietWindow()
        self.opts = opts

    def terms(self, nodes, now, requests=(), restarted=False):
        p = build_problem(TYPES, nodes, list(requests), idle_timeout_s=60.0)
        keys = [f"k{i}" for i in range(p.N)]
        opts = self.w.options_for(p, lambda: keys, self.opts, now, restarted=restarted)
        plan = schedule(p, mode="efficient", options=opts)
        assert check_plan(p, plan) == []
        return plan.terminations()


# node 0 uses 1 of 8 GPUs (a victim), node 1 has room for its work
QUIET = [_node(7.0, 0), _node(4.0, 1)]
ROSE = [_node(7.0, 0), _node(3.0, 1)]          # node 1 took one more GPU


def test_nothing_is_consolidated_until_the_cluster_was_quiet_long_enough():
    t = Ticks()
    assert t.terms(QUIET, 0.0) == []                       # the window starts
    assert t.terms(QUIET, 119.0) == []
    assert t.terms(QUIET, 120.0) == [(0, "CONSOLIDATE")]
    # work landed on node 1 (its use rose): the quiet starts over
    assert t.terms(ROSE, 125.0) == []
    assert t.terms(ROSE, 244.0) == []
    assert t.terms(ROSE, 245.0) == [(0, "CONSOLIDATE")]
    # use falling is quiet
    assert t.terms(QUIET, 250.0) == [(0, "CONSOLIDATE")]


def test_pending_demand_ends_the_quiet():
    t = Ticks()
    t.terms(QUIET, 0.0)
    pending = [RequestSpec({"CPU": 64.0, "GPU": 8.0}, 1)]       # fits no node: pending
    t.terms(QUIET, 100.0, requests=pending)
    assert t.terms(QUIET, 200.0) == []
    assert t.terms(QUIET, 220.0) == [(0, "CONSOLIDATE")]


def test_a_new_node_with_work_is_a_rise():
    t = Ticks()
    t.terms(QUIET, 0.0)
    assert t.terms(QUIET + [_node(6.0, 2)], 130.0) == []        # k2 appeared busy
    assert t.terms(QUIET + [_node(6.0, 2)], 250.0) == [(0, "CONSOLIDATE")]


def test_a_restart_of_the_engines_own_drain_is_not_demand():
    t = Ticks()
    t.terms(QUIET, 0.0)
    assert t.terms(ROSE, 60.0, restarted=True) == []            # still inside the window
    assert t.terms(ROSE, 120.0) == [(0, "CONSOLIDATE")]


def test_off_holds_nothing_and_remembers_nothing():
    t = Ticks(EfficientOptions(consolidate=0.25))
    assert t.terms(QUIET, 0.0) == [(0, "CONSOLIDATE")]
    assert t.w.used == {} and t.w.quiet_since is None


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), True, "60"])
def test_bad_quiet_names_the_field(bad):
    with pytest.raises(ValueError, match="options.consolidate_quiet_s:"):
        EfficientOptions(consolidate_quiet_s=bad)

"""The disruption budgets count the drains the engine itself sent for a cause other
than idleness (``drain_memory.DrainMemory``, kept across ticks by ``EngineScheduler``),
not every node being stopped: idle nodes being stopped hold no budget; drains of
unknown cause (sent before the memory began, or by someone else) still count."""
from __future__ import annotations

import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.disruption import draining
from vecsched.engine.efficient.drain_memory import DrainMemory
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
from vecsched.engine.model.dtypes import Cause, Kind, Status
from vecsched.engine.model.validate import check_plan

TYPES = [NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, max_workers=10)]
OPTS = EfficientOptions(consolidate=0.25, drain_deadline_s=60.0)


def _node(gpu_free, i, status=Status.RAY_RUNNING, idle_ms=0):
    return NodeSpec("gpu8", status, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                    {"CPU": 32.0 if gpu_free == 8.0 else 16.0, "GPU": gpu_free},
                    ray_node_id=f"n{i}", idle_ms=idle_ms)


class Ticks:
    """One DrainMemory across ticks; instance ``k`` of a tick is keyed ``ids[k]``."""

    def __init__(self, opts=OPTS):
        self.memory = DrainMemory()
        self.opts = opts

    def tick(self, nodes, ids):
        p = build_problem(TYPES, nodes, [], idle_timeout_s=60.0)
        opts = self.memory.options_for(p, lambda i: ids[i], self.opts)
        plan = schedule(p, mode="efficient", options=opts)
        assert check_plan(p, plan) == []
        self.memory.remember(p, plan, lambda i: ids[i], opts)
        return opts, [(ids[int(p.node_source[n])], c) for n, c in plan.terminations()]


# a: 1 of 8 GPUs in use (a victim); b: room for a's work; c: a second victim; z: idle
def test_an_idle_stop_holds_no_budget_a_consolidation_drain_does():
    t = Ticks()
    # tick 1: z has been idle past its timeout and is stopped; a is consolidated
    opts, terms = t.tick([_node(7.0, 0), _node(4.0, 1), _node(8.0, 2, idle_ms=120_000)],
                         ["a", "b", "z"])
    assert opts.consolidate_disrupting == 0
    assert sorted(terms) == [("a", "CONSOLIDATE"), ("z", "IDLE")]
    # tick 2: z is still stopping (RAY_STOP_REQUESTED), a is draining (RAY_STOPPING, left
    # out of the model's nodes): a holds the budget, z does not
    nodes = [_node(7.0, 0, Status.RAY_STOPPING), _node(4.0, 1),
             _node(8.0, 2, Status.RAY_STOP_REQUESTED), _node(7.0, 3)]
    opts, terms = t.tick(nodes, ["a", "b", "z", "c"])
    assert opts.consolidate_disrupting == 1 and terms == [] and t.memory.ended == 0
    # without the memory both count (the request alone does not say why)
    p = build_problem(TYPES, nodes, [], idle_timeout_s=60.0)
    assert draining(p) == 2
    # tick 3: a is gone; z still stopping: c may go now
    nodes = [_node(4.0, 1), _node(8.0, 2, Status.RAY_STOPPING), _node(7.0, 3)]
    opts, terms = t.tick(nodes, ["b", "z", "c"])
    assert opts.consolidate_disrupting == 0 and terms == [("c", "CONSOLIDATE")]
    assert t.memory.cause.keys() == {"z", "c"}
    assert t.memory.ended == 1                 # a's drain ended (z's idle stop does not count)


def test_drains_of_unknown_cause_count():
    """A fresh memory (a restarted autoscaler) counts every drain it did not see start."""
    t = Ticks()
    nodes = [_node(7.0, 0), _node(4.0, 1), _node(8.0, 2, Status.RAY_STOPPING)]
    opts, terms = t.tick(nodes, ["a", "b", "x"])
    assert opts.consolidate_disrupting == 1 and terms == []


def test_a_rejected_drain_is_forgotten():
    """An idle node whose drain was rejected (work landed: back to RAY_RUNNING) is
    forgotten; if it is stopping again later for a reason the memory did not see, it
    counts."""
    t = Ticks()
    t.tick([_node(4.0, 1), _node(8.0, 2, idle_ms=120_000)], ["b", "z"])
    assert t.memory.cause == {"z": Cause.IDLE}
    t.tick([_node(4.0, 1), _node(4.0, 2)], ["b", "z"])          # running again, busy
    assert t.memory.cause == {}
    opts, _ = t.tick([_node(4.0, 1), _node(4.0, 2, Status.RAY_STOP_REQUESTED)], ["b", "z"])
    assert opts.consolidate_disrupting == 1


def test_off_without_a_budget_in_use():
    t = Ticks(EfficientOptions())
    opts, terms = t.tick([_node(4.0, 1), _node(8.0, 2, idle_ms=120_000)], ["b", "z"])
    assert opts.consolidate_disrupting is None and t.memory.cause == {}
    assert terms == [("z", "IDLE")]


def test_the_outdated_budget_counts_the_memory_too():
    types = [NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, max_workers=20, launch_hash="v2")]

    def stale(i, status=Status.RAY_RUNNING):
        return NodeSpec("gpu8", status, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                        {"CPU": 16.0, "GPU": 6.0}, ray_node_id=f"o{i}", launch_hash="v1")
    idle_stop = NodeSpec("gpu8", Status.RAY_STOP_REQUESTED, Kind.WORKER,
                         {"CPU": 32.0, "GPU": 8.0}, {"CPU": 32.0, "GPU": 8.0},
                         ray_node_id="z", launch_hash="v2")
    p = build_problem(types, [stale(0), stale(1), idle_stop], [], idle_timeout_s=600.0,
                      disable_launch_config_check=False)
    plain = EfficientOptions(outdated_budget=1)
    assert schedule(p, mode="efficient", options=plain).terminations() == []
    # the memory says z stops for idleness: the outdated budget is free
    m = DrainMemory()
    m.cause["z"] = Cause.IDLE
    opts = m.options_for(p, lambda i: ["o0", "o1", "z"][i], plain)
    assert opts.consolidate_disrupting == 0
    assert schedule(p, mode="efficient", options=opts).terminations() == [(0, "OUTDATED")]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_bad_disrupting_names_the_field(bad):
    with pytest.raises(ValueError, match="options.consolidate_disrupting:"):
        EfficientOptions(consolidate_disrupting=bad)


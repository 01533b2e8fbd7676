"""Consolidation's safety: the drain deadline a CONSOLIDATE termination carries (how it
reaches Ray's details: tests/adapters/ray/test_consolidation_codec.py), the opt-outs
by label and worker type, the disruption budget (count, share, nodes already draining - RAY_STOP_REQUESTED nodes and
the RAY_STOPPING instances the model leaves out), and typed option errors."""
from __future__ import annotations

import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.disruption import budget, draining
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
from vecsched.engine.model.dtypes import Kind, Status
from vecsched.engine.model.validate import check_plan

TYPES = [NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, max_workers=10),
         NodeTypeSpec("gpu8b", {"CPU": 32.0, "GPU": 8.0}, max_workers=10)]


def _node(gpu_free, i, t="gpu8", labels=None, status=Status.RAY_RUNNING):
    ns = NodeSpec(t, status, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                  {"CPU": 16.0, "GPU": gpu_free}, ray_node_id=f"n{i}")
    ns.labels = labels
    return ns


def _problem(nodes):
    return build_problem(TYPES, nodes, [], idle_timeout_s=60.0)


def _plan(nodes, **kw):
    p = _problem(nodes)
    plan = schedule(p, mode="efficient", options=EfficientOptions(consolidate=0.25, **kw))
    assert check_plan(p, plan) == []
    return plan


# node 0 uses 1 of 8 GPUs (a victim); node 1 has room for its work
BASE = [_node(7.0, 0), _node(4.0, 1)]


def test_a_consolidation_carries_its_drain_deadline():
    plan = _plan(BASE, drain_deadline_s=90.0)
    assert plan.terminations() == [(0, "CONSOLIDATE")]
    assert plan.term_value.tolist() == [90_000]
    assert _plan(BASE).term_value.tolist() == [600_000]          # the default
    assert _plan(BASE, drain_deadline_s=0).term_value.tolist() == [0]


def test_opt_out_by_label_and_by_worker_type():
    label = "vecsched.io/do-not-disrupt"
    assert _plan([_node(7.0, 0, labels={label: "true"}), _node(4.0, 1)]).terminations() == []
    # any value; another label means nothing
    assert _plan([_node(7.0, 0, labels={label: ""}), _node(4.0, 1)]).terminations() == []
    assert _plan([_node(7.0, 0, labels={"keep": "true"}), _node(4.0, 1)]).terminations() \
        == [(0, "CONSOLIDATE")]
    # by worker type: node 0 (gpu8b) is left alone, the next least used goes
    nodes = [_node(7.0, 0, t="gpu8b"), _node(6.0, 1), _node(2.0, 2)]
    assert _plan(nodes).terminations() == [(0, "CONSOLIDATE")]
    assert _plan(nodes, consolidate_opt_out_types=("gpu8b",)).terminations() \
        == [(1, "CONSOLIDATE")]


def test_the_budget_counts_nodes_already_draining():
    stop_requested = _node(7.0, 9, status=Status.RAY_STOP_REQUESTED)
    assert _plan(BASE + [stop_requested]).terminations() == []
    assert _plan(BASE + [stop_requested], consolidate_budget=2).terminations() \
        == [(0, "CONSOLIDATE")]
    # a RAY_STOPPING instance (in Ray's request, left out of the nodes) counts too
    stopping = _node(7.0, 8, status=Status.RAY_STOPPING)
    p = _problem(BASE + [stopping])
    assert p.N == 2 and draining(p) == 1
    assert _plan(BASE + [stopping]).terminations() == []


def test_budget_count_and_share():
    # nodes 0-2 use 1 GPU each; node 3 has room for all of them (32 CPUs, 8 GPUs free)
    nodes = [_node(7.0, i) for i in range(3)]
    host = NodeSpec("gpu8", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 64.0, "GPU": 8.0},
                    {"CPU": 64.0, "GPU": 8.0}, ray_node_id="h")
    nodes = nodes + [host]
    many = dict(consolidate_per_tick=5)
    assert len(_plan(nodes, **many).terminations()) == 1                   # budget 1
    assert len(_plan(nodes, consolidate_budget=3, **many).terminations()) == 3
    # 25 % of 4 running nodes = 1; 50 % = 2
    assert len(_plan(nodes, consolidate_budget=3, consolidate_budget_pct=0.25,
                     **many).terminations()) == 1
    assert len(_plan(nodes, consolidate_budget=3, consolidate_budget_pct=0.5,
                     **many).terminations()) == 2
    assert budget(_problem(nodes), EfficientOptions(consolidate_budget=3,
                                                    consolidate_budget_pct=0.01)) == 1


@pytest.mark.parametrize("bad, field", [
    (dict(drain_deadline_s=-1.0), "drain_deadline_s"),
    (dict(drain_deadline_s=float("inf")), "drain_deadline_s"),
    (dict(consolidate_budget=0), "consolidate_budget"),
    (dict(consolidate_budget=1.5), "consolidate_budget"),
    (dict(consolidate_budget_pct=1.5), "consolidate_budget_pct"),
    (dict(consolidate_opt_out_types="gpu8"), "consolidate_opt_out_types"),
    (dict(outdated_budget=-1), "outdated_budget"),
    (dict(outdated_budget=True), "outdated_budget"),
    (dict(outdated_budget_pct=2.0), "outdated_budget_pct"),
])
def test_bad_options_name_the_field(bad, field):
    with pytest.raises(ValueError, match=f"options.{field}:"):
        EfficientOptions(**bad)


def test_cpu_nodes_are_consolidated_when_asked():
    types = [NodeTypeSpec("cpu16", {"CPU": 16.0}, max_workers=10),
             NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, max_workers=10)]

    def cpu(free, i):
        return NodeSpec("cpu16", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 16.0},
                        {"CPU": free}, ray_node_id=f"c{i}")
    # node 0 uses 2 of 16 CPUs, node 1 has 10 free: room for it
    nodes = [cpu(14.0, 0), cpu(10.0, 1)]
    p = build_problem(types, nodes, [], idle_timeout_s=60.0)

    def terms(**kw):
        plan = schedule(p, mode="efficient", options=EfficientOptions(**kw))
        assert check_plan(p, plan) == []
        return plan.terminations()
    assert terms(consolidate=0.25) == []                       # GPU nodes only
    assert terms(consolidate_cpu=0.25) == [(0, "CONSOLIDATE")]
    assert terms(consolidate_cpu=0.1) == []                    # 2/16 = 0.125 in use
    # GPU nodes go before CPU nodes, budget 1
    gpu = NodeSpec("gpu8", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                   {"CPU": 31.0, "GPU": 7.0}, ray_node_id="g")
    big = NodeSpec("gpu8", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                   {"CPU": 32.0, "GPU": 4.0}, ray_node_id="h")
    p = build_problem(types, nodes + [gpu, big], [], idle_timeout_s=60.0)
    assert terms(consolidate=0.25, consolidate_cpu=0.25) == [(2, "CONSOLIDATE")]
    with pytest.raises(ValueError, match="options.consolidate_cpu:"):
        EfficientOptions(consolidate_cpu=1.0)


def test_the_stability_window_holds_nodes_back_until_low_long_enough():
    from vecsched.engine.efficient.stability import StabilityWindow
    opts = EfficientOptions(consolidate=0.25, consolidate_after_s=300.0)
    w = StabilityWindow()

    def terms(nodes, keys, now):
        p = _problem(nodes)
        plan = schedule(p, mode="efficient", options=w.options_for(p, lambda: keys, opts, now))
        assert check_plan(p, plan) == []
        return plan.terminations()
    assert terms(BASE, ["a", "b"], 0.0) == []            # node a low since 0
    assert terms(BASE, ["a", "b"], 299.0) == []
    assert terms(BASE, ["a", "b"], 300.0) == [(0, "CONSOLIDATE")]
    # a new node (key c) in a's place starts its own window
    assert terms(BASE, ["c", "b"], 301.0) == []
    # busy again (3 of 8 GPUs), then low: the window starts over
    assert terms([_node(5.0, 0), _node(4.0, 1)], ["c", "b"], 400.0) == []
    assert terms(BASE, ["c", "b"], 500.0) == []
    assert terms(BASE, ["c", "b"], 800.0) == [(0, "CONSOLIDATE")]
    # off: nothing held, nothing remembered
    off = EfficientOptions(consolidate=0.25)
    p = _problem(BASE)
    assert w.options_for(p, lambda: ["c", "b"], off, 900.0) is off and w.low_since == {}
    with pytest.raises(ValueError, match="options.consolidate_after_s:"):
        EfficientOptions(consolidate_after_s=-1.0)


def test_daily_windows_on_the_injected_wall_clock():
    from vecsched.engine.efficient.options import in_windows
    from vecsched.engine.efficient.stability import StabilityWindow
    night = EfficientOptions(consolidate=0.25, consolidate_windows=(("22:00", "06:00"),))
    w = StabilityWindow()
    p = _problem(BASE)

    def terms(hh_mm: str):
        h, m = map(int, hh_mm.split(":"))
        wall_ns = (3 * 86400 + h * 3600 + m * 60) * 10**9       # a day 3, UTC
        plan = schedule(p, mode="efficient",
                        options=w.options_for(p, lambda: ["a", "b"], night, 0.0, wall_ns))
        return plan.terminations()
    assert terms("21:59") == [] and terms("06:00") == [] and terms("12:00") == []
    assert terms("22:00") == [(0, "CONSOLIDATE")] and terms("03:30") == [(0, "CONSOLIDATE")]
    # no wall clock given, or no windows: always
    assert w.options_for(p, lambda: [], night, 0.0) is night
    assert in_windows((), 0) and in_windows((("09:00", "17:00"),), 9 * 60)
    assert not in_windows((("09:00", "17:00"),), 17 * 60)
    for bad in ((("9:00", "17:00"),), (("09:00",),), ("09:00", "17:00"), (("24:00", "01:00"),)):
        with pytest.raises(ValueError, match="options.consolidate_windows:"):
            EfficientOptions(consolidate_windows=bad)


# ---- the outdated budget (per reason) ---------------------------------------------------

def _outdated_problem(n_stale: int, extra=(), idle=None):
    """``n_stale`` running nodes launched with an old config (hash v1, their type is at
    v2), each with 2 of 8 GPUs in use, plus ``extra`` nodes; launch-config check on."""
    types = [NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, max_workers=20, launch_hash="v2")]
    nodes = []
    for i in range(n_stale):
        ns = NodeSpec("gpu8", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                      {"CPU": 16.0, "GPU": 6.0}, ray_node_id=f"o{i}", launch_hash="v1",
                      idle_ms=(idle[i] if idle else 0))
        nodes.append(ns)
    nodes += list(extra)
    return build_problem(types, nodes, [], idle_timeout_s=600.0,
                         disable_launch_config_check=False)


def _terms(p, **kw):
    plan = schedule(p, mode="efficient", options=EfficientOptions(**kw))
    assert check_plan(p, plan) == []
    return plan.terminations()


def test_outdated_nodes_all_go_at_once_without_a_budget():
    p = _outdated_problem(4)
    assert _terms(p) == [(i, "OUTDATED") for i in range(4)]      # Ray's way, the default
    assert _terms(p, outdated_budget=0, outdated_budget_pct=0.0) == _terms(p)


def test_outdated_budget_count_share_and_order():
    # idle time decides who goes first (longest idle), then the lowest index
    p = _outdated_problem(4, idle=[0, 5_000, 5_000, 9_000])
    assert _terms(p, outdated_budget=1) == [(3, "OUTDATED")]
    assert _terms(p, outdated_budget=2) == [(1, "OUTDATED"), (3, "OUTDATED")]
    assert _terms(p, outdated_budget=10) == [(i, "OUTDATED") for i in range(4)]
    # 50 % of 4 running nodes = 2; the count and the share: the smaller wins
    assert len(_terms(p, outdated_budget_pct=0.5)) == 2
    assert len(_terms(p, outdated_budget=1, outdated_budget_pct=0.5)) == 1


def test_outdated_budget_counts_nodes_draining_for_any_reason():
    draining_ = NodeSpec("gpu8", Status.RAY_STOP_REQUESTED, Kind.WORKER,
                         {"CPU": 32.0, "GPU": 8.0}, {"CPU": 32.0, "GPU": 8.0},
                         ray_node_id="d", launch_hash="v2")
    p = _outdated_problem(3, extra=[draining_])
    assert _terms(p, outdated_budget=1) == []
    assert _terms(p, outdated_budget=2) == [(0, "OUTDATED")]


def test_consolidation_gets_what_the_outdated_nodes_leave():
    """Both budgets count every disruption: with two outdated nodes going, a budget of 2
    leaves consolidation nothing; a budget of 3 leaves it one."""
    victim = NodeSpec("gpu8", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                      {"CPU": 31.0, "GPU": 7.0}, ray_node_id="v", launch_hash="v2")
    host = NodeSpec("gpu8", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                    {"CPU": 32.0, "GPU": 8.0}, ray_node_id="h", launch_hash="v2")
    p = _outdated_problem(2, extra=[victim, host])
    kw = dict(consolidate=0.25, consolidate_per_tick=5, outdated_budget=2)
    assert _terms(p, consolidate_budget=2, **kw) == [(0, "OUTDATED"), (1, "OUTDATED")]
    assert _terms(p, consolidate_budget=3, **kw) == [(0, "OUTDATED"), (1, "OUTDATED"),
                                                     (2, "CONSOLIDATE")]

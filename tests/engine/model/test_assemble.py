"""The three policies (ray-compat, efficient, baseline) share one plan assembly
(vecsched.engine.model.assemble) and its termination rules."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import numpy as np
import pytest

import vecsched.engine.baseline.ffd as ffd
import vecsched.engine.efficient.tick as eff_tick
from vecsched.engine import schedule
from vecsched.engine.model import assemble
from vecsched.engine.model.assemble import Placements, Terminations, launch_order
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
from vecsched.engine.model.dtypes import CNT, CODE, IDX, Cause, Kind, Status
from vecsched.engine.model.termination import cap_victims, terminable
from vecsched.engine.model.validate import check_plan

from tests.kits.engine_cases import random_case
from tests.kits.ganggen import gang_tick

# the module, not the function vecsched.engine re-exports under the same name
ray_tick = importlib.import_module("vecsched.engine.raycompat.tick")
ENGINE = Path(ray_tick.__file__).resolve().parent.parent

POLICIES = {
    "ray-compat": (ray_tick, lambda p: schedule(p)),
    "efficient": (eff_tick, lambda p: schedule(p, mode="efficient")),
    "baseline": (ffd, ffd.schedule_baseline),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_each_policy_returns_the_shared_assembly(name, monkeypatch):
    """The plan a policy returns is the one assemble_plan made, in one call."""
    module, run = POLICIES[name]
    made = []

    def spy(p, decisions, **extra):
        plan = assemble.assemble_plan(p, decisions, **extra)
        made.append(plan)
        return plan

    monkeypatch.setattr(module, "assemble_plan", spy)
    problem = gang_tick(3, bundles=20)
    plan = run(problem)
    assert len(made) == 1 and plan is made[0]


def test_only_the_assembly_builds_a_plan():
    """No module of the engine but model/assemble.py constructs a Plan itself."""
    builders = []
    for f in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Plan":
                builders.append(str(f.relative_to(ENGINE)))
    assert builders == ["model/assemble.py"]


@pytest.mark.parametrize("seed", range(0, 60, 3))
def test_plans_of_all_policies_pass_one_validator(seed):
    for problem in (random_case(seed), gang_tick(seed, bundles=24)):
        for name, (_, run) in POLICIES.items():
            plan = run(problem)
            assert check_plan(problem, plan, allow_q1=name == "ray-compat") == [], (seed, name)
            assert plan.new_template.shape == plan.new_type.shape, (seed, name)
            assert plan.launch_order == launch_order(plan.new_type), (seed, name)


def test_placement_triples_merge_per_slot_and_run_in_slot_order():
    pl = Placements.of_triples([(5, 1, 2), (3, 0, 1), (5, 1, 3), (3, 2, 4)], n_runs=3)
    assert pl.slot.tolist() == [3, 3, 5] and pl.run.tolist() == [0, 2, 1]
    assert pl.count.tolist() == [1, 4, 5]
    assert (pl.slot.dtype, pl.run.dtype, pl.count.dtype) == (IDX, IDX, CNT)
    empty = Placements.of_triples([], n_runs=0)
    assert len(empty.slot) == 0 and empty.count.dtype == CNT


def test_terminations_keep_reply_order_and_types():
    t = Terminations.of_list([(4, Cause.IDLE, 9000), (1, Cause.OUTDATED, 0)])
    assert t.node.tolist() == [4, 1] and t.cause.tolist() == [Cause.IDLE, Cause.OUTDATED]
    assert (t.node.dtype, t.cause.dtype, t.value.dtype) == (IDX, CODE, CNT)


def test_launch_order_is_first_appearance():
    assert launch_order(np.array([2, 0, 2, 1, 0])) == (2, 0, 1)
    assert launch_order(np.zeros(0, IDX)) == ()


CPU4 = {"CPU": 4.0}
TYPES = [NodeTypeSpec("a", CPU4, max_workers=10)]


def running(idle_ms: int, **kw) -> NodeSpec:
    kw.setdefault("ray_node_id", f"r{idle_ms}")
    return NodeSpec("a", total=CPU4, available=CPU4, idle_ms=idle_ms, **kw)


def _problem():
    nodes = [running(10 ** 6, kind=Kind.HEAD), running(500), running(900),
             NodeSpec("a", status=Status.QUEUED),
             NodeSpec("a", status=Status.REQUESTED)]
    return build_problem(TYPES, nodes, [])


def test_terminable_excludes_head_and_untouchable_instances():
    assert terminable(_problem()).tolist() == [False, True, True, True, False]


def test_cap_victims_pending_then_longest_idle_then_least_used():
    p = _problem()
    cand = np.flatnonzero(terminable(p))
    assert cap_victims(p, cand, 2).tolist() == [3, 2]
    assert cap_victims(p, cand, 0).tolist() == []
    # util breaks a tie of idle time: equal idle, the less used goes first
    p2 = build_problem(TYPES, [running(5), running(5, ray_node_id="r5b")], [])
    assert cap_victims(p2, np.array([0, 1]), 1, util=np.array([0.5, 0.1])).tolist() == [1]
    assert cap_victims(p2, np.array([0, 1]), 1).tolist() == [0]

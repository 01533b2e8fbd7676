"""Consolidation's replace move (``engine/efficient/replace.py``): a low-use
node whose work no running node has room for is drained while one cheaper node that
holds its work is launched; never by its own type, never while a node boots, within the
disruption budget, and only when it saves."""
from __future__ import annotations

import numpy as np

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.replace import best_replacement
from vecsched.engine.efficient.state import State
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
from vecsched.engine.model.dtypes import Kind, Status
from vecsched.engine.model.validate import check_plan

BIG = NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, max_workers=10)
SMALL = NodeTypeSpec("gpu2", {"CPU": 8.0, "GPU": 2.0}, max_workers=10)


def _gpu8(i, gpu_free, cpu_free=28.0, status=Status.RAY_RUNNING):
    return NodeSpec("gpu8", status, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                    {"CPU": cpu_free, "GPU": gpu_free}, ray_node_id=f"n{i}")


def _plan(types, nodes, **kw):
    p = build_problem(types, nodes, [], idle_timeout_s=600.0)
    opts = dict(consolidate=0.25, consolidate_replace=True)
    opts.update(kw)
    plan = schedule(p, mode="efficient", options=EfficientOptions(**opts))
    assert check_plan(p, plan) == []
    return p, plan


def _launched(p, plan):
    return plan.launches()


def test_a_node_without_room_elsewhere_is_replaced_by_a_cheaper_type():
    # node 0 uses 1 GPU and 4 CPUs; node 1 is full: no running node has room
    nodes = [_gpu8(0, 7.0), _gpu8(1, 0.0, cpu_free=0.0)]
    p, plan = _plan([BIG, SMALL], nodes)
    assert plan.terminations() == [(0, "CONSOLIDATE")]
    assert _launched(p, plan) == {"gpu2": 1}
    assert plan.stats["consolidate_replace"] == 1
    # off by default; and the delete move, when it has room, goes first
    p, plan = _plan([BIG, SMALL], nodes, consolidate_replace=False)
    assert plan.terminations() == [] and _launched(p, plan) == {}
    p, plan = _plan([BIG, SMALL], [_gpu8(0, 7.0), _gpu8(1, 4.0)])
    assert plan.terminations() == [(0, "CONSOLIDATE")] and _launched(p, plan) == {}


def test_never_by_its_own_type_and_only_when_it_saves():
    nodes = [_gpu8(0, 7.0), _gpu8(1, 0.0, cpu_free=0.0)]
    p, plan = _plan([BIG], nodes)                        # only gpu8 to launch: churn
    assert plan.terminations() == [] and _launched(p, plan) == {}
    # the work (4 CPUs, 1 GPU) does not fit a gpu2 with 2 CPUs
    tiny = NodeTypeSpec("gpu2", {"CPU": 2.0, "GPU": 2.0}, max_workers=10)
    p, plan = _plan([BIG, tiny], nodes)
    assert plan.terminations() == [] and _launched(p, plan) == {}
    # priced so the small node costs more than the big one: no saving
    p, plan = _plan([BIG, SMALL], nodes, prices={"gpu8": 1.0, "gpu2": 2.0})
    assert plan.terminations() == [] and _launched(p, plan) == {}


def test_several_victims_onto_one_node_within_the_budget():
    # nodes 0-2 use 1 GPU / 2 CPUs each; node 3 is full; a gpu2 holds two of them
    nodes = [_gpu8(i, 7.0, cpu_free=30.0) for i in range(3)] + [_gpu8(3, 0.0, cpu_free=0.0)]
    p, plan = _plan([BIG, SMALL], nodes, consolidate_budget=3, consolidate_per_tick=3)
    assert plan.terminations() == [(0, "CONSOLIDATE"), (1, "CONSOLIDATE")]
    assert _launched(p, plan) == {"gpu2": 1}
    p, plan = _plan([BIG, SMALL], nodes)                 # budget 1: one victim
    assert plan.terminations() == [(0, "CONSOLIDATE")] and _launched(p, plan) == {"gpu2": 1}


def test_not_while_a_node_boots_nor_without_budget():
    booting = _gpu8(9, 8.0, cpu_free=32.0, status=Status.ALLOCATED)
    booting.total = booting.available = None
    nodes = [_gpu8(0, 7.0), _gpu8(1, 0.0, cpu_free=0.0), booting]
    p, plan = _plan([BIG, SMALL], nodes)
    assert [c for _, c in plan.terminations()] == [] and _launched(p, plan) == {}
    draining = _gpu8(8, 4.0, status=Status.RAY_STOP_REQUESTED)
    p, plan = _plan([BIG, SMALL], [_gpu8(0, 7.0), _gpu8(1, 0.0, cpu_free=0.0), draining])
    assert plan.terminations() == [] and _launched(p, plan) == {}


def test_best_replacement_matches_a_brute_force_search():
    """On seeded random clusters the chosen move saves as much as the best of every
    (type, first-fit packing of the victims in order) the rule allows."""
    rng = np.random.default_rng(7)
    types = [NodeTypeSpec(f"t{k}", {"CPU": float(c), "GPU": float(g)}, max_workers=5)
             for k, (c, g) in enumerate([(32, 8), (16, 4), (8, 2), (8, 1), (64, 8)])]
    for _ in range(40):
        nodes = []
        for i in range(int(rng.integers(1, 7))):
            t = types[int(rng.integers(len(types)))]
            c, g = t.resources["CPU"], t.resources["GPU"]
            nodes.append(NodeSpec(t.name, Status.RAY_RUNNING, Kind.WORKER, dict(t.resources),
                                  {"CPU": c - float(rng.integers(1, int(c) // 2 + 1)),
                                   "GPU": g - float(rng.integers(0, int(g) // 2 + 1))},
                                  ray_node_id=f"n{i}"))
        p = build_problem(types, nodes, [], idle_timeout_s=600.0)
        st = State(p)
        price = 1.0 + p.type_cap[:, p.gpu_col]
        used = np.clip(p.node_total - p.node_free, 0.0, None)
        real = np.ones(p.R, bool)
        victims = np.arange(p.N)
        t, took = best_replacement(st, price, victims, used, real, most=3)
        best = 0.0
        for u in range(p.T):
            room, got = p.type_free[u].copy(), []
            for v in victims.tolist():
                if len(got) < 3 and p.node_type[v] != u and np.all(used[v] <= room + 1e-9):
                    room -= used[v]
                    got.append(v)
            if got:
                best = max(best, float(price[p.node_type[got]].sum() - price[u]))
        saved = float(price[p.node_type[took]].sum() - price[t]) if t >= 0 else 0.0
        assert saved == best

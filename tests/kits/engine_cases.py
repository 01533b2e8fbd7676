"""Hand-made and seeded random engine problems shared by the engine's tests and bench:
small worker types, a running-node helper, a baseline plan with its legality check, and
``random_case(seed)`` (mixed node types, statuses, implicit resources, caps)."""
from __future__ import annotations

import numpy as np

from vecsched.engine.baseline.ffd import schedule_baseline
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import IMPLICIT_PREFIX, Kind, Status
from vecsched.engine.model.validate import assert_plan

CPU4 = {"CPU": 4.0, "memory": 16e9}
GPU1 = {"CPU": 8.0, "GPU": 1.0, "memory": 32e9}


def running(type_, avail=None, total=None, idle_ms=0, kind=Kind.WORKER, rid="r"):
    total = dict(total or CPU4)
    return NodeSpec(type_, Status.RAY_RUNNING, kind, total,
                    dict(total if avail is None else avail), idle_ms=idle_ms, ray_node_id=rid)


def plan_of(types, nodes, requests, **kw):
    problem = build_problem(types, nodes, requests, **kw)
    plan = schedule_baseline(problem)
    assert_plan(problem, plan)
    return problem, plan


def placed_by_slot(plan):
    out: dict[int, int] = {}
    for slot, c in zip(plan.place_slot.tolist(), plan.place_count.tolist()):
        out[slot] = out.get(slot, 0) + c
    return out


RES = ("CPU", "GPU", "memory", "TPU", IMPLICIT_PREFIX + "z")
FRACTIONS = (0.0, 0.1, 0.25, 0.3, 0.5, 1.0, 1.5, 2.0, 4.0)


def random_case(seed: int):
    rng = np.random.default_rng(seed)

    def bundle(scale: float, p_keep) -> dict[str, float]:
        out = {}
        for k, keep in zip(RES, np.broadcast_to(p_keep, len(RES))):
            if rng.random() < keep:
                out[k] = float(rng.choice(FRACTIONS)) * (scale if k != "memory" else 1e9)
        return out

    types = []
    for t in range(int(rng.integers(1, 4))):
        res = bundle(float(rng.choice([1.0, 2.0, 4.0, 8.0])), 0.6)
        lo = int(rng.integers(0, 3))
        types.append(NodeTypeSpec(f"t{t}", res, min_workers=lo, max_workers=lo + int(rng.integers(0, 6)),
                                  idle_timeout_s=None if rng.random() < 0.6 else float(rng.integers(0, 5))))
    names = [t.name for t in types] + ["ghost"]
    statuses = [Status.RAY_RUNNING] * 6 + [Status.QUEUED, Status.REQUESTED, Status.ALLOCATED,
                                           Status.RAY_INSTALLING, Status.RAY_STOP_REQUESTED,
                                           Status.TERMINATED]
    nodes = []
    for i in range(int(rng.integers(0, 12))):
        name = str(rng.choice(names))
        status = int(rng.choice(statuses))
        kind = Kind.HEAD if i == 0 and rng.random() < 0.5 else Kind.WORKER
        if status == Status.RAY_RUNNING:
            total = bundle(float(rng.choice([1.0, 4.0, 8.0])), 0.6)
            avail = {k: v * float(rng.choice([0.0, 0.5, 1.0])) for k, v in total.items()}
            nodes.append(NodeSpec(name, status, kind, total, avail,
                                  idle_ms=int(rng.integers(0, 10_000)), ray_node_id=f"n{i}"))
        else:
            nodes.append(NodeSpec(name, status, kind))
    requests = [RequestSpec(bundle(float(rng.choice([0.5, 1.0, 2.0])), (0.7, 0.2, 0.4, 0.1, 0.1)),
                            count=int(rng.integers(0, 12)))
                for _ in range(int(rng.integers(0, 8)))]
    kw = dict(max_num_nodes=None if rng.random() < 0.5 else int(rng.integers(0, 12)),
              idle_timeout_s=None if rng.random() < 0.3 else float(rng.integers(0, 8)),
              disable_launch_config_check=bool(rng.random() < 0.5))
    return build_problem(types, nodes, requests, **kw)


def type_holds_one(problem):
    """(S,) bool: some configured type holds one unit of the run (a slow twin of the fit)."""
    out = np.zeros(problem.S, dtype=bool)
    for s in range(problem.S):
        for t in np.flatnonzero(problem.type_configured):
            present = set(problem.type_order[t][problem.type_order[t] >= 0].tolist())
            ok = True
            for r in range(problem.R):
                q = problem.shape_qty[s, r]
                have = problem.type_cap[t, r]
                if problem.implicit[r] and r not in present:
                    have = 1.0
                ok &= bool(q == 0 or q <= have)
            out[s] |= ok
    return out


PLAN_ARRAYS = ("launch", "term_node", "term_cause", "term_value", "term_status", "infeasible",
               "infeasible_why", "run_order", "place_slot", "place_run", "place_count",
               "new_type", "cluster_resources")

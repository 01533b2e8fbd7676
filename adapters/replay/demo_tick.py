"""One realistic tick from the bundled openb trace, decided by the engine, the
greedy baseline and Ray 2.60's own scheduler, side by side."""
from __future__ import annotations

import statistics
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from vecsched.engine import schedule
from vecsched.engine import warmup
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import Kind, Status

from vecsched.adapters.traces import (bundled_trace, demand_shape, read_demand, read_worker_groups,
                      worker_group_specs)
from .trace import HEAD

GIB = float(2 ** 30)


@dataclass
class Tick:
    types: list
    nodes: list
    requests: list
    idle_timeout_s: float
    description: str


def _node_resources(ts: NodeTypeSpec, i: int) -> dict:
    total = dict(ts.resources)
    total["object_store_memory"] = 8 * GIB            # raylets report these two;
    total[f"node:10.{i // 65536}.{i // 256 % 256}.{i % 256}"] = 1.0   # tasks never use them
    return total


def demo_tick(seed: int = 0, n_running: int = 400, n_history: int = 3000,
              n_pending: int = 2000, trace: str = "openb") -> Tick:
    """The openb worker groups, ``n_running`` nodes filled first-fit with the
    trace's first ``n_history`` pods, and the next ``n_pending`` pods pending."""
    rng = np.random.default_rng(seed)
    demand_path, groups_path = bundled_trace(trace)
    groups = read_worker_groups(groups_path)
    types = [HEAD] + worker_group_specs(groups)
    weights = np.array([t.max_workers for t in types[1:]], float)
    picks = rng.choice(len(types) - 1, size=n_running, p=weights / weights.sum())
    picks = np.sort(picks)
    demand = read_demand(demand_path).to_pylist()
    shapes = [demand_shape(row) for row in demand[: n_history + n_pending]]

    cols = ["CPU", "memory", "GPU"]
    tot = np.array([[types[1 + t].resources.get(c, 0.0) for c in cols] for t in picks])
    free = tot.copy()
    used = np.zeros(len(picks), bool)
    for sh in shapes[:n_history]:
        q = np.array([sh.get(c, 0.0) for c in cols])
        fits = np.flatnonzero(np.all(free >= q, axis=1))
        if fits.size:
            free[fits[0]] -= q
            used[fits[0]] = True
    nodes = [NodeSpec("head", kind=Kind.HEAD, total=_node_resources(HEAD, 0),
                      available=_node_resources(HEAD, 0), ray_node_id="head")]
    for i, t in enumerate(picks):
        ts = types[1 + t]
        total = _node_resources(ts, i + 1)
        avail = dict(total)
        for j, c in enumerate(cols):
            if c in avail:
                avail[c] = float(free[i, j])
        idle = 0 if used[i] else int(rng.choice([10_000, 45_000, 120_000, 900_000]))
        nodes.append(NodeSpec(ts.name, status=Status.RAY_RUNNING, total=total, available=avail,
                              idle_ms=idle, ray_node_id=f"n{i + 1}"))
    for i in range(max(1, n_running // 50)):               # a few launches still in flight
        nodes.append(NodeSpec(types[1 + int(rng.choice(picks))].name,
                              status=int(rng.choice([Status.QUEUED, Status.REQUESTED,
                                                     Status.RAY_INSTALLING]))))
    grouped: "OrderedDict[tuple, int]" = OrderedDict()
    for sh in shapes[n_history:]:
        key = tuple(sh.items())
        grouped[key] = grouped.get(key, 0) + 1
    requests = [RequestSpec(dict(k), c) for k, c in grouped.items()]
    desc = (f"{trace}: {len(types) - 1} worker groups, {n_running} running nodes filled with "
            f"{n_history} earlier pods, {len(nodes) - n_running - 1} pending, "
            f"{n_pending} pending pods in {len(requests)} shapes")
    return Tick(types, nodes, requests, 60.0, desc)


def _median_time(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def run_demo(tick: Tick, *, repeat: int = 3, with_ray: bool = True) -> dict:
    """Decide the tick three ways; returns per scheduler its launches, terminations,
    infeasible units, GPU nodes launched and median seconds."""
    from vecsched.engine.baseline.ffd import schedule_baseline

    compile_s = warmup()
    problem = build_problem(tick.types, tick.nodes, tick.requests,
                            idle_timeout_s=tick.idle_timeout_s)
    gpu_types = {t.name for t in tick.types if t.resources.get("GPU", 0) > 0}
    results = {"compile_s": compile_s, "rows": {}}

    def row(plan_launch: dict, terms: int, infeasible: int, seconds: float):
        return {"launch": dict(plan_launch), "nodes": sum(plan_launch.values()),
                "gpu_nodes": sum(v for k, v in plan_launch.items() if k in gpu_types),
                "terminate": terms, "infeasible": infeasible, "seconds": seconds}

    plan, s = _median_time(lambda: schedule(problem), repeat)
    results["rows"]["engine"] = row(plan.launches(), len(plan.term_node),
                                    int(plan.infeasible.sum()), s)
    base, s = _median_time(lambda: schedule_baseline(problem), repeat)
    results["rows"]["baseline (FFD)"] = row(base.launches(), len(base.term_node),
                                            int(base.infeasible.sum()), s)
    if with_ray:
        from ray.autoscaler.v2.scheduler import ResourceDemandScheduler

        from vecsched.adapters.ray import EngineScheduler
        from vecsched.adapters.replay.demand_specs import scheduling_request

        def req():
            return scheduling_request(tick.types, tick.nodes, tick.requests,
                                      idle_timeout_s=tick.idle_timeout_s)
        r = req()
        eng = EngineScheduler()
        eng_reply, s_e = _median_time(lambda: eng.schedule(r), repeat)
        ray_reply, s_r = _median_time(lambda: ResourceDemandScheduler().schedule(req()),
                                      max(1, repeat // 3))
        launches = {lr.instance_type: lr.count for lr in ray_reply.to_launch}
        results["rows"]["ray 2.60"] = row(launches, len(ray_reply.to_terminate),
                                          len(ray_reply.infeasible_resource_requests), s_r)
        results["rows"]["engine via EngineScheduler"] = row(
            {lr.instance_type: lr.count for lr in eng_reply.to_launch},
            len(eng_reply.to_terminate), len(eng_reply.infeasible_resource_requests), s_e)
        results["same_as_ray"] = _same(ray_reply, eng_reply)
        results["ratio"] = s_r / s_e if s_e else float("inf")
    return results


def _same(a, b) -> bool:
    def key(rep):
        return (sorted((lr.instance_type, lr.count) for lr in rep.to_launch),
                sorted((t.instance_id, t.cause) for t in rep.to_terminate),
                sorted(r.SerializeToString(deterministic=True)
                       for r in rep.infeasible_resource_requests))
    return key(a) == key(b)

"""Inside Ray's own loop: the engine as the scheduler of Ray's real reconciler.

Ray 2.60's real `Reconciler.reconcile` drives Ray's `InstanceManager` (in-memory
storage, Ray's subscribers) against a simulated cloud behind Ray's
`ICloudInstanceProvider` and a simulated GCS (`adapters/sim/raycluster/`), once with
`EngineScheduler` and once with Ray's `ResourceDemandScheduler` as the scheduler, from
the same seed. Every scheduler reply (launches in reply order, terminations with cause
and status, infeasible requests) and the instance manager's state after every tick
must be identical. Ray draws uuid4 instance ids, so ids are compared by creation order.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace

import pytest

ray = pytest.importorskip("ray")
from ray.autoscaler.v2.instance_manager.node_provider import \
    ICloudInstanceProvider  # noqa: E402
from ray.autoscaler.v2.scheduler import ResourceDemandScheduler  # noqa: E402
from ray.core.generated.instance_manager_pb2 import (Instance,  # noqa: E402
                                                     TerminationRequest)

from vecsched.adapters.ray import EngineScheduler  # noqa: E402
from vecsched.adapters.sim.raycluster import (SimAutoscaler, SimClock, SimCloudProvider,  # noqa: E402
                                SimGcs, SimNodeType, autoscaling_config, ray_clock)

TICK_S = 5.0
SEED = 7
START_NS = 1_700_000_000 * 1_000_000_000

NODE_TYPES = {
    "head": {"resources": {"CPU": 2.0}, "max_workers": 0},
    "cpu-4": {"resources": {"CPU": 4.0}, "min_workers": 0, "max_workers": 4},
    "gpu-1": {"resources": {"CPU": 8.0, "GPU": 1.0}, "min_workers": 0, "max_workers": 2,
              "idle_timeout_s": 20.0},
}
CONFIG = dict(head_type="head", max_workers=8, idle_timeout_s=30.0, upscaling_speed=1.0)
SIM_TYPES = {
    "head": SimNodeType(),
    "cpu-4": SimNodeType(alloc_latency_s=10.0, install_latency_s=10.0, latency_jitter=0.2,
                         drain_latency_s=7.0, termination_latency_s=5.0),
    "gpu-1": SimNodeType(alloc_latency_s=20.0, install_latency_s=15.0, latency_jitter=0.2,
                         launch_failure_rate=0.3, drain_latency_s=7.0,
                         termination_latency_s=5.0),
}
BOOT_S = {"cpu-4": 3.0, "gpu-1": 6.0}   # listed but not yet running (ALLOCATED)
# tick -> [(shape, duration_s, count, cancel_after_s)]
BURST = {
    1: [({"CPU": 1.0}, 45.0, 6, None)],
    2: [({"CPU": 2.0, "GPU": 1.0}, 40.0, 2, None),
        ({"GPU": 4.0}, 0.0, 1, 20.0)],                 # infeasible; the user gives up
    4: [({"CPU": 2.0}, 30.0, 6, None)],
    8: [({"CPU": 0.5}, 20.0, 3, None)],
    10: [({"CPU": 8.0, "GPU": 1.0}, 15.0, 1, None)],
}
CHAOS = {
    "cpu-4": dict(drain_reject_rate=0.5, termination_failure_rate=0.4,
                  preemption_rate_per_h=30.0),
    "gpu-1": dict(drain_reject_rate=0.5, termination_failure_rate=0.4),
}
# name: (ticks, workload, {tick: config overrides}, {type: simulated-cloud overrides})
SCENARIOS = {
    # demand arrives, nodes launch (one launch fails), tasks run and finish, idle nodes
    # are drained and terminated.
    "burst": (34, BURST, {}, {}),
    # the same, but at tick 13 the config shrinks (cpu-4 max 4 -> 2, max_workers 8 -> 2)
    # while a cpu-4 is being allocated and busy nodes run: the allocated one is
    # terminated for MAX_NUM_NODE_PER_TYPE, running ones are stopped for MAX_NUM_NODES
    # and their tasks go back to the queue.
    "shrink": (40, BURST, {13: {"cpu-4": {"max_workers": 2}, "max_workers": 2}}, {}),
    # a flaky cloud: drains rejected (back to RAY_RUNNING), terminations failing
    # (TERMINATION_FAILED, retried), running cpu-4 instances preempted.
    "chaos": (40, BURST, {}, CHAOS),
}


def make_config(overrides: dict):
    types = {k: dict(v) for k, v in NODE_TYPES.items()}
    kw = dict(CONFIG)
    for key, val in overrides.items():
        if key in types:
            types[key].update(val)
        else:
            kw[key] = val
    return autoscaling_config(types, **kw)


STATUS = Instance.InstanceStatus.Name
CAUSE = TerminationRequest.Cause.Name


class Names:
    """Ray's random instance ids -> i0, i1, ... in creation (storage) order."""

    def __init__(self):
        self.map: dict[str, str] = {}

    def observe(self, ids) -> None:
        for i in ids:
            if i not in self.map:
                self.map[i] = f"i{len(self.map)}"

    def __call__(self, i: str) -> str:
        return self.map.get(i, f"?{i}")


def shape_key(req) -> tuple:
    return tuple(sorted(req.resources_bundle.items()))


def record_scheduler(sched, names: Names, log: list) -> None:
    """Record every reply the reconciler gets from `sched` (same object, same class)."""
    inner = sched.schedule

    def schedule(request):
        names.observe(i.im_instance.instance_id for i in request.current_instances
                      if i.im_instance is not None)
        reply = inner(request)
        log.append({
            "launch": [(lr.instance_type, lr.count) for lr in reply.to_launch],
            "terminate": [(names(t.instance_id), CAUSE(t.cause), STATUS(t.instance_status))
                          for t in reply.to_terminate],
            "infeasible": sorted(Counter(shape_key(r) for r in
                                         reply.infeasible_resource_requests).items()),
            "infeasible_gang": len(reply.infeasible_gang_resource_requests),
            "infeasible_constraints": len(reply.infeasible_cluster_resource_constraints),
            "demand": sorted((shape_key(r.request), r.count)
                             for r in request.resource_requests),
        })
        return reply

    sched.schedule = schedule


def replay(scheduler, scenario: str = "burst", *, seed: int = SEED,
           ticks: int | None = None) -> dict:
    n_ticks, script, changes, sim_overrides = SCENARIOS[scenario]
    sim_types = {k: replace(v, **sim_overrides.get(k, {})) for k, v in SIM_TYPES.items()}
    ticks = n_ticks if ticks is None else ticks
    clock = SimClock(START_NS)
    names = Names()
    replies: list = []
    ticks_log: list = []
    record_scheduler(scheduler, names, replies)
    with ray_clock(clock):
        provider = SimCloudProvider(sim_types, clock, seed, head_type="head",
                                    boot_latency_s=BOOT_S)
        gcs = SimGcs(provider, {k: v["resources"] for k, v in NODE_TYPES.items()}, clock,
                     seed=seed)
        auto = SimAutoscaler(make_config({}), scheduler, provider, gcs)
        for tick in range(ticks):
            if tick in changes:
                auto.config = make_config(changes[tick])   # Ray re-reads it every tick
            for shape, duration_s, count, cancel in script.get(tick, []):
                gcs.submit(shape, duration_s, count, cancel_after_s=cancel)
            gcs.step()
            state = auto.update_autoscaling_state()
            instances = auto.instances()
            names.observe(i.instance_id for i in instances)
            ticks_log.append({
                "tick": tick,
                "scheduler": replies[-1],
                "instances": [(names(i.instance_id), i.instance_type, STATUS(i.status))
                              for i in instances],
                "pending_requests": sorted((p.ray_node_type_name, p.count)
                                           for p in state.pending_instance_requests),
                "pending_instances": len(state.pending_instances),
                "failed_requests": len(state.failed_instance_requests),
                "infeasible": len(state.infeasible_resource_requests),
                "cluster": (len(gcs.pending), gcs.busy_nodes()),
            })
            clock.advance(TICK_S)
    assert len(replies) == ticks, "one scheduler call per reconcile tick"
    return {"ticks": ticks_log, "provider": provider, "gcs": gcs, "auto": auto}


def first_difference(a: list, b: list) -> str | None:
    for ta, tb in zip(a, b):
        if ta != tb:
            keys = [k for k in ta if ta[k] != tb[k]]
            lines = [f"tick {ta['tick']}:"]
            for k in keys:
                if k == "scheduler":
                    for kk in ta[k]:
                        if ta[k][kk] != tb[k][kk]:
                            lines.append(f"  reply.{kk}: ray={ta[k][kk]} engine={tb[k][kk]}")
                else:
                    lines.append(f"  {k}: ray={ta[k]} engine={tb[k]}")
            return "\n".join(lines)
    if len(a) != len(b):
        return f"lengths differ: ray={len(a)} engine={len(b)}"
    return None


_RUNS: dict = {}


def both(scenario: str):
    """(Ray's run, the engine's run, the EngineScheduler), replayed once per module."""
    if scenario not in _RUNS:
        t0 = time.perf_counter()
        ray_run = replay(ResourceDemandScheduler(), scenario)
        t1 = time.perf_counter()
        ids = iter(range(10**9))
        eng = EngineScheduler(new_id=lambda: f"req-{next(ids)}", now_ns=lambda: START_NS)
        eng_run = replay(eng, scenario)
        t2 = time.perf_counter()
        print(f"\n{scenario}: {len(ray_run['ticks'])} ticks of Ray's loop with Ray's "
              f"scheduler {t1 - t0:.2f}s, with EngineScheduler {t2 - t1:.2f}s")
        _RUNS[scenario] = (ray_run, eng_run, eng)
    return _RUNS[scenario]


def test_simulated_provider_is_rays_interface():
    assert issubclass(SimCloudProvider, ICloudInstanceProvider)
    assert not SimCloudProvider.__abstractmethods__


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_engine_and_ray_decide_the_same_in_rays_loop(scenario):
    ray_run, eng_run, eng = both(scenario)
    diff = first_difference(ray_run["ticks"], eng_run["ticks"])
    assert diff is None, "EngineScheduler and Ray diverge inside Ray's loop:\n" + diff
    assert eng.stats["engine_ticks"] == SCENARIOS[scenario][0]
    assert "delegated_ticks" not in eng.stats, dict(eng.stats)
    assert not eng_run["auto"].failures and not ray_run["auto"].failures
    assert eng_run["provider"].stats == ray_run["provider"].stats
    assert eng_run["gcs"].stats == ray_run["gcs"].stats


def _causes(log) -> Counter:
    return Counter(x[1] for t in log for x in t["scheduler"]["terminate"])


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_replay_scales_up_and_back_down(scenario):
    ray_run, _, _ = both(scenario)
    log, gcs = ray_run["ticks"], ray_run["gcs"]
    running = [Counter(t for _, t, s in tick["instances"] if s == "RAY_RUNNING") for tick in log]
    assert all(r["head"] == 1 for r in running)
    assert max(r["cpu-4"] + r["gpu-1"] for r in running) >= 3
    assert max(r["gpu-1"] for r in running) == 2
    assert sum(n for t in log for _, n in t["scheduler"]["launch"]) >= 5
    assert _causes(log)["IDLE"] >= 2
    final = Counter((t, s) for _, t, s in log[-1]["instances"])
    assert final[("head", "RAY_RUNNING")] == 1
    assert all(s in ("TERMINATED", "ALLOCATION_FAILED") for (t, s) in final if t != "head"), final
    assert log[-1]["cluster"] == (0, 0)                  # nothing pending, nothing running
    assert gcs.stats["tasks_done"] == 18 and gcs.stats["tasks_cancelled"] == 1
    assert ray_run["provider"].stats["launch_failures"] >= 1
    assert any(t["scheduler"]["infeasible"] for t in log)
    seen = {s for tick in log for _, _, s in tick["instances"]}
    assert {"QUEUED", "REQUESTED", "ALLOCATED", "RAY_INSTALLING", "RAY_RUNNING",
            "RAY_STOP_REQUESTED", "RAY_STOPPING", "TERMINATING", "TERMINATED",
            "ALLOCATION_FAILED"} <= seen, seen


def test_shrink_stops_running_nodes_for_the_caps():
    ray_run, _, _ = both("shrink")
    causes = _causes(ray_run["ticks"])
    assert causes["MAX_NUM_NODE_PER_TYPE"] >= 1 and causes["MAX_NUM_NODES"] >= 2, causes
    assert ray_run["gcs"].stats["stops"] >= 1          # RayStopper -> GcsClient.drain_nodes
    # the stopped busy node's tasks went back to the queue and were reported as demand
    assert any(dict(t["scheduler"]["demand"]).get((("CPU", 1.0),)) for t in
               ray_run["ticks"][14:])


def test_chaos_exercises_rays_failure_paths():
    ray_run, _, _ = both("chaos")
    assert ray_run["gcs"].stats["drains_rejected"] >= 1      # back to RAY_RUNNING
    assert ray_run["provider"].stats["termination_failures"] >= 1
    assert ray_run["provider"].stats["preemptions"] >= 1


def test_replay_is_deterministic():
    a = replay(ResourceDemandScheduler(), "chaos", ticks=25)
    b = replay(ResourceDemandScheduler(), "chaos", ticks=25)
    assert first_difference(a["ticks"], b["ticks"]) is None
    assert a["provider"].stats == b["provider"].stats

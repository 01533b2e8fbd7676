"""Ray's tick-time settings: the module-level values Ray 2.60's
scheduler reads while it schedules are read by the adapter at every tick, from
where Ray reads them, and the engine decides as Ray does under each
(adapters/ray/settings.py ``ray_settings``):

- ``ray.autoscaler.v2.scheduler.AUTOSCALER_CONSERVE_GPU_NODES`` (GPU avoidance);
- ``IMPLICIT_RESOURCE_PREFIX`` (the scheduler module's, for its pre-filter, and
  ``ray._raylet``'s, for ``_fits`` / ``_inplace_subtract``);
- ``ResourceDemandScheduler.PENDING_TERMINABLE_STATUSES`` (pending idle);
- the scheduler module's ``time.monotonic`` (pending idle clock).

Each test also shows the setting changes some decision (so it is really read).
"""
from __future__ import annotations

import pytest

pytest.importorskip("ray")
import ray._raylet  # noqa: E402
import ray.autoscaler._private.constants as ray_constants  # noqa: E402
import ray.autoscaler.v2.scheduler as rds  # noqa: E402
from ray.core.generated.instance_manager_pb2 import Instance  # noqa: E402

from vecsched.adapters.ray import EngineScheduler  # noqa: E402
from vecsched.engine import ProblemError  # noqa: E402

from tests.kits.compare import decisions, diff  # noqa: E402
from tests.kits.rayfixed import schedule_fixed  # noqa: E402
from tests.kits.raygen import make_request  # noqa: E402


def _both(seed: int, **kw):
    """(Ray's decisions, the engine's) on fresh copies of one seeded tick."""
    try:
        want = schedule_fixed(make_request(seed, **kw))
    except AssertionError:
        return None
    got = EngineScheduler(new_id=lambda: "id", now_ns=lambda: 0).schedule(make_request(seed, **kw))
    problems = diff(want, got)
    assert not problems, f"seed {seed}: " + "; ".join(problems)
    return decisions(want)


SEEDS = range(120)


@pytest.mark.slow
def test_conserve_gpu_nodes_as_the_scheduler_module_has_it(monkeypatch):
    base = {s: _both(s) for s in SEEDS}
    # Patched where Ray's scheduler reads it: GPU types are no longer avoided.
    monkeypatch.setattr(rds, "AUTOSCALER_CONSERVE_GPU_NODES", 0)
    off = {s: _both(s) for s in SEEDS}
    changed = [s for s in SEEDS if off[s] != base[s]]
    assert len(changed) >= 3, changed
    # Patched only in the constants module (where the codec used to read it):
    # Ray's scheduler holds its own name, so nothing changes for either.
    monkeypatch.setattr(rds, "AUTOSCALER_CONSERVE_GPU_NODES", 1)
    monkeypatch.setattr(ray_constants, "AUTOSCALER_CONSERVE_GPU_NODES", 0)
    for s in changed:
        assert _both(s) == base[s], s


@pytest.mark.slow
def test_implicit_resource_prefix_as_ray_reads_it(monkeypatch):
    base = {s: _both(s) for s in SEEDS}
    # "ssd" as the implicit prefix: a request for ssd now fits a node without
    # any (a missing implicit resource counts as 1.0), in Ray and the engine.
    monkeypatch.setattr(rds, "IMPLICIT_RESOURCE_PREFIX", "ssd")
    monkeypatch.setattr(ray._raylet, "IMPLICIT_RESOURCE_PREFIX", "ssd")
    patched = {s: _both(s) for s in SEEDS}
    assert sum(patched[s] != base[s] for s in SEEDS) >= 3
    # Only one of the two patched: the engine cannot model two prefixes; it says so.
    monkeypatch.setattr(ray._raylet, "IMPLICIT_RESOURCE_PREFIX", "node:__internal_implicit_resource_")
    with pytest.raises(ProblemError, match="IMPLICIT_RESOURCE_PREFIX"):
        EngineScheduler().schedule(make_request(0))


def _pending_idle_run(monkeypatch, seeds) -> list:
    """Ticks of pending-idle tracking with both schedulers' default clocks (the
    scheduler module's time.monotonic, patched here); their decisions."""
    import time as _time

    clock = {"now": 1000.0}
    monkeypatch.setattr(_time, "monotonic", lambda: clock["now"])
    out = []
    for seed in seeds:
        ray_s = rds.ResourceDemandScheduler()
        eng = EngineScheduler(new_id=lambda: "id", now_ns=lambda: 0)    # default monotonic
        for tick in range(5):
            clock["now"] = 1000.0 + 6.0 * tick
            kw = dict(max_nodes=24, full=seed % 2 == 0, pending_idle_timeout_s=10.0)
            try:
                want = schedule_fixed(make_request(seed, **kw), ray_s)
            except AssertionError:
                break
            got = eng.schedule(make_request(seed, **kw))
            problems = diff(want, got)
            assert not problems, f"seed {seed} tick {tick}: " + "; ".join(problems)
            out.append(decisions(want))
    return out


@pytest.mark.slow
def test_pending_terminable_statuses_and_clock_at_tick_time(monkeypatch):
    seeds = range(40)
    base = _pending_idle_run(monkeypatch, seeds)
    assert any(t[1] == "IDLE" and t[2] in (Instance.QUEUED, Instance.ALLOCATED,
                                            Instance.RAY_INSTALLING)
               for d in base for t in d["terminate"])
    # Only QUEUED and RAY_INSTALLING nodes are pending-terminable, RAY_INSTALLING first.
    monkeypatch.setattr(rds.ResourceDemandScheduler, "PENDING_TERMINABLE_STATUSES",
                        (Instance.RAY_INSTALLING, Instance.QUEUED))
    patched = _pending_idle_run(monkeypatch, seeds)
    assert patched != base
    assert not any(t[1] == "IDLE" and t[2] == Instance.ALLOCATED
                   for d in patched for t in d["terminate"])


def test_bad_pending_terminable_statuses_are_named(monkeypatch):
    monkeypatch.setattr(rds.ResourceDemandScheduler, "PENDING_TERMINABLE_STATUSES", ("QUEUED",))
    with pytest.raises(ProblemError, match="PENDING_TERMINABLE_STATUSES"):
        EngineScheduler().schedule(make_request(0))


def test_pending_terminable_rank_decides_who_goes(monkeypatch):
    """Two unneeded pending nodes of one type, one unneeded since a tick
    longer: the longest duration goes to the status ranked first in
    PENDING_TERMINABLE_STATUSES, and that node is terminated."""
    import time as _time

    from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
    from ray.autoscaler.v2.schema import AutoscalerInstance
    from ray.core.generated.autoscaler_pb2 import ResourceRequest, ResourceRequestByCount
    from ray.core.generated.instance_manager_pb2 import NodeKind

    def request(demand: int):
        insts = [AutoscalerInstance(im_instance=Instance(
            instance_id=f"i-{i}", instance_type="w", status=st, node_kind=NodeKind.WORKER))
            for i, st in ((1, Instance.QUEUED), (2, Instance.RAY_INSTALLING))]
        return rds.SchedulingRequest(
            node_type_configs={"w": NodeTypeConfig(name="w", min_worker_nodes=0,
                                                   max_worker_nodes=5, resources={"CPU": 4.0})},
            disable_launch_config_check=True, pending_idle_timeout_s=10.0,
            current_instances=insts,
            resource_requests=[ResourceRequestByCount(request=ResourceRequest(
                resources_bundle={"CPU": 1.0}), count=demand)] if demand else [])

    def run() -> list:
        clock = {"now": 1000.0}
        monkeypatch.setattr(_time, "monotonic", lambda: clock["now"])
        ray_s, eng = rds.ResourceDemandScheduler(), EngineScheduler()
        for now, demand in ((1000.0, 1), (1015.0, 0)):
            clock["now"] = now
            want, got = ray_s.schedule(request(demand)), eng.schedule(request(demand))
            assert not diff(want, got), diff(want, got)
        return [t[0] for t in decisions(want)["terminate"]]

    assert run() == ["i-1"]                       # QUEUED ranks first by default
    monkeypatch.setattr(rds.ResourceDemandScheduler, "PENDING_TERMINABLE_STATUSES",
                        (Instance.RAY_INSTALLING, Instance.QUEUED, Instance.ALLOCATED))
    assert run() == ["i-2"]

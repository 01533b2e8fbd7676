"""The cloud's answers in Ray's records: our twin of Ray's CloudResourceMonitor against
Ray's own, the differential suite on availability maps derived the way Ray derives
them, and EngineScheduler's availability memory and limits."""
from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

ray = pytest.importorskip("ray")
import ray.autoscaler.v2.instance_manager.subscribers.cloud_resource_monitor as crm  # noqa: E402
from ray.autoscaler.v2.scheduler import ResourceDemandScheduler  # noqa: E402
from ray.core.generated.instance_manager_pb2 import Instance, InstanceUpdateEvent  # noqa: E402

from vecsched.adapters.ray import EngineScheduler  # noqa: E402
from vecsched.adapters.ray.availability import (CloudAnswers, RayCloudMonitor,  # noqa: E402
                                                is_capacity_error)
from vecsched.adapters.ray.capacity_settings import (availability_from_env,  # noqa: E402
                                                     limits_from_env)
from vecsched.adapters.ray.checks import InstallError  # noqa: E402
from vecsched.adapters.replay.demand_specs import scheduling_request  # noqa: E402
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec  # noqa: E402
from vecsched.engine.model.dtypes import Status  # noqa: E402
from vecsched.engine.tick import AvailabilityOptions, Limits  # noqa: E402

from tests.kits.compare import diff  # noqa: E402
from tests.kits.rayfixed import schedule_fixed  # noqa: E402
from tests.kits.raygen import make_request  # noqa: E402

N_CASES = int(os.environ.get("VECSCHED_DIFF_CASES", "1200")) // 4
EPOCH = 1.75e9          # wall-clock seconds, as Ray's monitor stamps them


def _monitor_pair(rng, names, monkeypatch, n_events: int):
    """Ray's CloudResourceMonitor and ours fed the same seeded events; returns both
    and the time the maps are read at."""
    now = {"t": EPOCH}
    monkeypatch.setattr(crm.time, "time", lambda: now["t"])
    theirs, ours = crm.CloudResourceMonitor(), RayCloudMonitor()
    for _ in range(n_events):
        now["t"] += float(rng.choice([0.5, 3.0, 9.0, 40.0, 200.0]))
        name = str(rng.choice(names))
        status = Instance.ALLOCATION_TIMEOUT if rng.random() < 0.7 else Instance.RAY_RUNNING
        theirs.notify([InstanceUpdateEvent(instance_type=name, new_instance_status=status)])
        if status == Instance.ALLOCATION_TIMEOUT:
            ours.timeout(name, now["t"])
        else:
            ours.running(name)
    now["t"] += float(rng.choice([0.0, 5.0, 30.0, 700.0]))
    return theirs, ours, now["t"]


@pytest.mark.parametrize("seed", range(40))
def test_our_twin_derives_ray_monitors_maps(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    names = [f"t{i}" for i in range(4)]
    theirs, ours, t = _monitor_pair(rng, names, monkeypatch, int(rng.integers(0, 12)))
    assert ours.availabilities() == theirs.get_resource_availabilities()
    assert ours.recoverable(t) == theirs.get_recoverable_resource_availabilities()


def run_case(seed: int, monkeypatch) -> str:
    """A random tick whose availability maps are those Ray's monitor derives from a
    seeded history of allocation timeouts: most configured types below 1."""
    rng = np.random.default_rng(10_000 + seed)
    req = make_request(seed, max_nodes=30 if seed % 4 else 80)
    names = list(req.node_type_configs)
    _, ours, t = _monitor_pair(rng, names, monkeypatch, int(rng.integers(1, 10)))
    req.cloud_resource_availabilities = ours.availabilities()
    req.recoverable_resource_availabilities = ours.recoverable(t)
    eng_reply = EngineScheduler().schedule(req)
    try:
        ray_reply = schedule_fixed(req)
    except AssertionError:
        return "ray-fixed-asserts"
    problems = diff(ray_reply, eng_reply)
    assert not problems, f"seed {seed}: " + "; ".join(problems)
    below = sum(v < 1 for v in req.recoverable_resource_availabilities.values())
    return "match, recoverable below 1" if below else "match"


@pytest.mark.slow
@pytest.mark.parametrize("block", range(2))
def test_differential_with_rays_derived_availabilities(block, monkeypatch):
    outcome = Counter()
    lo, hi = block * N_CASES // 2, (block + 1) * N_CASES // 2
    for seed in range(lo, hi):
        outcome[run_case(seed, monkeypatch)] += 1
    print(f"seeds {lo}..{hi - 1}:", dict(outcome))
    assert outcome["ray-fixed-asserts"] <= 0.05 * (hi - lo), outcome
    assert outcome["match, recoverable below 1"] >= 0.3 * (hi - lo), outcome


def test_differential_with_derived_availabilities_quick(monkeypatch):
    outcome = Counter(run_case(seed, monkeypatch) for seed in range(0, 600, 15))
    assert outcome["match, recoverable below 1"] >= 10, outcome


# ---- EngineScheduler's memory ----------------------------------------------------------

from tests.kits.gpu_requests import G4, G8, PRICES, TYPES, gpu_request as _request  # noqa: E402,F401


def _launches(reply):
    return {lr.instance_type: lr.count for lr in reply.to_launch}


@pytest.mark.parametrize("mode", ["efficient", "baseline"])
def test_a_stocked_out_group_is_held_out_then_retried(mode):
    from vecsched.engine.efficient import EfficientOptions
    now = {"s": 1000.0}
    kw = dict(options=EfficientOptions(prices=PRICES)) if mode == "efficient" else {}
    s = EngineScheduler(mode=mode, now_ns=lambda: int(now["s"] * 1e9), warm=False, **kw)
    first = max(_launches(s.schedule(_request())).items(), key=lambda kv: kv[1])[0]
    other = "g4" if first == "g8" else "g8"
    failed = [(first, Instance.ALLOCATION_FAILED, 999.0, "InsufficientInstanceCapacity")]
    got = _launches(s.schedule(_request(failed)))
    assert first not in got and got.get(other, 0) > 0
    assert s.last_plan.stats["held_out"] == [first]
    # it held none when it stocked out: its learned cap is 0, so past the 180 s hold it
    # stays out (the other group takes the demand: no refusal is spent on it) ...
    now["s"] = 999.0 + 181.0
    assert first not in _launches(s.schedule(_request(failed)))
    assert s.last_plan.stats["held_out"] == [first]
    # ... until the cap is forgotten, cap_ttl_s after the refusal: asked again
    now["s"] = 999.0 + 1801.0
    assert first in _launches(s.schedule(_request(failed)))
    assert s.memory.counts["stockouts"] == 1     # each record is read once


def test_plain_launch_errors_hold_a_group_briefly_and_longer_when_repeated():
    now = {"s": 1000.0}
    s = EngineScheduler(mode="baseline", now_ns=lambda: int(now["s"] * 1e9), warm=False)
    errs = [("g8", Instance.ALLOCATION_FAILED, 990.0 + 40 * i, "launch failed: quota")
            for i in range(2)]
    s.schedule(_request(errs[:1]))
    assert s.last_plan.stats["held_out"] == ["g8"]          # 990 + 30 s
    now["s"] = 1021.0
    assert "held_out" not in (s.schedule(_request(errs[:1])) and s.last_plan.stats)
    now["s"] = 1031.0                                        # the retry failed at 1030
    s.schedule(_request(errs))
    assert s.memory.held_until("g8") == 1030.0 + 60.0       # doubled
    assert s.memory.counts == {"stockouts": 0, "launch_failures": 2, "holds": 2,
                               "interruptions": 0}


@pytest.mark.parametrize("mode", ["efficient", "baseline"])
@pytest.mark.parametrize("record", [
    ("g8", Instance.ALLOCATION_FAILED, 999.0, "InsufficientInstanceCapacity"),
    ("g8", Instance.ALLOCATED, 600.0, "")])          # a KubeRay pod Pending past 300 s
def test_a_tick_that_fails_mid_way_leaves_the_memory_and_the_answers_as_they_were(mode,
                                                                                   record):
    """The answers are read into a copy of the memory and marked read only once the
    tick succeeded: a tick that raises after the engine planned (here the id factory,
    while encoding the reply) changes neither, and the next tick reads the refusal
    once."""
    from vecsched.engine.efficient import EfficientOptions
    from vecsched.adapters.ray.capacity_settings import for_kuberay
    now = {"s": 1000.0}
    fail = {"left": 1}

    def new_id():
        if fail["left"]:
            fail["left"] -= 1
            raise RuntimeError("the id service is down")
        return f"id{fail['left']}-{now['s']}"

    kw = dict(options=EfficientOptions(prices=PRICES)) if mode == "efficient" else {}
    s = EngineScheduler(mode=mode, warm=False, now_ns=lambda: int(now["s"] * 1e9),
                        new_id=new_id, availability=for_kuberay(None), **kw)
    before = s.memory
    with pytest.raises(RuntimeError, match="id service"):
        s.schedule(_request([record], pods=16))
    assert s.memory is before and s.memory.counts == {
        "stockouts": 0, "launch_failures": 0, "holds": 0, "interruptions": 0}
    assert s.memory.unavailable(now["s"]) == frozenset() and s.last_plan is None
    got = _launches(s.schedule(_request([record], pods=16)))
    assert "g8" not in got and s.last_plan.stats["held_out"] == ["g8"]
    assert s.memory.counts["stockouts"] == 1 and s.memory.counts["holds"] == 1
    s.schedule(_request([record], pods=16))                   # read once: no second refusal
    assert s.memory.counts["stockouts"] == 1


@pytest.mark.parametrize("kw, where", [
    (dict(mode="baseline", availability={"ttl_s": 5}), "availability: expected"),
    (dict(mode="baseline", availability="false"), "availability: expected"),
    (dict(mode="efficient", options={"prices": PRICES}), "options: expected"),
    (dict(new_id="id"), "new_id: expected a callable"),
    (dict(now_ns=123), "now_ns: expected a callable")])
def test_engine_scheduler_arguments_of_the_wrong_kind_are_named(kw, where):
    """A dict of availability options was silently replaced by the defaults (a 5 s
    hold became 180 s); a dict of efficient options failed deep in the first tick."""
    with pytest.raises(ValueError, match=where):
        EngineScheduler(warm=False, **kw)


def test_ray_compat_keeps_rays_decisions_whatever_failed():
    failed = [("g8", Instance.ALLOCATION_FAILED, 999.0, "InsufficientInstanceCapacity")]
    ours = EngineScheduler(warm=False).schedule(_request(failed))
    theirs = ResourceDemandScheduler().schedule(_request(failed))
    assert not diff(theirs, ours)


def test_limits_in_every_mode_and_reported():
    for mode in ("ray-compat", "efficient", "baseline"):
        s = EngineScheduler(mode=mode, warm=False, limits=Limits(total={"GPU": 8}))
        reply = s.schedule(_request(pods=20))
        gpus = sum(G8["GPU"] * n if t == "g8" else G4["GPU"] * n
                   for t, n in _launches(reply).items())
        assert 0 < gpus <= 8, mode
        assert s.last_plan.stats["limit_blocked"] > 0, mode


def test_capacity_errors_are_told_from_other_errors():
    assert is_capacity_error("launch failed with InsufficientInstanceCapacity: ...")
    assert is_capacity_error("ZONE_RESOURCE_POOL_EXHAUSTED")
    assert is_capacity_error("simulated stock-out")
    assert not is_capacity_error("launch failed with AuthFailure")


def test_a_failed_tick_does_not_consume_the_answers():
    answers = CloudAnswers()
    req = _request([("g8", Instance.ALLOCATION_FAILED, 5.0, "stockout")])
    ev = answers.scan(req.current_instances, 10.0)
    assert len(ev) == 2 and len(answers.scan(req.current_instances, 10.0)) == 2   # + the head
    answers.commit(ev, [ai.im_instance.instance_id for ai in req.current_instances])
    assert answers.scan(req.current_instances, 10.0) == []


# ---- the environment route --------------------------------------------------------------

def test_limits_and_availability_from_the_environment(tmp_path):
    lim = limits_from_env(raw='{"total": {"GPU": 64, "cost_per_hour": 100}}',
                          prices={"g8": 8.0})
    assert lim.total == {"GPU": 64.0, "cost_per_hour": 100.0} and lim.prices == {"g8": 8.0}
    f = tmp_path / "lim.json"
    f.write_text('{"per_group": {"g8": {"GPU": 16}}}')
    assert limits_from_env(raw=str(f)).per_group == {"g8": {"GPU": 16.0}}
    assert availability_from_env(raw='{"ttl_s": 60}') == AvailabilityOptions(ttl_s=60)
    assert availability_from_env(raw="false") is False
    for bad, where in [('{"total": {"GPU": -1}}', r"limits.total\['GPU'\]"),
                       ('{"totals": {}}', "'totals' is not a key"),
                       ('{"total": [1]}', "'total' must be a JSON object")]:
        with pytest.raises(InstallError, match=where):
            limits_from_env(raw=bad)
    with pytest.raises(InstallError, match="'ttl' is not an option"):
        availability_from_env(raw='{"ttl": 3}')
    with pytest.raises(InstallError, match="availability.backoff"):
        availability_from_env(raw='{"backoff": 0.5}')


def test_settings_for_a_mode_that_ignores_them_are_refused():
    """VECSCHED_AVAILABILITY options with VECSCHED_MODE=engine (ray-compat keeps no
    memory) and VECSCHED_LIMITS with shadow (Ray's scheduler decides) were accepted and
    changed nothing."""
    with pytest.raises(InstallError, match="only VECSCHED_MODE=efficient keeps"):
        availability_from_env(raw='{"ttl_s": 60}', mode="engine")
    with pytest.raises(InstallError, match="only VECSCHED_MODE=efficient keeps"):
        availability_from_env(raw='{"ttl_s": 60}', mode="shadow")
    assert availability_from_env(raw="false", mode="engine") is False
    assert availability_from_env(raw='{"ttl_s": 60}', mode="efficient").ttl_s == 60
    with pytest.raises(InstallError, match="shadow"):
        limits_from_env(raw='{"total": {"GPU": 8}}', mode="shadow")
    assert limits_from_env(raw='{"total": {"GPU": 8}}', mode="engine").total == {"GPU": 8.0}


def test_a_pod_pending_past_the_timeout_is_a_stockout_once():
    answers = CloudAnswers(pending_stockout_s=300.0)
    req = _request([("g8", Instance.ALLOCATED, 100.0, "")])
    assert [e[0] for e in answers.scan(req.current_instances, 350.0)] == ["landed"]  # the head
    ev = answers.scan(req.current_instances, 400.0)
    assert [(e[0], e[1], e[3]) for e in ev if e[0] == "refused"] == [("refused", "g8", True)]
    answers.commit(ev, ["head", "f0"])
    assert answers.scan(req.current_instances, 900.0) == []


def test_the_kuberay_sidecar_counts_long_pending_pods_as_stockouts():
    from vecsched.adapters.ray.capacity_settings import KUBERAY_PENDING_STOCKOUT_S, for_kuberay
    assert for_kuberay(None).pending_stockout_s == KUBERAY_PENDING_STOCKOUT_S
    assert for_kuberay(False) is False
    mine = for_kuberay(AvailabilityOptions(ttl_s=60, pending_stockout_s=120))
    assert (mine.ttl_s, mine.pending_stockout_s) == (60, 120)
    s = EngineScheduler(mode="efficient", warm=False, availability=for_kuberay(None))
    assert s._answers.pending_stockout_s == KUBERAY_PENDING_STOCKOUT_S


def test_the_efficient_mode_prices_spot_interruptions_in():
    """A spot twin at 5/h beats its on-demand twin at 8/h until it is interrupted
    often: with 3 interruptions in the last hour and no node of it running it costs
    5 x (1 + 3 / 1 x 1) = 20/h and the on-demand group is chosen."""
    from ray.autoscaler.v2.schema import AutoscalerInstance
    from vecsched.engine.efficient import EfficientOptions
    types = [NodeTypeSpec("s8", G8, max_workers=10), NodeTypeSpec("g8", G8, max_workers=10),
             NodeTypeSpec("head", {"CPU": 2.0}, max_workers=0)]
    now = {"s": 5000.0}
    s = EngineScheduler(mode="efficient", warm=False, now_ns=lambda: int(now["s"] * 1e9),
                        options=EfficientOptions(prices={"s8": 5.0, "g8": 8.0, "head": 1.0}))

    def req(stopped=0):
        head = NodeSpec("head", Status.RAY_RUNNING, 1, {"CPU": 2.0}, {"CPU": 2.0},
                        ray_node_id="h")
        r = scheduling_request(types, [head], [RequestSpec({"GPU": 8.0}, 1)], ids=["head"])
        for i in range(stopped):
            im = Instance(instance_id=f"x{i}", instance_type="s8", status=Instance.RAY_STOPPED)
            for st, t in ((Instance.RAY_RUNNING, 4000.0 + i), (Instance.RAY_STOPPED, 4001.0 + i)):
                im.status_history.add(instance_status=st, timestamp_ns=int(t * 1e9))
            r.current_instances.append(AutoscalerInstance(im_instance=im))
        return r

    assert set(_launches(s.schedule(req()))) == {"s8"}
    assert set(_launches(s.schedule(req(stopped=3)))) == {"g8"}
    assert s.memory.counts["interruptions"] == 3
    now["s"] = 4000.0 + 3600.0 + 10.0                     # the window passed
    assert set(_launches(s.schedule(req()))) == {"s8"}

"""The installed autoscaler scheduler never waits on a compile: its kernels warm
up in a background thread while Ray's own scheduler decides, and the engine
takes over (with Ray's pending-node idle state) once they are loaded
(adapters/ray/autoscaler_scheduler.py, adapters/ray/warming.py)."""
from __future__ import annotations

import copy
import threading
import time

import pytest

pytest.importorskip("ray")

from vecsched.adapters.ray import install as inst  # noqa: E402
from vecsched.adapters.ray.autoscaler_scheduler import AutoscalerScheduler  # noqa: E402
from vecsched.adapters.ray.stats import read_stats  # noqa: E402
from vecsched.adapters.ray.warming import warm_all  # noqa: E402

from tests.kits.compare import decisions  # noqa: E402
from tests.kits.semantics_kit import (IDLE, QUEUED, EngineScheduler,  # noqa: E402
                            ResourceDemandScheduler, cfg, pending, request, running, terms)

A, HEAD = {"CPU": 4.0}, {"CPU": 2.0}


@pytest.fixture
def autoscaler_module():
    import ray.autoscaler.v2.autoscaler as mod
    original = mod.ResourceDemandScheduler
    yield mod
    inst.uninstall()                 # Ray's metrics class back too (test_metrics checks it)
    mod.ResourceDemandScheduler = original


@pytest.fixture
def gate(monkeypatch):
    """A warm-up that does not start its work until the test opens the gate."""
    gate, started = threading.Event(), threading.Event()

    def held():
        started.set()
        gate.wait(120)
        warm_all()
    monkeypatch.setattr(AutoscalerScheduler, "warm_up", staticmethod(held))
    gate.started = started
    yield gate
    gate.set()


def _quirk_request():
    """A tick where Ray shows quirk Q4 (a termination with an empty instance id)
    and the engine, which fixes it, decides differently: who decided shows."""
    from tests.kits.raygen import make_request
    return make_request(3, max_nodes=8)


def _by_ray(reply) -> bool:
    return any(t.instance_id == "" for t in reply.to_terminate)


def test_first_decision_is_rays_while_the_kernels_compile(gate, autoscaler_module, tmp_path):
    cls = inst.install(mode="engine", stats_path=str(tmp_path / "stats.json"))
    sched = autoscaler_module.ResourceDemandScheduler(None)     # what Autoscaler.__init__ does
    assert type(sched) is cls and gate.started.wait(60)
    req = _quirk_request()
    first = sched.schedule(copy.deepcopy(req))
    assert not sched.warmup.done()                # it answered while the warm-up was held
    assert _by_ray(first)
    assert decisions(first) == decisions(ResourceDemandScheduler().schedule(copy.deepcopy(req)))
    c = sched.counters
    assert c["warmup_ticks"] == c["ray_ticks"] == 1 and c["engine_ticks"] == 0
    s = read_stats(str(tmp_path / "stats.json"))
    assert s["warmup_ticks"] == 1 and s["warmup_s"] is None

    gate.set()
    assert sched.warmup.wait(600) and sched.warmup.ready()
    second = sched.schedule(copy.deepcopy(req))
    assert not _by_ray(second)                    # the engine's own decisions now
    assert decisions(second) == decisions(EngineScheduler().schedule(copy.deepcopy(req)))
    assert c["engine_ticks"] == 1 and c["warmup_ticks"] == 1 and c["engine_errors"] == 0
    s = read_stats(str(tmp_path / "stats.json"))
    assert s["engine_ticks"] == 1 and s["warmup_s"] > 0 and s["warmup_error"] is None


def test_shadow_mode_compares_only_after_the_warm_up(gate, autoscaler_module):
    inst.install(mode="shadow")
    sched = autoscaler_module.ResourceDemandScheduler(None)
    assert gate.started.wait(60)
    req = _quirk_request()
    assert _by_ray(sched.schedule(copy.deepcopy(req)))
    assert sched.counters["shadow_ticks"] == 0 and sched.counters["warmup_ticks"] == 1
    gate.set()
    assert sched.warmup.wait(600)
    assert _by_ray(sched.schedule(copy.deepcopy(req)))           # Ray acts in shadow mode
    assert sched.counters["shadow_ticks"] == sched.counters["shadow_diff_ticks"] == 1


def test_a_failed_warm_up_leaves_ray_deciding(monkeypatch, autoscaler_module, caplog):
    def broken():
        raise RuntimeError("injected warm-up failure")
    monkeypatch.setattr(AutoscalerScheduler, "warm_up", staticmethod(broken))
    inst.install(mode="engine")
    with caplog.at_level("ERROR"):
        sched = autoscaler_module.ResourceDemandScheduler(None)
        assert sched.warmup.wait(60) and not sched.warmup.ready()
    assert "warm-up failed" in caplog.text
    req = _quirk_request()
    for _ in range(2):
        assert _by_ray(sched.schedule(copy.deepcopy(req)))
    assert sched.counters["warmup_ticks"] == 2 and sched.counters["engine_ticks"] == 0
    assert "injected" in sched.stats_snapshot()["warmup_error"]


@pytest.fixture
def clock(monkeypatch):
    now = {"t": 1000.0}
    monkeypatch.setattr(time, "monotonic", lambda: now["t"])
    return now


def _pending_tick(sched, clock, t):
    clock["t"] = t
    types = [cfg("head", HEAD, mx=1), cfg("a", A)]
    head = running("h", "head", HEAD, {"CPU": 0.0}, head=True)
    return terms(sched.schedule(request(types, [head, pending("q", "a", QUEUED)],
                                        pending_idle_timeout_s=10.0)))


def test_pending_idle_state_passes_from_ray_to_the_engine(gate, autoscaler_module, clock):
    inst.install(mode="engine")
    sched = autoscaler_module.ResourceDemandScheduler(None)
    assert gate.started.wait(60)
    assert _pending_tick(sched, clock, 1000.0) == []              # Ray: q unneeded since 1000
    gate.set()
    assert sched.warmup.wait(600)
    # The engine decides this one, from Ray's timestamps: q has been unneeded 12 s > 10 s
    # (starting afresh it would be 0 s and q would stay).
    assert _pending_tick(sched, clock, 1012.0) == [("q", IDLE, QUEUED)]
    assert sched.counters["engine_ticks"] == 1 and sched.counters["warmup_ticks"] == 1


def test_pending_idle_state_passes_from_the_engine_to_ray(monkeypatch, autoscaler_module,
                                                        clock):
    inst.install(mode="engine")
    sched = autoscaler_module.ResourceDemandScheduler(None)
    assert sched.warmup.wait(600)
    assert _pending_tick(sched, clock, 1000.0) == []              # the engine
    assert sched.counters["engine_ticks"] == 1

    def boom(self, request):
        raise RuntimeError("injected")
    monkeypatch.setattr(EngineScheduler, "schedule", boom)
    assert _pending_tick(sched, clock, 1012.0) == [("q", IDLE, QUEUED)]    # Ray, from 1000
    assert sched.counters["engine_errors"] == 1 and sched.counters["ray_ticks"] == 1


def test_with_limits_ray_launches_nothing_while_the_kernels_compile(gate, autoscaler_module,
                                                                     monkeypatch):
    """Ray's scheduler knows no limits: on the ticks it decides (the warm-up) its
    launches are held back, so a limit is never exceeded; the engine then launches
    within the limit."""
    from tests.kits.gpu_requests import gpu_request
    monkeypatch.setenv("VECSCHED_LIMITS", '{"total": {"GPU": 8}}')
    inst.install(mode="engine")
    sched = autoscaler_module.ResourceDemandScheduler(None)
    assert gate.started.wait(60)
    assert ResourceDemandScheduler().schedule(gpu_request(pods=20)).to_launch   # Ray would
    assert not sched.schedule(gpu_request(pods=20)).to_launch
    assert sched.counters["limit_held_ray_launches"] > 0
    gate.set()
    assert sched.warmup.wait(600)
    launched = sched.schedule(gpu_request(pods=20)).to_launch
    assert launched and sched.last_plan.stats["limits"]["GPU"]["asked"] <= 8

"""The replay's scheduler interface (adapters/replay/interface.py): declared, not probed;
each scheduler built once per replay, on the replay's clock; wrappers forward every
member."""
from __future__ import annotations

import pytest

from vecsched.adapters.replay import ForwardingScheduler, Replay, ReplayConfig, Window, load, make

pytest.importorskip("ray.autoscaler.v2.scheduler", reason="the engine runs through Ray's protobuf")

TINY = Window(start=None, pods=60, arrival_scale=200.0)


def test_a_scheduler_must_be_a_replay_scheduler():
    class Duck:
        name = "duck"

        def decide(self, state):
            raise AssertionError("never called")
    with pytest.raises(TypeError, match="ReplayScheduler.*Duck"):
        Replay(load(None, None, TINY), Duck())


def _counting(monkeypatch, module, name: str) -> list:
    """Count the constructions of ``module.name`` (a class) from now on."""
    built: list = []
    cls = getattr(module, name)

    class Counted(cls):
        def __init__(self, *args, **kwargs):
            built.append(self)
            super().__init__(*args, **kwargs)
    monkeypatch.setattr(module, name, Counted)
    return built


@pytest.mark.parametrize("name, check_ray", [("engine", True), ("efficient", False),
                                             ("ray", False)])
def test_each_scheduler_is_built_once_per_replay_on_its_clock(monkeypatch, name, check_ray):
    import ray.autoscaler.v2.scheduler as ray_scheduler

    import vecsched.adapters.ray.scheduler as engine_scheduler
    engines = _counting(monkeypatch, engine_scheduler, "EngineScheduler")
    rays = _counting(monkeypatch, ray_scheduler, "ResourceDemandScheduler")
    sched = make(name, check_ray=check_ray)
    assert not engines and not rays                     # nothing built before start
    rep = Replay(load(None, None, TINY), sched, ReplayConfig(seed=0))
    rep.begin()
    for k in range(40):
        rep.tick(k)
    assert sched.clock is rep.clock
    assert len(engines) == (name != "ray") and len(rays) == (check_ray or name == "ray")
    if check_ray:                               # the check dates its examples on that clock
        assert sched.check.now_s == 39 * rep.cfg.tick_s


def test_a_wrapper_forwards_the_drain_deadline_and_the_clock():
    inner = make("efficient-consolidate")
    rep = Replay(load(None, None, TINY), ForwardingScheduler(inner), ReplayConfig(seed=0))
    assert inner.drain_deadline_s > 0
    assert rep.provider.deadline_ns == int(inner.drain_deadline_s * 1e9)
    assert rep.scheduler.clock is inner.clock is rep.clock
    assert make("baseline").drain_deadline_s == make("engine").drain_deadline_s == 0.0


def test_a_tick_state_with_the_clouds_answers_pickles_and_comes_back_equal():
    # asv's setup_cache pickles recorded ticks; Ray's protobuf classes name a module
    # (src.ray.protobuf...) that cannot be imported, so the answers must travel as bytes
    import pickle
    states = []

    class Recorder(ForwardingScheduler):
        def decide(self, state):
            states.append(state)
            return self.inner.decide(state)
    Replay(load(None, None, TINY), Recorder(make("engine")), ReplayConfig(seed=0)).run()
    with_answers = [s for s in states if s.answers]
    assert with_answers, "the window should stop nodes, so some ticks carry answers"
    for s in with_answers:
        back = pickle.loads(pickle.dumps(s))
        assert [a.im_instance for a in back.answers] == [a.im_instance for a in s.answers]
        assert [a.cloud_instance_id for a in back.answers] == \
            [a.cloud_instance_id for a in s.answers]
        assert back.requests == s.requests and back.ids == s.ids

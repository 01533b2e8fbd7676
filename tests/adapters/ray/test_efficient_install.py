"""``VECSCHED_MODE=efficient``: the installed scheduler in the efficient mode, its options
from ``VECSCHED_EFFICIENT_OPTIONS`` (adapters/ray/efficient_settings.py), and every
mistake in them refused before anything is installed."""
from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray")

from vecsched.adapters.ray import install as inst  # noqa: E402
from vecsched.adapters.ray.efficient_settings import (ENV_OPTIONS, efficient_options,  # noqa: E402
                                                      settable_fields)
from vecsched.engine.efficient import EfficientOptions  # noqa: E402

OPTS = {"prices": {"cpu2": 1.0, "gpu1": 4.5}, "consolidate": 0.25, "drain_deadline_s": 60,
        "consolidate_after_s": 300, "consolidate_windows": [["22:00", "06:00"]],
        "consolidate_opt_out_types": ["gpu1"], "tick_budget_s": 0.25}


@pytest.fixture
def clean_install(monkeypatch):
    import ray.autoscaler.v2.autoscaler as mod
    from ray._private import services
    original, start = mod.ResourceDemandScheduler, services.start_ray_process
    monkeypatch.delenv(ENV_OPTIONS, raising=False)
    yield mod
    inst.uninstall()
    mod.ResourceDemandScheduler = original
    services.start_ray_process = start


def test_inline_json_and_file_give_the_same_options(tmp_path):
    inline = efficient_options("efficient", json.dumps(OPTS))
    path = tmp_path / "opts.json"
    path.write_text(json.dumps(OPTS))
    from_file = efficient_options("efficient", str(path))
    for got in (inline, from_file):
        assert isinstance(got, EfficientOptions)
        assert got.prices == {"cpu2": 1.0, "gpu1": 4.5} and got.consolidate == 0.25
        assert got.drain_deadline_s == 60 and got.consolidate_after_s == 300
        assert got.consolidate_windows == (("22:00", "06:00"),)
        assert got.consolidate_opt_out_types == ("gpu1",)
        assert got.tick_budget_s == 0.25 and callable(got.clock)   # the guard's clock
    assert efficient_options("efficient", "") is None              # unset: the defaults
    assert "clock" not in settable_fields() and "consolidate_hold" not in settable_fields()


@pytest.mark.parametrize("raw, field", [
    ('{"consolidate": 2}', "options.consolidate"),
    ('{"fast": true}', "'fast' is not an option"),
    ('{"clock": 1}', "'clock' is not an option"),
    ('{"consolidate_windows": "22:00-06:00"}', "'consolidate_windows' must be a JSON list"),
    ('{"consolidate_windows": [["25:00", "06:00"]]}', "options.consolidate_windows"),
    ('{"prices": [1, 2]}', "'prices' must be an object"),
    ('{"prices": {"cpu2": -1}}', "options.prices['cpu2']"),
    ('{"tick_budget_s": 0}', "options.tick_budget_s"),
    ('{"consolidate": ', "is not JSON"),
    ("[1, 2]", "cannot read"),                      # not starting with {: a file path
    ("/nonexistent/opts.json", "cannot read file '/nonexistent/opts.json'"),
])
def test_bad_options_are_refused_naming_the_field(raw, field):
    with pytest.raises(inst.InstallError) as e:
        efficient_options("efficient", raw)
    assert ENV_OPTIONS in str(e.value) and field in str(e.value)
    assert "nothing was installed" in str(e.value)


def test_a_file_holding_a_list_is_refused(tmp_path):
    path = tmp_path / "opts.json"
    path.write_text("[1, 2]")
    with pytest.raises(inst.InstallError, match="must be a JSON object of options, got list"):
        efficient_options("efficient", str(path))


def test_options_for_another_mode_refuse_install_and_change_nothing(monkeypatch, clean_install):
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler

    monkeypatch.setenv(ENV_OPTIONS, '{"consolidate": 0.25}')
    with pytest.raises(inst.InstallError, match="only VECSCHED_MODE=efficient takes options"):
        inst.install(mode="engine")
    monkeypatch.setenv(ENV_OPTIONS, '{"consolidate": 7}')
    with pytest.raises(inst.InstallError, match="options.consolidate"):
        inst.install(mode="efficient")
    monkeypatch.setenv("RAY_enable_autoscaler_v2", "1")
    monkeypatch.setenv(inst.ENV_MODE, "efficient")
    with pytest.raises(inst.InstallError, match="options.consolidate"):
        inst.ray_start_hook(None, True)               # `ray start` fails, nothing started
    assert clean_install.ResourceDemandScheduler is ResourceDemandScheduler
    assert inst.installed() is None


def test_installed_efficient_scheduler_plans_as_the_efficient_mode(monkeypatch, tmp_path,
                                                                   clean_install):
    from tests.kits.raygen import make_request
    from vecsched.adapters.ray import EngineScheduler
    from vecsched.adapters.ray.compare import decisions
    from vecsched.adapters.ray.install import read_stats

    opts = {"prices": {"cpu2": 1.0, "gpu1": 4.5}, "consolidate": 0.25}
    monkeypatch.setenv(ENV_OPTIONS, json.dumps(opts))
    stats = tmp_path / "stats.json"
    cls = inst.install(mode="efficient", stats_path=str(stats))
    sched = clean_install.ResourceDemandScheduler(None)      # what Autoscaler.__init__ does
    assert type(sched) is cls and sched.engine_mode == "efficient"
    assert sched._options == efficient_options("efficient", json.dumps(opts))
    assert sched.warmup._fn.keywords == {"efficient": True}     # its kernels warm too
    assert sched.warmup.wait(600)
    direct = EngineScheduler(None, warm=False, mode="efficient",
                             options=efficient_options("efficient", json.dumps(opts)))
    differs = 0
    for seed in range(12):
        req = make_request(seed, max_nodes=8)
        import copy
        got = sched.schedule(copy.deepcopy(req))
        assert sched.last_plan.stats["scheduler"] == "efficient"
        want = direct.schedule(copy.deepcopy(req))
        assert decisions(got) == decisions(want), f"seed {seed}"
        from ray.autoscaler.v2.scheduler import ResourceDemandScheduler
        differs += decisions(got) != decisions(ResourceDemandScheduler().schedule(
            copy.deepcopy(req)))
    s = read_stats(str(stats))
    assert s["mode"] == "efficient" and s["engine_ticks"] == 12 and s["engine_errors"] == 0
    assert differs > 0           # the efficient mode chooses for cost, not as Ray does

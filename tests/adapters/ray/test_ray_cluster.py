"""End to end: EngineScheduler inside a real local Ray 2.60 cluster (autoscaler v2).

Each test starts its own cluster (tests/kits/ray_local_cluster.py): `ray start --head
--block` on a GCS port of its own, Ray's fake multi-node provider (provider `type:
external`; the wheel lacks the fake provider's example.yaml), worker types ``cpu2 {CPU:
2}`` and ``gpu1 {CPU: 1, GPU: 1}`` (logical GPUs), and stops only the processes it
started (never `ray stop`, which would stop every Ray cluster on the machine).

* ``test_engine_via_ray_start_hook``: ``RAY_START_HOOK`` makes `ray start` run vecsched's
  monitor; a STRICT_SPREAD placement group of two ``{CPU: 2}`` bundles (num_cpus tasks in
  it) and a ``num_gpus=1`` task scale the cluster to exactly 2 x cpu2 + 1 x gpu1, then
  idle scale-down returns it to zero workers; every schedule() call is the engine's.
* ``test_shadow_via_vecsched_monitor``: the head starts without a monitor and
  ``vecsched-monitor`` (the KubeRay-style entry point) is started after it, in shadow
  mode: Ray's scheduler decides, the engine runs on every tick and must agree.

Both are marked ``cluster``: skip them locally with ``-m "not cluster"``; CI runs them.
``VECSCHED_CLUSTER_REPORT=1`` prints each phase's time and the peak memory. The other
tests here are fast, in-process checks of ``adapters/ray/install.py`` (version guard,
hook, fallback, shadow mode).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
import psutil  # noqa: E402  (Ray vendors psutil and puts it on sys.path)

from vecsched.adapters.ray import install as inst  # noqa: E402
from vecsched.adapters.ray.install import HOOK, read_stats  # noqa: E402

from tests.kits.ray_local_cluster import (BIN, PY, REPORT, TICK_S, NodeBook,  # noqa: E402,F401
                                         cluster_factory, free_ports, gpu_task, on_node)


@pytest.mark.cluster
def test_engine_via_ray_start_hook(cluster_factory):
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    c = cluster_factory("hook", via="hook", mode="engine")
    with c.phase("head + autoscaler up"):
        c.start()
    mpid = c.monitor_pid()
    assert mpid is not None, "no monitor.py among the cluster's processes"
    cmdline = subprocess.list2cmdline(psutil.Process(mpid).cmdline())
    assert "adapters/monitor.py" in cmdline
    assert "monitor.py" in cmdline          # how `ray stop` recognises the monitor
    assert "--autoscaling-config=" in cmdline and f"--logs-dir={c.logs_dir}" in cmdline
    assert "will schedule with EngineScheduler" in c.head_log.read_text()
    assert c.stats()["pid"] == mpid

    with c.phase("driver connect"):
        ray.init(address=c.gcs_address, logging_level="warning", log_to_driver=False)
    with c.phase("scale-up (PG + GPU task)"):
        pg = placement_group([{"CPU": 2}, {"CPU": 2}], strategy="STRICT_SPREAD")
        gpu_ref = gpu_task.remote()
        assert pg.wait(150), f"placement group not placed; {c.stats()}"
        pg_refs = [on_node.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            pg, placement_group_bundle_index=i)).remote(i) for i in range(2)]
        pg_out = ray.get(pg_refs, timeout=60)
        gpu_node, gpu_ids = ray.get(gpu_ref, timeout=150)
    book = NodeBook().update()
    types = book.types
    assert sorted(i for i, _ in pg_out) == [0, 1]
    pg_nodes = [n for _, n in pg_out]
    assert len(set(pg_nodes)) == 2, f"STRICT_SPREAD bundles shared a node: {pg_nodes}"
    assert all(types[n] == "cpu2" for n in pg_nodes), types
    assert types[gpu_node] == "gpu1" and len(gpu_ids) == 1, (types, gpu_ids)

    with c.phase("idle scale-down to zero"):
        remove_placement_group(pg)
        def scaled_down():
            book.update()                  # note every node the GCS shows on the way down
            return not c.workers() and not c.status().pending_nodes
        c.wait(scaled_down, 120, "idle scale-down to zero workers")
        c.wait(lambda: (c.stats() or {}).get("terminated", {}).get("IDLE", 0) >= 3, 30,
               "the stats file to show the idle terminations")
    book.update()
    ray.shutdown()
    time.sleep(2 * TICK_S)             # a couple of ticks on the empty cluster
    s = c.stats()

    assert book.launched() == ["cpu2", "cpu2", "gpu1"], book.types
    assert not any(book.alive.values()), book.alive
    # Every schedule() call of this autoscaler went through EngineScheduler; only ticks
    # before its kernels were loaded (Ray decides those, the warm-up is in the background)
    # are not the engine's.
    assert s["pid"] == mpid and s["schedulers_built"] == 1
    assert "vecsched.adapters.ray.scheduler.EngineScheduler" in s["scheduler_mro"]
    assert s["mode"] == "engine" and s["warmup_error"] is None
    assert s["ticks"] > 0 and s["engine_ticks"] + s["warmup_ticks"] == s["ticks"], s
    assert s["engine_ticks"] > 0 and s["warmup_s"] is not None, s
    assert s["engine_errors"] == 0 and s["ray_ticks"] == s["warmup_ticks"], s
    assert s["launched"] == {"cpu2": 2, "gpu1": 1}, s
    assert s["terminated"] == {"IDLE": 3}, s
    log = "\n".join(p.read_text(errors="replace") for p in c.logs_dir.glob("monitor.log*"))
    assert "schedules with EngineScheduler (mode engine" in log
    assert "decided by engine" in log
    assert "EngineScheduler failed" not in log and "vecsched: cannot write" not in log
    if REPORT:
        print(f"\n[hook] {s['ticks']} ticks, all by EngineScheduler; engine "
              f"{s['engine_s_total'] * 1e3:.1f} ms in all, max {s['engine_s_max'] * 1e3:.1f} ms"
              f"; warm-up {s['warmup_s']:.2f} s", file=sys.stderr)


@pytest.mark.cluster
def test_shadow_via_vecsched_monitor(cluster_factory):
    c = cluster_factory("shadow", via="monitor", mode="shadow")
    with c.phase("head, then vecsched-monitor up"):
        c.start()
    assert c.stats()["pid"] == c.monitor.pid

    with c.phase("driver connect"):
        ray.init(address=c.gcs_address, logging_level="warning", log_to_driver=False)
    with c.phase("scale-up (one num_cpus=2 task)"):
        i, node = ray.get(on_node.remote(7), timeout=150)
    book = NodeBook().update()
    assert i == 7 and book.types[node] == "cpu2", book.types
    with c.phase("idle scale-down to zero"):
        c.wait(lambda: not c.workers() and not c.status().pending_nodes, 120,
               "idle scale-down to zero workers")
        c.wait(lambda: (c.stats() or {}).get("terminated", {}).get("IDLE", 0) >= 1, 30,
               "the stats file to show the idle termination")
    book.update()
    ray.shutdown()
    s = c.stats()
    assert book.launched() == ["cpu2"] and not any(book.alive.values()), book.types
    assert s["mode"] == "shadow" and s["schedulers_built"] == 1
    assert s["ticks"] > 0 and s["ray_ticks"] == s["ticks"], s
    assert s["shadow_ticks"] + s["warmup_ticks"] == s["ticks"] and s["shadow_ticks"] > 0, s
    assert s["engine_ticks"] == 0 and s["shadow_errors"] == 0, s
    assert s["shadow_diff_ticks"] == 0, s["last_diff"]
    assert s["launched"] == {"cpu2": 1} and s["terminated"] == {"IDLE": 1}, s


@pytest.mark.cluster
def test_efficient_mode_via_ray_start_hook(cluster_factory):
    """``VECSCHED_MODE=efficient`` with options in ``VECSCHED_EFFICIENT_OPTIONS``: the
    installed scheduler decides in the efficient mode (the stats say so, no tick fell
    back to Ray after the warm-up), a CPU task and a GPU task get a node of the right
    type each, and the idle nodes are stopped again."""
    opts = {"prices": {"cpu2": 1.0, "gpu1": 4.5}, "consolidate": 0.25, "drain_deadline_s": 30}
    c = cluster_factory("eff", via="hook", mode="efficient",
                        extra_env={"VECSCHED_EFFICIENT_OPTIONS": json.dumps(opts)})
    with c.phase("head + autoscaler up"):
        c.start()
    assert "will schedule with EngineScheduler (mode efficient)" in c.head_log.read_text()
    with c.phase("driver connect"):
        ray.init(address=c.gcs_address, logging_level="warning", log_to_driver=False)
    with c.phase("scale-up (a num_cpus=2 task and a GPU task)"):
        cpu_ref, gpu_ref = on_node.remote(3), gpu_task.remote()
        i, cpu_node = ray.get(cpu_ref, timeout=150)
        gpu_node, gpu_ids = ray.get(gpu_ref, timeout=150)
    book = NodeBook().update()
    assert i == 3 and book.types[cpu_node] == "cpu2", book.types
    assert book.types[gpu_node] == "gpu1" and len(gpu_ids) == 1, book.types
    with c.phase("idle scale-down to zero"):
        c.wait(lambda: not c.workers() and not c.status().pending_nodes, 120,
               "idle scale-down to zero workers")
        c.wait(lambda: (c.stats() or {}).get("terminated", {}).get("IDLE", 0) >= 2, 30,
               "the stats file to show the idle terminations")
    book.update()
    ray.shutdown()
    s = c.stats()
    assert book.launched() == ["cpu2", "gpu1"] and not any(book.alive.values()), book.types
    assert s["mode"] == "efficient" and s["schedulers_built"] == 1
    assert s["engine_ticks"] > 0 and s["engine_errors"] == 0, s
    assert s["engine_ticks"] + s["warmup_ticks"] == s["ticks"], s
    assert s["launched"] == {"cpu2": 1, "gpu1": 1} and s["terminated"] == {"IDLE": 2}, s
    log = "\n".join(p.read_text(errors="replace") for p in c.logs_dir.glob("monitor.log*"))
    assert "schedules with EngineScheduler (mode efficient" in log
    assert "EngineScheduler failed" not in log


@pytest.mark.cluster
def test_hook_refuses_without_autoscaler_v2_and_starts_nothing(tmp_path):
    """The guard runs inside `ray start`, before any Ray process exists."""
    d = Path(tempfile.mkdtemp(prefix="vsoff_", dir="/tmp"))
    port, = free_ports(1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "VECSCHED_"))}
    env.update(RAY_START_HOOK=HOOK, RAY_USAGE_STATS_ENABLED="0")
    try:
        r = subprocess.run([str(BIN / "ray"), "start", "--head", "--block", f"--port={port}",
                            f"--temp-dir={d / 'ray'}", "--num-cpus=0",
                            "--include-dashboard=false", "--disable-usage-stats"],
                           env=env, capture_output=True, text=True, timeout=120)
        out = r.stdout + r.stderr
        assert r.returncode != 0, out
        assert "autoscaler v2 only" in out and "RAY_enable_autoscaler_v2=1" in out, out
        assert not (d / "ray").exists() or not any((d / "ray").glob("session_*")), \
            "ray start created a session although the hook refused"
        stray = [p.pid for p in psutil.process_iter(["cmdline"])
                 if str(d) in " ".join(p.info["cmdline"] or ())]
        assert not stray, stray
    finally:
        for p in psutil.process_iter(["cmdline"]):     # nothing should match; be safe
            try:
                if str(d) in " ".join(p.info["cmdline"] or ()):
                    p.kill()
            except psutil.Error:
                pass
        shutil.rmtree(d, ignore_errors=True)


# -------------------------------------------------------- fast, in-process install checks


def _request(seed):
    from tests.kits.raygen import make_request
    return make_request(seed, max_nodes=8)


def _ray_reply(request):
    import copy
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler
    return ResourceDemandScheduler().schedule(copy.deepcopy(request))


@pytest.fixture
def clean_install():
    import ray.autoscaler.v2.autoscaler as mod
    from ray._private import services
    original, start = mod.ResourceDemandScheduler, services.start_ray_process
    yield mod
    inst.uninstall()                 # Ray's metrics class back too (test_metrics checks it)
    mod.ResourceDemandScheduler = original
    services.start_ray_process = start


def test_untested_ray_version_refuses_and_changes_nothing(monkeypatch, clean_install, capsys):
    from ray._private import services
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler

    monkeypatch.setattr(ray, "__version__", "2.61.0")
    monkeypatch.delenv(inst.ENV_UNTESTED_RAY, raising=False)
    monkeypatch.setenv("RAY_enable_autoscaler_v2", "1")
    before = services.start_ray_process
    with pytest.raises(inst.InstallError, match=r"tested with Ray 2\.60\.0 only.*Ray 2\.61\.0"):
        inst.install()
    with pytest.raises(inst.InstallError, match="nothing was changed"):
        inst.ray_start_hook(None, True)
    assert clean_install.ResourceDemandScheduler is ResourceDemandScheduler
    assert services.start_ray_process is before and inst.installed() is None

    from vecsched.adapters import monitor
    with pytest.raises(SystemExit) as e:
        monitor.main(["--gcs-address=127.0.0.1:1", "--logs-dir=/nonexistent"])
    assert e.value.code == 2
    assert "vecsched-monitor: vecsched's EngineScheduler is tested with Ray" in \
        capsys.readouterr().err
    assert clean_install.ResourceDemandScheduler is ResourceDemandScheduler

    monkeypatch.setenv(inst.ENV_UNTESTED_RAY, "ray")           # fall back, loudly
    assert inst.install() is None
    assert clean_install.ResourceDemandScheduler is ResourceDemandScheduler


def test_hook_rewrites_only_the_v2_monitor_command(monkeypatch, clean_install):
    from ray._private import ray_constants, services

    seen = []
    monkeypatch.setattr(services, "start_ray_process",
                        lambda command, process_type, *a, **k: seen.append(command))
    monkeypatch.delenv(inst.ENV_MODE, raising=False)
    monkeypatch.delenv("RAY_enable_autoscaler_v2", raising=False)
    monkeypatch.delenv("RAY_USAGE_STATS_KUBERAY_IN_USE", raising=False)
    with pytest.raises(inst.InstallError, match="RAY_enable_autoscaler_v2=1"):
        inst.ray_start_hook(None, True)
    inst.ray_start_hook(None, False)                 # a worker node: nothing to do
    monkeypatch.setenv("RAY_enable_autoscaler_v2", "1")
    inst.ray_start_hook(None, True)
    inst.ray_start_hook(None, True)                  # idempotent: wrapped once
    v2 = os.path.join(services.RAY_PATH, services.AUTOSCALER_V2_DIR, "monitor.py")
    v1 = os.path.join(services.RAY_PATH, services.AUTOSCALER_PRIVATE_DIR, "monitor.py")
    args = ["--logs-dir=/x", "--gcs-address=1.2.3.4:5"]
    services.start_ray_process([PY, "-u", v2, *args], ray_constants.PROCESS_TYPE_MONITOR)
    services.start_ray_process([PY, "-u", v1, *args], ray_constants.PROCESS_TYPE_MONITOR)
    services.start_ray_process([PY, "-u", v2], ray_constants.PROCESS_TYPE_DASHBOARD)
    assert seen == [[PY, "-u", inst.MONITOR_SCRIPT, *args], [PY, "-u", v1, *args],
                    [PY, "-u", v2]]
    assert os.path.basename(inst.MONITOR_SCRIPT) == "monitor.py"


def test_installed_scheduler_decides_counts_and_writes_stats(tmp_path, clean_install):
    from tests.kits.compare import diff
    from vecsched.adapters.ray import EngineScheduler

    stats = tmp_path / "stats.json"
    cls = inst.install(mode="engine", stats_path=str(stats))
    assert inst.installed() is cls and issubclass(cls, EngineScheduler)
    sched = clean_install.ResourceDemandScheduler(None)     # what Autoscaler.__init__ does
    assert type(sched) is cls
    assert sched.warmup.wait(600) and sched.warmup_s is not None    # (background warm-up)
    req = _request(4)
    reply = sched.schedule(req)
    assert diff(_ray_reply(req), reply) == []
    s = read_stats(str(stats))
    assert s["ticks"] == s["engine_ticks"] == 1 and s["engine_errors"] == s["ray_ticks"] == 0
    assert s["launched"] == _count_launches(reply)
    inst.uninstall()
    assert inst.installed() is None


def _count_launches(reply):
    from collections import Counter
    c = Counter()
    for lr in reply.to_launch:
        c[lr.instance_type] += lr.count
    return dict(c)


def test_engine_error_falls_back_to_ray_for_that_tick(monkeypatch, clean_install, caplog):
    from tests.kits.compare import diff
    from vecsched.adapters.ray.scheduler import EngineScheduler

    cls = inst.install(mode="engine")
    sched = cls(None)
    assert sched.warmup.wait(600)

    def boom(self, request):
        raise RuntimeError("injected")
    monkeypatch.setattr(EngineScheduler, "schedule", boom)
    req = _request(4)
    with caplog.at_level("ERROR", logger=inst.AutoscalerScheduler.__module__):
        reply = sched.schedule(req)
    assert diff(_ray_reply(req), reply) == []
    assert sched.counters["engine_errors"] == 1 and sched.counters["ray_ticks"] == 1
    assert "Ray's ResourceDemandScheduler decides this tick instead" in caplog.text


def test_shadow_mode_acts_on_ray_and_reports_differences(clean_install, caplog):
    from tests.kits.compare import decisions

    cls = inst.install(mode="shadow")
    sched = cls(None)
    assert sched.warmup.wait(600)
    same = _request(4)                     # engine == Ray
    assert decisions(sched.schedule(same)) == decisions(_ray_reply(same))
    assert sched.counters["shadow_diff_ticks"] == 0 and sched.counters["shadow_ticks"] == 1
    quirk = _request(3)                    # Ray shows Q4; the engine differs on purpose
    with caplog.at_level("WARNING", logger=inst.AutoscalerScheduler.__module__):
        reply = sched.schedule(quirk)
    assert decisions(reply) == decisions(_ray_reply(quirk))   # Ray's reply is the one acted on
    assert any(t.instance_id == "" for t in reply.to_terminate)
    c = sched.counters
    assert c["shadow_diff_ticks"] == c["shadow_known_divergence_ticks"] == 1
    assert c["ray_ticks"] == c["shadow_ticks"] == 2 and c["engine_ticks"] == 0
    assert "tick 2, the engine differs from Ray" in caplog.text and "Q4" in caplog.text


def test_mode_ray_installs_nothing_and_bad_mode_refuses(monkeypatch, clean_install):
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler

    assert inst.install(mode="ray") is None
    assert clean_install.ResourceDemandScheduler is ResourceDemandScheduler
    monkeypatch.setenv(inst.ENV_MODE, "fast")
    with pytest.raises(inst.InstallError, match="not one of engine, efficient, shadow, ray"):
        inst.install()
    assert clean_install.ResourceDemandScheduler is ResourceDemandScheduler

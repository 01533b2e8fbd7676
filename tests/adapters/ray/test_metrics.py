"""The installed scheduler's Prometheus metrics (adapters/ray/metrics.py), in process:
scraped from a fresh CollectorRegistry, and from the registry Ray's monitor builds
(AutoscalerPrometheusMetrics) once install() has run. The live-cluster scrape is in
test_metrics_cluster.py."""
from __future__ import annotations

import copy
import time
import urllib.request
from collections import Counter

import pytest

ray = pytest.importorskip("ray")
prometheus_client = pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from vecsched.adapters import metrics as m  # noqa: E402
from vecsched.adapters.ray import install as inst  # noqa: E402
from vecsched.adapters.ray import metrics as rm  # noqa: E402
from vecsched.adapters.ray.decisions import WHY_CODES, count_decisions  # noqa: E402
from vecsched.adapters.ray.stats import TickHistogram  # noqa: E402


def _request(seed):
    from tests.kits.raygen import make_request
    return make_request(seed, max_nodes=8)


@pytest.fixture
def installed(monkeypatch):
    """install() in this process, undone after (scheduler and Ray's metrics class)."""
    import ray.autoscaler.v2.autoscaler as mod
    from ray.autoscaler._private import prom_metrics

    original, ray_metrics = mod.ResourceDemandScheduler, prom_metrics.AutoscalerPrometheusMetrics
    monkeypatch.delenv(m.ENV_PORT, raising=False)

    def make(mode="engine", warm=True):
        inst.install(mode=mode)
        sched = mod.ResourceDemandScheduler(None)        # what Autoscaler.__init__ does
        if warm:
            assert sched.warmup.wait(600)
        return sched
    yield make
    inst.uninstall()
    mod.ResourceDemandScheduler = original
    assert prom_metrics.AutoscalerPrometheusMetrics is ray_metrics


def _scrape(sched) -> dict:
    """{(sample name, frozenset(labels)): value} from a fresh registry."""
    reg = prometheus_client.CollectorRegistry()
    reg.register(rm.SchedulerCollector(lambda: sched))
    return _parse(m.scrape(reg))


def _parse(text: str) -> dict:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _get(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def _sum(samples, name, **labels):
    return sum(v for (n, ls), v in samples.items()
               if n == name and all((k, w) in ls for k, w in labels.items()))


def test_tick_histogram_buckets_are_prometheus_buckets():
    h = TickHistogram((0.01, 0.1, 1.0))
    for s in (0.005, 0.01, 0.05, 0.5, 3.0, 7.0):
        h.observe(s)
    assert h.counts == [2, 1, 1, 2] and h.n == 6     # le 0.01 holds 0.01 itself
    assert h.total_s == pytest.approx(10.565)
    assert m.histogram_buckets(h.bounds, h.counts) == [
        ("0.01", 2), ("0.1", 3), ("1.0", 4), ("+Inf", 6)]
    with pytest.raises(ValueError, match="bounds"):
        TickHistogram((0.1, 0.1))
    with pytest.raises(m.MetricsError, match="counts"):
        m.histogram_buckets((1.0,), [1])


def test_engine_ticks_are_timed_and_their_decisions_counted(installed):
    sched = installed("engine")
    before = _scrape(sched)
    assert _get(before, "vecsched_ticks_total", decided_by="engine") == 0
    assert _get(before, "vecsched_tick_seconds_count", scheduler="engine") == 0
    assert _get(before, "vecsched_engine_ready") == 1
    assert _get(before, "vecsched_scheduler_info", mode="engine",
                ray_version=ray.__version__) == 1

    expected = Counter()
    for seed in (14, 0, 14):        # launches, terminations, infeasible of every kind
        req = _request(seed)
        reply = sched.schedule(req)
        expected.update(count_decisions(reply, sched.last_plan))
        last = reply
    s = _scrape(sched)
    assert _get(s, "vecsched_ticks_total", decided_by="engine") == 3
    assert _get(s, "vecsched_ticks_total", decided_by="ray") == 0
    assert _get(s, "vecsched_tick_seconds_count", scheduler="engine") == 3
    assert _get(s, "vecsched_tick_seconds_count", scheduler="ray") == 0
    assert _get(s, "vecsched_tick_seconds_bucket", scheduler="engine", le="+Inf") == 3
    assert _get(s, "vecsched_tick_seconds_sum", scheduler="engine") == pytest.approx(
        sched.times["engine_s_total"])
    for (kind, cause, node_type), n in expected.items():
        assert _get(s, "vecsched_decisions_total", kind=kind, cause=cause,
                    node_type=node_type) == n
    # What follows from the replies themselves, not from the counting code:
    launched = sum(lr.count for seed in (14, 0, 14)
                   for lr in _ray_reply(_request(seed)).to_launch)
    assert _sum(s, "vecsched_decisions_total", kind="launch") == launched
    assert _get(s, "vecsched_decisions_total", kind="infeasible",
                cause="CLUSTER_RESOURCE_CONSTRAINT", node_type="") == 2   # seed 14 twice
    causes = {dict(ls)["cause"] for (n, ls) in s if n == "vecsched_decisions_total"
              and dict(ls)["kind"] == "infeasible"}
    assert causes <= set(WHY_CODES.values()) | {"CLUSTER_RESOURCE_CONSTRAINT"}
    assert "UNKNOWN" not in causes
    n_inf = (len(last.infeasible_resource_requests) + len(last.infeasible_gang_resource_requests)
             + len(last.infeasible_cluster_resource_constraints))
    assert _sum(s, "vecsched_infeasible_requests") == n_inf
    assert {dict(ls)["reason"]: v for (n, ls), v in s.items()
            if n == "vecsched_ray_decided_ticks_total"} == {
        "warmup": 0, "engine_error": 0, "shadow": 0}


def _ray_reply(request):
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler
    return ResourceDemandScheduler().schedule(copy.deepcopy(request))


def test_terminations_are_counted_by_their_cause(installed):
    sched = installed("engine")
    seen = Counter()
    for seed in (0, 2, 7, 23):
        reply = sched.schedule(_request(seed))
        seen.update((ray_cause(t), t.instance_type) for t in reply.to_terminate)
    s = _scrape(sched)
    assert {"IDLE", "OUTDATED", "MAX_NUM_NODES", "MAX_NUM_NODE_PER_TYPE"} <= {
        c for c, _ in seen}
    for (cause, node_type), n in seen.items():
        assert _get(s, "vecsched_decisions_total", kind="terminate", cause=cause,
                    node_type=node_type) == n


def ray_cause(tr):
    from ray.core.generated.instance_manager_pb2 import TerminationRequest
    return TerminationRequest.Cause.Name(tr.cause)


def test_ticks_ray_decided_are_counted_by_reason(installed, monkeypatch):
    from vecsched.adapters.ray.autoscaler_scheduler import AutoscalerScheduler
    from vecsched.adapters.ray.scheduler import EngineScheduler

    # warm-up not finished: Ray decides, infeasible causes are not known
    gate = __import__("threading").Event()
    monkeypatch.setattr(AutoscalerScheduler, "warm_up", staticmethod(lambda: gate.wait(60)))
    sched = installed("engine", warm=False)
    sched.schedule(_request(14))
    s = _scrape(sched)
    assert _get(s, "vecsched_engine_ready") == 0
    assert _get(s, "vecsched_ray_decided_ticks_total", reason="warmup") == 1
    assert _get(s, "vecsched_ticks_total", decided_by="ray") == 1
    assert _get(s, "vecsched_tick_seconds_count", scheduler="ray") == 1
    assert _get(s, "vecsched_warmup_seconds") is None
    unknown = _get(s, "vecsched_infeasible_requests", cause="UNKNOWN")
    assert unknown is not None and unknown > 0
    gate.set()
    assert sched.warmup.wait(600)

    # the engine raises: Ray decides that tick
    def boom(self, request):
        raise RuntimeError("injected")
    monkeypatch.setattr(EngineScheduler, "schedule", boom)
    sched.schedule(_request(4))
    monkeypatch.undo()
    sched.schedule(_request(4))
    s = _scrape(sched)
    assert _get(s, "vecsched_engine_ready") == 1 and _get(s, "vecsched_warmup_seconds") >= 0
    assert _get(s, "vecsched_ray_decided_ticks_total", reason="engine_error") == 1
    assert _get(s, "vecsched_engine_errors_total") == 1
    assert _get(s, "vecsched_ticks_total", decided_by="engine") == 1
    assert _get(s, "vecsched_ticks_total", decided_by="ray") == 2


def test_shadow_mode_counts_ray_ticks_and_differences(installed):
    sched = installed("shadow")
    sched.schedule(_request(4))          # engine == Ray
    sched.schedule(_request(3))          # a documented divergence (Q4)
    s = _scrape(sched)
    assert _get(s, "vecsched_ray_decided_ticks_total", reason="shadow") == 2
    assert _get(s, "vecsched_ticks_total", decided_by="engine") == 0
    assert _get(s, "vecsched_tick_seconds_count", scheduler="ray") == 2
    assert _get(s, "vecsched_tick_seconds_count", scheduler="engine") == 2   # shadow pass
    assert _get(s, "vecsched_shadow_diff_ticks_total", documented="yes") == 1
    assert _get(s, "vecsched_shadow_diff_ticks_total", documented="no") == 0
    assert _get(s, "vecsched_shadow_errors_total") == 0


def test_metrics_are_in_the_registry_ray_monitor_serves(installed):
    """install() makes every AutoscalerPrometheusMetrics Ray's monitor builds carry our
    collectors, so they are served on AUTOSCALER_METRIC_PORT beside Ray's own."""
    from ray.autoscaler._private import prom_metrics

    sched = installed("engine")
    ray_metrics = prom_metrics.AutoscalerPrometheusMetrics(session_name="s1")
    ray_metrics.started_nodes.inc(2)                   # one of Ray's own
    sched.schedule(_request(14))
    s = _parse(m.scrape(ray_metrics.registry))
    assert _get(s, "autoscaler_started_nodes_total", SessionName="s1") == 2
    assert _get(s, "vecsched_ticks_total", decided_by="engine") == 1
    inst.uninstall()
    plain = prom_metrics.AutoscalerPrometheusMetrics(session_name="s2")
    assert "vecsched_" not in m.scrape(plain.registry)


def test_standalone_port_serves_the_same_metrics(installed, monkeypatch):
    monkeypatch.setenv(m.ENV_PORT, "0")
    sched = installed("engine")
    sched.schedule(_request(14))
    port = rm._served["port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        s = _parse(r.read().decode())
    assert _get(s, "vecsched_ticks_total", decided_by="engine") == 1
    assert _sum(s, "vecsched_decisions_total", kind="launch") > 0


def test_bad_metrics_port_refuses_to_install_and_names_the_variable(monkeypatch):
    import ray.autoscaler.v2.autoscaler as mod
    original = mod.ResourceDemandScheduler
    for bad in ("http", "70000", "-1"):
        monkeypatch.setenv(m.ENV_PORT, bad)
        with pytest.raises(inst.InstallError, match=m.ENV_PORT):
            inst.install(mode="engine")
        assert mod.ResourceDemandScheduler is original


def test_a_scrape_during_ticks_sees_consistent_counts(installed):
    """The collector reads from the HTTP server's thread while ticks run."""
    import threading

    sched = installed("engine")
    stop, errors, seen = threading.Event(), [], []

    def scrape():
        while not stop.is_set():
            try:
                s = _scrape(sched)
                seen.append((_get(s, "vecsched_ticks_total", decided_by="engine"),
                             _get(s, "vecsched_tick_seconds_count", scheduler="engine")))
            except Exception as e:                       # pragma: no cover - a failure
                errors.append(e)
            time.sleep(0.001)
    t = threading.Thread(target=scrape)
    t.start()
    for seed in range(12):
        sched.schedule(_request(seed))
    stop.set()
    t.join()
    assert not errors and seen
    assert all(ticks <= count for ticks, count in seen)   # a tick is timed before counted
    assert _get(_scrape(sched), "vecsched_ticks_total", decided_by="engine") == 12


def test_without_prometheus_client_nothing_is_exported_and_install_works(
        installed, monkeypatch, caplog):
    """As Ray's monitor does without prometheus_client: a warning, no metrics, the
    scheduler itself unchanged (it keeps its own counts for the stats file)."""
    from ray.autoscaler._private import prom_metrics

    monkeypatch.setattr(m, "prometheus_client", None)
    ray_class = prom_metrics.AutoscalerPrometheusMetrics
    with caplog.at_level("WARNING", logger=rm.__name__):
        sched = installed("engine")
    assert "prometheus_client not found" in caplog.text
    assert prom_metrics.AutoscalerPrometheusMetrics is ray_class     # not hooked
    assert not m.available()
    with pytest.raises(m.MetricsError, match="prometheus_client is not installed"):
        rm.SchedulerCollector(lambda: sched).collect()
    sched.schedule(_request(14))
    assert sched.metrics_view()["engine_ticks"] == 1


def test_a_collector_added_later_reaches_every_registry(installed, monkeypatch):
    """The side-car's ledger collector is added after install(): it must reach the
    registry Ray already built, the stand-alone one, and any Ray builds later."""
    from ray.autoscaler._private import prom_metrics

    from vecsched.adapters.kuberay.sidecar import Ledger
    from vecsched.adapters.metrics_kuberay import LedgerCollector

    monkeypatch.setenv(m.ENV_PORT, "0")
    sched = installed("engine")          # (kept alive: the collector holds a weak reference)
    before = prom_metrics.AutoscalerPrometheusMetrics(session_name="before")
    rm.add_collector(LedgerCollector(Ledger(None)))
    after = prom_metrics.AutoscalerPrometheusMetrics(session_name="after")
    with urllib.request.urlopen(f"http://127.0.0.1:{rm._served['port']}/metrics",
                                timeout=10) as r:
        served = r.read().decode()
    for text in (m.scrape(before.registry), m.scrape(after.registry), served):
        s = _parse(text)
        assert _get(s, "vecsched_kuberay_patches_total") == 0
        assert _get(s, "vecsched_ticks_total", decided_by="engine") == 0
    assert sched.counters["ticks"] == 0


def test_limit_headroom_gauge_from_vecsched_limits(installed, monkeypatch):
    """VECSCHED_LIMITS reaches the installed scheduler; the headroom of each limit and
    the demand it held back are exported."""
    from tests.kits.gpu_requests import gpu_request
    monkeypatch.setenv("VECSCHED_LIMITS", '{"total": {"GPU": 8}, '
                                          '"per_group": {"g4": {"CPU": 64}}}')
    sched = installed()
    sched.schedule(gpu_request(pods=20))
    got = _scrape(sched)
    assert _get(got, "vecsched_limit", limit="GPU") == 8.0
    assert _get(got, "vecsched_limit_headroom", limit="GPU") == 0.0
    assert _get(got, "vecsched_limit", limit="g4/CPU") == 64.0
    assert _get(got, "vecsched_infeasible_requests", cause="LIMIT") > 0

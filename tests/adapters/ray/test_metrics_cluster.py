"""vecsched's metrics scraped from a live local Ray 2.60 autoscaler (marked ``cluster``).

The cluster is test_ray_cluster.py's (``ray start --head`` with ``RAY_START_HOOK``, Ray's
fake multi-node provider); its monitor is started by Ray with ``--monitor-ip``, so Ray
serves its ``AutoscalerPrometheusMetrics`` registry on ``AUTOSCALER_METRIC_PORT`` (a free
port of this test's, passed on through ``ray start``'s environment) and advertises the
address in the GCS. The test reads that address from the GCS, scrapes it over HTTP, and
checks what follows from what happened: the tick counter and the tick histogram grow,
the one node a ``num_cpus=2`` task needs is counted as one ``cpu2`` launch and, once idle,
one ``IDLE`` termination (as the stats file says), Ray's own
``autoscaler_*`` metrics come from the same port.
"""
from __future__ import annotations

import time
import urllib.request

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from tests.kits.ray_local_cluster import cluster_factory, free_ports, on_node  # noqa: E402,F401


def _scrape(addr: str) -> dict:
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _sum(samples, name, **labels):
    return sum(v for (n, ls), v in samples.items()
               if n == name and all((k, w) in ls for k, w in labels.items()))


def _ticks(s):
    return _sum(s, "vecsched_ticks_total")


@pytest.mark.cluster
def test_metrics_scraped_from_a_live_ray_autoscaler(cluster_factory, monkeypatch):
    from ray._raylet import GcsClient

    port, = free_ports(1)
    monkeypatch.setenv("AUTOSCALER_METRIC_PORT", str(port))
    monkeypatch.delenv("VECSCHED_METRICS_PORT", raising=False)
    # a token in ~/.ray (another cluster's) would switch token auth on for some of the
    # processes and not others; this cluster and its driver run without (as LocalKubeRay)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    c = cluster_factory("metrics", via="hook", mode="engine")
    with c.phase("head + autoscaler up"):
        c.start()
    addr = GcsClient(address=c.gcs_address).internal_kv_get(
        b"AutoscalerMetricsAddress", None).decode()
    assert addr.endswith(f":{port}"), addr

    box = {}

    def scraped():
        box["s"] = _scrape(addr)
        return _ticks(box["s"]) > 0
    c.wait(scraped, 60, "vecsched's metrics on Ray's autoscaler metrics port")
    s0 = box["s"]
    assert _sum(s0, "vecsched_scheduler_info", mode="engine") == 1
    assert any(n.startswith("autoscaler_") for n, _ in s0), "Ray's own metrics missing"
    assert _sum(s0, "vecsched_decisions_total", kind="launch") == 0

    with c.phase("scale-up (one num_cpus=2 task)"):
        ray.init(address=c.gcs_address, logging_level="warning", log_to_driver=False)
        i, _node = ray.get(on_node.remote(3), timeout=150)
    assert i == 3

    def launched():
        box["s"] = _scrape(addr)
        return _sum(box["s"], "vecsched_decisions_total", kind="launch") >= 1
    c.wait(launched, 30, "the launch to be counted")
    c.wait(lambda: _sum(_scrape(addr), "vecsched_engine_ready") == 1, 120,
           "the engine's warm-up")
    ray.shutdown()

    def idle_terminated():                             # idle timeout 12 s
        box["s"] = _scrape(addr)
        return _sum(box["s"], "vecsched_decisions_total", kind="terminate") >= 1
    with c.phase("idle scale-down"):
        c.wait(idle_terminated, 90, "the idle termination to be counted")
    time.sleep(3)                                      # a few more ticks
    s1 = _scrape(addr)
    stats = c.stats()

    assert _sum(s1, "vecsched_decisions_total", kind="launch", node_type="cpu2") == 1
    assert _sum(s1, "vecsched_decisions_total", kind="launch") == 1
    assert stats["launched"] == {"cpu2": 1}, stats
    assert _sum(s1, "vecsched_decisions_total", kind="terminate", cause="IDLE",
                node_type="cpu2") == 1
    assert _sum(s1, "vecsched_decisions_total", kind="terminate") == 1
    assert stats["terminated"] == {"IDLE": 1}, stats
    ticks0, ticks1 = _ticks(s0), _ticks(s1)
    assert ticks1 > ticks0
    passes = _sum(s1, "vecsched_tick_seconds_count")  # one pass per tick in engine mode
    assert ticks1 <= passes <= ticks1 + 1
    assert _sum(s1, "vecsched_tick_seconds_bucket", le="+Inf") == passes
    assert _sum(s1, "vecsched_tick_seconds_count", scheduler="engine") > 0
    assert _sum(s1, "vecsched_ticks_total", decided_by="engine") > 0
    assert _sum(s1, "vecsched_ray_decided_ticks_total", reason="engine_error") == 0
    # the warm-up was over seconds before s1: its ticks are final, as in the stats file
    assert _sum(s1, "vecsched_ray_decided_ticks_total", reason="warmup") == \
        stats["warmup_ticks"]
    assert ticks1 <= stats["ticks"]

"""The KubeRay side-car's metrics, scraped live (marked ``cluster``, about 1 min).

The side-car (``vecsched-monitor kuberay-autoscaler``: Ray 2.60's own side-car with the
engine installed) runs against the Kubernetes API stand-in, as in test_kuberay_e2e.py;
Ray's monitor inside it serves its registry on ``AUTOSCALER_METRIC_PORT`` (a free port
of this test's) and advertises it in the GCS. Demand scales the ``cpu`` group up, then a
GitOps writer puts ``replicas`` back: the scrape must show the scheduler's launches and
the side-car's patches, ownership conflict, findings and stale reads exactly as the
side-car's own ledger file records them.
"""
from __future__ import annotations

import os
import sys
import urllib.request

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from vecsched.adapters.sim.kube import scenario  # noqa: E402
from vecsched.adapters.sim.kube.local_cluster import LocalKubeRay, free_ports  # noqa: E402

TIMEOUT = 120


class MeteredKubeRay(LocalKubeRay):
    """The stand-in cluster, its side-car serving metrics on a port of its own."""

    def __init__(self, *a, metric_port: int, **kw):
        super().__init__(*a, **kw)
        self.metric_port = metric_port

    def _base_env(self) -> dict:
        env = super()._base_env()
        env["AUTOSCALER_METRIC_PORT"] = str(self.metric_port)
        return env


def _scrape(addr: str) -> dict:
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _sum(samples, name, **labels):
    return sum(v for (n, ls), v in samples.items()
               if n == name and all((k, w) in ls for k, w in labels.items()))


def _kinds(entries) -> dict:
    out: dict = {}
    for e in entries:
        out[e["kind"]] = out.get(e["kind"], 0) + 1
    return out


@pytest.mark.cluster
def test_sidecar_metrics_match_its_ledger():
    from ray._raylet import GcsClient
    from ray.util.placement_group import placement_group, remove_placement_group

    from vecsched.engine import warmup
    warmup()                          # fills the numba cache the side-car loads
    port, = free_ports(1)
    kr = MeteredKubeRay(scenario.demo_cluster(), mode="engine", ray_check=False,
                        metric_port=port)
    try:
        kr.start(timeout=300)
        addr = GcsClient(address=kr.gcs_address).internal_kv_get(
            b"AutoscalerMetricsAddress", None).decode()
        assert addr.endswith(f":{port}"), addr
        kr.wait(lambda: len(kr.pods()["cpu"]) == 1, TIMEOUT, "the minReplicas pod")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")    # as the cluster runs
        ray.init(address=kr.gcs_address, logging_level="warning", log_to_driver=False)
        pg = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
        assert pg.wait(TIMEOUT), kr.log_tail()
        scenario.gitops_revert(kr, "cpu", 1)
        kr.wait(lambda: any(c["kind"] == "ownership" for c in kr.ledger().get("conflicts", [])),
                TIMEOUT, "the side-car to report the ownership conflict")
        remove_placement_group(pg)
        ray.shutdown()

        # The ledger file is written on every event, the metrics read the same ledger:
        # scrape until a scrape and the file agree (a patch may land between the two).
        def agree():
            s, led = _scrape(addr), kr.ledger()
            box["s"], box["led"] = s, led
            return (_sum(s, "vecsched_kuberay_patches_total") == len(led["patches"])
                    and _sum(s, "vecsched_kuberay_stale_reads_total")
                    == len(led["stale_reads"]))
        box: dict = {}
        kr.wait(agree, 30, "a scrape to agree with the ledger file")
        s, led = box["s"], box["led"]
        assert len(led["patches"]) >= 1                     # the scale-up
        for kind, n in _kinds(led["conflicts"]).items():
            assert _sum(s, "vecsched_kuberay_conflicts_total", kind=kind) == n
        assert _sum(s, "vecsched_kuberay_conflicts_total", kind="ownership") >= 1
        for kind, n in _kinds(led["findings"]).items():
            assert _sum(s, "vecsched_kuberay_findings_total", kind=kind) == n
        # the scheduler's metrics come from the same port, and the launches follow from
        # the scale-up: 2 more cpu nodes for 3 STRICT_SPREAD bundles (1 was there)
        assert _sum(s, "vecsched_scheduler_info", mode="engine") == 1
        launched = _sum(s, "vecsched_decisions_total", kind="launch", node_type="cpu")
        assert launched >= 2 and launched == kr.stats()["launched"]["cpu"], kr.stats()
        assert _sum(s, "vecsched_ticks_total") > 0
        assert any(n.startswith("autoscaler_") for n, _ in s)
    except Exception:
        print(kr.log_tail(200), file=sys.stderr)
        raise
    finally:
        if ray.is_initialized():
            ray.shutdown()
        kr.stop()
        kr.cleanup()

"""The lease and KubeRay side-car collectors (adapters/metrics_lease.py,
adapters/metrics_kuberay.py) and the shared layer (adapters/metrics.py): each scraped
from a fresh CollectorRegistry after real events (a real redis-server for the lease, the
side-car's own Ledger fed the reads and patches it sees)."""
from __future__ import annotations

import time
import urllib.request

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from tests.kits.ha_kit import redis_server  # noqa: E402,F401 (fixture)
from vecsched.adapters import metrics as m  # noqa: E402
from vecsched.adapters.kuberay.sidecar import Ledger  # noqa: E402
from vecsched.adapters.leader import Keys, Lease, RedisLeaseBackend, connect  # noqa: E402
from vecsched.adapters.metrics_kuberay import LedgerCollector  # noqa: E402
from vecsched.adapters.metrics_lease import LeaseCollector, serve_lease_metrics  # noqa: E402

TTL = 0.5


def _parse(text: str) -> dict:
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _scrape(collector) -> dict:
    reg = m.registry()
    m.register(reg, collector)
    return _parse(m.scrape(reg))


def _get(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


class Clock:
    """A monotonic ns clock the test moves."""

    def __init__(self):
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns

    def advance(self, s: float) -> None:
        self.ns += int(s * 1e9)


def _lease(server, holder, clock) -> Lease:
    client = connect(port=server.port, timeout_s=0.5)
    return Lease(RedisLeaseBackend(client, Keys("metrics")), holder, TTL, clock=clock)


# ------------------------------------------------------------------------------ lease


def test_lease_holder_epoch_transitions_and_losses(redis_server):
    clock = Clock()
    a, b = _lease(redis_server, "A", clock), _lease(redis_server, "B", clock)
    ca, cb = LeaseCollector(a), LeaseCollector(b)
    s = _scrape(ca)
    assert _get(s, "vecsched_lease_is_leader", holder="A") == 0
    assert _get(s, "vecsched_lease_epoch", holder="A") == 0
    assert _get(s, "vecsched_lease_transitions_total", holder="A") == 0

    assert a.try_acquire() and not b.try_acquire()
    assert a.renew() and a.renew()
    s, t = _scrape(ca), _scrape(cb)
    assert _get(s, "vecsched_lease_is_leader", holder="A") == 1
    assert _get(t, "vecsched_lease_is_leader", holder="B") == 0
    epoch_a = _get(s, "vecsched_lease_epoch", holder="A")
    assert epoch_a == a.epoch >= 1
    assert _get(s, "vecsched_lease_transitions_total", holder="A") == 1
    assert _get(s, "vecsched_lease_renewals_total", holder="A") == 2
    assert _get(t, "vecsched_lease_acquire_attempts_total", holder="B") == 1
    assert _get(t, "vecsched_lease_max_epoch_seen", holder="B") == epoch_a
    lat = {q: _get(s, "vecsched_lease_renew_latency_seconds", holder="A", quantile=q)
           for q in ("0.5", "0.99", "1")}
    assert all(v is not None and v >= 0 for v in lat.values())
    assert lat["0.5"] <= lat["0.99"] <= lat["1"]
    # the clock is the test's: the two renewals took 0 s by it
    assert lat["1"] == 0

    a.release()
    assert b.try_acquire()
    s, t = _scrape(ca), _scrape(cb)
    assert _get(s, "vecsched_lease_is_leader", holder="A") == 0
    assert _get(s, "vecsched_lease_losses_total", holder="A", reason="released") == 1
    assert _get(t, "vecsched_lease_is_leader", holder="B") == 1
    assert _get(t, "vecsched_lease_epoch", holder="B") > epoch_a
    assert _get(t, "vecsched_lease_transitions_total", holder="B") == 1

    clock.advance(TTL)                                 # B's lease runs out by its clock
    t = _scrape(cb)
    assert _get(t, "vecsched_lease_is_leader", holder="B") == 0
    assert _get(t, "vecsched_lease_epoch", holder="B") == 0
    assert _get(t, "vecsched_lease_losses_total", holder="B", reason="expired") == 1
    assert _get(t, "vecsched_lease_max_epoch_seen", holder="B") > epoch_a


def test_lease_renew_failures_are_counted_when_redis_is_gone(redis_server):
    clock = Clock()
    a = _lease(redis_server, "A", clock)
    assert a.try_acquire()
    redis_server.stop()
    assert not a.renew()
    s = _scrape(LeaseCollector(a))
    assert _get(s, "vecsched_lease_renew_failures_total", holder="A") == 1
    assert _get(s, "vecsched_lease_is_leader", holder="A") == 1    # until valid_until


def test_serve_lease_metrics_over_http(redis_server):
    a = _lease(redis_server, "replica-1", time.monotonic_ns)
    assert a.try_acquire()
    _reg, port = serve_lease_metrics(a, 0, addr="127.0.0.1")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        s = _parse(r.read().decode())
    assert _get(s, "vecsched_lease_is_leader", holder="replica-1") == 1
    assert _get(s, "vecsched_lease_epoch", holder="replica-1") == a.epoch


# --------------------------------------------------------------------------- side-car


def _cluster(rv: int, replicas: int, writer: str = "autoscaler") -> dict:
    return {"metadata": {"name": "rc", "resourceVersion": str(rv),
                         "managedFields": [{
                             "manager": writer, "time": f"2026-01-01T00:00:{rv:02d}Z",
                             "fieldsV1": {"f:spec": {"f:workerGroupSpecs": {}}}}]},
            "spec": {"headGroupSpec": _pod_group(), "workerGroupSpecs": [dict(
                _pod_group(), groupName="cpu", replicas=replicas, minReplicas=0,
                maxReplicas=4)]}}


def _pod_group(**kw) -> dict:
    return {"rayStartParams": {"num-cpus": "1"},
            "template": {"spec": {"containers": [{"name": "ray"}]}}, **kw}


def test_ledger_patches_conflicts_findings_and_stale_reads():
    ledger = Ledger(None)
    c = LedgerCollector(ledger)
    s = _scrape(c)
    assert _get(s, "vecsched_kuberay_patches_total") == 0
    assert _get(s, "vecsched_kuberay_stale_reads_total") == 0
    assert not any(n == "vecsched_kuberay_conflicts_total" for n, _ in s)

    ledger.on_patch("/apis/ray.io/v1/namespaces/ns/rayclusters/rc",
                    [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}],
                    "application/json-patch+json", _cluster(5, 2))
    ledger.fresh(_cluster(6, 6, writer="kubectl"), reread=None)   # a person wrote 6
    ledger.fresh(_cluster(4, 6), reread=lambda rv: _cluster(rv, 6))  # stale, read again
    s = _scrape(c)
    assert _get(s, "vecsched_kuberay_patches_total") == 1
    assert _get(s, "vecsched_kuberay_conflicts_total", kind="ownership") == 1
    assert _get(s, "vecsched_kuberay_findings_total", kind="replicas_out_of_range") == 1
    assert _get(s, "vecsched_kuberay_stale_reads_total") == 1
    assert _get(s, "vecsched_kuberay_ray_check_ticks_total") == 0
    ledger.on_check(1, ["launch differs"], None)
    ledger.on_check_error()
    s = _scrape(c)
    assert _get(s, "vecsched_kuberay_ray_check_ticks_total") == 1
    assert _get(s, "vecsched_kuberay_ray_check_diff_ticks_total") == 1
    assert _get(s, "vecsched_kuberay_ray_check_errors_total") == 1
    assert _get(s, "vecsched_kuberay_guard_total", event="guarded_patches") == 0
    assert _get(s, "vecsched_kuberay_guard_total", event="wrong_group_patches") == 0
    payload = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}]
    sent = [{"op": "test", "path": "/metadata/resourceVersion", "value": "6"}, *payload]
    ledger.on_patch("/apis/ray.io/v1/namespaces/ns/rayclusters/rc", payload,
                    "application/json-patch+json", _cluster(7, 3), sent=sent)
    s = _scrape(c)
    assert _get(s, "vecsched_kuberay_guard_total", event="guarded_patches") == 1


def test_ledger_exports_each_malformed_field_by_group():
    """A malformed group is a finding (counted once) and, while it stays malformed, a
    gauge naming the group and the field."""
    ledger = Ledger(None)
    cr = _cluster(5, 1)
    cr["spec"]["workerGroupSpecs"].append(dict(_pod_group(), groupName="bad", replicas=0,
                                               minReplicas=0, maxReplicas=2,
                                               rayStartParams={"num-cpus": "abc"}))
    ledger.fresh(cr, reread=None)
    ledger.fresh(dict(cr, metadata=dict(cr["metadata"], resourceVersion="6")), reread=None)
    s = _scrape(LedgerCollector(ledger))
    assert _get(s, "vecsched_kuberay_findings_total", kind="malformed_group") == 1
    assert _get(s, "vecsched_kuberay_malformed", group="bad", action="skipped",
                field="spec.workerGroupSpecs[1].rayStartParams.num-cpus") == 1
    cr["spec"]["workerGroupSpecs"].pop()                  # fixed: the gauge is gone
    ledger.fresh(dict(cr, metadata=dict(cr["metadata"], resourceVersion="7")), reread=None)
    s = _scrape(LedgerCollector(ledger))
    assert not any(n == "vecsched_kuberay_malformed" for n, _ in s)


# ------------------------------------------------------------------------ shared layer


def test_register_is_idempotent_and_ports_are_checked():
    reg = m.registry()
    c = LedgerCollector(Ledger(None))
    assert m.register(reg, c) and not m.register(reg, c)
    assert m.parse_port("9100") == 9100 and m.parse_port(0) == 0
    for bad in ("x", "65536", "-3", ""):
        with pytest.raises(m.MetricsError, match="VECSCHED_METRICS_PORT"):
            m.parse_port(bad)
    with pytest.raises(m.MetricsError, match="port"):
        m.serve(reg, "nope")


def test_lease_reset_wait_is_exported(redis_server):
    """After Redis comes back empty, the next holder waits out the earlier one: while it
    does, ``vecsched_lease_waiting`` is 1; the grant counts as a backend reset and a
    reset wait, and the time held back is exported when it is over."""
    clock = Clock()
    a, b = _lease(redis_server, "A", clock), _lease(redis_server, "B", clock)
    cb = LeaseCollector(b)
    assert a.try_acquire()
    b.observe(a.epoch)                                 # B read A's lease while passive
    t = _scrape(cb)
    assert _get(t, "vecsched_lease_waiting", holder="B") == 0
    assert _get(t, "vecsched_lease_backend_resets_total", holder="B") == 0
    redis_server.restart(empty=True)
    assert b.try_acquire()
    t = _scrape(cb)
    assert _get(t, "vecsched_lease_waiting", holder="B") == 1
    assert _get(t, "vecsched_lease_is_leader", holder="B") == 0
    assert _get(t, "vecsched_lease_backend_resets_total", holder="B") == 1
    assert _get(t, "vecsched_lease_reset_waits_total", holder="B") == 1
    assert _get(t, "vecsched_lease_reset_wait_seconds_total", holder="B") == TTL
    clock.advance(TTL / 2)
    assert b.renew()
    clock.advance(TTL / 2)                             # one ttl since B's acquisition
    t = _scrape(cb)
    assert _get(t, "vecsched_lease_waiting", holder="B") == 0
    assert _get(t, "vecsched_lease_is_leader", holder="B") == 1

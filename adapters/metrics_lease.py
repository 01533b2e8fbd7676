"""A leader lease's Prometheus metrics (an HA autoscaler replica; docs/metrics.md).

:class:`LeaseCollector` reads a ``vecsched.adapters.leader.Lease`` (its ``holder``,
``epoch``, ``max_epoch_seen`` and ``LeaseStats``) when scraped, under the lease's own
lock (``Lease.snapshot()``), so the replica keeps counting as it does and nothing is
counted twice. Every sample carries the replica's ``holder`` label.

A replica exports them with :func:`serve_lease_metrics` (a registry of ours on a port,
as Ray's monitor serves its own), or, inside Ray's monitor, through
``vecsched.adapters.ray.metrics.add_collector(LeaseCollector(lease))``.
"""
from __future__ import annotations

from vecsched.adapters import metrics as m

# The renew round-trip quantiles exported over the recent window LeaseStats keeps.
QUANTILES = (("0.5", "p50"), ("0.99", "p99"), ("1", "max"))


class LeaseCollector:
    """Prometheus collector over one replica's ``Lease``."""

    def __init__(self, lease):
        self.lease = lease

    def describe(self):
        return self._families(None)

    def collect(self):
        lease = self.lease
        snap = lease.snapshot()          # takes the lease's lock; records an expiry seen now
        snap["max_epoch_seen"] = lease.max_epoch_seen
        snap["waiting_ns"] = lease.waiting()
        return self._families(snap)

    def _families(self, s) -> list:
        h = [self.lease.holder]
        leader = m.gauge("lease_is_leader", "1 while this replica holds a lease that is "
                         "valid by its own clock.", ["holder"])
        epoch = m.gauge("lease_epoch", "The epoch (fencing token) this replica holds; 0 "
                        "when it does not lead.", ["holder"])
        seen = m.gauge("lease_max_epoch_seen", "The highest epoch this replica has heard "
                       "of; it never goes down.", ["holder"])
        trans = m.counter("lease_transitions", "Times this replica was granted the lease "
                          "(each grant is a leader transition).", ["holder"])
        losses = m.counter("lease_losses", "Step-downs of this replica, by reason "
                           "(expired, lost, released, fenced, ...).", ["holder", "reason"])
        attempts = m.counter("lease_acquire_attempts", "Acquisition attempts.", ["holder"])
        acq_err = m.counter("lease_acquire_errors", "Backend errors while trying to "
                            "acquire.", ["holder"])
        renewals = m.counter("lease_renewals", "Successful renewals.", ["holder"])
        ren_fail = m.counter("lease_renew_failures", "Renewals that failed with a backend "
                             "error (timeout, refused).", ["holder"])
        ren_rej = m.counter("lease_renew_rejected", "Renewals the backend refused: the "
                            "lease was no longer this replica's.", ["holder"])
        latency = m.gauge("lease_renew_latency_seconds", "Renewal round trip over the "
                          "recent window (quantile 0.5, 0.99, and 1 = the maximum since "
                          "start).", ["holder", "quantile"])
        waiting = m.gauge("lease_waiting", "1 while this replica holds a lease granted "
                          "after the backend lost its records and waits out any earlier "
                          "holder before it acts.", ["holder"])
        resets = m.counter("lease_backend_resets", "Grants from a backend that had lost "
                           "its records (a Redis restarted empty or restored from an old "
                           "snapshot, a deleted or restored Lease).", ["holder"])
        waits = m.counter("lease_reset_waits", "Grants held back to wait out an earlier "
                          "holder.", ["holder"])
        wait_s = m.counter("lease_reset_wait_seconds", "Time held back so, in all.",
                           ["holder"])
        fams = [leader, epoch, seen, trans, losses, attempts, acq_err, renewals, ren_fail,
                ren_rej, latency, waiting, resets, waits, wait_s]
        if s is None:
            return fams
        leader.add_metric(h, s["is_leader"])
        epoch.add_metric(h, s["epoch"])
        seen.add_metric(h, s["max_epoch_seen"])
        trans.add_metric(h, s["leader_transitions_total"])
        for reason, n in sorted(s["losses"].items()):
            losses.add_metric(h + [reason], n)
        attempts.add_metric(h, s["acquire_attempts"])
        acq_err.add_metric(h, s["acquire_errors"])
        renewals.add_metric(h, s["renewals"])
        ren_fail.add_metric(h, s["renew_failures"])
        ren_rej.add_metric(h, s["renew_rejected"])
        waiting.add_metric(h, 1 if s["waiting_ns"] > 0 else 0)
        resets.add_metric(h, s["backend_resets"])
        waits.add_metric(h, s["reset_waits"])
        wait_s.add_metric(h, s["reset_waits_ms"] / 1e3)
        lat = s["renew_latency_ms"]
        if lat.get("samples"):
            for q, key in QUANTILES:
                if lat.get(key) is not None:
                    latency.add_metric(h + [q], lat[key] / 1e3)
        return fams


def serve_lease_metrics(lease, port: int, addr=None):
    """Serve ``lease``'s metrics on ``addr:port`` (``0``: a free port; ``addr`` None:
    ``VECSCHED_METRICS_HOST``, else 127.0.0.1) from a registry of ours; returns
    ``(registry, port)``, or ``(None, None)`` without prometheus_client. A port already
    taken raises ``metrics.MetricsPortTaken`` naming it.

    The hook for an HA replica: call it once after building its ``Lease``."""
    if not m.available():
        return None, None
    reg = m.registry()
    m.register(reg, LeaseCollector(lease))
    _server, bound = m.serve(reg, port, addr)
    return reg, bound

"""The KubeRay side-car's Prometheus metrics (docs/metrics.md).

:class:`LedgerCollector` reads the side-car's ``Ledger``
(``vecsched.adapters.kuberay.sidecar``) when scraped: the patches it saw sent, the
conflicts it reported (by kind: ``ownership`` is a person's or a GitOps tool's write of
``replicas``; other kinds as the ledger names them), its findings (e.g. ``replicas``
outside [minReplicas, maxReplicas]), stale reads it caught, and the Ray cross-check's
ticks and differences (``VECSCHED_RAY_CHECK=1``). It reads the ledger's public lists
and counters only (copies taken under the GIL), never its private state.
``vecsched-monitor kuberay-autoscaler`` registers it in Ray's autoscaler registry.
"""
from __future__ import annotations

from collections import Counter

from vecsched.adapters import metrics as m


class LedgerCollector:
    """Prometheus collector over the side-car's ``Ledger``."""

    def __init__(self, ledger):
        self.ledger = ledger

    def describe(self):
        return self._families(None)

    def collect(self):
        lg = self.ledger
        view = {"patches": len(lg.patches), "stale_reads": len(lg.stale_reads),
                "conflicts": _by_kind(list(lg.conflicts)),
                "findings": _by_kind(list(lg.findings)), "check": dict(lg.check),
                "guard": dict(getattr(lg, "guard", {})),
                "malformed": list(getattr(lg, "malformed", []))}
        return self._families(view)

    @staticmethod
    def _families(v) -> list:
        patches = m.counter("kuberay_patches", "JSON patches the side-car sent to the "
                            "RayCluster (replicas, workersToDelete).")
        conflicts = m.counter("kuberay_conflicts", "Conflicts the side-car reported, by "
                              "kind (ownership: someone else wrote replicas).", ["kind"])
        findings = m.counter("kuberay_findings", "Other findings on the RayCluster, by kind "
                             "(replicas_out_of_range, ...).", ["kind"])
        stale = m.counter("kuberay_stale_reads", "RayCluster reads older than one already "
                          "seen (read again at the newest resourceVersion).")
        ticks = m.counter("kuberay_ray_check_ticks", "VECSCHED_RAY_CHECK=1: ticks on which "
                          "Ray's scheduler ran beside the engine.")
        diffs = m.counter("kuberay_ray_check_diff_ticks", "VECSCHED_RAY_CHECK=1: ticks on "
                          "which Ray's scheduler differed from the engine.")
        errors = m.counter("kuberay_ray_check_errors", "VECSCHED_RAY_CHECK=1: ticks on "
                           "which Ray's scheduler failed.")
        guard = m.counter("kuberay_guard", "Patch guards (docs/kuberay.md), by event: "
                          "guarded_patches sent with test ops; guard_failures answered 422/409; "
                          "version_retries and moved_retries re-sent after a re-read; refused "
                          "not re-sent (the group changed or went); wrong_group_patches that "
                          "landed on another group than meant (must stay 0).", ["event"])
        malformed = m.gauge("kuberay_malformed", "1 for each RayCluster field the last read "
                            "found malformed, by group and field; action: skipped (the "
                            "group is left out, the others scale), head_replaced, default "
                            "(docs/kuberay.md).", ["group", "field", "action"])
        fams = [patches, conflicts, findings, stale, ticks, diffs, errors, guard, malformed]
        if v is None:
            return fams
        for p in v["malformed"]:
            malformed.add_metric([p.get("group") or "", p["field"], p["action"]], 1)
        patches.add_metric([], v["patches"])
        stale.add_metric([], v["stale_reads"])
        for kind, n in sorted(v["conflicts"].items()):
            conflicts.add_metric([kind], n)
        for kind, n in sorted(v["findings"].items()):
            findings.add_metric([kind], n)
        check = v["check"]
        ticks.add_metric([], check.get("ticks", 0))
        diffs.add_metric([], check.get("diff_ticks", 0))
        errors.add_metric([], check.get("errors", 0))
        for event, n in sorted(v["guard"].items()):
            guard.add_metric([event], n)
        return fams


def _by_kind(entries: list) -> Counter:
    return Counter(str(e.get("kind", "unknown")) if isinstance(e, dict) else "unknown"
                   for e in entries)

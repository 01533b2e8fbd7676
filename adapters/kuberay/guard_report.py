"""What the side-car's ledger records when the API server refused a guarded patch
(422 / 409) and the re-read's verdict (``guard.verdict``) says why: one conflict per
group that moved, lost its identity or went, and per other field that changed, each
with its log line. (A touched group's own counts that changed are the ledger's
``_changed_under_patch``: a ``replicas`` change is an ownership conflict.)"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple


def failure_conflicts(t: float, cluster: str, status: int, verdict, rv_basis, rv_fresh,
                      writer: str, writer_of: Callable[[str], Optional[str]]
                      ) -> List[Tuple[dict, str]]:
    """``(conflict entry, log line)`` for each thing the verdict found, but the touched
    groups' changed counts. ``writer_of(path)`` names the last writer of a field."""
    out = []
    for g, (was, now) in verdict.moved.items():
        out.append(({"t": t, "kind": "group_moved", "cluster": cluster, "group": g,
                     "field": "spec.workerGroupSpecs", "index_decided_on": was,
                     "index_now": now, "writer": writer, "status": status,
                     "resource_version": rv_fresh, "decided_on": rv_basis},
                    f"vecsched kuberay: RayCluster {cluster}: worker group {g} moved from "
                    f"index {was} to {now} between the read and the patch (writer "
                    f"{writer!r}); the patch was refused ({status}) and is sent to index "
                    f"{now}"))
    for g, field, why in verdict.identity:
        out.append(({"t": t, "kind": "group_identity", "cluster": cluster, "group": g,
                     "field": field, "reason": why, "writer": writer, "status": status,
                     "resource_version": rv_fresh},
                    f"vecsched kuberay: RayCluster {cluster}: worker group {g}: {field} "
                    f"{why} between the read and the patch (writer {writer!r}); not "
                    f"patched, the next tick decides again"))
    for g in verdict.gone:
        out.append(({"t": t, "kind": "group_gone", "cluster": cluster, "group": g,
                     "field": "spec.workerGroupSpecs", "writer": writer,
                     "resource_version": rv_fresh},
                    f"vecsched kuberay: RayCluster {cluster}: worker group {g} is gone "
                    f"(writer {writer!r}); not patched"))
    for _, path, was, now in verdict.other:
        who = writer_of(path) or writer
        out.append(({"t": t, "kind": "field_changed", "cluster": cluster, "field": path,
                     "decided_on": was, "found": now, "writer": who,
                     "resource_version": rv_fresh},
                    f"vecsched kuberay: RayCluster {cluster}: {path} changed from {was!r} "
                    f"to {now!r} between the read and the patch (writer {who!r}); not "
                    f"patched"))
    return out

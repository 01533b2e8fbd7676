"""The KubeRay duplicate-name scenario: a group's name stops naming one group, between
the side-car's read of the RayCluster and its patch.

Same cluster as ``scenario.py`` (``cpu``: min 1, max 3; ``pair``: numOfHosts 2, max 1).

1. ``start``           the operator's minReplicas ``cpu`` pod and its Ray node.
2. ``duplicate``       the next PATCH of the RayCluster is preceded by a GitOps write that
                       inserts, at index 0, a copy of ``cpu`` with the same name and
                       counts and another image (a pasted block whose name was not
                       changed); then demand for 3 x {CPU: 1}. Ray's patch was meant for
                       the ``cpu`` group it read. Guarded: refused (the name is now two
                       groups'), both reported and left out of Ray's view; no group
                       named ``cpu`` is patched while the name is ambiguous.
3. ``revert``          the writer removes the copy: ``cpu`` scales to 3 pods.
4. ``swap``            the demand goes; the next PATCH (the idle ``cpu`` nodes named in
                       ``workersToDelete``) is preceded by a write that swaps the two
                       groups' names and counts, their templates and start parameters
                       staying put (the name ``cpu`` now on the ``pair`` template).
                       Guarded: refused (the group's identity changed), decided again
                       on the new read; ``cpu`` ends at minReplicas.

The record is ``scenario.collect``'s plus ``writes`` (when each adversarial write
landed) and ``audit`` (``wire_audit.counts``: wrong-group patches and overwritten
writes judged from the stand-in's own request log and write journal).
"""
from __future__ import annotations

import copy
import time

from .local_cluster import NS, LocalKubeRay
from .reorder import _until
from .scenario import GITOPS_MANAGER, _ray_nodes, recorded_run, start_phase

COPY_IMAGE = "rayproject/ray:2.60.0-copy"
_COUNTS = ("replicas", "minReplicas", "maxReplicas", "numOfHosts", "scaleStrategy")


def _write(kr: LocalKubeRay, record: list, what: str, edit):
    """A GitOps write of the groups (``edit(groups) -> groups``), recorded."""
    def write(store):
        cr = store.get("rayclusters", NS, kr.name)
        cr["spec"]["workerGroupSpecs"] = edit(cr["spec"]["workerGroupSpecs"])
        out = store.update("rayclusters", NS, kr.name, cr, GITOPS_MANAGER)
        record.append({"t": time.time(), "write": what,
                       "order": [g["groupName"] for g in out["spec"]["workerGroupSpecs"]],
                       "resource_version": out["metadata"]["resourceVersion"]})
    return write


def insert_copy(groups: list) -> list:
    """A copy of ``cpu`` (same name and counts, another image) in front."""
    dup = copy.deepcopy(next(g for g in groups if g["groupName"] == "cpu"))
    dup["template"]["spec"]["containers"][0]["image"] = COPY_IMAGE
    return [dup] + groups


def drop_copy(groups: list) -> list:
    return [g for g in groups
            if g["template"]["spec"]["containers"][0].get("image") != COPY_IMAGE]


def swap_names(groups: list) -> list:
    """``cpu`` and ``pair`` swap their names and counts; templates and start
    parameters stay at their index."""
    i = next(k for k, g in enumerate(groups) if g["groupName"] == "cpu")
    j = next(k for k, g in enumerate(groups) if g["groupName"] == "pair")
    a, b = groups[i], groups[j]
    for f in ("groupName",) + _COUNTS:
        va, vb = a.pop(f, None), b.pop(f, None)
        if vb is not None:
            a[f] = vb
        if va is not None:
            b[f] = va
    return groups


def _conflict(kr: LocalKubeRay, kind: str, n: int = 1) -> bool:
    return sum(1 for c in kr.ledger().get("conflicts", []) if c["kind"] == kind) >= n


def run(kr: LocalKubeRay, log=print, timeout: float = 90.0) -> dict:
    """Drive the scenario on a started cluster; the caller stops it."""
    from ray.util.placement_group import placement_group, remove_placement_group

    with recorded_run(kr, log, scenario="duplicate-name", writes=[]) as (rec, phase):
        start_phase(kr, phase, timeout)

        phase("duplicate", demand="placement group 3 x {CPU: 1}, STRICT_SPREAD",
              race="a copy of cpu (same name) inserted at index 0 before the patch")
        kr.api.store.before_next_patch("rayclusters", NS, kr.name,
                                       _write(kr, rec["writes"], "insert copy", insert_copy))
        pg = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
        _until(kr, rec, lambda: len(rec["writes"]) == 1 and (
            _conflict(kr, "group_identity") or len(kr.pods()["cpu"]) >= 3),
            timeout, "the patch after the copy's insertion", log)
        time.sleep(3 * kr.tick_s)            # ticks with the name ambiguous
        rec["while_duplicated"] = {"replicas": _replicas_by_image(kr), "pods": kr.pods()}

        phase("revert", write="the copy removed")
        _write(kr, rec["writes"], "remove copy", drop_copy)(kr.api.store)
        _until(kr, rec, lambda: len(_ray_nodes(kr).get("cpu", [])) == 3, timeout,
               "3 cpu Ray nodes", log)
        rec["after_scale_up"] = {"replicas": kr.replicas(), "pods": kr.pods(),
                                 "ray_nodes": _ray_nodes(kr)}

        phase("swap", race="cpu and pair swap names and counts before the scale-down patch")
        kr.api.store.before_next_patch("rayclusters", NS, kr.name,
                                       _write(kr, rec["writes"], "swap names", swap_names))
        remove_placement_group(pg)
        _until(kr, rec, lambda: len(kr.pods()["cpu"]) == 1 and not kr.pods()["pair"]
               and len(_ray_nodes(kr).get("cpu", [])) == 1, timeout + 30,
               "scale-down to minReplicas", log)
        time.sleep(2 * kr.tick_s)
        phase("end")
    return rec


def _replicas_by_image(kr: LocalKubeRay) -> dict:
    return {f"{g['groupName']} ({g['template']['spec']['containers'][0].get('image', '-')})":
            g.get("replicas") for g in kr.cluster()["spec"]["workerGroupSpecs"]}


def checks(rec: dict) -> dict:
    """The duplicate-name scenario's verdicts: name -> (ok, detail)."""
    led = rec.get("ledger") or {}
    audit = rec.get("audit") or {}
    ident = [c for c in led.get("conflicts", []) if c["kind"] == "group_identity"]
    dup = [f for f in led.get("findings", []) if f["kind"] == "malformed_group"
           and f["field"].endswith(".groupName")]
    up, fin = rec.get("after_scale_up") or {}, rec.get("final") or {}
    return {
        "every phase reached its state": (not rec.get("timeouts"), rec.get("timeouts")),
        "all three writes landed between a read and a patch or a tick": (
            len(rec.get("writes", [])) == 3, [w["write"] for w in rec.get("writes", [])]),
        "wrong_group_patches == 0 (the API stand-in's record)": (
            audit.get("wrong_group_patches") == 0, audit.get("detail", {}).get(
                "wrong_group_patches")),
        "the copy and the swap refused (group_identity)": (
            {c["field"] for c in ident} >= {"groupName"} and len(ident) >= 2,
            [f"{c['group']}: {c['field']} {c['reason']}" for c in ident]),
        "both groups named cpu reported while the name was ambiguous": (
            len({f["field"] for f in dup}) >= 2, sorted({f["field"] for f in dup})),
        "scale-up after the revert: 3 cpu pods": (
            len(up.get("pods", {}).get("cpu", [])) == 3, up.get("replicas")),
        "scale-down to minReplicas": (
            len(fin.get("pods", {}).get("cpu", [])) == 1 and not fin.get("pods", {}).get("pair"),
            fin.get("replicas")),
    }

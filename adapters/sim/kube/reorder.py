"""The KubeRay reorder scenario: a GitOps writer reorders the worker groups between the
side-car's read of the RayCluster and its patch, once during a scale-up and once
during a scale-down (with Ray 2.60's own client, its index-addressed patch then scales
the other group; the side-car's guarded client re-reads and re-addresses it).

Same cluster as ``scenario.py`` (``cpu``: min 1, max 3; ``pair``: numOfHosts 2, max 1).

1. ``start``             the operator's minReplicas ``cpu`` pod and its Ray node.
2. ``reorder-launch``    the next PATCH of the RayCluster is preceded by a PUT that
                         reverses ``workerGroupSpecs``; then demand for 3 x {CPU: 1}.
                         Ray's patch (``/0/replicas = 3``) was meant for ``cpu``; after
                         the reversal index 0 is ``pair``. Guarded: 422, read again,
                         sent to ``cpu``'s new index: 3 ``cpu`` pods, no ``pair`` pod.
3. ``reorder-terminate`` the demand goes; the next PATCH (the idle ``cpu`` nodes named
                         in ``workersToDelete``, ``replicas`` lowered) is preceded by a
                         PUT restoring the order. Guarded as above: ``cpu`` ends at
                         minReplicas, ``pair`` never runs a pod.

The record has what ``scenario.run`` records, plus ``reorders`` (when each reversal
landed) and ``max_pods`` (the most pods each group ever had, sampled).
"""
from __future__ import annotations

import time

from .local_cluster import NS, LocalKubeRay
from .scenario import GITOPS_MANAGER, _ray_nodes, recorded_run, start_phase


def reverse_groups(name: str, record: list):
    """A write of the GitOps writer: reverse the group order (same groups, same values)."""
    def write(store):
        cr = store.get("rayclusters", NS, name)
        cr["spec"]["workerGroupSpecs"] = cr["spec"]["workerGroupSpecs"][::-1]
        out = store.update("rayclusters", NS, name, cr, GITOPS_MANAGER)
        record.append({"t": time.time(), "order": [g["groupName"] for g in
                                                   out["spec"]["workerGroupSpecs"]],
                       "resource_version": out["metadata"]["resourceVersion"]})
    return write


def _arm(kr: LocalKubeRay, record: list) -> None:
    kr.api.store.before_next_patch("rayclusters", NS, kr.name, reverse_groups(kr.name, record))


def _until(kr: LocalKubeRay, rec: dict, cond, timeout: float, what: str, log) -> bool:
    """Wait for ``cond``; a timeout is recorded (``rec["timeouts"]``), not raised, so an
    unguarded run (``--no-guard``) still ends with its record and its verdicts."""
    try:
        kr.wait(cond, timeout, what)
        return True
    except TimeoutError:
        rec.setdefault("timeouts", []).append(what)
        log(f"timed out waiting for {what}")
        return False


def run(kr: LocalKubeRay, log=print, timeout: float = 90.0) -> dict:
    """Drive the reorder scenario on a started cluster; the caller stops it."""
    from ray.util.placement_group import placement_group, remove_placement_group

    with recorded_run(kr, log, scenario="reorder", reorders=[]) as (rec, phase):
        start_phase(kr, phase, timeout)

        phase("reorder-launch", demand="placement group 3 x {CPU: 1}, STRICT_SPREAD",
              race="groups reversed between the side-car's read and its patch")
        _arm(kr, rec["reorders"])
        pg = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
        _until(kr, rec, lambda: len(_ray_nodes(kr).get("cpu", [])) == 3, timeout,
               "3 cpu Ray nodes", log)
        rec["after_scale_up"] = {"replicas": kr.replicas(), "pods": kr.pods(),
                                 "ray_nodes": _ray_nodes(kr)}

        phase("reorder-terminate", race="order restored between the read and the patch")
        _arm(kr, rec["reorders"])
        remove_placement_group(pg)
        _until(kr, rec, lambda: len(kr.pods()["cpu"]) == 1 and not kr.pods()["pair"]
               and len(_ray_nodes(kr).get("cpu", [])) == 1, timeout + 30,
               "scale-down to minReplicas", log)
        time.sleep(2 * kr.tick_s)
        phase("end")
        rec["final"]["order"] = [g["groupName"] for g in kr.cluster()["spec"]["workerGroupSpecs"]]
    rec["max_pods"] = {}
    for row in rec["timeline"]:
        for g, n in row["pods"].items():
            rec["max_pods"][g] = max(rec["max_pods"].get(g, 0), n)
    return rec


def checks(rec: dict) -> dict:
    """The reorder scenario's verdicts: name -> (ok, detail)."""
    led = rec.get("ledger") or {}
    guard = led.get("guard") or {}
    moved = [c for c in led.get("conflicts", []) if c["kind"] == "group_moved"]
    up, fin = rec.get("after_scale_up") or {}, rec.get("final") or {}
    return {
        "every phase reached its state": (not rec.get("timeouts"), rec.get("timeouts")),
        "both reorders landed between a read and a patch": (
            len(rec.get("reorders", [])) == 2, [r["order"] for r in rec.get("reorders", [])]),
        "wrong_group_patches == 0": (
            guard.get("wrong_group_patches") == 0 and "guard" in led, guard),
        "reorders caught (422, re-addressed)": (
            len({(c["index_decided_on"], c["index_now"]) for c in moved}) == 2,
            [f"{c['group']}: index {c['index_decided_on']} -> {c['index_now']}"
             for c in moved]),
        "scale-up reached cpu, not pair": (
            len(up.get("pods", {}).get("cpu", [])) == 3 and not up.get("pods", {}).get("pair"),
            up.get("replicas")),
        "no pair pod ever (nobody asked for one)": (
            rec.get("max_pods", {}).get("pair", 0) == 0, rec.get("max_pods")),
        "scale-down to minReplicas": (
            len(fin.get("pods", {}).get("cpu", [])) == 1 and not fin.get("pods", {}).get("pair"),
            fin.get("replicas")),
    }

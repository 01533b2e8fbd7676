"""The KubeRay scenario: demand -> patch -> pods -> Ray nodes -> idle -> workersToDelete
-> scale-down to minReplicas, with KubeRay's known failure modes on the way.

Groups: ``cpu`` (1 CPU a pod; min 1, max 3) and ``pair`` (numOfHosts 2: one replica is
two pods; custom resource ``pair``; min 0, max 1). The CR starts with ``cpu`` replicas 0
(below minReplicas) and a ``workersToDelete`` left over from a previous autoscaler
naming a pod that no longer exists.

Phases (each returns what it observed; ``run`` returns the whole record):

1. ``start``        the operator clamps ``cpu`` to 1 pod; its Ray node joins.
2. ``scale-up``     a STRICT_SPREAD placement group of 3 x {CPU: 1}: 2 more ``cpu`` pods.
3. ``gitops``       an external writer (Argo-CD-like) puts ``cpu`` replicas back to its
                    Git value 1: the side-car reports the ownership conflict; the
                    operator deletes nothing at random.
4. ``multi-host``   a STRICT_SPREAD group of 2 x {pair: 1}: ``pair`` replicas 0 -> 1,
                    two pods, two Ray nodes.
5. ``scale-down``   both groups removed, the operator slow to delete (``delete_delay_s``)
                    and the API serving stale RayCluster reads: idle nodes are named in
                    ``workersToDelete``, the pods go, ``cpu`` ends at minReplicas (1 pod),
                    ``pair`` at 0.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from typing import Optional

import requests

from . import wire_audit
from .local_cluster import NS, LocalKubeRay, Sampler

CLUSTER = "kuberay-demo"
LEFTOVER = f"{CLUSTER}-cpu-worker-gone0"
GITOPS_MANAGER = "argocd-application-controller"
IDLE_S = 5
DELETE_DELAY_S = 6.0


def demo_cluster(idle_s: float = IDLE_S, upscaling_mode: str = "Default") -> dict:
    small = {"object-store-memory": "78643200"}
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": CLUSTER},
        "spec": {
            "enableInTreeAutoscaling": True,
            "autoscalerOptions": {"version": "v2", "idleTimeoutSeconds": idle_s,
                                  "upscalingMode": upscaling_mode},
            "headGroupSpec": {"rayStartParams": {"num-cpus": "0", **small},
                              "template": {"spec": {"containers": [{"name": "ray-head"}]}}},
            "workerGroupSpecs": [
                {"groupName": "cpu", "replicas": 0, "minReplicas": 1, "maxReplicas": 3,
                 "rayStartParams": {"num-cpus": "1", **small},
                 "scaleStrategy": {"workersToDelete": [LEFTOVER]},
                 "template": {"spec": {"containers": [{"name": "ray-worker"}]}}},
                {"groupName": "pair", "replicas": 0, "minReplicas": 0, "maxReplicas": 1,
                 "numOfHosts": 2,
                 "rayStartParams": {"num-cpus": "0", "resources": '"{\\"pair\\": 1}"',
                                    **small},
                 "scaleStrategy": {"workersToDelete": []},
                 "template": {"spec": {"containers": [{"name": "ray-worker"}]}}},
            ],
        },
    }


def gitops_revert(kr: LocalKubeRay, group: str, value: int, tries: int = 10) -> dict:
    """An external writer puts ``replicas`` back to its Git value: GET, edit, PUT with the
    resourceVersion read (409 -> read again). Returns how it went."""
    url = f"{kr.api.url}/apis/ray.io/v1/namespaces/{NS}/rayclusters/{kr.name}"
    kw = dict(kr.api.certs.requests_kwargs(), timeout=10,
              params={"fieldManager": GITOPS_MANAGER})
    conflicts = 0
    for _ in range(tries):
        cr = requests.get(url, **kw).json()
        for g in cr["spec"]["workerGroupSpecs"]:
            if g["groupName"] == group:
                g["replicas"] = value
        r = requests.put(url, json=cr, **kw)
        if r.status_code == 200:
            return {"conflicts": conflicts, "resource_version": r.json()["metadata"][
                "resourceVersion"]}
        if r.status_code != 409:
            r.raise_for_status()
        conflicts += 1
    raise RuntimeError(f"the external writer got {conflicts} conflicts in a row")


def _ray_nodes(kr: LocalKubeRay) -> dict:
    """Alive Ray worker nodes by their pod's group (the node's instance id is the pod)."""
    st = kr.status()
    out: dict = {}
    for n in st.active_nodes + st.idle_nodes:
        if n.ray_node_type_name and n.ray_node_type_name != "headgroup":
            out.setdefault(n.ray_node_type_name, []).append(n.instance_id)
    return out


def run(kr: LocalKubeRay, log=print, timeout: float = 90.0) -> dict:
    """Drive the scenario on a started cluster; the caller stops it."""
    from ray.util.placement_group import placement_group, remove_placement_group

    with recorded_run(kr, log) as (rec, phase):
        start_phase(kr, phase, timeout)

        phase("scale-up", demand="placement group 3 x {CPU: 1}, STRICT_SPREAD")
        pg = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
        if not pg.wait(timeout):
            raise TimeoutError(f"placement group not placed\n{kr.log_tail()}")
        kr.wait(lambda: len(_ray_nodes(kr).get("cpu", [])) == 3, timeout, "3 cpu Ray nodes")
        rec["after_scale_up"] = {"replicas": kr.replicas(), "pods": kr.pods(),
                                 "ray_nodes": _ray_nodes(kr)}

        phase("gitops", writer=GITOPS_MANAGER, sets="cpu replicas = 1")
        rec["gitops"] = gitops_revert(kr, "cpu", 1)
        kr.wait(lambda: any(c["kind"] == "ownership" for c in kr.ledger().get("conflicts", [])),
                timeout, "the side-car to report the ownership conflict")
        time.sleep(2 * kr.tick_s)          # the operator must not delete anything meanwhile
        rec["after_gitops"] = {"replicas": kr.replicas(), "pods": kr.pods()}

        phase("multi-host", demand="placement group 2 x {pair: 1}, STRICT_SPREAD")
        pg2 = placement_group([{"pair": 1}] * 2, strategy="STRICT_SPREAD")
        if not pg2.wait(timeout):
            raise TimeoutError(f"pair placement group not placed\n{kr.log_tail()}")
        rec["after_multi_host"] = {"replicas": kr.replicas(), "pods": kr.pods(),
                                   "ray_nodes": _ray_nodes(kr)}

        phase("scale-down", operator_delete_delay_s=DELETE_DELAY_S, stale_reads=3)
        kr.operator.delete_delay_s = DELETE_DELAY_S
        remove_placement_group(pg)
        remove_placement_group(pg2)
        # a cache three writes behind: older than anything the side-car read lately
        kr.api.store.serve_stale("rayclusters", NS, kr.name, 3, back=3)
        kr.wait(lambda: len(kr.pods()["cpu"]) == 1 and not kr.pods()["pair"]
                and len(_ray_nodes(kr).get("cpu", [])) == 1 and not _ray_nodes(kr).get("pair"),
                timeout + IDLE_S + DELETE_DELAY_S, "scale-down to minReplicas")
        time.sleep(2 * kr.tick_s)
        phase("end")
        rec["final"]["workers_to_delete"] = {
            g["groupName"]: (g.get("scaleStrategy") or {}).get("workersToDelete", [])
            for g in kr.cluster()["spec"]["workerGroupSpecs"]}
    return rec


def start_phase(kr: LocalKubeRay, phase, timeout: float, cpu: int = 1) -> None:
    """The ``start`` phase every scenario begins with: ``cpu`` pods of the ``cpu``
    group and their Ray nodes up, then this driver joins the cluster."""
    import ray

    phase("start")
    kr.wait(lambda: len(kr.pods()["cpu"]) == cpu and len(_ray_nodes(kr).get("cpu", [])) == cpu,
            timeout, f"the {cpu} cpu pod(s) and their Ray nodes")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")    # as the cluster runs
    ray.init(address=kr.gcs_address, logging_level="warning", log_to_driver=False)


@contextmanager
def recorded_run(kr: LocalKubeRay, log, **rec):
    """A scenario's frame: ``(rec, phase)``, the record (``rec`` its first keys) and a
    ``phase(name, **detail)`` that stamps and logs each phase; at the end, whatever
    happened, the driver leaves Ray, the sampler stops, ``collect`` fills the record,
    and the final state (``final``: replicas, pods, Ray nodes) is taken if the scenario
    got to its ``end`` phase."""
    import ray

    rec = {"phases": [], **rec}
    sampler = Sampler(kr).start()
    rec["t0_wall"] = sampler.t0_wall

    def phase(name: str, **extra):
        entry = {"name": name, "t": sampler.now(), **extra}
        rec["phases"].append(entry)
        log(f"[{entry['t']:6.1f} s] {name}")
        if name == "end":
            rec["final"] = {"replicas": kr.replicas(), "pods": kr.pods(),
                            "ray_nodes": _ray_nodes(kr)}
    try:
        yield rec, phase
    finally:
        if ray.is_initialized():
            ray.shutdown()
        sampler.stop()
        collect(kr, sampler, rec)


def collect(kr: LocalKubeRay, sampler: Sampler, rec: dict) -> None:
    """What every scenario records at its end: timeline, operator events, the side-car's
    ledger and stats, the RayCluster PATCHes and PUTs as they arrived on the wire."""
    rec["timeline"] = sampler.rows
    rec["operator_events"] = list(kr.operator.events) if kr.operator else []
    rec["ledger"] = kr.ledger()
    rec["stats"] = kr.stats()
    rec["wire_patches"] = [{"t": e["t"], "manager": e["manager"], "body": e["body"],
                            "status": e["status"], "content_type": e["content_type"]}
                           for e in (kr.api.requests("PATCH", "rayclusters")
                                     if kr.api else [])]
    rec["wire_puts"] = [{"t": e["t"], "manager": e["manager"], "status": e["status"],
                         "path": e["path"]}
                        for e in (kr.api.requests("PUT", "rayclusters") if kr.api else [])]
    if kr.api:       # judged from the stand-in's own record (wire_audit.py)
        rec["audit"] = wire_audit.counts(kr.api.requests(), kr.api.store.journal, kr.name,
                                         rec["ledger"].get("conflicts", []))


def result_json(rec: dict, t0: Optional[float] = None) -> dict:
    """``kuberay.json``: replicas timeline per group, the patches as sent, conflicts."""
    groups: dict = {}
    for row in rec.get("timeline", []):
        for g, r in row["replicas"].items():
            groups.setdefault(g, []).append([row["t"], r, row["pods"].get(g, 0)])
    led = rec.get("ledger") or {}
    st = rec.get("stats") or {}
    audit = rec.get("audit") or {}
    t0 = rec.get("t0_wall", 0.0) if t0 is None else t0

    def rel(items):                       # wall-clock "t" -> seconds on the timeline
        return [dict(e, at_s=round(e["t"] - t0, 3)) for e in items]

    return {
        "replicas_timeline": {g: [{"t": t, "replicas": r, "pods": p} for t, r, p in rows]
                              for g, rows in groups.items()},
        "pending_demand_timeline": [{"t": row["t"], "bundles": row["pending_demand"]}
                                    for row in rec.get("timeline", [])],
        "patches": rel(led.get("patches", [])),
        "conflicts": rel(led.get("conflicts", [])),
        "findings": rel(led.get("findings", [])),
        "stale_reads": rel(led.get("stale_reads", [])),
        # from the API stand-in's own record (wire_audit.py): patches that landed on a
        # group other than the one meant, and other writers' replicas writes the
        # autoscaler overwrote with no conflict reported (both must be 0); then the
        # guard's own counters and the conflicts it caught, by kind
        "wrong_group_patches": audit.get("wrong_group_patches"),
        "overwrites": audit.get("overwrites"),
        "overwrites_unreported": audit.get("overwrites_unreported"),
        "audit": audit.get("detail"),
        "guard": led.get("guard", {}),
        "conflicts_caught": {k: sum(1 for c in led.get("conflicts", []) if c["kind"] == k)
                             for k in sorted({c["kind"] for c in led.get("conflicts", [])})},
        "rejected_patches": [dict(w, at_s=round(w["t"] - t0, 3))
                             for w in rec.get("wire_patches", []) if w["status"] != 200],
        "scenario": rec.get("scenario", "default"),
        "reorders": rel(rec.get("reorders", [])),
        "max_pods": rec.get("max_pods"),
        "ray_check": led.get("ray_check", {}),
        "phases": rec.get("phases", []),
        "operator_events": rel(rec.get("operator_events", [])),
        "final": rec.get("final"),
        "autoscaler": {k: st.get(k) for k in ("mode", "ticks", "engine_ticks", "engine_errors",
                                              "ray_ticks", "shadow_ticks", "shadow_diff_ticks",
                                              "launched", "terminated", "engine_s_total",
                                              "engine_s_max", "warmup_s")},
    }

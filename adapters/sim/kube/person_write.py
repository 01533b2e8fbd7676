"""The KubeRay person-write scenario: a person lowers ``replicas`` of a group the
side-car has never written, while it runs.

The cluster is ``scenario.py``'s with ``cpu`` created at ``replicas: 2`` by the person who
applied the RayCluster (min 1, max 3, no ``workersToDelete`` left over) and a long idle
timeout, so the autoscaler has no reason to write ``cpu`` on its own.

1. ``start``         two ``cpu`` pods and their Ray nodes.
2. ``person-write``  ``kubectl edit`` sets ``cpu`` replicas 2 -> 1 (manager
                     ``kubectl-edit``); the operator deletes nothing at random. The
                     side-car's next read must report it (an ``ownership`` conflict on
                     ``spec.workerGroupSpecs[0].replicas``: expected 2, found 1,
                     written by ``kubectl-edit``, the autoscaler never wrote it).
3. ``pair-launch``   demand for 2 x {pair: 1}: Ray's scale request sets ``pair`` to 1
                     and, by Ray 2.60's rule (a decrease without ``workersToDelete`` is
                     put back to the pods it observes), ``cpu`` back to 2. That
                     overwrite is expected; unreported it would be silent.

``overwrites_unreported`` is counted from the API stand-in's write journal (the
person's write, and the autoscaler's later write of that field) against the ledger's
conflicts (``wire_audit.overwrites``).
"""
from __future__ import annotations

import copy
import time

from .local_cluster import NS, LocalKubeRay
from .reorder import _until
from .scenario import _ray_nodes, demo_cluster, recorded_run, start_phase

PERSON = "kubectl-edit"


def person_cluster() -> dict:
    """``demo_cluster()`` with ``cpu`` at 2 replicas as applied, nothing left over, and
    idle nodes kept 10 minutes."""
    cr = demo_cluster(idle_s=600)
    cpu = cr["spec"]["workerGroupSpecs"][0]
    cpu["replicas"], cpu["scaleStrategy"] = 2, {"workersToDelete": []}
    return cr


def lower(kr: LocalKubeRay, group: str, value: int) -> dict:
    """The person's ``kubectl edit``: read, set ``replicas``, write back."""
    st = kr.api.store
    cr = st.get("rayclusters", NS, kr.name)
    for g in cr["spec"]["workerGroupSpecs"]:
        if g["groupName"] == group:
            g["replicas"] = value
    out = st.update("rayclusters", NS, kr.name, copy.deepcopy(cr), PERSON)
    return {"t": time.time(), "resource_version": out["metadata"]["resourceVersion"]}


def _reported(kr: LocalKubeRay) -> bool:
    return any(c["kind"] == "ownership" and c.get("writer") == PERSON
               for c in kr.ledger().get("conflicts", []))


def run(kr: LocalKubeRay, log=print, timeout: float = 90.0) -> dict:
    """Drive the scenario on a started cluster; the caller stops it."""
    from ray.util.placement_group import placement_group

    with recorded_run(kr, log, scenario="person-write") as (rec, phase):
        start_phase(kr, phase, timeout, cpu=2)

        phase("person-write", writer=PERSON, sets="cpu replicas 2 -> 1")
        rec["person_write"] = lower(kr, "cpu", 1)
        # reported at the next read; without the report, wait a few ticks all the same
        _until(kr, rec, lambda: _reported(kr), max(10.0, 5 * kr.tick_s),
               "the side-car to report the person's write", log)
        rec["after_write"] = {"replicas": kr.replicas(), "pods": kr.pods()}

        phase("pair-launch", demand="placement group 2 x {pair: 1}, STRICT_SPREAD")
        pg = placement_group([{"pair": 1}] * 2, strategy="STRICT_SPREAD")
        if not pg.wait(timeout):
            rec.setdefault("timeouts", []).append("the pair placement group")
        _until(kr, rec, lambda: len(_ray_nodes(kr).get("pair", [])) == 2, timeout,
               "2 pair Ray nodes", log)
        time.sleep(2 * kr.tick_s)
        phase("end")
    return rec


def checks(rec: dict) -> dict:
    """The person-write scenario's verdicts: name -> (ok, detail)."""
    led = rec.get("ledger") or {}
    audit = rec.get("audit") or {}
    own = [c for c in led.get("conflicts", []) if c["kind"] == "ownership"
           and c.get("writer") == PERSON]
    writes = [w for w in audit.get("detail", {}).get("foreign_writes", [])
              if w["writer"] == PERSON]
    fin = rec.get("final") or {}
    return {
        "every phase reached its state": (not rec.get("timeouts"), rec.get("timeouts")),
        "the person's write reported (ownership, the autoscaler never wrote cpu)": (
            bool(own) and own[0]["field"] == "spec.workerGroupSpecs[0].replicas"
            and own[0].get("autoscaler_wrote") is None,
            [f"{c['field']}: expected {c.get('expected')}, found {c['found']}, writer "
             f"{c['writer']}" for c in own]),
        "overwrites_unreported == 0 (the API stand-in's journal)": (
            audit.get("overwrites_unreported") == 0,
            [f"{w['group']} {w['from']} -> {w['to']} by {w['writer']}: overwritten "
             f"{w['overwritten']} (to {w.get('autoscaler_value')}), reported {w['reported']}"
             for w in writes]),
        "wrong_group_patches == 0 (the API stand-in's record)": (
            audit.get("wrong_group_patches") == 0, audit.get("wrong_group_patches")),
        "the pair launch went ahead": (
            len(fin.get("pods", {}).get("pair", [])) == 2, fin.get("replicas")),
    }

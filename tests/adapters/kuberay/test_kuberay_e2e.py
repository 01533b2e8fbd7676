"""End to end: the KubeRay side-car (``vecsched-monitor kuberay-autoscaler``, Ray 2.60's own
KubeRay config reader and provider, the engine deciding) against the Kubernetes API
stand-in, with the operator stand-in starting each pod as a real Ray 2.60 worker node.

The scenario is adapters/sim/kube/scenario.py: demand -> replicas patch -> pods -> Ray
nodes -> idle -> workersToDelete -> scale-down to minReplicas, through every regression
scenario: replicas outside [min, max] (0 < minReplicas 1 at the start), a
``workersToDelete`` left over from an earlier autoscaler, numOfHosts 2, the operator
slow to delete, stale RayCluster reads, an external writer reverting ``replicas``.

* engine mode: Ray's scheduler runs beside the engine on every tick (the side-car's
  ``VECSCHED_RAY_CHECK=1``) and must agree on every one, so the patches sent are the
  ones Ray 2.60 would have sent;
* shadow mode (docs/ray.md): Ray's scheduler decides, the engine runs beside it, 0
  differences, and the same scale-up patches as in engine mode (the scale-down
  patches name whichever pods went idle first: timing, not the scheduler).

Marked ``cluster`` (like tests/adapters/ray/test_ray_cluster.py): real Ray processes, about 1.5 min.
"""
from __future__ import annotations

import glob
import os
import sys

import pytest

ray = pytest.importorskip("ray")

from vecsched.adapters.sim.kube import duplicate, person_write, reorder, scenario  # noqa: E402
from vecsched.adapters.sim.kube.local_cluster import LocalKubeRay  # noqa: E402
from vecsched.adapters.cli.kuberay import checks  # noqa: E402

RUNS: dict = {}


def _run(mode: str, tmp_path, which: str = "default") -> dict:
    key = (mode, which)
    if key in RUNS:
        return RUNS[key]
    from vecsched.engine import warmup
    warmup()                    # fills the numba cache the side-car loads
    dumps = str(tmp_path / f"dumps-{mode}")
    cr = person_write.person_cluster() if which == "person-write" else scenario.demo_cluster()
    kr = LocalKubeRay(cr, mode=mode, ray_check=mode == "engine", dump_dir=dumps)
    try:
        kr.start(timeout=300)
        run = {"reorder": reorder.run, "duplicate-name": duplicate.run,
               "person-write": person_write.run}.get(which, scenario.run)
        rec = run(kr, log=lambda m: print(f"[{mode}/{which}] {m}", file=sys.stderr))
        rec["dumps"] = sorted(glob.glob(os.path.join(dumps, "tick-*.json")))
        rec["managed"] = kr.cluster()["metadata"]["managedFields"]
    except Exception:
        print(kr.log_tail(200), file=sys.stderr)
        raise
    finally:
        kr.stop()
        kr.cleanup()
    RUNS[key] = rec
    return rec


def _replica_values(patches) -> dict:
    out: dict = {}
    for p in patches:
        for op in p:
            if op["path"].endswith("/replicas"):
                out.setdefault(int(op["path"].split("/")[3]), []).append(op["value"])
    return out


def _named(patches) -> set:
    return {n for p in patches for op in p if op["path"].endswith("/scaleStrategy")
            for n in op["value"]["workersToDelete"]}


@pytest.mark.cluster
def test_kuberay_engine_end_to_end(tmp_path):
    rec = _run("engine", tmp_path)
    verdicts = checks(rec)
    assert all(ok for ok, _ in verdicts.values()), verdicts
    # judged from the API stand-in's record: the GitOps revert was overwritten only
    # after it was reported, and no patch landed on another group
    audit = rec["audit"]
    assert audit["wrong_group_patches"] == 0 and audit["overwrites_unreported"] == 0, audit
    st, led = rec["stats"], rec["ledger"]
    # every decision after the kernels' background warm-up was the engine's (Ray's
    # scheduler decides the ticks before it, adapters/ray/autoscaler_scheduler.py);
    # Ray's scheduler agreed on every tick
    assert st["mode"] == "engine" and st["engine_ticks"] > 0
    assert st["engine_ticks"] + st["warmup_ticks"] == st["ticks"], st
    assert st["engine_errors"] == 0 and st["ray_ticks"] == st["warmup_ticks"], st
    chk = led["ray_check"]
    # (the two files are read a moment apart while the side-car keeps ticking)
    assert abs(chk["ticks"] - st["ticks"]) <= 1, (chk, st)
    assert chk["ticks"] > 0 and chk["diff_ticks"] == 0 and chk["errors"] == 0, chk
    # 4 nodes idle-terminated; a termination Ray's provider refuses while the slow
    # operator still holds an earlier one is decided again later, so >= 4 decisions
    assert st["launched"] == {"cpu": 2, "pair": 2}, st
    assert set(st["terminated"]) == {"IDLE"} and st["terminated"]["IDLE"] >= 4, st
    # the patches as the side-car sent them (guarded) are the ones the API server
    # applied; any it refused was a failed guard (422 / 409), read again and re-sent
    sent = [p["payload"] for p in led["patches"]]
    wire = [w["body"] for w in rec["wire_patches"]
            if w["manager"] == "python-requests" and w["status"] == 200]
    assert [p["sent"] for p in led["patches"]] == wire
    refused = [w for w in rec["wire_patches"] if w["status"] != 200]
    assert all(w["status"] in (409, 422) for w in refused)
    assert led["guard"]["guard_failures"] == len(refused), (led["guard"], refused)
    assert led["guard"]["wrong_group_patches"] == 0 and led["guard"]["refused"] == 0
    assert all(w["content_type"] == "application/json-patch+json" for w in rec["wire_patches"])
    assert all(p["sent"][0] == {"op": "test", "path": "/metadata/resourceVersion",
                                "value": p["sent"][0]["value"]} for p in led["patches"])
    # scale-up: one patch, replicas 0 -> 3, and the leftover workersToDelete cleared
    assert sent[0] == [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
         "value": {"workersToDelete": []}}]
    vals = _replica_values(sent)
    # after the external revert to 1, Ray's provider restores the observed 3 with the
    # pair launch; pair: one replica of two hosts; the scale-down ends at min / 0
    assert vals[0][:2] == [3, 3] and vals[0][-1] == 1, vals
    assert vals[1][0] == 1 and vals[1][-1] == 0, vals
    # pods <-> Ray nodes: each Ray node's instance id is its pod
    up = rec["after_scale_up"]
    assert sorted(up["ray_nodes"]["cpu"]) == sorted(up["pods"]["cpu"])
    mh = rec["after_multi_host"]
    assert sorted(mh["ray_nodes"]["pair"]) == sorted(mh["pods"]["pair"])
    # the operator deleted exactly the pods the autoscaler named, none at random, late
    deleted = {e["name"] for e in rec["operator_events"] if e["what"].startswith("pod deleted")}
    # (on a mismatch: every operator event with its reason, and the patches' times)
    assert deleted == _named(sent) - {scenario.LEFTOVER}, (
        [(round(e["t"], 1), e["what"], e["name"]) for e in rec["operator_events"]],
        [(round(p["t"], 1), p["payload"]) for p in led["patches"]])
    assert deleted == (set(up["pods"]["cpu"]) | set(mh["pods"]["pair"])) - set(
        rec["final"]["pods"]["cpu"])
    first_named = min(p["t"] for p in led["patches"] if _named([p["payload"]]))
    first_delete = min(e["t"] for e in rec["operator_events"]
                       if e["what"].startswith("pod deleted"))
    assert first_delete - first_named >= scenario.DELETE_DELAY_S - 0.5
    # the operator never cleared workersToDelete (it writes status only)
    assert rec["final"]["workers_to_delete"]["cpu"] or rec["final"]["workers_to_delete"]["pair"]
    assert {e["manager"] for e in rec["managed"] if "f:spec" in e["fieldsV1"]} <= {
        "kubectl", "python-requests", scenario.GITOPS_MANAGER}
    # regression reports: the revert (field named), replicas below min, stale reads
    (c,) = [c for c in led["conflicts"] if c["kind"] == "ownership"]
    assert (c["field"], c["group"], c["autoscaler_wrote"], c["found"], c["writer"]) == (
        "spec.workerGroupSpecs[0].replicas", "cpu", 3, 1, scenario.GITOPS_MANAGER)
    assert rec["after_gitops"]["pods"]["cpu"] == up["pods"]["cpu"]
    (f,) = led["findings"]
    assert (f["field"], f["replicas"], f["minReplicas"]) == ("spec.workerGroupSpecs[0].replicas",
                                                             0, 1)
    assert led["stale_reads"] and all(s["reread"] >= s["newest_seen"]
                                      for s in led["stale_reads"])
    # every tick's request was dumped, and explain reads them
    from vecsched.adapters.ray.dump import load_dump
    from vecsched.adapters.ray.explain import explain
    assert len(rec["dumps"]) >= st["ticks"]
    last = load_dump(rec["dumps"][-1])
    assert last["context"]["source"] == "kuberay" and last["context"]["upscaling_speed"] == 1000
    assert explain(last["request"], last["context"])["unplaced"] == []


@pytest.mark.cluster
def test_kuberay_shadow_mode_agrees_with_ray(tmp_path):
    rec = _run("shadow", tmp_path)
    verdicts = checks(rec)
    assert all(ok for ok, _ in verdicts.values()), verdicts
    st = rec["stats"]
    assert st["mode"] == "shadow" and st["ticks"] > 0
    assert st["ray_ticks"] == st["ticks"] == st["shadow_ticks"] + st["warmup_ticks"], st
    assert st["shadow_ticks"] > 0, st
    assert st["shadow_diff_ticks"] == 0 and st["shadow_errors"] == 0, st["last_diff"]
    assert st["launched"] == {"cpu": 2, "pair": 2}, st
    assert set(st["terminated"]) == {"IDLE"} and st["terminated"]["IDLE"] >= 4, st
    sent = [p["payload"] for p in rec["ledger"]["patches"]]
    if ("engine", "default") in RUNS:     # Ray deciding sent what the engine deciding sent
        eng = [p["payload"] for p in RUNS[("engine", "default")]["ledger"]["patches"]]
        assert sent[:2] == eng[:2]
        assert _replica_values(sent)[1] == _replica_values(eng)[1]
        assert _replica_values(sent)[0][-1] == _replica_values(eng)[0][-1] == 1
        # which cpu pods go first depends on when each went idle (timing), not on who
        # decides: the same number of them, the same pair pods
        assert len(_named(sent)) == len(_named(eng))


@pytest.mark.cluster
def test_kuberay_reorder_between_read_and_patch(tmp_path):
    """A reorder race: the groups reversed between the side-car's read and its patch, during
    a scale-up and a scale-down. Every patch lands on the group Ray meant: the guard's
    422 is read again and the patch re-addressed; ``pair`` never runs a pod.
    (On main, or with ``kuberay-demo --no-guard``, the scale-up patch went to ``pair``.)"""
    rec = _run("engine", tmp_path, "reorder")
    verdicts = reorder.checks(rec)
    assert all(ok for ok, _ in verdicts.values()), verdicts
    led = rec["ledger"]
    assert led["guard"]["wrong_group_patches"] == 0 and led["guard"]["moved_retries"] == 2
    moved = [(c["group"], c["index_decided_on"], c["index_now"], c["status"])
             for c in led["conflicts"] if c["kind"] == "group_moved"]
    assert moved == [("cpu", 0, 1, 422), ("cpu", 1, 0, 422)]
    # what Ray built addressed the index it read; what landed addressed cpu's index then
    for p, order in zip(led["patches"], (["pair", "cpu"], ["cpu", "pair"])):
        idx = order.index("cpu")
        assert {op["path"].split("/")[3] for op in p["sent"] if op["op"] == "replace"} \
            == {str(idx)}
        assert {"op": "test", "path": f"/spec/workerGroupSpecs/{idx}/groupName",
                "value": "cpu"} in p["sent"]
    result = scenario.result_json(rec)
    assert result["wrong_group_patches"] == 0
    assert result["conflicts_caught"] == {"group_moved": 2}
    assert result["overwrites_unreported"] == 0       # judged from the stand-in's record


@pytest.mark.cluster
def test_kuberay_duplicate_name_and_swapped_names(tmp_path):
    """A same-name copy of ``cpu`` inserted in front between a read and a patch, then
    ``cpu`` and ``pair`` swapping names (and counts) on unchanged templates: neither
    patch is re-sent by name; what landed is judged from the API stand-in's record.
    (With the name-only guard, both landed on the other group: wrong_group_patches 2.)"""
    rec = _run("engine", tmp_path, "duplicate-name")
    verdicts = duplicate.checks(rec)
    assert all(ok for ok, _ in verdicts.values()), verdicts
    result = scenario.result_json(rec)
    assert result["wrong_group_patches"] == 0 and result["overwrites_unreported"] == 0
    assert result["conflicts_caught"].get("group_identity", 0) >= 2


@pytest.mark.cluster
def test_kuberay_person_write_to_a_group_never_written(tmp_path):
    """A person lowers ``cpu`` (applied at 2, never written by the side-car) to 1: the
    side-car reports it at its next read; Ray's next scale request puts it back to the
    2 pods it observes, an overwrite that was reported. (Before: overwrites_unreported
    1.)"""
    rec = _run("engine", tmp_path, "person-write")
    verdicts = person_write.checks(rec)
    assert all(ok for ok, _ in verdicts.values()), verdicts
    result = scenario.result_json(rec)
    assert result["overwrites"] == 1 and result["overwrites_unreported"] == 0

"""The adversarial KubeRay cases (a stale read, a write of another client between read and
patch, ownership conflicts, replicas outside their bounds), in process: Ray 2.60's own
``KubeRayProvider`` and ``KubernetesHttpApiClient`` against the API and operator
stand-ins, once with the stock client (what main did: each case shows the damage) and
once with the side-car's client (``adapters/kuberay/client.py``: the damage is gone
and the ledger reports what it caught).

Races are made deterministic with the stand-in's ``before_next_patch`` hook: another
client's write lands between the provider's read and its patch.
"""
from __future__ import annotations

import pytest

pytest.importorskip("ray")
import requests  # noqa: E402
from ray.autoscaler._private.kuberay import node_provider as npv  # noqa: E402
from ray.autoscaler._private.kuberay.autoscaling_config import (  # noqa: E402
    _derive_autoscaling_config_from_ray_cr)

from tests.kits.kube_standin import (  # noqa: E402,F401  (fixtures)
    GITOPS, NS, RC, api, certs, live_pods, operator_of, patches_of, ray_cluster, ray_provider,
    tracked_client as _client, rewrite as _rewrite, replicas_of as _replicas,
    settle as _settle, worker_group, worker_names)

# ------------------------------------------------------------------ the API stand-in

def test_stand_in_answers_guards_as_the_api_server(api):
    """Through Ray's own client: a failed ``test`` op is 422 Invalid (nothing of the
    patch applied), a stale resourceVersion the patch sets is 409 Conflict, the
    current one passes."""
    api.store.create("rayclusters", NS, ray_cluster(worker_group("cpu", 0, 0, 3),
                                                 worker_group("gpu", 0, 0, 2)), "kubectl")
    c = npv.KubernetesHttpApiClient(NS)
    rv = c.get(f"rayclusters/{RC}")["metadata"]["resourceVersion"]
    wrong_name = [{"op": "test", "path": "/spec/workerGroupSpecs/0/groupName", "value": "gpu"},
                  npv.worker_replica_patch(0, 2)]
    with pytest.raises(requests.HTTPError) as e:
        c.patch(f"rayclusters/{RC}", wrong_name)
    assert e.value.response.status_code == 422 and e.value.response.json()["reason"] == "Invalid"
    assert _replicas(api) == {"cpu": 0, "gpu": 0}
    out = c.patch(f"rayclusters/{RC}", [npv.resource_version_test_patch(rv),
                                         npv.worker_replica_patch(1, 1)])
    assert out["spec"]["workerGroupSpecs"][1]["replicas"] == 1
    with pytest.raises(requests.HTTPError) as e:              # rv is stale now
        c.patch(f"rayclusters/{RC}", [npv.replace_patch("/metadata/resourceVersion", rv),
                                       npv.worker_replica_patch(0, 3)])
    assert e.value.response.status_code == 409 and e.value.response.json()["reason"] == "Conflict"
    cur = out["metadata"]["resourceVersion"]
    out = c.patch(f"rayclusters/{RC}", [npv.replace_patch("/metadata/resourceVersion", cur),
                                         npv.worker_replica_patch(0, 3)])
    assert _replicas(api) == {"cpu": 3, "gpu": 1}
    assert int(out["metadata"]["resourceVersion"]) > int(cur)


# ------------------------------------------------------------------ reorder during a patch

def _reorder_terminate(api, client):
    """cpu and gpu each run 2 pods; the provider terminates one cpu pod while a GitOps
    writer reverses the group order between its read and its patch."""
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 2, 0, 4), worker_group("gpu", 2, 0, 4)),
              "kubectl")
    op = operator_of(api)
    _settle(op)
    prov = ray_provider(client)
    victim = sorted(k for k, v in prov.get_non_terminated().items()
                    if v.node_type == "cpu")[0]
    st.before_next_patch("rayclusters", NS, RC, _rewrite(lambda gs: gs[::-1]))
    prov.terminate([victim], "t1")
    errs = prov.poll_errors()
    _settle(op)
    return victim, errs


def test_reorder_during_terminate_stock_client_hits_the_other_group(api):
    victim, errs = _reorder_terminate(api, None)
    assert errs == []
    assert _replicas(api) == {"gpu": 1, "cpu": 2}           # the gpu group scaled down
    assert victim in live_pods(api, "cpu")                        # the cpu pod kept running


def test_reorder_during_terminate_guarded_hits_the_right_group(api):
    client, ledger = _client()
    victim, errs = _reorder_terminate(api, client)
    assert errs == []
    assert _replicas(api) == {"gpu": 2, "cpu": 1}
    assert victim not in live_pods(api, "cpu") and len(live_pods(api, "gpu")) == 2
    (moved,) = [c for c in ledger.conflicts if c["kind"] == "group_moved"]
    assert (moved["group"], moved["index_decided_on"], moved["index_now"]) == ("cpu", 0, 1)
    assert moved["writer"] == GITOPS and moved["status"] == 422
    assert ledger.guard["wrong_group_patches"] == 0 and ledger.guard["moved_retries"] == 1
    sent = ledger.patches[-1]["sent"]
    assert {"op": "test", "path": "/spec/workerGroupSpecs/1/groupName", "value": "cpu"} in sent
    assert sent[-1]["path"] == "/spec/workerGroupSpecs/1/scaleStrategy"


def test_unguarded_client_measures_the_wrong_group_patch(api):
    """``guard=False`` sends Ray's patch unchanged: ``wrong_group_patches`` counts it."""
    client, ledger = _client(guard=False)
    _reorder_terminate(api, client)
    assert ledger.guard["wrong_group_patches"] == 1
    (w,) = ledger.wrong_group_patches
    assert {(h["meant"], h["hit"]) for h in w["hits"]} == {("cpu", "gpu")}


# ------------------------------------------------------------------ insert during a launch

def _insert_launch(api, client):
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 1, 0, 3), worker_group("gpu", 0, 0, 2)),
              "kubectl")
    op = operator_of(api)
    _settle(op)
    prov = ray_provider(client)
    st.before_next_patch("rayclusters", NS, RC,
                         _rewrite(lambda gs: [worker_group("mem", 1, 1, 4)] + gs))
    prov.launch({"gpu": 2}, "l1")
    errs = prov.poll_errors()
    _settle(op)
    return errs


def test_insert_during_launch_stock_client_scales_the_wrong_group(api):
    assert _insert_launch(api, None) == []
    # index 1 was gpu when read; after the insert it is cpu: cpu 1 -> 2, no gpu pod
    assert _replicas(api) == {"mem": 1, "cpu": 2, "gpu": 0}
    assert live_pods(api, "gpu") == [] and len(live_pods(api, "cpu")) == 2


def test_insert_during_launch_guarded_launches_gpu(api):
    client, ledger = _client()
    assert _insert_launch(api, client) == []
    assert _replicas(api) == {"mem": 1, "cpu": 1, "gpu": 2}
    assert len(live_pods(api, "gpu")) == 2 and len(live_pods(api, "cpu")) == 1
    moved = {c["group"]: (c["index_decided_on"], c["index_now"])
             for c in ledger.conflicts if c["kind"] == "group_moved"}
    assert moved == {"gpu": (1, 2)}                # cpu needs no change: not in the patch
    assert ledger.guard["wrong_group_patches"] == 0


# ------------------------------------------------------------------ a person's replicas write

def _person_writes(api, client):
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 1, 0, 8)), "kubectl")
    op = operator_of(api)
    _settle(op)
    prov = ray_provider(client)
    st.before_next_patch("rayclusters", NS, RC, _rewrite(
        lambda gs: [dict(gs[0], replicas=6)], manager="kubectl-edit"))
    prov.launch({"cpu": 1}, "l1")
    return prov, op, prov.poll_errors()


def test_person_replicas_write_stock_client_overwrites_it_silently(api):
    prov, op, errs = _person_writes(api, None)
    assert errs == [] and _replicas(api) == {"cpu": 2}         # 6 became 2, nobody told


def test_person_replicas_write_guarded_is_reported_and_kept(api):
    client, ledger = _client()
    prov, op, errs = _person_writes(api, client)
    assert [type(e).__name__ for e in errs] == ["LaunchNodeError"]
    assert _replicas(api) == {"cpu": 6}
    (c,) = [c for c in ledger.conflicts if c["kind"] == "ownership"]
    assert (c["field"], c["decided_on"], c["found"], c["writer"], c["detected"]) == (
        "spec.workerGroupSpecs[0].replicas", 1, 6, "kubectl-edit", "patch")
    assert ledger.guard["refused"] == 1 and ledger.guard["wrong_group_patches"] == 0
    # the next tick decides from 6 (Ray honours a manual increase); reported only once
    prov.launch({"cpu": 1}, "l2")
    assert prov.poll_errors() == [] and _replicas(api) == {"cpu": 7}
    assert len([c for c in ledger.conflicts if c["kind"] == "ownership"]) == 1


# ------------------------------------------------------------------ restart, then a stale read

def _restart_stale(api, client_after_restart):
    """An earlier side-car process terminated pod a; a new one starts (empty memory),
    its first RayCluster read is served stale, and it terminates pod b."""
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 3, 0, 3)), "kubectl")
    op = operator_of(api)
    _settle(op)
    before, _ = _client()
    prov = ray_provider(before)
    a, b, c = worker_names(prov)
    prov.terminate([a], "t1")                      # replicas 2, workersToDelete [a]
    st.serve_stale("rayclusters", NS, RC, 1)       # the restarted one's first read is old
    prov2 = ray_provider(client_after_restart)
    prov2.terminate([b], "t2")
    errs = prov2.poll_errors()
    _settle(op)
    return a, b, c, errs


def test_restart_stale_first_read_stock_client_leaks_a_pod(api):
    a, b, c, errs = _restart_stale(api, None)
    assert errs == [] and a in live_pods(api, "cpu")


def test_restart_stale_first_read_caught_against_a_list(api):
    client, ledger = _client()
    a, b, c, errs = _restart_stale(api, client)
    (s,) = ledger.stale_reads
    assert s["first_read"] and s["reread"] > s["got"]
    assert [type(e).__name__ for e in errs] == ["TerminateNodeError"]   # waits for a
    assert live_pods(api, "cpu") == sorted([b, c])
    lists = [e for e in api.requests("GET", "rayclusters") if e["name"] is None]
    assert len(lists) == 2                 # one LIST per side-car start, on its first read


# ------------------------------------------------------------------ a malformed group

def _malformed_cluster():
    no_name = worker_group("x", 0, 0, 2)
    del no_name["groupName"]
    return ray_cluster(worker_group("nullrep", None, 0, 2), worker_group("strmax", 0, 0, "3"), no_name,
                    worker_group("cpu", 0, 0, 3))


def test_malformed_group_stock_client_stops_every_group(api):
    api.store.create("rayclusters", NS, _malformed_cluster(), "kubectl")
    prov = ray_provider()
    prov.launch({"cpu": 2}, "l1")
    (err,) = prov.poll_errors()
    assert isinstance(err.__cause__, TypeError)
    assert _replicas_safe(api)["cpu"] == 0
    with pytest.raises((TypeError, KeyError)):             # Ray's config reader too
        _derive_autoscaling_config_from_ray_cr(api.store.get("rayclusters", NS, RC))


def _replicas_safe(api):
    return {g.get("groupName"): g.get("replicas") for g in
            api.store.get("rayclusters", NS, RC)["spec"]["workerGroupSpecs"]}


def test_malformed_group_reported_and_skipped_other_groups_scale(api):
    api.store.create("rayclusters", NS, _malformed_cluster(), "kubectl")
    client, ledger = _client()
    view = client.get(f"rayclusters/{RC}")
    assert [g["groupName"] for g in view["spec"]["workerGroupSpecs"]] == ["cpu"]
    cfg = _derive_autoscaling_config_from_ray_cr(view)        # Ray's config reader copes
    assert "cpu" in cfg["available_node_types"]
    prov = ray_provider(client)
    prov.launch({"cpu": 2}, "l1")
    assert prov.poll_errors() == []
    op = operator_of(api)
    _settle(op)
    assert _replicas_safe(api)["cpu"] == 2 and len(live_pods(api, "cpu")) == 2
    # Ray's patch said index 0 (its view); it went to index 3, guarded by the name
    assert ledger.patches[-1]["payload"][0]["path"] == "/spec/workerGroupSpecs/0/replicas"
    assert ledger.patches[-1]["sent"][-1]["path"] == "/spec/workerGroupSpecs/3/replicas"
    found = {(f["field"], repr(f["value"])) for f in ledger.findings
             if f["kind"] == "malformed_group"}
    assert found == {("spec.workerGroupSpecs[0].replicas", "None"),
                     ("spec.workerGroupSpecs[1].maxReplicas", "'3'"),
                     ("spec.workerGroupSpecs[2].groupName", "None")}
    prov.get_non_terminated()                                  # reported once, not per read
    assert len([f for f in ledger.findings if f["kind"] == "malformed_group"]) == 3


# ------------------------------------------------------------------ Ray's other patches

def test_idle_suspend_merge_patch_guarded_by_the_version(api):
    """Ray's idleSuspend merge patch carries the version decided on: re-sent after an
    unrelated write, refused (and reported) if someone wrote idleSuspend meanwhile."""
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 0, 0, 3)), "kubectl")
    client, ledger = _client()
    client.get(f"rayclusters/{RC}")
    st.before_next_patch("rayclusters", NS, RC, _rewrite(lambda gs: [dict(gs[0], maxReplicas=4)]))
    out = client.patch(f"rayclusters/{RC}", npv.idle_suspend_patch(True),
                       content_type="application/merge-patch+json")
    assert out["spec"]["idleSuspend"] is True and ledger.guard["version_retries"] == 1
    sent = ledger.patches[-1]["sent"]
    assert sent["metadata"]["resourceVersion"] != ledger.patches[-1]["payload"].get(
        "metadata", {}).get("resourceVersion")

    def resume(store):
        cr = store.get("rayclusters", NS, RC)
        cr["spec"]["idleSuspend"] = False
        store.update("rayclusters", NS, RC, cr, "kubectl-edit")
    client.get(f"rayclusters/{RC}")              # the next decision reads idleSuspend true
    st.before_next_patch("rayclusters", NS, RC, resume)
    with pytest.raises(requests.HTTPError) as e:          # Ray's code sees an HTTPError
        client.patch(f"rayclusters/{RC}", npv.idle_suspend_patch(True),
                     content_type="application/merge-patch+json")
    assert e.value.response.status_code == 409
    assert api.store.get("rayclusters", NS, RC)["spec"]["idleSuspend"] is False
    (c,) = [c for c in ledger.conflicts if c["kind"] == "field_changed"]
    assert (c["field"], c["found"], c["writer"]) == ("/spec/idleSuspend", False, "kubectl-edit")


def test_ray_finalizer_patch_refused_once_not_retried_against_its_own_test(api):
    """Ray's finalizer patch tests the version itself: when the RayCluster changed, the
    side-car does not re-send it (Ray's own test would fail again); Ray sees the 422
    it handles ("retry in the next reconcile cycle")."""
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 0, 0, 3)), "kubectl")
    client, ledger = _client()
    cr = client.get(f"rayclusters/{RC}")
    st.before_next_patch("rayclusters", NS, RC, _rewrite(lambda gs: [dict(gs[0], maxReplicas=4)]))
    with pytest.raises(requests.HTTPError) as e:
        client.patch(f"rayclusters/{RC}", npv.finalizer_patch(
            "ray.io/x", [], cr["metadata"]["resourceVersion"]))
    assert e.value.response.status_code == 422
    assert len([w for w in api.requests("PATCH", "rayclusters")]) == 1     # sent once
    assert ledger.guard["refused"] == 1
    fresh = client.get(f"rayclusters/{RC}")                               # the next cycle
    out = client.patch(f"rayclusters/{RC}", npv.finalizer_patch(
        "ray.io/x", [], fresh["metadata"]["resourceVersion"]))
    assert out["metadata"]["finalizers"] == ["ray.io/x"]


def test_malformed_group_pods_kept_other_groups_still_scale_down(api):
    """A malformed group with a running pod: Ray sees the pod as of an unknown node type
    and asks to terminate it with the idle cpu pod in one call. With Ray's provider the
    whole call fails and the cpu pod stays; with the side-car's (``provider.py``) the
    cpu pod goes, the malformed group's pod is kept and reported."""
    from ray.autoscaler.v2.instance_manager.cloud_providers.kuberay import cloud_provider
    from vecsched.adapters.kuberay.provider import skipping_provider

    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 2, 0, 3),
                                          worker_group("strmax", 1, 0, "3")), "kubectl")
    op = operator_of(api)
    _settle(op)
    (odd,) = live_pods(api, "strmax")
    cpu_pod = live_pods(api, "cpu")[0]
    results = {}
    for name, cls in (("stock", cloud_provider.KubeRayProvider), ("side-car", None)):
        client, ledger = _client()
        if cls is None:
            cls = skipping_provider(cloud_provider.KubeRayProvider, ledger)
        prov = cls(RC, {"namespace": NS}, gcs_client=None, k8s_api_client=client)
        prov.get_non_terminated()
        prov.terminate([cpu_pod, odd], f"t-{name}")
        results[name] = ([type(e).__name__ for e in prov.poll_errors()], ledger)
        _settle(op)
        if name == "stock":
            assert cpu_pod in live_pods(api, "cpu")              # nothing terminated at all
    errs, ledger = results["side-car"]
    assert errs == ["TerminateNodeError"]                    # for the malformed group's pod
    assert cpu_pod not in live_pods(api, "cpu") and live_pods(api, "strmax") == [odd]
    assert [f["pod"] for f in ledger.findings if f["kind"] == "termination_skipped"] == [odd]
    assert results["stock"][0] == ["TerminateNodeError", "TerminateNodeError"]

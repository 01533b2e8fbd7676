"""The Kubernetes API and KubeRay operator stand-ins, tested against Ray 2.60's own
KubeRay client code (``KubernetesHttpApiClient``, ``KubeRayProvider``), in process and
without a Ray cluster (the end-to-end run is tests/adapters/kuberay/test_kuberay_e2e.py).

Ray reads the API address and the TLS files from the environment when its module is
imported (``KUBERNETES_SERVICE_HOST``/``..._PORT_HTTPS``, ``RAY_KUBERAY_CLIENT_CERT_PATH``,
``..._KEY_PATH``, ``RAY_KUBERAY_CA_CERT_PATH``); the side-car process gets exactly those
variables. Here, in a process that imported Ray already, the ``api`` fixture
(tests/kits/kube_standin.py) sets the same module-level values Ray derived from them.
"""
from __future__ import annotations

import json
import ssl

import pytest

pytest.importorskip("ray")
import requests  # noqa: E402
from ray.autoscaler._private.kuberay import node_provider as npv  # noqa: E402

from vecsched.adapters.sim.kube.operator import Operator, PodRunner, desired_replicas  # noqa: E402
from vecsched.adapters.kuberay.sidecar import Ledger, tracking_client  # noqa: E402

from tests.kits.kube_standin import (NS, RC, api, certs, live_pods, operator_of,  # noqa: E402,F401
                                     patches_of, put_cluster, ray_cluster, ray_provider,
                                     worker_group, worker_names)


# ------------------------------------------------------------------ the API stand-in

def test_ray_client_reads_lists_and_patches_over_mtls(api):
    api.store.create("rayclusters", NS, ray_cluster(worker_group("cpu", 0, 0, 3)), "kubectl")
    c = npv.KubernetesHttpApiClient(NS)
    cr = c.get(f"rayclusters/{RC}")
    assert cr["spec"]["workerGroupSpecs"][0]["groupName"] == "cpu"
    prov = ray_provider()
    assert worker_names(prov) == []
    lists = [e for e in api.requests("GET", "pods") if e["name"] is None]
    # KubeRayProvider lists pods by label selector at the head pod's version or newer
    assert "labelSelector=ray.io/cluster%3Drc" in lists[-1]["path"]
    assert "resourceVersionMatch=NotOlderThan" in lists[-1]["path"]
    out = c.patch(f"rayclusters/{RC}", [npv.worker_replica_patch(0, 2)])
    assert out["spec"]["workerGroupSpecs"][0]["replicas"] == 2
    assert api.requests("PATCH")[-1]["content_type"] == "application/json-patch+json"
    assert api.requests("PATCH")[-1]["manager"] == "python-requests"
    # a caller without the client certificate is turned away at the TLS handshake
    with pytest.raises((requests.exceptions.SSLError, requests.exceptions.ConnectionError,
                        ssl.SSLError)):
        requests.get(f"{api.url}/api/v1/namespaces/{NS}/pods", verify=api.certs.ca, timeout=5)


def test_resource_version_semantics(api):
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 0, 0, 3)), "kubectl")
    c = npv.KubernetesHttpApiClient(NS)
    rv = int(c.get(f"rayclusters/{RC}")["metadata"]["resourceVersion"])
    with pytest.raises(requests.HTTPError) as e:             # not older than the future
        c.get(f"pods?labelSelector=x%3Dy&resourceVersion={rv + 50}"
              "&resourceVersionMatch=NotOlderThan")
    assert e.value.response.status_code == 504
    c.patch(f"rayclusters/{RC}", [npv.worker_replica_patch(0, 1)])
    with pytest.raises(requests.HTTPError) as e:             # an exact old version is gone
        c.get(f"pods?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert e.value.response.status_code == 410
    with pytest.raises(requests.HTTPError) as e:
        c.get("pods?labelSelector=a%20in%20(b")
    assert e.value.response.status_code == 400
    # a no-op patch keeps the version; a real one bumps it
    before = c.get(f"rayclusters/{RC}")["metadata"]["resourceVersion"]
    c.patch(f"rayclusters/{RC}", [npv.worker_replica_patch(0, 1)])
    assert c.get(f"rayclusters/{RC}")["metadata"]["resourceVersion"] == before


def test_conflicts_409_and_test_op_422_and_merge_patch(api):
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 0, 0, 3)), "kubectl")
    c = npv.KubernetesHttpApiClient(NS)
    cr = c.get(f"rayclusters/{RC}")
    c.patch(f"rayclusters/{RC}", [npv.worker_replica_patch(0, 2)])
    cr["spec"]["workerGroupSpecs"][0]["replicas"] = 0
    r = put_cluster(api, cr)                                          # read-modify-write, stale
    assert r.status_code == 409 and r.json()["reason"] == "Conflict"
    # Ray's finalizer patch guards itself with a resourceVersion `test` op
    stale = npv.finalizer_patch("f/x", [], cr["metadata"]["resourceVersion"])
    with pytest.raises(requests.HTTPError) as e:
        c.patch(f"rayclusters/{RC}", stale)
    assert e.value.response.status_code == 422
    fresh = c.get(f"rayclusters/{RC}")
    out = c.patch(f"rayclusters/{RC}", npv.finalizer_patch(
        "f/x", [], fresh["metadata"]["resourceVersion"]))
    assert out["metadata"]["finalizers"] == ["f/x"]
    out = c.patch(f"rayclusters/{RC}", npv.idle_suspend_patch(True),
                  content_type="application/merge-patch+json")
    assert out["spec"]["idleSuspend"] is True
    # replace of a key that is not there is rejected, as by the API server
    with pytest.raises(requests.HTTPError) as e:
        c.patch(f"rayclusters/{RC}", [npv.replace_patch("/spec/nothing/here", 1)])
    assert e.value.response.status_code == 422
    # the status subresource: a spec write keeps status, a status write keeps spec
    st.update("rayclusters", NS, RC, {"status": {"readyWorkerReplicas": 7}}, "op",
              subresource="status")
    cur = c.get(f"rayclusters/{RC}")
    cur["status"] = {}
    assert put_cluster(api, cur).json()["status"] == {"readyWorkerReplicas": 7}


def test_managed_fields_name_the_last_writer(api):
    api.store.create("rayclusters", NS, ray_cluster(worker_group("cpu", 0, 0, 3)), "kubectl")
    c = npv.KubernetesHttpApiClient(NS)
    c.patch(f"rayclusters/{RC}", [npv.worker_replica_patch(0, 2)])
    cr = c.get(f"rayclusters/{RC}")
    owners = {e["manager"] for e in cr["metadata"]["managedFields"]
              if "f:workerGroupSpecs" in e["fieldsV1"].get("f:spec", {})}
    assert owners == {"python-requests"}
    cr["spec"]["workerGroupSpecs"][0]["replicas"] = 0
    assert put_cluster(api, cr).status_code == 200
    cr = c.get(f"rayclusters/{RC}")
    owners = {e["manager"] for e in cr["metadata"]["managedFields"]
              if "f:workerGroupSpecs" in e["fieldsV1"].get("f:spec", {})}
    assert owners == {"argocd-application-controller"}


# ------------------------------------------------------------------ the operator stand-in

@pytest.mark.parametrize("rep,lo,hi,want", [(0, 1, 3, 1), (9, 0, 3, 3), (2, 0, 3, 2),
                                            (2, 4, 3, 3), (None, 2, 5, 2)])
def test_replicas_clamped_to_min_max(rep, lo, hi, want):
    g = {"minReplicas": lo, "maxReplicas": hi}
    if rep is not None:
        g["replicas"] = rep
    assert desired_replicas(g) == want


def test_operator_reconciles_pods(api):
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 9, 0, 3), worker_group("pair", 1, 0, 2, 2),
                                          worker_group("low", 0, 1, 4)), "kubectl")
    op = operator_of(api)
    op.reconcile_once()
    op.reconcile_once()
    assert len(live_pods(api, "cpu")) == 3           # above max: clamped
    assert len(live_pods(api, "pair")) == 2          # one replica of two hosts
    assert len(live_pods(api, "low")) == 1           # below min: clamped
    running = st.list("pods", NS, "ray.io/group=cpu")["items"]
    assert all("running" in p["status"]["containerStatuses"][0]["state"] for p in running)
    assert st.get("rayclusters", NS, RC)["status"]["desiredWorkerReplicas"] == 6


def test_workers_to_delete_first_never_cleared_no_random_delete(api):
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 3, 0, 3)), "kubectl")
    op = operator_of(api)
    op.reconcile_once()
    a, b, c = live_pods(api, "cpu")
    cr = st.get("rayclusters", NS, RC)
    g = cr["spec"]["workerGroupSpecs"][0]
    g.update(replicas=1, scaleStrategy={"workersToDelete": [b, "rc-cpu-worker-never"]})
    st.update("rayclusters", NS, RC, cr, "python-requests")
    op.reconcile_once()
    op.reconcile_once()
    assert live_pods(api, "cpu") == [a, c]           # b deleted; surplus c NOT deleted at random
    wtd = st.get("rayclusters", NS, RC)["spec"]["workerGroupSpecs"][0]["scaleStrategy"]
    assert wtd == {"workersToDelete": [b, "rc-cpu-worker-never"]}    # never cleared
    # the list deleted first, whatever replicas says: replicas 3 recreates after it
    cr = st.get("rayclusters", NS, RC)
    cr["spec"]["workerGroupSpecs"][0].update(replicas=3, scaleStrategy={"workersToDelete": [a]})
    st.update("rayclusters", NS, RC, cr, "python-requests")
    op.reconcile_once()
    op.reconcile_once()
    left = live_pods(api, "cpu")
    assert a not in left and c in left and len(left) == 3


def test_slow_operator_and_unhealthy_pods(api):
    st = api.store
    clock = [1000.0]
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 2, 0, 3)), "kubectl")
    op = Operator(st, NS, PodRunner(), clock=lambda: clock[0])
    op.delete_delay_s = 5.0
    op.reconcile_once()
    a, b = live_pods(api, "cpu")
    cr = st.get("rayclusters", NS, RC)
    cr["spec"]["workerGroupSpecs"][0].update(replicas=1, scaleStrategy={"workersToDelete": [a]})
    st.update("rayclusters", NS, RC, cr, "python-requests")
    op.reconcile_once()
    assert live_pods(api, "cpu") == [a, b]           # not yet
    clock[0] += 6
    op.reconcile_once()
    op.reconcile_once()
    assert live_pods(api, "cpu") == [b]
    # a Ray container that exits (restartPolicy Never): deleted, then recreated
    op.runner._state[b] = ("terminated", 1)
    op.reconcile_once()
    op.reconcile_once()
    op.reconcile_once()
    left = live_pods(api, "cpu")
    assert b not in left and len(left) == 1


# ------------------------------------------------------------------ Ray's provider

def test_ray_provider_patches(api):
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 0, 0, 3, wtd=["gone"]),
                                          worker_group("pair", 0, 0, 1, hosts=2)), "kubectl")
    op = operator_of(api)
    prov = ray_provider()
    prov.launch({"cpu": 2}, "l1")
    prov.launch({"pair": 2}, "l2")
    assert prov.poll_errors() == []
    op.reconcile_once()
    op.reconcile_once()
    assert len(live_pods(api, "cpu")) == 2 and len(live_pods(api, "pair")) == 2
    victim = live_pods(api, "cpu")[0]
    prov.terminate([victim], "t1")
    prov.launch({"cpu": 1}, "l3")              # a delete is pending: refused this time
    errs = prov.poll_errors()
    assert [type(e).__name__ for e in errs] == ["LaunchNodeError"]
    assert "Waiting for them to be deleted" in str(errs[0])
    prov.launch({"cpu": 5}, "l4")             # after the delete: capped at maxReplicas
    op.reconcile_once()
    prov.launch({"cpu": 5}, "l5")
    errs = prov.poll_errors()
    assert errs and "capped by maxReplicas" in str(errs[-1])
    assert patches_of(api) == [
        [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2},
         {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
          "value": {"workersToDelete": []}}],
        [{"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 1}],
        [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
         {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
          "value": {"workersToDelete": [victim]}}],
        [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3},
         {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
          "value": {"workersToDelete": []}}],
    ]


def _stale_scenario(api, client):
    """Two idle-terminations in a row, the second built on a stale RayCluster read."""
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 3, 0, 3)), "kubectl")
    op = operator_of(api)
    op.reconcile_once()
    prov = ray_provider(client)
    a, b, c = worker_names(prov)
    prov.terminate([a], "t1")                  # replicas 2, workersToDelete [a]
    st.serve_stale("rayclusters", NS, RC, 1)   # the next read is the version before it
    prov.terminate([b], "t2")
    errs = prov.poll_errors()
    for _ in range(3):
        op.reconcile_once()
    return a, b, c, errs


def test_stale_read_stock_ray_client_leaks_a_pod(api):
    """The failure the side-car's guard exists for: on a stale read Ray 2.60's provider
    does not see ``a`` pending deletion, replaces workersToDelete with [b] and sets
    replicas from the old value, so ``a`` is never deleted."""
    a, b, c, errs = _stale_scenario(api, None)
    assert errs == []
    assert patches_of(api)[-1][-1]["value"] == {"workersToDelete": [b]}
    assert a in live_pods(api, "cpu")                       # leaked: Ray asked for its deletion


def test_stale_read_caught_by_the_sidecar_client(api):
    ledger = Ledger(None)
    client = tracking_client(npv.KubernetesHttpApiClient, ledger)(NS)
    a, b, c, errs = _stale_scenario(api, client)
    assert len(ledger.stale_reads) == 1
    assert ledger.stale_reads[0]["reread"] > ledger.stale_reads[0]["got"]
    # with a fresh read Ray sees `a` still pending and waits instead of overwriting it
    assert [type(e).__name__ for e in errs] == ["TerminateNodeError"]
    assert live_pods(api, "cpu") == sorted([b, c])
    assert [p for p in patches_of(api) if p[-1].get("value") == {"workersToDelete": [b]}] == []


def test_ownership_conflict_reported_with_the_field(api):
    st = api.store
    st.create("rayclusters", NS, ray_cluster(worker_group("cpu", 0, 0, 3), worker_group("gpu", 0, 0, 2)),
              "kubectl")
    ledger = Ledger(None)
    client = tracking_client(npv.KubernetesHttpApiClient, ledger)(NS)
    prov = ray_provider(client)
    prov.launch({"gpu": 2}, "l1")
    prov.get_non_terminated()
    st.update("rayclusters", NS, RC, {"status": {"readyWorkerReplicas": 2}}, "kuberay-operator",
              subresource="status")
    prov.get_non_terminated()
    assert ledger.conflicts == []                        # the operator's status is not one
    cr = st.get("rayclusters", NS, RC)
    cr["spec"]["workerGroupSpecs"][1]["replicas"] = 0
    assert put_cluster(api, cr).status_code == 200
    prov.get_non_terminated()
    prov.get_non_terminated()                            # reported once, not every tick
    (c,) = ledger.conflicts
    assert c["field"] == "spec.workerGroupSpecs[1].replicas" and c["group"] == "gpu"
    assert (c["autoscaler_wrote"], c["found"]) == (2, 0)
    assert c["writer"] == "argocd-application-controller"
    assert [p["sent"] for p in ledger.patches] == patches_of(api)


def test_replicas_outside_min_max_reported(api):
    api.store.create("rayclusters", NS, ray_cluster(worker_group("cpu", 7, 1, 3)), "kubectl")
    ledger = Ledger(None)
    client = tracking_client(npv.KubernetesHttpApiClient, ledger)(NS)
    ray_provider(client).get_non_terminated()
    (f,) = ledger.findings
    assert f["kind"] == "replicas_out_of_range" and f["field"] == "spec.workerGroupSpecs[0].replicas"
    assert (f["replicas"], f["minReplicas"], f["maxReplicas"]) == (7, 1, 3)
    assert json.dumps(ledger.snapshot())                 # the file's content is JSON

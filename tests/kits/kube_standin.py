"""The Kubernetes API and KubeRay operator stand-ins set up for Ray 2.60's own KubeRay
client code, in process: the ``certs`` and ``api`` pytest fixtures (import them into
the test module) and helpers to build RayClusters and read pods and patches
(tests/adapters/sim/kube/test_kuberay_standin.py, test_kuberay_guards.py).

Ray reads the API address and the TLS files from the environment when its module is
imported; in a process that imported Ray already, ``api`` sets the same module-level
values Ray derived from them (and the default of ``url_from_resource``'s
``kubernetes_host`` argument, which Python bound at import)."""
from __future__ import annotations

import pytest
import requests
from ray.autoscaler._private.kuberay import node_provider as npv
from ray.autoscaler.v2.instance_manager.cloud_providers.kuberay import cloud_provider as cpv
from ray.autoscaler.v2.instance_manager.node_provider import NodeKind

from vecsched.adapters.kuberay.sidecar import Ledger, tracking_client
from vecsched.adapters.sim.kube.apiserver import KubeApiStandIn
from vecsched.adapters.sim.kube.operator import Operator, PodRunner
from vecsched.adapters.sim.kube.tls import Certs

NS = "default"
RC = "rc"


def worker_group(name, replicas, lo, hi, hosts=1, wtd=()):
    return {"groupName": name, "replicas": replicas, "minReplicas": lo, "maxReplicas": hi,
            "numOfHosts": hosts, "rayStartParams": {"num-cpus": "1"},
            "scaleStrategy": {"workersToDelete": list(wtd)},
            "template": {"spec": {"containers": [{"name": "ray-worker"}]}}}


def ray_cluster(*groups):
    return {"metadata": {"name": RC}, "spec": {
        "headGroupSpec": {"rayStartParams": {"num-cpus": "0"},
                          "template": {"spec": {"containers": [{"name": "ray-head"}]}}},
        "workerGroupSpecs": list(groups)}}


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs.make(str(tmp_path_factory.mktemp("tls")))


@pytest.fixture
def api(certs, monkeypatch):
    a = KubeApiStandIn(certs).start()
    monkeypatch.setattr(npv, "KUBERAY_CLIENT_CERT_PATH", certs.client_cert)
    monkeypatch.setattr(npv, "KUBERAY_CLIENT_KEY_PATH", certs.client_key)
    monkeypatch.setattr(npv, "KUBERAY_CA_CERT_PATH", certs.ca)
    monkeypatch.setattr(npv.url_from_resource, "__defaults__", (npv.KUBERAY_CRD_VER, a.url))
    monkeypatch.setattr(cpv, "RAY_HEAD_POD_NAME", "rc-head")
    a.store.create("pods", NS, {"metadata": {"name": "rc-head", "labels": {
        "ray.io/cluster": RC, "ray.io/node-type": "head", "ray.io/group": "headgroup"}},
        "spec": {"containers": [{"name": "ray-head"}]},
        "status": {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}},
        "kuberay-operator")
    yield a
    a.stop()


def put_cluster(api, cr, manager="argocd-application-controller"):
    return requests.put(f"{api.url}/apis/ray.io/v1/namespaces/{NS}/rayclusters/{RC}",
                        json=cr, params={"fieldManager": manager}, timeout=10,
                        **api.certs.requests_kwargs())


def ray_provider(client=None):
    return cpv.KubeRayProvider(RC, {"namespace": NS}, gcs_client=None, k8s_api_client=client)


def worker_names(prov):
    return sorted(k for k, v in prov.get_non_terminated().items()
                  if v.node_kind == NodeKind.WORKER)


def patches_of(api):
    return [e["body"] for e in api.requests("PATCH", "rayclusters") if e["status"] == 200]


def operator_of(api):
    return Operator(api.store, NS, PodRunner())


def live_pods(api, group=None):
    sel = "ray.io/node-type=worker" + (f",ray.io/group={group}" if group else "")
    return sorted(p["metadata"]["name"] for p in api.store.list("pods", NS, sel)["items"]
                  if "deletionTimestamp" not in p["metadata"])


# ---- writes of other clients and the side-car's client (the guard and identity tests)

GITOPS = "argocd-application-controller"


def tracked_client(guard=True, ledger=None):
    """Ray's KubeRay client wrapped by the side-car's (guarded or not) and its ledger."""
    ledger = ledger or Ledger(None)
    return tracking_client(npv.KubernetesHttpApiClient, ledger, guard=guard)(NS), ledger


def rewrite(edit, manager=GITOPS):
    """A write of another client: read the RayCluster, edit its groups, PUT it."""
    def write(store):
        cr = store.get("rayclusters", NS, RC)
        cr["spec"]["workerGroupSpecs"] = edit(cr["spec"]["workerGroupSpecs"])
        store.update("rayclusters", NS, RC, cr, manager)
    return write


def replicas_of(api):
    """groupName -> replicas as stored."""
    return {g["groupName"]: g["replicas"] for g in
            api.store.get("rayclusters", NS, RC)["spec"]["workerGroupSpecs"]}


def settle(op, n=3):
    """A few operator reconcile rounds."""
    for _ in range(n):
        op.reconcile_once()

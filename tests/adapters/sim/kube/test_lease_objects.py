"""The API stand-in's ``coordination.k8s.io/v1`` Lease objects, over HTTPS: create,
get, update and both patch kinds, with the API server's optimistic concurrency
(409 on a stale resourceVersion, 409 AlreadyExists on a second create, 422 on a
failed JSON-patch ``test``), and the Lease served only under its own API group."""
from __future__ import annotations

import json

import pytest
import requests

from vecsched.adapters.sim.kube.apiserver import KubeApiStandIn
from vecsched.adapters.sim.kube.tls import Certs

NS = "default"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs.make(str(tmp_path_factory.mktemp("tls")))


@pytest.fixture
def api(certs):
    a = KubeApiStandIn(certs).start()
    yield a
    a.stop()


def _call(api, method, path, body=None, ctype="application/json"):
    return requests.request(method, f"{api.url}/apis/coordination.k8s.io/v1/namespaces/{NS}/"
                            f"leases{path}", data=None if body is None else
                            json.dumps(body), headers={"Content-Type": ctype},
                            timeout=5, **api.certs.requests_kwargs())


def _lease(holder, transitions=1):
    return {"metadata": {"name": "l"}, "spec": {"holderIdentity": holder,
                                                "leaseDurationSeconds": 10,
                                                "leaseTransitions": transitions}}


def test_lease_crud_with_optimistic_concurrency(api):
    r = _call(api, "POST", "", _lease("A"))
    assert r.status_code == 201
    made = r.json()
    assert (made["apiVersion"], made["kind"]) == ("coordination.k8s.io/v1", "Lease")
    assert _call(api, "POST", "", _lease("B")).status_code == 409         # AlreadyExists
    assert _call(api, "POST", "", _lease("B")).json()["reason"] == "AlreadyExists"
    got = _call(api, "GET", "/l").json()
    assert got["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    # two writers from the same read: the first wins, the second is 409
    w1 = dict(got, spec=dict(got["spec"], holderIdentity="B", leaseTransitions=2))
    w2 = dict(got, spec=dict(got["spec"], holderIdentity="C", leaseTransitions=2))
    assert _call(api, "PUT", "/l", w1).status_code == 200
    r = _call(api, "PUT", "/l", w2)
    assert r.status_code == 409 and r.json()["reason"] == "Conflict"
    assert _call(api, "GET", "/l").json()["spec"]["holderIdentity"] == "B"
    # a merge patch carrying the old version: 409; the current one: applied
    stale = {"metadata": {"resourceVersion": got["metadata"]["resourceVersion"]},
             "spec": {"holderIdentity": "D"}}
    assert _call(api, "PATCH", "/l", stale, "application/merge-patch+json").status_code == 409
    cur = _call(api, "GET", "/l").json()["metadata"]["resourceVersion"]
    ok = dict(stale, metadata={"resourceVersion": cur})
    assert _call(api, "PATCH", "/l", ok, "application/merge-patch+json").status_code == 200
    # a JSON patch guarded by a test op on the holder
    guard = [{"op": "test", "path": "/spec/holderIdentity", "value": "B"},
             {"op": "replace", "path": "/spec/holderIdentity", "value": "E"}]
    assert _call(api, "PATCH", "/l", guard, "application/json-patch+json").status_code == 422
    assert _call(api, "GET", "/l").json()["spec"]["holderIdentity"] == "D"
    # no status subresource, and not served under another API group
    assert _call(api, "GET", "/l/status").status_code == 404
    r = requests.get(f"{api.url}/api/v1/namespaces/{NS}/leases/l", timeout=5,
                     **api.certs.requests_kwargs())
    assert r.status_code == 404
    assert _call(api, "DELETE", "/l").status_code == 200
    assert _call(api, "GET", "/l").status_code == 404

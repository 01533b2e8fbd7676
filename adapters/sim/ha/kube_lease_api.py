"""The Kubernetes API STAND-IN that holds the demo's Lease (`--backend kube`).

No real API server runs here, so `ha-demo --backend kube` starts the loopback
stand-in (`adapters/sim/kube/apiserver.py`: Lease objects with real optimistic
concurrency, 409 on a stale resourceVersion) in the demo's own process, on a
thread, over HTTPS on 127.0.0.1 with a throw-away CA and a client certificate
written under the run's directory. Every replica gets its URL and the TLS file
paths in its config (`settings`); `summary()` is what `ha.json` records of it: the
final Lease object's spec and how many requests of each method the replicas sent.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from vecsched.adapters.sim.kube.apiserver import KubeApiStandIn
from vecsched.adapters.sim.kube.store import ApiError
from vecsched.adapters.sim.kube.tls import Certs

NAMESPACE = "default"
LEASE_NAME = "vecsched-ha-demo"


class KubeLeaseApi:
    """A context manager: the stand-in serving while the demo runs."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.api: KubeApiStandIn | None = None

    def __enter__(self) -> "KubeLeaseApi":
        certs = Certs.make(str(self.directory))
        self.api = KubeApiStandIn(certs).start()
        return self

    def __exit__(self, *exc) -> None:
        if self.api is not None:
            self.api.stop()

    def settings(self) -> dict:
        """A replica's `kube` config: where the Lease is and how to reach it."""
        c = self.api.certs
        return {"url": self.api.url, "ca": c.ca, "client_cert": c.client_cert,
                "client_key": c.client_key, "namespace": NAMESPACE, "name": LEASE_NAME}

    def summary(self) -> dict:
        """The Lease's final spec and the requests the stand-in served, by method and
        status code."""
        try:
            spec = self.api.store.get("leases", NAMESPACE, LEASE_NAME).get("spec", {})
        except ApiError:
            spec = None
        reqs = self.api.requests(kind="leases")
        return {"url": self.api.url, "namespace": NAMESPACE, "name": LEASE_NAME,
                "lease": spec,
                "requests": dict(Counter(f"{r['method']} {r['status']}" for r in reqs))}

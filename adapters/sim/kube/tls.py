"""Certificates for the loopback Kubernetes API stand-in (``apiserver.py``).

Ray's KubeRay HTTP client refuses plain ``http://`` (``url_from_resource``), so the
stand-in speaks HTTPS. A throw-away CA (``trustme``) signs a server certificate for
127.0.0.1 and a client certificate; the server requires the client certificate. Ray
2.60 reads client TLS credentials from ``RAY_KUBERAY_CLIENT_CERT_PATH`` /
``RAY_KUBERAY_CLIENT_KEY_PATH`` and the CA from ``RAY_KUBERAY_CA_CERT_PATH``, and the
API address from ``KUBERNETES_SERVICE_HOST`` / ``KUBERNETES_SERVICE_PORT_HTTPS``
(``ray/autoscaler/_private/kuberay/node_provider.py``), so the side-car needs no code
change at all to talk to the stand-in: :meth:`Certs.sidecar_env` is the whole injection.
"""
from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

HOST = "127.0.0.1"          # loopback only: the stand-in never listens elsewhere


@dataclass(frozen=True)
class Certs:
    ca: str                  # PEM: the CA both sides trust
    server_chain: str        # PEM: server key + certificate chain
    client_cert: str         # PEM: client certificate chain
    client_key: str          # PEM: client private key

    @classmethod
    def make(cls, directory: str) -> "Certs":
        import trustme

        os.makedirs(directory, exist_ok=True)
        ca = trustme.CA(organization_name="vecsched kube-api stand-in")
        server = ca.issue_cert(HOST, "localhost")
        client = ca.issue_cert("vecsched-kuberay-sidecar@stand-in")
        paths = cls(*(os.path.join(directory, n) for n in
                      ("ca.pem", "server.pem", "client.pem", "client.key")))
        ca.cert_pem.write_to_path(paths.ca)
        server.private_key_and_cert_chain_pem.write_to_path(paths.server_chain)
        with open(paths.client_cert, "wb") as f:
            for blob in client.cert_chain_pems:
                f.write(blob.bytes())
        client.private_key_pem.write_to_path(paths.client_key)
        return paths

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=self.ca)
        ctx.load_cert_chain(self.server_chain)
        ctx.verify_mode = ssl.CERT_REQUIRED        # every caller shows the client cert
        return ctx

    def requests_kwargs(self) -> dict:
        """``verify`` / ``cert`` for a ``requests`` call to the stand-in."""
        return {"verify": self.ca, "cert": (self.client_cert, self.client_key)}

    def sidecar_env(self, port: int) -> dict:
        """The environment that points Ray's own KubeRay client at the stand-in."""
        return {
            "KUBERNETES_SERVICE_HOST": HOST,
            "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
            "RAY_KUBERAY_CLIENT_CERT_PATH": self.client_cert,
            "RAY_KUBERAY_CLIENT_KEY_PATH": self.client_key,
            "RAY_KUBERAY_CA_CERT_PATH": self.ca,
        }

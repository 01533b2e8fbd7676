"""A loopback Kubernetes API server STAND-IN for tests and demos (no real cluster here).

It serves the part of the Kubernetes REST API that Ray 2.60's KubeRay code
(``ray/autoscaler/_private/kuberay/``, ``ray/autoscaler/v2/.../kuberay/cloud_provider.py``)
and the KubeRay operator use, over HTTPS on 127.0.0.1 with a client certificate:

=========  ==========================================================  ===================
method     path                                                        used by
=========  ==========================================================  ===================
GET        /apis/ray.io/v1/namespaces/NS/rayclusters/NAME               Ray: every tick, config
PATCH      /apis/ray.io/v1/namespaces/NS/rayclusters/NAME               Ray: replicas, workersToDelete
           (``application/json-patch+json``; ``merge-patch+json``)      (merge: idleSuspend)
PUT        /apis/ray.io/v1/namespaces/NS/rayclusters/NAME[/status]      GitOps writers, the operator
DELETE     /apis/ray.io/v1/namespaces/NS/rayclusters/NAME               Ray: idle cluster delete
GET        /api/v1/namespaces/NS/pods?labelSelector=..&resourceVersion=..&resourceVersionMatch=..
GET        /api/v1/namespaces/NS/pods/NAME                              Ray: head pod version
PATCH/DELETE /api/v1/namespaces/NS/pods/NAME                            (IPPR, operator)
GET/POST/PUT/PATCH/DELETE /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]
                                                                       the Kubernetes lease
                                                                       backend (leader)
=========  ==========================================================  ===================

Semantics live in ``store.py`` (resourceVersion, 409 conflicts, managedFields, status
subresource, graceful deletion, stale reads on demand). Every request is kept in
:attr:`KubeApiStandIn.audit` (method, path, content type, body, status, manager), so
a test can read the patches exactly as they arrived on the wire.

Not served (404/405/415): watches, other kinds, strategic-merge and apply patches,
field selectors, admission webhooks and CRD validation beyond JSON well-formedness.
"""
from __future__ import annotations

import json
import re
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, List, Optional
from urllib.parse import parse_qs, unquote, urlsplit

from .selectors import SelectorError
from .store import ApiError, Store
from .tls import HOST, Certs

_PATH = re.compile(
    r"^/(?:api/v1|apis/ray\.io/v1|apis/coordination\.k8s\.io/v1)/namespaces/(?P<ns>[^/]+)/"
    r"(?P<kind>pods|rayclusters|leases)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?/?$")
_API_OF = {"pods": "/api/v1/", "rayclusters": "/apis/ray.io/v1/",
           "leases": "/apis/coordination.k8s.io/v1/"}


def manager_of(user_agent: str, field_manager: Optional[str]) -> str:
    """The field manager the API server records: ``fieldManager``, else the
    User-Agent's product token (``python-requests/2.32`` -> ``python-requests``)."""
    if field_manager:
        return field_manager
    return (user_agent or "unknown").split("/")[0].strip() or "unknown"


class KubeApiStandIn:
    """The stand-in: a :class:`Store` behind an HTTPS server on 127.0.0.1.

    ``start()`` binds a free port (or ``port``) and serves in a daemon thread;
    ``stop()`` closes it. ``url`` is ``https://127.0.0.1:PORT``.
    """

    def __init__(self, certs: Certs, store: Optional[Store] = None, port: int = 0,
                 clock: Callable[[], float] = time.time):
        self.certs = certs
        self.store = store or Store(clock=clock)
        self.audit: List[dict] = []
        self._audit_lock = threading.Lock()
        self._clock = clock
        self._server = ThreadingHTTPServer((HOST, port), _Handler)
        self._server.daemon_threads = True
        self._server.api = self
        # The TLS handshake runs in each request's own thread (on its first read), so
        # a slow or silent client never holds up the accept loop.
        self._server.socket = certs.server_context().wrap_socket(
            self._server.socket, server_side=True, do_handshake_on_connect=False)
        self._thread: Optional[threading.Thread] = None
        self._conns: set = set()              # open client connections (keep-alive)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"

    def start(self) -> "KubeApiStandIn":
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="kube-api-stand-in", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop every open connection, as a server that went away
        (a kept-alive connection does not go on being answered)."""
        self._server.shutdown()
        self._server.server_close()
        with self._audit_lock:
            conns, self._conns = list(self._conns), set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(5)

    def record(self, entry: dict) -> None:
        with self._audit_lock:
            self.audit.append(entry)

    def requests(self, method: Optional[str] = None, kind: Optional[str] = None) -> List[dict]:
        with self._audit_lock:
            return [e for e in self.audit if (method is None or e["method"] == method)
                    and (kind is None or e["kind"] == kind)]

    # ------------------------------------------------------------------ dispatch
    def handle(self, method: str, raw_path: str, headers, body: bytes) -> tuple:
        parts = urlsplit(raw_path)
        q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        m = _PATH.match(unquote(parts.path))
        if m is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested "
                           f"resource ({parts.path})")
        ns, kind, name, sub = m.group("ns"), m.group("kind"), m.group("name"), m.group("sub")
        if sub not in (None, "status") or (sub and kind == "leases"):
            raise ApiError(404, "NotFound", f"unknown subresource {sub!r}")
        if not parts.path.startswith(_API_OF[kind]):
            raise ApiError(404, "NotFound", f"{kind} is not served under this API group")
        manager = manager_of(headers.get("User-Agent", ""), q.get("fieldManager"))
        st = self.store
        if name is None:
            if method == "GET":
                return 200, st.list(kind, ns, q.get("labelSelector", ""),
                                    rv=q.get("resourceVersion"),
                                    match=q.get("resourceVersionMatch"))
            if method == "POST":
                return 201, st.create(kind, ns, _json(body), manager)
            raise ApiError(405, "MethodNotAllowed", f"{method} on a {kind} collection")
        if method == "GET":
            return 200, st.get(kind, ns, name, rv=q.get("resourceVersion"))
        if method == "PUT":
            return 200, st.update(kind, ns, name, _json(body), manager, subresource=sub)
        if method == "PATCH":
            ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
            return 200, st.patch(kind, ns, name, ctype, body, manager, subresource=sub)
        if method == "DELETE" and sub is None:
            return 200, st.delete(kind, ns, name, manager)
        raise ApiError(405, "MethodNotAllowed", f"{method} on {kind}/{name}")


def _json(body: bytes) -> dict:
    try:
        obj = json.loads(body or b"null")
    except ValueError as e:
        raise ApiError(400, "BadRequest", f"invalid JSON body: {e}")
    if not isinstance(obj, dict):
        raise ApiError(400, "BadRequest", "the body must be a JSON object")
    return obj


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "vecsched-kube-api-stand-in/1"
    # TCP_NODELAY: the status line + headers and the body leave in two writes; with
    # Nagle on, the second waits for the client's delayed ACK (~40 ms per request)
    disable_nagle_algorithm = True

    def log_message(self, *args):          # quiet: the audit log is the record
        pass

    def setup(self):
        super().setup()
        api = self.server.api
        with api._audit_lock:
            api._conns.add(self.connection)

    def finish(self):
        api = self.server.api
        with api._audit_lock:
            api._conns.discard(self.connection)
        super().finish()

    def _serve(self):
        api: KubeApiStandIn = self.server.api
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        t0 = time.monotonic()
        try:
            code, out = api.handle(self.command, self.path, self.headers, body)
        except ApiError as e:
            code, out = e.code, e.status()
        except SelectorError as e:
            code, out = 400, ApiError(400, "BadRequest", str(e)).status()
        except ValueError as e:
            code, out = 400, ApiError(400, "BadRequest", str(e)).status()
        payload = json.dumps(out).encode()
        m = _PATH.match(urlsplit(self.path).path)
        api.record({
            "t": api._clock(), "method": self.command, "path": self.path,
            "kind": m.group("kind") if m else None,
            "name": m.group("name") if m else None,
            "content_type": self.headers.get("Content-Type"),
            "manager": manager_of(self.headers.get("User-Agent", ""),
                                  parse_qs(urlsplit(self.path).query).get(
                                      "fieldManager", [None])[-1]),
            "body": _maybe_json(body), "status": code,
            "resource_version": (out.get("metadata") or {}).get("resourceVersion"),
            "ms": round(1e3 * (time.monotonic() - t0), 3),
        })
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_PUT = do_PATCH = do_POST = do_DELETE = _serve


def _maybe_json(body: bytes):
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")

"""The lease as a Kubernetes ``coordination.k8s.io/v1`` Lease (``LeaseBackend``).

One Lease object per cluster, the object client-go's leader election uses:

    spec.holderIdentity        the holder ('' once released)
    spec.leaseDurationSeconds  the holder's ttl, in whole seconds (rounded up: a
                               backend expiry later than the holder's own is safe)
    spec.leaseTransitions      the epoch: +1 on every successful acquisition, so each
                               term's epoch is above every earlier one; the object is
                               created with 1 (0 stays "never granted")
    spec.acquireTime/renewTime MicroTime on the writer's wall clock, for people only

Every change is a compare-and-swap: a PUT carrying the ``resourceVersion`` read, which
the API server refuses with 409 if anybody wrote the Lease since; a create that finds
the object already there is 409 too. So of two replicas acting on the same read, one
wins and the other reads again.

**Expiry is judged as client-go judges it**, never by comparing ``renewTime`` with
this machine's wall clock: each backend remembers the last version of the Lease it
saw and when it first saw it, on its own monotonic clock; another holder's lease is
expired once that clock has run ``leaseDurationSeconds`` past the moment this backend
first observed the current version without seeing any newer one. Clock offsets between
machines therefore do not matter, only clock rates (the ``Lease`` margin covers those).
A holder that renews writes a new version, which restarts every observer's count.

Holder identities must be unique per process start: :func:`new_holder_id` appends a
UUID to a readable name (a container's PID is 1 in every replica; a name and a PID
can repeat after a restart, and a zombie with a reused identity would renew a term
that is not its own).

Deleting the Lease object restarts ``leaseTransitions``; a backend that saw a higher
epoch creates the new object above it, and ``try_acquire``'s ``floor`` (which
``Lease`` passes: the highest epoch the replica knows of, from its own grants and
from durable places such as the fenced records or the cloud's fence) lifts the
grant above epochs this backend never saw. Only a replica that knows of no such
epoch anywhere could be granted one again (as with a Redis that lost its data).
A Lease created while an epoch was known is a grant after a loss (`Grant.reset`):
the deleted object's holder may still act until its own lease runs out. So is a
takeover of a Lease whose ``leaseTransitions`` is below the floor (the object restored
from an old backup).
"""
from __future__ import annotations

import copy
import math
import re
import time
import uuid
from datetime import datetime, timezone
from typing import Callable, Optional, Tuple

import requests

from .lease import BackendError, Grant, LeaseBackend

API = "coordination.k8s.io/v1"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_UNREACHABLE = (requests.ConnectionError, requests.Timeout)


def new_holder_id(name: str) -> str:
    """``<name>-<uuid4>``: a holder identity no other process start will ever use."""
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"name: a non-empty name without spaces is required, got {name!r}")
    return f"{name}-{uuid.uuid4()}"


def _micro_time(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_micro_time(text: Optional[str]) -> float:
    """Seconds since the epoch of a MicroTime / Time string (0 if absent or unreadable)."""
    if not text:
        return 0.0
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    return 0.0


def _check_name(field: str, value: str) -> None:
    if not isinstance(value, str) or len(value) > 253 or not _NAME.match(value):
        raise ValueError(f"{field}: a Kubernetes object name (lowercase letters, digits, "
                         f"'-' and '.', at most 253) is required, got {value!r}")


class KubeLeaseBackend(LeaseBackend):
    """``LeaseBackend`` over a Kubernetes API server (see the module docstring).

    api_url: ``https://host:port`` of the API server; namespace, name: the Lease's;
    ca: the CA bundle to verify the server with; client_cert / client_key: a client
    certificate (mTLS), and/or token_file: a bearer token (a service account's), read
    on every request so a rotated token is picked up; timeout_s: per request (keep it
    well under the lease ttl); clock: monotonic ns (the expiry rule's clock); wall:
    seconds since the epoch (only for acquireTime / renewTime).
    """

    def __init__(self, api_url: str, namespace: str, name: str, *,
                 ca: Optional[str] = None, client_cert: Optional[str] = None,
                 client_key: Optional[str] = None, token_file: Optional[str] = None,
                 timeout_s: float = 0.25, clock: Callable[[], int] = time.monotonic_ns,
                 wall: Callable[[], float] = time.time):
        if not isinstance(api_url, str) or not api_url.startswith("https://"):
            raise ValueError(f"api_url: an https:// URL of the Kubernetes API server is "
                             f"required, got {api_url!r}")
        _check_name("namespace", namespace)
        _check_name("name", name)
        if (client_cert is None) != (client_key is None):
            raise ValueError("client_cert / client_key: give both or neither")
        if not (timeout_s > 0):
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.namespace, self.name = namespace, name
        self._collection = (f"{api_url.rstrip('/')}/apis/{API}/namespaces/{namespace}"
                            f"/leases")
        self._url = f"{self._collection}/{name}"
        self._token_file, self._timeout = token_file, timeout_s
        self._clock, self._wall = clock, wall
        self._session = requests.Session()
        # per request, not on the session: a session's verify loses to
        # REQUESTS_CA_BUNDLE from the environment
        self._verify = ca if ca is not None else True
        self._cert = (client_cert, client_key) if client_cert is not None else None
        self._seen_rv: Optional[str] = None     # the last version observed ...
        self._seen_ns = 0                       # ... first observed at (local clock)
        self.max_epoch_seen = 0

    # ---- the API ------------------------------------------------------------------------
    def _request(self, method: str, url: str, body: Optional[dict] = None) -> Tuple[int, dict]:
        headers = {"Accept": "application/json"}
        if self._token_file:
            try:
                with open(self._token_file) as f:
                    headers["Authorization"] = f"Bearer {f.read().strip()}"
            except OSError as e:
                raise BackendError(f"kube lease: cannot read token_file: {e}") from e
        try:
            r = self._session.request(method, url, json=body, headers=headers,
                                      timeout=self._timeout, verify=self._verify,
                                      cert=self._cert)
        except _UNREACHABLE as e:
            raise BackendError(f"kube lease: {type(e).__name__}: {e}") from e
        try:
            out = r.json()
        except ValueError:
            out = {}
        if r.status_code >= 500 or r.status_code == 429 or r.status_code in (401, 403):
            raise BackendError(f"kube lease: {method} {url} answered {r.status_code} "
                               f"{out.get('reason', '')}: {out.get('message', r.text[:200])}")
        return r.status_code, out

    def _get(self) -> Optional[dict]:
        code, out = self._request("GET", self._url)
        if code == 404:
            return None
        if code != 200:
            raise BackendError(f"kube lease: GET answered {code}: {out.get('message')}")
        self._observe(out)
        return out

    def _put(self, obj: dict) -> Tuple[bool, Optional[dict]]:
        """Compare-and-swap on the resourceVersion ``obj`` carries."""
        code, out = self._request("PUT", self._url, obj)
        if code == 200:
            self._observe(out)
            return True, out
        if code == 409:
            return False, None
        raise BackendError(f"kube lease: PUT answered {code}: {out.get('message')}")

    # ---- the expiry rule ----------------------------------------------------------------
    def _observe(self, obj: dict) -> None:
        rv = obj["metadata"].get("resourceVersion")
        if rv != self._seen_rv:
            self._seen_rv, self._seen_ns = rv, int(self._clock())
        self.max_epoch_seen = max(self.max_epoch_seen, _spec(obj)[1])

    def _left_ms(self, obj: dict) -> int:
        """Time left on another holder's lease, by this backend's observation."""
        holder, _, duration_s = _spec(obj)
        if not holder:
            return -1
        left = self._seen_ns + duration_s * 1_000_000_000 - int(self._clock())
        return max(0, left // 1_000_000)

    def _held_by_other(self, obj: dict, holder: str) -> bool:
        cur = _spec(obj)[0]
        return bool(cur) and cur != holder and self._left_ms(obj) > 0

    def _grant(self, obj: Optional[dict], acquired: bool, ttl_ms: int = -1) -> Grant:
        if obj is None:
            return Grant(False, self.max_epoch_seen, "", -1)
        holder, epoch, _ = _spec(obj)
        return Grant(acquired, epoch, holder, ttl_ms if acquired else self._left_ms(obj))

    def _record(self, obj: dict, holder: str, ttl_ms: int, epoch: int, acquire: bool) -> dict:
        """The Lease with a new record. Its renewTime is always later than the one it
        replaces (by 1 us if the wall clock has not moved on or went back): a renewal
        that changed nothing would be a no-op write, no new version, invisible to the
        other replicas, which would then take a lease that is being renewed."""
        new = copy.deepcopy(obj)
        spec = new.setdefault("spec", {})
        now = _micro_time(max(self._wall(), _parse_micro_time(spec.get("renewTime")) + 1e-6))
        spec.update(holderIdentity=holder, leaseDurationSeconds=_seconds(ttl_ms),
                    renewTime=now, leaseTransitions=epoch)
        if acquire:
            spec["acquireTime"] = now
        return new

    # ---- LeaseBackend -------------------------------------------------------------------
    def try_acquire(self, holder: str, ttl_ms: int, floor: int = 0) -> Grant:
        """Take the Lease if it is free, expired by this backend's observation, or
        ours, with ``leaseTransitions`` set one above the highest of its current
        value and ``floor`` (the highest epoch the acquirer knows of from elsewhere:
        the fenced records, the cloud's fence), so a Lease object that was deleted
        and recreated, or restored from an old backup, never hands out an epoch that
        was already used."""
        floor = int(floor)
        if floor < 0:
            raise ValueError(f"floor must be >= 0, got {floor!r}")
        obj = self._get()
        if obj is None:
            epoch = max(self.max_epoch_seen, floor) + 1
            body = self._record({"apiVersion": API, "kind": "Lease",
                                 "metadata": {"name": self.name, "namespace": self.namespace}},
                                holder, ttl_ms, epoch, acquire=True)
            code, out = self._request("POST", self._collection, body)
            if code == 201:
                self._observe(out)
                # Gone although an epoch was known: a deleted Lease, whose holder may
                # still act until its own lease runs out (`Lease` waits it out).
                return Grant(True, epoch, holder, int(ttl_ms), reset=epoch > 1)
            if code != 409:
                raise BackendError(f"kube lease: create answered {code}: {out.get('message')}")
            return self._grant(self._get(), False)     # somebody else created it first
        if self._held_by_other(obj, holder):
            return self._grant(obj, False)
        known = _spec(obj)[1]
        epoch = max(known, floor) + 1
        ok, out = self._put(self._record(obj, holder, ttl_ms, epoch, acquire=True))
        if ok:
            # leaseTransitions below an epoch the acquirer saw: the object went back (a
            # restored backup), so a holder of a forgotten epoch may still act
            return Grant(True, epoch, holder, int(ttl_ms), reset=known < floor)
        return self._grant(self._get(), False)         # lost the compare-and-swap

    def renew(self, holder: str, epoch: int, ttl_ms: int) -> bool:
        for _ in range(2):               # a 409 from an unrelated write: read, try once more
            obj = self._get()
            if obj is None or _spec(obj)[:2] != (holder, epoch):
                return False
            ok, _ = self._put(self._record(obj, holder, ttl_ms, epoch, acquire=False))
            if ok:
                return True
        return False

    def release(self, holder: str, epoch: int) -> bool:
        obj = self._get()
        if obj is None or _spec(obj)[:2] != (holder, epoch):
            return False
        new = self._record(obj, "", 1000, epoch, acquire=False)
        return self._put(new)[0]

    def read(self) -> Grant:
        return self._grant(self._get(), False)


def _spec(obj: dict) -> Tuple[str, int, int]:
    """(holderIdentity, leaseTransitions, leaseDurationSeconds) of a Lease object,
    with the API's defaults for absent fields."""
    spec = obj.get("spec") or {}
    return (spec.get("holderIdentity") or "", int(spec.get("leaseTransitions") or 0),
            int(spec.get("leaseDurationSeconds") or 0))


def _seconds(ttl_ms: int) -> int:
    return max(1, math.ceil(int(ttl_ms) / 1000))

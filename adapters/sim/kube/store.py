"""The object store behind the Kubernetes API stand-in: etcd's part, in memory.

What it keeps faithful to a real API server, because Ray's KubeRay client and the
KubeRay operator depend on it:

* one cluster-wide ``resourceVersion`` counter; every write that changes an object
  bumps it, a write that changes nothing does not;
* optimistic concurrency: an update, a merge patch or a JSON patch whose result
  carries a ``metadata.resourceVersion`` other than the current one fails with 409
  Conflict (a patch that leaves the version alone is applied to the current object);
  a JSON patch ``test`` op that fails is 422 Invalid, checked before the version (what
  Ray 2.60's finalizer patch and the side-car's guards expect);
* the status subresource: writes to the main resource keep ``status``, writes to
  ``/status`` change only ``status``; ``metadata.generation`` moves with the spec;
* ``metadata.managedFields``: who last wrote which field (manager = the
  ``fieldManager`` parameter, else the User-Agent's product token, as the API server
  does), lists owned whole (the RayCluster CRD declares no list keys);
* graceful deletion: deleting a pod sets ``deletionTimestamp``; the pod leaves the
  store when its "kubelet" (the operator's runner) reports it stopped;
* reads not older than a ``resourceVersion`` (wait, then 504 "Too large resource
  version"), ``Exact`` matches (410 Gone for an old version).

Kinds: ``pods``, ``rayclusters`` and ``leases`` (``coordination.k8s.io/v1``, the
leader-election object: no status subresource, the same optimistic concurrency).

Fault injection for the regression scenarios: :meth:`Store.serve_stale` makes the next
n unversioned GETs of one object return a version some writes old (a lagging cache);
:meth:`Store.before_next_patch` runs a write of another client just before the next
PATCH of one object is applied (a GitOps writer racing between a read and a patch).
:attr:`Store.journal` keeps every committed RayCluster write (manager, resourceVersion,
the object before and after) for the scenarios' audits (``wire_audit.py``).
"""
from __future__ import annotations

import copy
import json
import threading
import time
from collections import deque
from datetime import datetime, timezone
from typing import Callable, Dict, Optional, Tuple

import jsonpatch
import jsonpointer

from .selectors import parse as parse_selector

KINDS = {"pods": ("v1", "Pod"), "rayclusters": ("ray.io/v1", "RayCluster"),
         "leases": ("coordination.k8s.io/v1", "Lease")}
_VOLATILE = ("resourceVersion", "managedFields", "generation")
_HISTORY = 8              # previous versions kept per object (stale reads)


class ApiError(Exception):
    """An API error answered as a ``Status`` object."""

    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}


def _now(clock) -> str:
    return datetime.fromtimestamp(clock(), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fields(old, new) -> dict:
    """FieldsV1 of the leaves that differ between two JSON objects (lists atomic)."""
    out = {}
    for k in list(old) + [k for k in new if k not in old]:
        a, b = old.get(k, _MISSING), new.get(k, _MISSING)
        if k in _VOLATILE or a == b:
            continue
        if isinstance(b, dict) and (a is _MISSING or isinstance(a, dict)):
            sub = _fields({} if a is _MISSING else a, b)
            if sub or not b:
                out["f:" + k] = sub
        else:
            out["f:" + k] = {}
    return out


_MISSING = object()


def _merge_fields(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in b.items():
        whole = not v or (k in out and not out[k])     # {} owns the whole field
        out[k] = {} if whole else _merge_fields(out.get(k, {}), v)
    return out


def _remove_fields(a: dict, b: dict) -> dict:
    """a minus the leaves of b (a leaf of b removes a's whole subtree there)."""
    out = {}
    for k, v in a.items():
        if k not in b:
            out[k] = v
        elif b[k] and v:
            rest = _remove_fields(v, b[k])
            if rest:
                out[k] = rest
    return out


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


Key = Tuple[str, str, str]        # (kind, namespace, name)


class Store:
    def __init__(self, clock: Callable[[], float] = time.time,
                 uid: Optional[Callable[[], str]] = None):
        self._clock = clock
        self._n_uid = 0
        self._uid = uid or self._next_uid
        self._rv = 0
        self._objs: Dict[Key, dict] = {}
        self._hist: Dict[Key, deque] = {}
        self._stale: Dict[Key, tuple] = {}    # key -> (GETs left, versions back)
        self._before_patch: Dict[Key, list] = {}  # key -> writes to run before PATCHes
        self._cv = threading.Condition()
        # every committed write of a RayCluster, in order: what the audit of a scenario
        # reads (which group a patch landed on, whose write it overwrote)
        self.journal: list = []

    def _next_uid(self) -> str:
        self._n_uid += 1
        return f"00000000-0000-4000-8000-{self._n_uid:012d}"

    # ---------------------------------------------------------------- reading
    @property
    def resource_version(self) -> int:
        with self._cv:
            return self._rv

    def get(self, kind: str, ns: str, name: str, *, rv: Optional[str] = None,
            timeout: float = 3.0) -> dict:
        key = (kind, ns, name)
        with self._cv:
            if rv not in (None, "", "0"):
                self._wait_for(int(rv), timeout)
            obj = self._objs.get(key)
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
            n, back = self._stale.get(key, (0, 1))
            if rv in (None, "") and n > 0:
                self._stale[key] = (n - 1, back)
                hist = self._hist.get(key)
                if hist:
                    return copy.deepcopy(hist[-min(back, len(hist))])
            return copy.deepcopy(obj)

    def list(self, kind: str, ns: str, selector: str = "", *, rv: Optional[str] = None,
             match: Optional[str] = None, timeout: float = 3.0) -> dict:
        pred = parse_selector(selector)
        with self._cv:
            if match and rv in (None, ""):
                raise ApiError(400, "BadRequest",
                               "resourceVersionMatch is forbidden unless resourceVersion "
                               "is provided")
            if match not in (None, "", "NotOlderThan", "Exact"):
                raise ApiError(400, "BadRequest", f"unknown resourceVersionMatch {match!r}")
            if match == "Exact":
                if int(rv) != self._rv:
                    raise ApiError(410, "Expired", f"too old resource version: {rv} "
                                   f"({self._rv})")
            elif rv not in (None, "", "0"):
                self._wait_for(int(rv), timeout)
            items = [copy.deepcopy(o) for (k, n, _), o in sorted(self._objs.items())
                     if k == kind and n == ns and pred(o["metadata"].get("labels", {}))]
            api, k = KINDS[kind]
            return {"kind": k + "List", "apiVersion": api,
                    "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    def _wait_for(self, rv: int, timeout: float) -> None:
        if not self._cv.wait_for(lambda: self._rv >= rv, timeout):
            raise ApiError(504, "Timeout", f"Timeout: Too large resource version: {rv}, "
                           f"current resource version: {self._rv}")

    def wait_change(self, since: int, timeout: float) -> int:
        """Block until the store's resourceVersion passes ``since`` (or timeout)."""
        with self._cv:
            self._cv.wait_for(lambda: self._rv > since, timeout)
            return self._rv

    # ---------------------------------------------------------------- writing
    def serve_stale(self, kind: str, ns: str, name: str, n: int, back: int = 1) -> None:
        """The next ``n`` unversioned GETs of this object return the version ``back``
        writes before the current one (or the oldest kept): a cache lagging behind."""
        with self._cv:
            self._stale[(kind, ns, name)] = (n, back)

    def before_next_patch(self, kind: str, ns: str, name: str,
                          write: Callable[["Store"], None]) -> None:
        """Run ``write(store)`` right before the next PATCH of this object is applied,
        as if another client's write had landed between the patcher's read and its
        patch. Several calls queue up, one per PATCH."""
        with self._cv:
            self._before_patch.setdefault((kind, ns, name), []).append(write)

    def create(self, kind: str, ns: str, obj: dict, manager: str) -> dict:
        obj = copy.deepcopy(obj)
        api, k = KINDS[kind]
        obj.setdefault("apiVersion", api)
        obj.setdefault("kind", k)
        meta = obj.setdefault("metadata", {})
        meta["namespace"] = ns
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        with self._cv:
            key = (kind, ns, name)
            if key in self._objs:
                raise ApiError(409, "AlreadyExists", f'{kind} "{name}" already exists')
            meta.update(uid=self._uid(), generation=1,
                        creationTimestamp=_now(self._clock))
            meta.pop("resourceVersion", None)
            meta["managedFields"] = []
            self._commit(key, {}, obj, manager, "Update", None)
            return copy.deepcopy(obj)

    def update(self, kind: str, ns: str, name: str, obj: dict, manager: str,
               subresource: Optional[str] = None) -> dict:
        with self._cv:
            cur = self._current(kind, ns, name)
            self._precondition(cur, (obj.get("metadata") or {}).get("resourceVersion"))
            return self._apply(kind, ns, name, cur, copy.deepcopy(obj), manager, subresource)

    def patch(self, kind: str, ns: str, name: str, content_type: str, body: bytes,
              manager: str, subresource: Optional[str] = None) -> dict:
        try:
            doc = json.loads(body or b"null")
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"invalid JSON in the patch body: {e}")
        with self._cv:
            queued = self._before_patch.get((kind, ns, name))
            if queued:
                queued.pop(0)(self)
            cur = self._current(kind, ns, name)
            if content_type == "application/json-patch+json":
                if not isinstance(doc, list):
                    raise ApiError(400, "BadRequest", "a JSON patch must be a list of ops")
                try:
                    new = jsonpatch.JsonPatch(doc).apply(cur)
                except jsonpatch.JsonPatchTestFailed as e:
                    raise ApiError(422, "Invalid", f"the server rejected our request due to "
                                   f"an error in our request: {e}")
                except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException,
                        TypeError, KeyError, IndexError) as e:
                    raise ApiError(422, "Invalid", f"the server rejected our request due to "
                                   f"an error in our request: {e}")
            elif content_type == "application/merge-patch+json":
                if not isinstance(doc, dict):
                    raise ApiError(400, "BadRequest", "a merge patch must be an object")
                self._precondition(cur, (doc.get("metadata") or {}).get("resourceVersion"))
                new = merge_patch(cur, doc)
            else:
                # strategic merge and apply patches are not served for custom resources
                raise ApiError(415, "UnsupportedMediaType",
                               f"the body of the request was in an unknown format - "
                               f"accepted media types include: application/json-patch+json, "
                               f"application/merge-patch+json (got {content_type!r})")
            # A resourceVersion the patch put (or left) in the object is a precondition,
            # as when the API server updates the patched object in storage.
            meta = new.setdefault("metadata", {}) if isinstance(new, dict) else None
            if meta is None or not isinstance(meta, dict):
                raise ApiError(422, "Invalid", "the patched object has no metadata")
            self._precondition(cur, meta.get("resourceVersion"))
            meta["resourceVersion"] = cur["metadata"]["resourceVersion"]
            return self._apply(kind, ns, name, cur, new, manager, subresource)

    def delete(self, kind: str, ns: str, name: str, manager: str,
               graceful: bool = True) -> dict:
        with self._cv:
            cur = self._current(kind, ns, name)
            if graceful and (kind == "pods" or cur["metadata"].get("finalizers")):
                if "deletionTimestamp" in cur["metadata"]:
                    return copy.deepcopy(cur)
                new = copy.deepcopy(cur)
                new["metadata"]["deletionTimestamp"] = _now(self._clock)
                self._commit((kind, ns, name), cur, new, manager, "Update", None)
                return copy.deepcopy(new)
            return self.remove(kind, ns, name)

    def remove(self, kind: str, ns: str, name: str) -> dict:
        """The object leaves the store (a pod whose containers stopped, after a delete)."""
        with self._cv:
            key = (kind, ns, name)
            obj = self._objs.pop(key, None)
            self._hist.pop(key, None)
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
            self._rv += 1
            self._cv.notify_all()
            return copy.deepcopy(obj)

    # ---------------------------------------------------------------- internals
    def _current(self, kind, ns, name) -> dict:
        obj = self._objs.get((kind, ns, name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
        return obj

    @staticmethod
    def _precondition(cur: dict, rv) -> None:
        if rv not in (None, "") and str(rv) != cur["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict",
                           f'Operation cannot be fulfilled on {cur["kind"].lower()}s '
                           f'"{cur["metadata"]["name"]}": the object has been modified; '
                           f"please apply your changes to the latest version and try again")

    def _apply(self, kind, ns, name, cur, new, manager, subresource) -> dict:
        meta = new.setdefault("metadata", {})
        for k in ("uid", "creationTimestamp", "namespace", "name", "generation",
                  "managedFields", "deletionTimestamp"):
            if k in cur["metadata"]:
                meta[k] = copy.deepcopy(cur["metadata"][k])
            else:
                meta.pop(k, None)
        if subresource == "status":
            merged = copy.deepcopy(cur)
            merged["status"] = copy.deepcopy(new.get("status", {}))
            new = merged
        elif subresource is None and kind == "rayclusters":
            new["status"] = copy.deepcopy(cur.get("status", {}))
            if new.get("spec") != cur.get("spec"):
                new["metadata"]["generation"] = cur["metadata"].get("generation", 1) + 1
        elif subresource is not None:
            raise ApiError(404, "NotFound", f"unknown subresource {subresource!r}")
        self._commit((kind, ns, name), cur, new, manager, "Update", subresource)
        return copy.deepcopy(self._objs[(kind, ns, name)])

    def _commit(self, key: Key, old: dict, new: dict, manager: str, op: str,
                subresource: Optional[str]) -> None:
        changed = _fields(old, new)
        if old and not changed:
            return                                 # a no-op write keeps its version
        entries = [dict(e) for e in new["metadata"].get("managedFields", [])]
        for e in entries:
            e["fieldsV1"] = _remove_fields(e.get("fieldsV1", {}), changed)
        entries = [e for e in entries if e["fieldsV1"]]
        mine = next((e for e in entries if e["manager"] == manager
                     and e.get("subresource") == subresource), None)
        if mine is None:
            mine = {"manager": manager, "operation": op, "apiVersion": KINDS[key[0]][0],
                    "fieldsType": "FieldsV1", "fieldsV1": {}}
            if subresource:
                mine["subresource"] = subresource
            entries.append(mine)
        mine["fieldsV1"] = _merge_fields(mine["fieldsV1"], changed)
        mine["time"] = _now(self._clock)
        new["metadata"]["managedFields"] = entries
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        if old:
            self._hist.setdefault(key, deque(maxlen=_HISTORY)).append(copy.deepcopy(old))
        if key[0] == "rayclusters":
            self.journal.append({"t": self._clock(), "ns": key[1], "name": key[2],
                                 "manager": manager, "subresource": subresource,
                                 "rv": self._rv, "old": copy.deepcopy(old) or None,
                                 "new": copy.deepcopy(new)})
        self._objs[key] = new
        self._cv.notify_all()

"""The side-car's Kubernetes client: Ray's ``KubernetesHttpApiClient`` with the ledger
watching RayCluster reads and every RayCluster JSON patch guarded.

Reads (``GET rayclusters/NAME``): checked for staleness by the ledger (a LIST on the
first read), malformed groups reported and left out of the object handed to Ray
(``groups.py``); the object as read is kept as the basis of the next patch.

JSON patches of the RayCluster (``guard.py``): named by group from the object Ray was
given, sent with ``test`` ops on the basis's resourceVersion and the groups' names and
identities (template, start parameters) at their indices; on 422 / 409 the RayCluster is read again (not older than the basis) and
the verdict decides: same groups, new positions or an unrelated change -> sent again
at the current indices (at most ``MAX_ATTEMPTS`` times); a touched group changed, gone,
its name now another group's or not unique -> reported and not sent (``GuardRefused``, which Ray's provider records as a
launch / terminate error; its next tick decides again).

Merge patches of the RayCluster (Ray's ``idleSuspend``) carry the version decided on as
a precondition (409 if it changed) and are re-sent unless a field they write changed.
Other requests (pods) pass through.

``guard=False`` is main's behaviour, for measuring it: Ray gets the RayCluster as read
(malformed groups included) and its patches go out unchanged, but the ledger still
records which group each was meant for, so ``wrong_group_patches`` is counted.
"""
from __future__ import annotations

import copy

import requests

from .groups import group_names, split_groups
from .guard import GuardRefused, address, merge_verdict, name_ops, verdict

MAX_ATTEMPTS = 4
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


def _is_cluster(path: str) -> bool:
    return path.startswith("rayclusters/") and "?" not in path


def tracking_client(base: type, ledger, guard: bool = True) -> type:
    """A subclass of Ray's client class ``base`` reporting to ``ledger``: the tracking
    behaviour of ``_Tracking`` in front of ``base``, with the ledger and the guard switch
    as class attributes."""
    return type("TrackingKubernetesHttpApiClient", (_Tracking, base),
                {"_vs_ledger": ledger, "_vs_guard": guard})


class _Tracking:
    """The tracking half of the side-car's client; ``tracking_client`` puts it in front
    of Ray's client class, so ``super()`` here is Ray's own request."""
    _vs_ledger = None
    _vs_guard = True

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._basis: dict = {}          # path -> (object as read, view given to Ray)

    def _raw_get(self, path: str):
        """Ray's own GET, bypassing the tracking."""
        return super().get(path)

    def _raw_patch(self, path: str, payload, content_type: str):
        """Ray's own PATCH, bypassing the guard."""
        return super().patch(path, payload, content_type)

    def get(self, path: str):
        """Ray's GET; a RayCluster read is checked for staleness and, guarded, handed to
        Ray without its malformed groups (the read kept as the next patch's basis)."""
        out = self._raw_get(path)
        if not (_is_cluster(path) and isinstance(out, dict)):
            return out
        raw = self._vs_ledger.fresh(
            out, lambda rv: self._raw_get(f"{path}?resourceVersion={rv}"),
            lambda: self._raw_get("rayclusters"))
        view, _ = split_groups(raw) if self._vs_guard else (raw, [])
        self._basis[path] = (raw, view)
        return view

    def patch(self, path: str, payload, content_type: str = JSON_PATCH):
        """Ray's PATCH: a RayCluster patch guarded (or, unguarded, recorded with the
        group it was meant for); anything else passed through."""
        guard = self._vs_guard
        guarded = guard and _is_cluster(path) and (
            (content_type == JSON_PATCH and isinstance(payload, list))
            or (content_type == MERGE_PATCH and isinstance(payload, dict)))
        if not guarded and not (_is_cluster(path) and content_type == JSON_PATCH
                                and isinstance(payload, list)):
            out = self._raw_patch(path, payload, content_type)
            if _is_cluster(path) and isinstance(out, dict):
                self._vs_ledger.on_patch(path, payload, content_type, out)
            return out
        raw, view = self._basis.get(path) or (None, None)
        if raw is None:                 # Ray always reads first; be safe if not
            self.get(path)
            raw, view = self._basis[path]
        if not guard:
            return self._unguarded(path, payload, content_type, view)
        if content_type == MERGE_PATCH:
            return self._guarded_merge(path, payload, raw)
        return self._guarded(path, payload, content_type, raw, view)

    def _refetch(self, path: str, cr: dict, error: requests.HTTPError) -> dict:
        """After a refused guard: the RayCluster not older than ``cr``; the error
        again if nothing changed (then it was not the guard that failed)."""
        code = error.response.status_code if error.response is not None else None
        if code not in (409, 422):
            raise error
        fresh = self._raw_get(f"{path}?resourceVersion={cr['metadata']['resourceVersion']}")
        if fresh["metadata"]["resourceVersion"] == cr["metadata"]["resourceVersion"]:
            raise error
        return fresh

    def _guarded_merge(self, path, payload, basis):
        """A merge patch (Ray's idleSuspend) with the version decided on as its
        precondition (409 if the RayCluster changed); re-sent with the new version
        unless a field it writes changed meanwhile."""
        cluster = path.split("/", 1)[1]
        cr, last = basis, None
        for _ in range(MAX_ATTEMPTS):
            body = copy.deepcopy(payload)
            body.setdefault("metadata", {})["resourceVersion"] = \
                cr["metadata"]["resourceVersion"]
            try:
                out = self._raw_patch(path, body, MERGE_PATCH)
            except requests.HTTPError as e:
                fresh = self._refetch(path, cr, e)
                v = merge_verdict(payload, basis, fresh)
                self._vs_ledger.on_guard_failure(cluster, e.response.status_code, v, basis,
                                                 fresh)
                if not v.retry:
                    raise GuardRefused(f"RayCluster {cluster}: merge patch not sent, "
                                       f"{v.other} changed since the read",
                                       response=e.response) from e
                cr, last = fresh, e
                continue
            self._vs_ledger.on_patch(path, payload, MERGE_PATCH, out, sent=body)
            return out
        raise _gave_up(cluster, last) from last

    def _unguarded(self, path, payload, content_type, view):
        """main's behaviour: the patch sent as Ray wrote it, recorded with the group
        each op was meant for."""
        names = group_names(view)
        intended = {}
        for n in name_ops(payload, view):
            if n.group is not None:
                intended[names.index(n.group)] = n.group
        out = self._raw_patch(path, payload, content_type)
        self._vs_ledger.on_patch(path, payload, content_type, out, intended=intended)
        return out

    def _guarded(self, path, payload, content_type, basis, view):
        """A JSON patch named by group and sent with ``test`` ops at the groups' current
        indices; re-sent after a refusal while the verdict allows it."""
        named = name_ops(payload, view)
        cluster = path.split("/", 1)[1]
        cr, last = basis, None
        for _ in range(MAX_ATTEMPTS):
            body, intended = address(named, cr, basis)
            try:
                out = self._raw_patch(path, body, content_type)
            except requests.HTTPError as e:
                fresh = self._refetch(path, cr, e)
                v = verdict(named, basis, fresh)
                self._vs_ledger.on_guard_failure(cluster, e.response.status_code, v, basis,
                                                 fresh)
                if not v.retry:
                    raise GuardRefused(
                        f"RayCluster {cluster}: not patched, what it addresses changed "
                        f"since the read (groups changed {v.changed}, gone {v.gone}, "
                        f"identity {v.identity}, other {v.other})",
                        response=e.response) from e
                cr, last = fresh, e
                continue
            self._vs_ledger.on_patch(path, payload, content_type, out, sent=body,
                                     intended=intended)
            self._basis[path] = (out, split_groups(out)[0])
            return out
        raise _gave_up(cluster, last) from last


def _gave_up(cluster: str, last) -> GuardRefused:
    """The refusal after ``MAX_ATTEMPTS`` guarded sends all met a changed object."""
    return GuardRefused(f"RayCluster {cluster}: the guard failed {MAX_ATTEMPTS} times "
                        f"in a row (the object keeps changing)",
                        response=last.response if last is not None else None)

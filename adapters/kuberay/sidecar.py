"""What ``vecsched-monitor kuberay-autoscaler`` adds around Ray's own KubeRay code.

Ray 2.60's side-car is unchanged: its ``AutoscalingConfigProducer`` reads the RayCluster,
its ``KubeRayProvider`` turns launches and terminations into JSON patches of
``replicas`` and ``scaleStrategy.workersToDelete``. :func:`prepare` swaps in, for both,
a subclass of Ray's ``KubernetesHttpApiClient`` (same requests, same bodies) that:

* records every PATCH as sent, with the resourceVersion it produced;
* reports an **ownership conflict** when a read of the RayCluster shows a
  ``spec.workerGroupSpecs[i].replicas`` other than the value the autoscaler last wrote,
  or, for a group it has not written, last read (``ownership.py``): ``replicas``
  belongs to the autoscaler (people own ``minReplicas``/``maxReplicas``); the report
  names the field, both values and the writer (from ``managedFields``);
* reports ``replicas`` outside [minReplicas, maxReplicas] (the operator clamps it);
* detects a **stale read** (a RayCluster older than one already seen) and reads again
  with ``?resourceVersion=<newest seen>`` (the API server's "not older than"), so
  Ray's provider never builds a patch from an old ``workersToDelete``/``replicas``;
  the first read after a start (nothing seen yet) is checked against a fresh LIST;
* **guards every patch** (``guard.py``, in ``client.py``): ``test`` ops on the
  resourceVersion decided on and on each group's name at its index; a failed guard is
  re-read and retried at the group's current index, or refused and reported if the
  group itself changed; ``wrong_group_patches`` counts patches that landed on a group
  other than the one meant (0 with the guard);
* reports a **malformed group** (``groups.py``: ``replicas: null``, ``maxReplicas:
  "3"``, no ``groupName``, ...) and hands Ray the RayCluster without it, so the other
  groups keep scaling.

The ledger's counters (``guard``, ``check``) and lists are plain attributes, read
under its lock by :meth:`Ledger.snapshot` (metrics exporters read that).

With ``VECSCHED_RAY_CHECK=1`` in engine mode, Ray's own ``ResourceDemandScheduler``
also runs every tick on a copy of the request and any difference is counted and logged
(shadow mode with the roles swapped: the engine acts). Everything goes to a JSON file,
``VECSCHED_KUBERAY_FILE`` (default ``vecsched_kuberay.json`` beside the stats file).
"""
from __future__ import annotations

import copy
import logging
import os
import re
import threading
import time
from typing import Optional

from vecsched.adapters.files import write_json

from .client import tracking_client  # noqa: F401  (re-exported: the side-car's client)
from .groups import group_problem, split_groups
from .guard_report import failure_conflicts
from .ownership import (Ownership, conflict_entry, conflict_message, owner as _owner,
                        writer_of as _writer_of)
from .provider import skipping_provider
from .guard import wrong_groups

logger = logging.getLogger(__name__)

ENV_FILE = "VECSCHED_KUBERAY_FILE"
ENV_RAY_CHECK = "VECSCHED_RAY_CHECK"
ENV_GUARD = "VECSCHED_KUBERAY_GUARD"      # "0": send Ray's patches unguarded (to measure)
FILE_NAME = "vecsched_kuberay.json"
_REPLICAS = re.compile(r"^/spec/workerGroupSpecs/(\d+)/replicas$")
_MALFORMED_ACTION = {   # what the side-car does about it (groups.split_groups)
    "skipped": "the group {} is skipped until it is fixed, the other groups scale",
    "head_replaced": "Ray's view gets a neutral head group until it is fixed (Ray never "
                     "launches the head); the worker groups scale",
    "default": "left out of Ray's view (Ray's default applies) until it is fixed"}


def _rv(obj) -> Optional[int]:
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return None


class Ledger:
    """The side-car's record: patches, conflicts, stale reads, Ray cross-check."""

    def __init__(self, path: Optional[str], clock=time.time):
        self.path, self.clock = path, clock
        self.patches: list = []
        self.conflicts: list = []
        self.findings: list = []
        self.malformed: list = []         # what the last read left out of Ray's view
        self.stale_reads: list = []
        self.guard = {"guarded_patches": 0, "guard_failures": 0, "version_retries": 0,
                      "moved_retries": 0, "refused": 0, "wrong_group_patches": 0}
        self.wrong_group_patches: list = []
        self.check = {"ticks": 0, "diff_ticks": 0, "known_divergence_ticks": 0,
                      "errors": 0, "last_diff": []}
        self.last_cluster: Optional[dict] = None
        self.owner = Ownership()          # replicas: written by us, last read
        self._our_manager: Optional[str] = None
        self._newest = -1
        self._reported: set = set()
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- client events
    def on_patch(self, path: str, payload, content_type: str, response: dict,
                 sent=None, intended: Optional[dict] = None) -> None:
        """A patch that landed: ``payload`` as Ray built it, ``sent`` as it went on the
        wire (guarded and re-addressed; the payload itself when unguarded),
        ``intended`` the group meant at each index written."""
        with self._lock:
            rv = _rv(response)
            sent = payload if sent is None else sent
            self.patches.append({"t": self.clock(), "path": path,
                                 "content_type": content_type, "payload": payload,
                                 "sent": sent, "resource_version": rv})
            if sent is not payload:
                self.guard["guarded_patches"] += 1
            wrong = wrong_groups(intended or {}, response)
            if wrong:
                self.guard["wrong_group_patches"] += 1
                self.wrong_group_patches.append({
                    "t": self.clock(), "resource_version": rv, "sent": sent,
                    "hits": [{"index": i, "meant": m, "hit": h} for i, m, h in wrong]})
                logger.error("vecsched kuberay: a patch meant for %s landed on %s",
                             [m for _, m, _ in wrong], [h for _, _, h in wrong])
            if rv is not None:
                self._newest = max(self._newest, rv)
            groups = (response.get("spec") or {}).get("workerGroupSpecs") or []
            for op in sent if isinstance(sent, list) else []:
                m = _REPLICAS.match(op.get("path", ""))
                if m and op.get("op") in ("replace", "add") and int(m.group(1)) < len(groups):
                    self.owner.wrote(groups[int(m.group(1))]["groupName"], op.get("value"))
                    self._our_manager = _owner(response, None)
            self.last_cluster = response
            self._write()

    def fresh(self, obj: dict, reread, relist=None) -> dict:
        """A RayCluster read: re-read it if it is older than one already seen. With
        nothing seen yet (the first read after a start), ``relist()`` (a LIST, which the
        API server answers from its latest state) gives the version to compare with."""
        with self._lock:
            rv = _rv(obj)
            first = self._newest < 0
            if first and relist is not None and rv is not None:
                self._first_read(obj, rv, relist)
            if rv is not None and rv < self._newest:
                entry = {"t": self.clock(), "got": rv, "newest_seen": self._newest,
                         "first_read": first}
                obj = reread(self._newest)
                entry["reread"] = _rv(obj)
                self.stale_reads.append(entry)
                logger.warning("vecsched kuberay: stale RayCluster read (resourceVersion %s, "
                               "%s already seen); read again at resourceVersion >= %s",
                               rv, self._newest, self._newest)
            rv = _rv(obj)
            if rv is not None:
                self._newest = max(self._newest, rv)
            self._report_malformed(obj)
            self._check_ownership(obj)
            self.last_cluster = obj
            self._write()
            return obj

    def _first_read(self, obj: dict, rv: int, relist) -> None:
        """Set the newest version seen from a LIST, so a stale first read is caught."""
        name = (obj.get("metadata") or {}).get("name")
        try:
            listed = relist()
        except Exception as e:             # e.g. no RBAC permission to list
            logger.warning("vecsched kuberay: cannot LIST rayclusters to check the first "
                           "read (%s); the first read is taken as it is", e)
            return
        for item in (listed or {}).get("items") or []:
            if (item.get("metadata") or {}).get("name") == name and _rv(item) is not None:
                self._newest = max(self._newest, _rv(item))
                if _rv(item) > rv:
                    logger.warning("vecsched kuberay: the first RayCluster read "
                                   "(resourceVersion %s) is older than a fresh LIST's (%s)",
                                   rv, _rv(item))

    def _report_malformed(self, cr: dict) -> None:
        _, problems = split_groups(cr)
        name = (cr.get("metadata") or {}).get("name")
        self.malformed = [{k: p[k] for k in ("group", "field", "action", "reason")}
                          for p in problems]
        for p in problems:
            key = ("malformed", p["field"], repr(p["value"]), p["group"])
            if key in self._reported:
                continue
            self._reported.add(key)
            self.findings.append({"t": self.clock(), "kind": "malformed_group",
                                  "cluster": name, **p})
            logger.warning("vecsched kuberay: RayCluster %s: %s is %r (%s); %s", name,
                           p["field"], p["value"], p["reason"], _MALFORMED_ACTION[
                               p.get("action", "skipped")].format(
                               p["group"] or f"#{p['index']}"))

    def on_skipped_termination(self, cluster: str, pods: list) -> None:
        """Pods of a malformed group Ray asked to terminate: kept, reported once each."""
        with self._lock:
            for pod in pods:
                if ("skipped", pod) in self._reported:
                    continue
                self._reported.add(("skipped", pod))
                self.findings.append({"t": self.clock(), "kind": "termination_skipped",
                                      "cluster": cluster, "pod": pod})
                logger.warning("vecsched kuberay: RayCluster %s: Ray asked to terminate pod "
                               "%s of a malformed worker group; kept until the group is "
                               "fixed", cluster, pod)
            self._write()

    def on_guard_failure(self, cluster: str, status: int, verdict, basis: dict,
                         fresh: dict) -> None:
        """A guarded patch was refused by the API server (422 / 409): what moved or
        changed between the version decided on and now."""
        with self._lock:
            self.guard["guard_failures"] += 1
            t, writer = self.clock(), _owner(fresh, self._our_manager) or "unknown"
            for g, field, was, now in verdict.changed:
                self._changed_under_patch(cluster, g, field, was, now, writer, fresh)
            for entry, message in failure_conflicts(
                    t, cluster, status, verdict, _rv(basis), _rv(fresh), writer,
                    lambda path: _writer_of(fresh, path, self._our_manager)):
                self.conflicts.append(entry)
                logger.warning(message)
            if verdict.retry:
                self.guard["moved_retries" if verdict.moved else "version_retries"] += 1
            else:
                self.guard["refused"] += 1
            self._write()

    def _changed_under_patch(self, cluster, group, field, was, now, writer, fresh):
        i = {g.get("groupName"): j for j, g in enumerate(
            (fresh.get("spec") or {}).get("workerGroupSpecs") or [])}.get(group)
        path = f"spec.workerGroupSpecs[{i}].{field}"
        kind = "ownership" if field == "replicas" else "group_changed"
        entry = {"t": self.clock(), "kind": kind, "cluster": cluster, "field": path,
                 "group": group, "decided_on": was, "found": now, "writer": writer,
                 "detected": "patch", "resource_version": _rv(fresh)}
        if field == "replicas":
            entry["autoscaler_wrote"] = self.owner.ours.get(group, was)
            self.owner.seen_under_patch(group, now)   # reported here, not on the next read
        self.conflicts.append(entry)
        logger.warning("vecsched kuberay: RayCluster %s: %s (group %s) changed from %r to %r "
                       "between the autoscaler's read and its patch (writer %r); the patch "
                       "was not applied, the next tick decides from the new value",
                       cluster, path, group, was, now, writer)

    def _check_ownership(self, cr: dict) -> None:
        name = (cr.get("metadata") or {}).get("name")
        for change in self.owner.read(cr):
            c = conflict_entry(self.clock(), name, change,
                               _owner(cr, self._our_manager) or "unknown", _rv(cr))
            self.conflicts.append(c)
            logger.warning(conflict_message(c))
        for i, g in enumerate((cr.get("spec") or {}).get("workerGroupSpecs") or []):
            if group_problem(g) is not None:
                continue                       # reported as malformed
            group, rep = g.get("groupName"), g.get("replicas", 1)
            field = f"spec.workerGroupSpecs[{i}].replicas"
            lo, hi = g.get("minReplicas", 0), g.get("maxReplicas")
            if (rep < lo or (hi is not None and rep > hi)) and \
                    (group, rep, lo, hi) not in self._reported:
                self._reported.add((group, rep, lo, hi))
                self.findings.append({"t": self.clock(), "kind": "replicas_out_of_range",
                                      "cluster": name, "field": field, "group": group,
                                      "replicas": rep, "minReplicas": lo, "maxReplicas": hi})
                logger.warning("vecsched kuberay: %s (group %s) is %s, outside [minReplicas %s,"
                               " maxReplicas %s]; the operator runs the clamped count", field,
                               group, rep, lo, hi)

    # ---------------------------------------------------------------- cross-check
    def on_check(self, tick: int, diff: list, quirk: Optional[str]) -> None:
        with self._lock:
            self.check["ticks"] += 1
            if diff:
                self.check["diff_ticks"] += 1
                if quirk:
                    self.check["known_divergence_ticks"] += 1
                self.check["last_diff"] = [f"tick {tick}"] + diff
                logger.warning("vecsched ray-check: tick %d, Ray's scheduler differs from the "
                               "engine: %s", tick, "; ".join(diff))
            self._write()

    def on_check_error(self) -> None:
        with self._lock:
            self.check["errors"] += 1
            self._write()

    # ---------------------------------------------------------------- output
    def snapshot(self) -> dict:
        with self._lock:
            return copy.deepcopy({"pid": os.getpid(), "updated_at": self.clock(),
                                  "patches": self.patches, "conflicts": self.conflicts,
                                  "findings": self.findings, "malformed": self.malformed,
                                  "stale_reads": self.stale_reads,
                                  "guard": self.guard,
                                  "wrong_group_patches": self.wrong_group_patches,
                                  "ray_check": self.check})

    def _write(self) -> None:
        if not self.path:
            return
        try:
            write_json(self.path, self.snapshot(), indent=1)
        except Exception:
            logger.exception("vecsched kuberay: cannot write %s", self.path)


def ray_checked(cls: type, ledger: Ledger) -> type:
    """The installed scheduler class, also running Ray's scheduler on a copy each tick."""
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler

    from vecsched.adapters.ray.compare import ray_quirk, reply_diff

    class RayChecked(cls):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self._ray_check = ResourceDemandScheduler(None)

        def schedule(self, request):
            twin = copy.deepcopy(request)
            reply = super().schedule(request)
            try:
                ray_reply = self._ray_check.schedule(twin)
                ledger.on_check(self.counters["ticks"], reply_diff(ray_reply, reply),
                                ray_quirk(ray_reply))
            except Exception:
                logger.exception("vecsched ray-check: Ray's scheduler failed")
                ledger.on_check_error()
            return reply

    RayChecked.__name__, RayChecked.__qualname__ = cls.__name__, cls.__qualname__
    return RayChecked


def prepare(stats_path: Optional[str] = None) -> Ledger:
    """Install the tracking client (and, if asked, the Ray cross-check) in this process.
    Call after ``vecsched.adapters.ray.install.install()`` and before Ray's side-car starts."""
    import ray.autoscaler.v2.autoscaler as autoscaler_module
    from ray.autoscaler._private.kuberay import node_provider
    from ray.autoscaler.v2.instance_manager.cloud_providers.kuberay import cloud_provider

    from vecsched.adapters.ray.install import installed

    path = os.environ.get(ENV_FILE) or (
        os.path.join(os.path.dirname(stats_path), FILE_NAME) if stats_path else None)
    ledger = Ledger(path)
    guard = os.environ.get(ENV_GUARD, "1") != "0"
    if not guard:
        logger.warning("vecsched kuberay: %s=0: RayCluster patches are sent unguarded "
                       "(index-addressed, as Ray 2.60 sends them)", ENV_GUARD)
    client = tracking_client(node_provider.KubernetesHttpApiClient, ledger, guard=guard)
    node_provider.KubernetesHttpApiClient = client       # AutoscalingConfigProducer
    cloud_provider.KubernetesHttpApiClient = client      # KubeRayProvider (+ IPPR)
    # pods of a malformed group are not terminated (provider.py)
    autoscaler_module.KubeRayProvider = skipping_provider(cloud_provider.KubeRayProvider,
                                                          ledger)
    cls = installed()
    if cls is not None:      # a worker pod Pending past a timeout counts as a stock-out
        from vecsched.adapters.ray.capacity_settings import for_kuberay
        cls.availability_setting = for_kuberay(cls.availability_setting)
    if cls is not None and cls.mode == "engine" and os.environ.get(ENV_RAY_CHECK) == "1":
        autoscaler_module.ResourceDemandScheduler = ray_checked(cls, ledger)
    ledger._write()
    return ledger


def dump_context(ledger: Ledger) -> dict:
    """What ``vecsched explain`` needs beside the request: the launch limits in force."""
    from ray.autoscaler._private.constants import AUTOSCALER_MAX_CONCURRENT_LAUNCHES

    out = {"max_concurrent_launches": AUTOSCALER_MAX_CONCURRENT_LAUNCHES,
           "source": "kuberay"}
    cr = ledger.last_cluster
    if cr:
        from ray.autoscaler._private.kuberay.autoscaling_config import (
            _derive_autoscaling_config_from_ray_cr)
        try:
            cfg = _derive_autoscaling_config_from_ray_cr(cr)
            out["upscaling_speed"] = cfg.get("upscaling_speed")
            out["upscaling_mode"] = (cr["spec"].get("autoscalerOptions") or {}).get(
                "upscalingMode", "Default")
        except Exception:
            pass
    return out

"""A KubeRay operator STAND-IN (plus the kubelet's part): RayCluster ``replicas`` -> pods.

One reconcile pass per RayCluster follows KubeRay's ``reconcilePods`` for worker groups
(ray-operator/controllers/ray/raycluster_controller.go, v1.x):

1. pods whose Ray container terminated (restartPolicy Never) are deleted, and no pod is
   created in that pass;
2. every pod named in ``scaleStrategy.workersToDelete`` is deleted, whatever
   ``replicas`` says (a name with no pod is skipped); the list itself is NEVER cleared
   by the operator - clearing it is the autoscaler's job;
3. the desired pod count is ``replicas`` clamped to [minReplicas, maxReplicas] (max
   wins when min > max; 0 when the group is suspended), times ``numOfHosts``;
4. missing pods are created; surplus pods are NOT deleted at random (in-tree
   autoscaling is on, ``ENABLE_RANDOM_POD_DELETE`` unset): the autoscaler decides;
5. ``status`` (desired/ready worker replicas) is written through the status
   subresource with the version read, retried on 409 in the next pass.

The kubelet's part: a :class:`PodRunner` starts a created pod's Ray container and
reports its state, which becomes ``status.containerStatuses[0].state``; a deleted pod
(``deletionTimestamp``) is stopped and then removed from the store.

Knobs for regression scenarios: ``delete_delay_s`` (the operator is slow to act on
``workersToDelete``), ``schedulable`` (False: new pods stay Pending, as on a cluster
with no room for them).
"""
from __future__ import annotations

import copy
import itertools
import logging
import threading
import time
from typing import Callable, Dict, List, Optional

from .store import ApiError, Store, _now

logger = logging.getLogger(__name__)

MANAGER = "kuberay-operator"
L_CLUSTER, L_GROUP, L_KIND = "ray.io/cluster", "ray.io/group", "ray.io/node-type"


def desired_replicas(group: dict) -> int:
    """KubeRay's GetWorkerGroupDesiredReplicas: ``replicas`` clamped to [min, max]."""
    if group.get("suspend"):
        return 0
    lo, hi = int(group.get("minReplicas", 0)), int(group.get("maxReplicas", 2 ** 31 - 1))
    rep = group.get("replicas")
    if lo > hi:
        return hi
    if rep is None or int(rep) < lo:
        return lo
    return min(int(rep), hi)


def num_of_hosts(group: dict) -> int:
    return max(1, int(group.get("numOfHosts", 1) or 1))


class PodRunner:
    """The kubelet's side: run a pod's Ray container. This base runs nothing: each pod's
    container is "running" as soon as it is started (pods without processes)."""

    def __init__(self):
        self._state: Dict[str, object] = {}

    def start(self, pod: dict, group: dict) -> None:
        self._state[pod["metadata"]["name"]] = "running"

    def state(self, name: str):
        """'pending', 'running', ('terminated', exit code) or None (unknown pod)."""
        return self._state.get(name)

    def stop(self, name: str) -> None:
        self._state.pop(name, None)

    def stopped(self, name: str) -> bool:
        return name not in self._state

    def close(self) -> None:
        for name in list(self._state):
            self.stop(name)


class Operator:
    def __init__(self, store: Store, namespace: str, runner: Optional[PodRunner] = None, *,
                 clock: Callable[[], float] = time.time, period_s: float = 0.25,
                 suffixes: Optional[Callable[[], str]] = None):
        self.store, self.ns = store, namespace
        self.runner = runner or PodRunner()
        self.clock = clock
        self.period_s = period_s
        self.delete_delay_s = 0.0
        self.schedulable = True
        self.events: List[dict] = []        # what the operator did, in order
        self._seen_delete: Dict[str, float] = {}   # pod -> when workersToDelete named it
        counter = itertools.count(1)
        self._suffix = suffixes or (lambda: f"{next(counter):05d}")
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ loop
    def start(self) -> "Operator":
        self._thread = threading.Thread(target=self._loop, name="kuberay-operator",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        rv = -1
        while not self._stop.is_set():
            try:
                self.reconcile_once()
            except Exception:                     # a pass failing is retried, like a requeue
                logger.exception("stand-in operator: reconcile failed; retrying")
            rv = self.store.wait_change(rv, self.period_s)

    def reconcile_once(self) -> None:
        with self._lock:
            self._kubelet()
            for rc in self.store.list("rayclusters", self.ns)["items"]:
                self._reconcile(rc)

    # ------------------------------------------------------------------ kubelet
    def _kubelet(self) -> None:
        for pod in self.store.list("pods", self.ns, f"{L_KIND}=worker")["items"]:
            name = pod["metadata"]["name"]
            if "deletionTimestamp" in pod["metadata"]:
                if self.runner.state(name) is not None:
                    self.runner.stop(name)
                if self.runner.stopped(name):
                    self.store.remove("pods", self.ns, name)
                    self._event("pod removed", pod)
                continue
            st = self.runner.state(name)
            if st is None and self.schedulable and pod["status"].get("phase") == "Pending":
                self.runner.start(pod, self._group_of(pod))
                st = self.runner.state(name)
            self._set_container_state(pod, st)

    def _group_of(self, pod: dict) -> dict:
        labels = pod["metadata"]["labels"]
        try:
            rc = self.store.get("rayclusters", self.ns, labels[L_CLUSTER])
        except ApiError:
            return {}
        return next((g for g in rc["spec"].get("workerGroupSpecs", [])
                     if g.get("groupName") == labels.get(L_GROUP)), {})

    def _set_container_state(self, pod: dict, st) -> None:
        now = _now(self.clock)
        if st == "running":
            want = {"running": {"startedAt": now}}
        elif isinstance(st, tuple) and st[0] == "terminated":
            want = {"terminated": {"exitCode": int(st[1]), "finishedAt": now}}
        else:
            return
        cur = (pod["status"].get("containerStatuses") or [{}])[0].get("state", {})
        if set(cur) == set(want):
            return
        pod = copy.deepcopy(pod)
        pod["status"].update(phase="Running", podIP="127.0.0.1", containerStatuses=[{
            "name": pod["spec"]["containers"][0]["name"], "ready": "running" in want,
            "restartCount": 0, "state": want}])
        try:
            self.store.update("pods", self.ns, pod["metadata"]["name"], pod, "kubelet",
                              subresource="status")
        except ApiError as e:                      # changed meanwhile: next pass
            if e.code not in (404, 409):
                raise

    # ------------------------------------------------------------------ controller
    def _reconcile(self, rc: dict) -> None:
        cluster = rc["metadata"]["name"]
        if "deletionTimestamp" in rc["metadata"]:
            return
        spec = rc["spec"]
        status_groups = {}
        for group in spec.get("workerGroupSpecs", []):
            gname = group.get("groupName")
            if not isinstance(gname, str) or not gname:
                continue        # a real API server's CRD validation would not admit it
            sel = f"{L_CLUSTER}={cluster},{L_GROUP}={gname},{L_KIND}=worker"
            pods = [p for p in self.store.list("pods", self.ns, sel)["items"]
                    if "deletionTimestamp" not in p["metadata"]]
            # 1. unhealthy pods (terminated Ray container, restartPolicy Never)
            bad = [p for p in pods if "terminated" in
                   ((p["status"].get("containerStatuses") or [{}])[0].get("state", {}))]
            for p in bad:
                self._delete(p, "Ray container terminated (restartPolicy Never)")
            if bad:
                continue                           # KubeRay requeues before creating
            # 2. workersToDelete, deleted first; the list stays as it is
            names = {p["metadata"]["name"]: p for p in pods}
            victims = [v for v in (group.get("scaleStrategy") or {}).get("workersToDelete")
                       or [] if v in names]
            first = [self._seen_delete.setdefault(v, self.clock()) for v in victims]
            if victims and self.clock() - min(first) < self.delete_delay_s:
                # a slow (backlogged) operator has not got to this group's change yet
                status_groups[gname] = (desired_replicas(group) * num_of_hosts(group),
                                        len(pods))
                continue
            gone = set()
            for victim in victims:
                self._delete(names[victim], "named in workersToDelete")
                gone.add(victim)
            running = [p for p in pods if p["metadata"]["name"] not in gone]
            # 3.-4. clamp, then create (never delete at random)
            want = desired_replicas(group) * num_of_hosts(group)
            for _ in range(max(0, want - len(running))):
                self._create(rc, group)
            status_groups[gname] = (want, len(running))
        self._write_status(rc, status_groups)

    def _create(self, rc: dict, group: dict) -> None:
        cluster, gname = rc["metadata"]["name"], group["groupName"]
        name = f"{cluster}-{gname}-worker-{self._suffix()}"
        template = copy.deepcopy(group.get("template") or {})
        tspec = template.get("spec") or {"containers": [{"name": "ray-worker"}]}
        tspec.setdefault("restartPolicy", "Never")
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels.update({L_CLUSTER: cluster, L_GROUP: gname, L_KIND: "worker",
                       "ray.io/is-ray-node": "yes",
                       "app.kubernetes.io/created-by": MANAGER})
        pod = {"metadata": {"name": name, "labels": labels,
                            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                                 "name": cluster,
                                                 "uid": rc["metadata"].get("uid")}]},
               "spec": tspec, "status": {"phase": "Pending"}}
        self.store.create("pods", self.ns, pod, MANAGER)
        self._event("pod created", pod)

    def _delete(self, pod: dict, why: str) -> None:
        try:
            self.store.delete("pods", self.ns, pod["metadata"]["name"], MANAGER)
            self._event(f"pod deleted: {why}", pod)
        except ApiError as e:
            if e.code != 404:
                raise

    def _write_status(self, rc: dict, groups: dict) -> None:
        status = copy.deepcopy(rc.get("status") or {})
        status.update(desiredWorkerReplicas=sum(w for w, _ in groups.values()),
                      readyWorkerReplicas=sum(r for _, r in groups.values()),
                      observedGeneration=rc["metadata"].get("generation", 1))
        if status == rc.get("status"):
            return
        body = {"metadata": {"resourceVersion": rc["metadata"]["resourceVersion"]},
                "status": status}
        try:
            self.store.update("rayclusters", self.ns, rc["metadata"]["name"], body, MANAGER,
                              subresource="status")
        except ApiError as e:
            if e.code != 409:                     # someone wrote first: next pass
                raise
            self._event("status update conflict (409), retried next pass", rc)

    def _event(self, what: str, obj: dict) -> None:
        self.events.append({"t": self.clock(), "what": what,
                            "name": obj["metadata"]["name"],
                            "group": obj["metadata"].get("labels", {}).get(L_GROUP)})

"""A simulated cloud and Ray cluster behind Ray's own autoscaler-v2 interfaces.

This is what lets Ray's real reconcile loop (`Reconciler.reconcile`, the
`InstanceManager` on `InMemoryStorage`, the `CloudInstanceUpdater` / `RayStopper` /
`CloudResourceMonitor` subscribers) run on a laptop, deterministically, with any
`IResourceScheduler` plugged in (RAY_V2_SEMANTICS.md §10–§11):

* `SimCloudProvider` implements Ray's `ICloudInstanceProvider`: launches land after a
  seeded per-type allocation latency on an injected clock; optional launch failures
  and stock-outs (reported as `LaunchNodeError`), lost requests, termination latency
  and failures (`TerminateNodeError`) and preemptions. Per-type behaviour is the
  lifecycle simulator's `SimNodeType`, so both simulations read the same knobs.
* `SimGcs` plays the GCS and the raylets: a ray node joins an allocated cloud instance
  after the type's install latency, tasks are queued, placed first-fit on live nodes
  and finish after their duration; `get_cluster_resource_state()` returns the
  serialised reply that Ray's `sdk.get_cluster_resource_state` parses (node states
  with idle durations, pending demand aggregated by shape). `drain_node` /
  `drain_nodes` answer Ray's `RayStopper`.
* `autoscaling_config(...)` builds a real `AutoscalingConfig` (through Ray's own
  `prepare_config` / `validate_config`) for an "external" provider.
* `SimAutoscaler` wires these exactly as `ray.autoscaler.v2.autoscaler.Autoscaler`
  does, but with the scheduler as an argument, and `update_autoscaling_state()` follows
  Ray's method step for step (the `config` attribute stands in for the config reader:
  replace it to change the config between ticks).
* `ray_clock(clock)` points the clock Ray's instance manager stamps status changes
  with (and times out on) at the simulated clock.

All randomness comes from seeded numpy Generators drawn in call order (the provider's;
the GCS has its own for drain rejections, which RayStopper asks for on its worker
thread), so a replay with the same seeds and the same scheduler decisions repeats exactly
(`SimAutoscaler.settle()` waits for RayStopper after each tick).
Ray itself still draws uuid4 instance and launch-request ids; compare runs by mapping
instance ids in creation order.
"""
from __future__ import annotations

import hashlib
import heapq
import threading
import time as _time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from queue import Queue
from typing import Any, Optional

import numpy as np
from ray.autoscaler.v2.instance_manager.config import AutoscalingConfig
from ray.autoscaler.v2.instance_manager.instance_manager import InstanceManager
from ray.autoscaler.v2.instance_manager.instance_storage import InstanceStorage
from ray.autoscaler.v2.instance_manager.node_provider import (CloudInstance,
                                                            CloudInstanceProviderError,
                                                            ICloudInstanceProvider,
                                                            LaunchNodeError,
                                                            TerminateNodeError)
from ray.autoscaler.v2.instance_manager.reconciler import Reconciler
from ray.autoscaler.v2.instance_manager.storage import InMemoryStorage
from ray.autoscaler.v2.instance_manager.subscribers.cloud_instance_updater import \
    CloudInstanceUpdater
from ray.autoscaler.v2.instance_manager.subscribers.cloud_resource_monitor import \
    CloudResourceMonitor
from ray.autoscaler.v2.instance_manager.subscribers.ray_stopper import RayStopper
from ray.autoscaler.v2.scheduler import IResourceScheduler
from ray.autoscaler.v2.sdk import get_cluster_resource_state
from ray.core.generated.autoscaler_pb2 import (AutoscalingState, DrainNodeReason,
                                               GetClusterResourceStateReply, NodeState,
                                               NodeStatus, ResourceRequest,
                                               ResourceRequestByCount)
from ray.core.generated.instance_manager_pb2 import NodeKind

from adapters.lifecycle.provider import SimClock, SimNodeType

__all__ = ["SimClock", "SimNodeType", "SimCloudProvider", "SimGcs", "SimAutoscaler",
           "autoscaling_config", "ray_clock", "HEAD_MARKER"]

NS_PER_S = 1_000_000_000
HEAD_MARKER = "node:__internal_head__"     # how Ray tells a head node (utils.is_head_node)


# ---- Ray's clock -------------------------------------------------------------------------

class _SimTime:
    """Stands in for the `time` module: `time()`/`time_ns()` read the simulated clock,
    everything else is the real module."""

    def __init__(self, clock: Callable[[], int]):
        self._clock = clock

    def time_ns(self) -> int:
        return int(self._clock())

    def time(self) -> float:
        return int(self._clock()) / NS_PER_S

    def __getattr__(self, name):
        return getattr(_time, name)


_RAY_TIMED_MODULES = (
    "ray.autoscaler.v2.instance_manager.common",      # status_history stamps, has_timeout
    "ray.autoscaler.v2.instance_manager.reconciler",  # stuck-instance warnings
    "ray.autoscaler.v2.instance_manager.subscribers.cloud_resource_monitor",
)


@contextmanager
def ray_clock(clock: Callable[[], int]):
    """Within the block, Ray's instance manager, reconciler and cloud resource monitor
    read wall time from `clock` (ns). The schedulers are left alone: they only stamp ids
    and `request_ts_ms` with it (pending-node idle tracking is off unless
    RAY_AUTOSCALER_PENDING_NODE_IDLE_TIMEOUT_S is set)."""
    import importlib
    mods = [importlib.import_module(m) for m in _RAY_TIMED_MODULES]
    saved = [m.time for m in mods]
    shim = _SimTime(clock)
    for m in mods:
        m.time = shim
    try:
        yield clock
    finally:
        for m, t in zip(mods, saved):
            m.time = t


# ---- the config ----------------------------------------------------------------------------

def autoscaling_config(node_types: Mapping[str, Mapping[str, Any]], *, head_type: str,
                       max_workers: Optional[int] = None,
                       idle_timeout_s: Optional[float] = 60.0,
                       upscaling_speed: float = 1.0,
                       disable_node_updaters: bool = False,
                       cluster_name: str = "vecsched-sim") -> AutoscalingConfig:
    """A real `AutoscalingConfig` for a cluster of `node_types`.

    `node_types[name]` takes the cluster-YAML keys `resources`, `min_workers`,
    `max_workers`, `labels`, `idle_timeout_s` (optional per-type override) and
    `priority`. The provider is "external" (Ray's generic third-party provider type),
    the launch-config check is disabled (the IM never stamps a hash on instances, so an
    enabled check only produces Ray's quirk Q2). `disable_node_updaters=False` makes
    Ray's reconciler move allocated instances to RAY_INSTALLING itself (no installer
    subscriber runs; the simulated GCS brings ray up); True is KubeRay's setting
    (ALLOCATED -> RAY_RUNNING directly).
    """
    types = {}
    for name, spec in node_types.items():
        t = {"resources": dict(spec.get("resources", {})), "node_config": {},
             "min_workers": int(spec.get("min_workers", 0)),
             "max_workers": int(spec.get("max_workers", 0))}
        for key in ("labels", "idle_timeout_s", "priority"):
            if spec.get(key) is not None:
                t[key] = spec[key]
        types[name] = t
    raw = {
        "cluster_name": cluster_name,
        "provider": {"type": "external", "module": f"{__name__}.SimCloudProvider",
                     "disable_node_updaters": bool(disable_node_updaters),
                     "disable_launch_config_check": True},
        "head_node_type": head_type,
        "available_node_types": types,
        "upscaling_speed": float(upscaling_speed),
        "setup_commands": [], "head_setup_commands": [], "worker_setup_commands": [],
        "cluster_synced_files": [], "file_mounts": {},
    }
    if max_workers is not None:
        raw["max_workers"] = int(max_workers)
    if idle_timeout_s is not None:
        raw["idle_timeout_minutes"] = idle_timeout_s / 60.0
    return AutoscalingConfig(raw, skip_content_hash=True)


# ---- the cloud ----------------------------------------------------------------------------

@dataclass
class SimCloudInstance:
    cloud_instance_id: str
    node_type: str
    node_kind: int
    request_id: Optional[str]
    allocated_ns: int
    ray_up_ns: int                   # when a ray node joins the GCS for this instance
    running_ns: int = 0              # when the instance is listed as running
    alive: bool = True
    terminating: bool = False
    preempted: bool = False


# provider event kinds
_ALLOCATE, _TERMINATE, _TERMINATE_FAILED, _PREEMPT = range(4)


class SimCloudProvider(ICloudInstanceProvider):
    """Ray's `ICloudInstanceProvider` over a seeded simulated cloud.

    * `launch(shape, request_id)`: per instance, a stock-out (type `capacity` reached by
      live plus in-flight instances) or a draw below `launch_failure_rate` fails it,
      reported by `poll_errors()` as one `LaunchNodeError` per type and request; a draw
      below `launch_lost_rate` is never answered (Ray's REQUESTED timeout requeues it);
      otherwise a cloud instance appears in `get_non_terminated()` after
      `alloc_latency_s` (× U(1−jitter, 1+jitter)), already running.
    * `terminate(ids, request_id)`: the instance disappears after
      `termination_latency_s`, or with `termination_failure_rate` stays and a
      `TerminateNodeError` is reported then. Idempotent while a termination is pending.
    * Preemption: with `preemption_rate_per_h` > 0, each allocated instance vanishes
      after an exponential time.
    * `boot_latency_s` (per type, or one value for all): how long an allocated instance
      is listed with `is_running=False` (Ray's reconciler only starts installing ray on
      running instances, so the scheduler sees it ALLOCATED meanwhile).
    * `ray_up_ns(id)`: when the simulated GCS should see a ray node on the instance
      (allocation + boot + `install_latency_s`).

    `head_type` starts the cluster with one running head instance. Cloud ids are
    `cloud-00000`, `cloud-00001`, … in allocation order.
    """

    def __init__(self, types: Mapping[str, SimNodeType], clock: Callable[[], int],
                 seed: int | np.random.Generator = 0, *, head_type: Optional[str] = None,
                 default: Optional[SimNodeType] = None,
                 boot_latency_s: float | Mapping[str, float] = 0.0):
        self.types = dict(types)
        self.boot_latency_s = boot_latency_s
        self.default = default
        self.clock = clock
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.instances: dict[str, SimCloudInstance] = {}     # every instance ever, in order
        self.stats = dict(launch_calls=0, launched=0, launch_failures=0, stockouts=0, lost=0,
                          allocations=0, terminate_calls=0, terminations=0,
                          termination_failures=0, preemptions=0)
        self._errors: list[CloudInstanceProviderError] = []
        self._events: list[tuple] = []
        self._seq = 0
        self._inflight: dict[str, int] = {}
        self._n = 0
        self._lock = threading.Lock()
        if head_type is not None:
            now = int(clock())
            self._new_instance(head_type, NodeKind.HEAD, None, now, ray_up_ns=now).running_ns = now

    # -- helpers
    def spec(self, node_type: str) -> SimNodeType:
        spec = self.types.get(node_type, self.default)
        if spec is None:
            raise KeyError(f"no simulated behaviour for node type {node_type!r}")
        return spec

    def _latency_ns(self, nominal_s: float, jitter: float) -> int:
        u = self.rng.random()
        return int(round(nominal_s * (1.0 + jitter * (2.0 * u - 1.0)) * NS_PER_S))

    def _push(self, due_ns: int, kind: int, payload) -> None:
        heapq.heappush(self._events, (int(due_ns), self._seq, kind, payload))
        self._seq += 1

    def live(self, node_type: str) -> int:
        return sum(1 for c in self.instances.values() if c.alive and c.node_type == node_type)

    def _new_instance(self, node_type, kind, request_id, now, ray_up_ns) -> SimCloudInstance:
        cid = f"cloud-{self._n:05d}"
        self._n += 1
        inst = SimCloudInstance(cid, node_type, int(kind), request_id, now, ray_up_ns)
        self.instances[cid] = inst
        return inst

    def boot_ns(self, node_type: str) -> int:
        b = self.boot_latency_s
        b = b.get(node_type, 0.0) if isinstance(b, Mapping) else b
        return int(round(float(b) * NS_PER_S))

    def ray_up_ns(self, cloud_instance_id: str) -> int:
        return self.instances[cloud_instance_id].ray_up_ns

    # -- time
    def advance(self, now_ns: Optional[int] = None) -> None:
        """Apply every cloud event due by `now_ns` (default: the clock)."""
        now = int(self.clock() if now_ns is None else now_ns)
        with self._lock:
            while self._events and self._events[0][0] <= now:
                due, _, kind, payload = heapq.heappop(self._events)
                self._fire(due, kind, payload)

    def _fire(self, due: int, kind: int, payload) -> None:
        if kind == _ALLOCATE:
            node_type, request_id = payload
            self._inflight[node_type] -= 1
            spec = self.spec(node_type)
            running = due + self.boot_ns(node_type)
            up = running + self._latency_ns(spec.install_latency_s, spec.latency_jitter)
            inst = self._new_instance(node_type, NodeKind.WORKER, request_id, due, up)
            inst.running_ns = running
            self.stats["allocations"] += 1
            if spec.preemption_rate_per_h > 0:
                wait_s = self.rng.exponential(3600.0 / spec.preemption_rate_per_h)
                self._push(due + int(round(wait_s * NS_PER_S)), _PREEMPT,
                           inst.cloud_instance_id)
        elif kind == _TERMINATE:
            inst = self.instances[payload]
            if inst.alive:
                inst.alive = False
                self.stats["terminations"] += 1
        elif kind == _TERMINATE_FAILED:
            cid, request_id = payload
            inst = self.instances[cid]
            inst.terminating = False
            if inst.alive:
                self.stats["termination_failures"] += 1
                self._errors.append(TerminateNodeError(
                    cloud_instance_id=cid, request_id=request_id, timestamp_ns=due,
                    details="simulated termination failure"))
        else:
            inst = self.instances[payload]
            if inst.alive:
                inst.alive = False
                inst.preempted = True
                self.stats["preemptions"] += 1

    # -- ICloudInstanceProvider
    def get_non_terminated(self) -> dict[str, CloudInstance]:
        now = int(self.clock())
        self.advance(now)
        with self._lock:
            return {c.cloud_instance_id: CloudInstance(
                        cloud_instance_id=c.cloud_instance_id, node_type=c.node_type,
                        node_kind=c.node_kind, is_running=c.running_ns <= now,
                        request_id=c.request_id)
                    for c in self.instances.values() if c.alive}

    def launch(self, shape: dict[str, int], request_id: str) -> None:
        now = int(self.clock())
        with self._lock:
            self.stats["launch_calls"] += 1
            for node_type, count in shape.items():
                spec = self.spec(node_type)
                failed = stocked_out = 0
                for _ in range(int(count)):
                    self.stats["launched"] += 1
                    u_fail, u_lost = self.rng.random(2)
                    used = (sum(1 for c in self.instances.values()
                                if c.alive and c.node_type == node_type)
                            + self._inflight.get(node_type, 0))
                    if spec.capacity is not None and used >= spec.capacity:
                        stocked_out += 1
                    elif u_fail < spec.launch_failure_rate:
                        failed += 1
                    elif u_lost < spec.launch_lost_rate:
                        self.stats["lost"] += 1
                    else:
                        self._inflight[node_type] = self._inflight.get(node_type, 0) + 1
                        lat = self._latency_ns(spec.alloc_latency_s, spec.latency_jitter)
                        self._push(now + lat, _ALLOCATE, (node_type, request_id))
                self.stats["launch_failures"] += failed
                self.stats["stockouts"] += stocked_out
                if failed + stocked_out:
                    why = []
                    if failed:
                        why.append(f"{failed} simulated launch failure(s)")
                    if stocked_out:
                        why.append(f"{stocked_out} over capacity {spec.capacity}")
                    self._errors.append(LaunchNodeError(
                        node_type=node_type, count=failed + stocked_out,
                        request_id=request_id, timestamp_ns=now, details=", ".join(why)))

    def terminate(self, ids: list[str], request_id: str) -> None:
        now = int(self.clock())
        with self._lock:
            self.stats["terminate_calls"] += 1
            for cid in ids:
                inst = self.instances.get(cid)
                if inst is None or not inst.alive or inst.terminating:
                    continue
                inst.terminating = True
                spec = self.spec(inst.node_type)
                failed = self.rng.random() < spec.termination_failure_rate
                lat = self._latency_ns(spec.termination_latency_s, spec.latency_jitter)
                if failed:
                    self._push(now + lat, _TERMINATE_FAILED, (cid, request_id))
                else:
                    self._push(now + lat, _TERMINATE, cid)

    def poll_errors(self) -> list[CloudInstanceProviderError]:
        self.advance()
        with self._lock:
            errors, self._errors = self._errors, []
            return errors


# ---- the GCS and the raylets ----------------------------------------------------------------

def node_id_for(cloud_instance_id: str) -> bytes:
    """A deterministic 28-byte ray NodeID for a cloud instance."""
    return hashlib.sha224(cloud_instance_id.encode()).digest()


@dataclass
class SimTask:
    task_id: int
    shape: dict
    duration_ns: int
    submitted_ns: int
    cancel_ns: Optional[int] = None
    node: Optional[bytes] = None
    start_ns: Optional[int] = None
    end_ns: Optional[int] = None
    cancelled: bool = False

    @property
    def done(self) -> bool:
        return self.end_ns is not None or self.cancelled


@dataclass
class SimRayNode:
    node_id: bytes
    cloud_instance_id: str
    node_type: str
    ip: str
    total: dict
    used: dict = field(default_factory=dict)
    status: str = "alive"            # alive | draining | dead
    up_ns: int = 0
    idle_since_ns: Optional[int] = 0
    dies_ns: Optional[int] = None
    tasks: list = field(default_factory=list)

    def free(self) -> dict:
        return {k: v - self.used.get(k, 0.0) for k, v in self.total.items()}


class SimGcs:
    """The GCS and raylets of a simulated Ray cluster on `provider`'s instances.

    `step()` brings the cluster to the clock's time: ray nodes join allocated instances
    at `provider.ray_up_ns`, die with their cloud instance or when a drain completes
    (`drain_latency_s` of the type), finished tasks release their resources, tasks
    whose `cancel_after_s` ran out while still pending are dropped, and pending tasks
    are placed first-fit (submission order onto node join order) on live, non-draining
    nodes. A dead node's running tasks go back to the front of the queue.

    `drain_node` (RayStopper's idle termination) is accepted for an alive node with no
    tasks unless a draw below the type's `drain_reject_rate` rejects it; the node is
    DRAINING, then DEAD after `drain_latency_s`. `drain_nodes` (RayStopper's stop for
    any other cause) kills the nodes at the next `step()`.

    Node totals are the type's configured resources plus `node:<ip>` (and Ray's head
    marker on the head). Available resources leave out exhausted entries, as the GCS
    does. Dead nodes are reported (status DEAD) until their cloud instance is gone.
    """

    def __init__(self, provider: SimCloudProvider, resources: Mapping[str, Mapping[str, float]],
                 clock: Callable[[], int], *, seed: int = 0,
                 session_name: str = "vecsched-sim"):
        self.provider = provider
        # Drain rejections are drawn on RayStopper's worker thread, concurrently with the
        # provider's launch draws on the reconciler's thread: keep them on their own stream.
        self.rng = np.random.default_rng(seed)
        self.resources = {k: dict(v) for k, v in resources.items()}
        self.clock = clock
        self.session_name = session_name
        self.nodes: dict[bytes, SimRayNode] = {}
        self.tasks: list[SimTask] = []
        self.pending: list[SimTask] = []
        self.version = 0
        self.stats = dict(drains_accepted=0, drains_rejected=0, stops=0, nodes_up=0,
                          node_deaths=0, tasks_done=0, tasks_cancelled=0)
        self._joined: set[bytes] = set()      # ray nodes ever started (never twice)
        self._lock = threading.RLock()

    # -- workload
    def submit(self, shape: Mapping[str, float], duration_s: float, count: int = 1, *,
               cancel_after_s: Optional[float] = None) -> list[SimTask]:
        now = int(self.clock())
        out = []
        with self._lock:
            for _ in range(int(count)):
                t = SimTask(len(self.tasks), dict(shape), int(round(duration_s * NS_PER_S)), now,
                            None if cancel_after_s is None
                            else now + int(round(cancel_after_s * NS_PER_S)))
                self.tasks.append(t)
                self.pending.append(t)
                out.append(t)
        return out

    # -- time
    def step(self) -> None:
        now = int(self.clock())
        self.provider.advance(now)
        with self._lock:
            self._sync_nodes(now)
            self._finish_tasks(now)
            self._cancel_tasks(now)
            self._place(now)

    def _sync_nodes(self, now: int) -> None:
        clouds = self.provider.instances
        for node in list(self.nodes.values()):
            cloud = clouds[node.cloud_instance_id]
            if node.status != "dead" and (not cloud.alive or
                                          (node.dies_ns is not None and node.dies_ns <= now)):
                self._kill(node)
            if node.status == "dead" and not cloud.alive:
                del self.nodes[node.node_id]          # the GCS forgets it with the instance
        for cid, cloud in clouds.items():
            if cloud.alive and cloud.ray_up_ns <= now \
                    and not cloud.terminating and node_id_for(cid) not in self._joined:
                self._join(cloud)

    def _join(self, cloud: SimCloudInstance) -> None:
        nid = node_id_for(cloud.cloud_instance_id)
        self._joined.add(nid)
        n = len(self._joined)
        ip = f"10.0.{n // 250}.{n % 250 + 1}"
        total = dict(self.resources.get(cloud.node_type, {}))
        total[f"node:{ip}"] = 1.0
        if cloud.node_kind == NodeKind.HEAD:
            total[HEAD_MARKER] = 1.0
        self.nodes[nid] = SimRayNode(nid, cloud.cloud_instance_id, cloud.node_type, ip, total,
                                     up_ns=cloud.ray_up_ns, idle_since_ns=cloud.ray_up_ns)
        self.stats["nodes_up"] += 1

    def _kill(self, node: SimRayNode) -> None:
        node.status = "dead"
        node.dies_ns = None
        self.stats["node_deaths"] += 1
        back = [t for t in node.tasks if not t.done]
        for t in back:
            t.node = t.start_ns = None
        node.tasks, node.used = [], {}
        self.pending[:0] = sorted(back, key=lambda t: t.task_id)

    def _finish_tasks(self, now: int) -> None:
        for node in self.nodes.values():
            if node.status == "dead" or not node.tasks:
                continue
            still = []
            last_end = None
            for t in node.tasks:
                if t.start_ns + t.duration_ns <= now:
                    t.end_ns = t.start_ns + t.duration_ns
                    last_end = t.end_ns if last_end is None else max(last_end, t.end_ns)
                    for k, v in t.shape.items():
                        node.used[k] = node.used.get(k, 0.0) - v
                    self.stats["tasks_done"] += 1
                else:
                    still.append(t)
            node.tasks = still
            if not still:
                node.used = {}
                node.idle_since_ns = last_end

    def _cancel_tasks(self, now: int) -> None:
        keep = []
        for t in self.pending:
            if t.cancel_ns is not None and t.cancel_ns <= now:
                t.cancelled = True
                self.stats["tasks_cancelled"] += 1
            else:
                keep.append(t)
        self.pending = keep

    def _place(self, now: int) -> None:
        live = [n for n in self.nodes.values() if n.status == "alive"]
        left = []
        for t in self.pending:
            for node in live:
                free = node.free()
                if all(free.get(k, 0.0) >= v for k, v in t.shape.items()):
                    for k, v in t.shape.items():
                        node.used[k] = node.used.get(k, 0.0) + v
                    node.tasks.append(t)
                    node.idle_since_ns = None
                    t.node, t.start_ns = node.node_id, now
                    break
            else:
                left.append(t)
        self.pending = left

    # -- what the autoscaler reads
    def cluster_resource_state_reply(self):
        now = int(self.clock())
        with self._lock:
            self.version += 1
            reply = GetClusterResourceStateReply()
            state = reply.cluster_resource_state
            state.cluster_resource_state_version = self.version
            state.cluster_session_name = self.session_name
            for node in self.nodes.values():
                ns = NodeState(node_id=node.node_id, instance_id=node.cloud_instance_id,
                               ray_node_type_name=node.node_type, node_ip_address=node.ip,
                               total_resources=node.total)
                if node.status == "dead":
                    ns.status = NodeStatus.DEAD
                else:
                    for k, v in node.free().items():
                        if v > 0:
                            ns.available_resources[k] = v
                    if node.status == "draining":
                        ns.status = NodeStatus.DRAINING
                    elif node.tasks:
                        ns.status = NodeStatus.RUNNING
                    else:
                        ns.status = NodeStatus.IDLE
                        ns.idle_duration_ms = (now - node.idle_since_ns) // 1_000_000
                state.node_states.append(ns)
            by_shape: dict[tuple, list] = {}
            for t in self.pending:
                key = tuple(t.shape.items())
                by_shape.setdefault(key, [t.shape, 0])[1] += 1
            for shape, count in by_shape.values():
                state.pending_resource_requests.append(ResourceRequestByCount(
                    request=ResourceRequest(resources_bundle=shape), count=count))
            return reply

    def get_cluster_resource_state(self) -> bytes:
        """What `GcsClient.get_cluster_resource_state()` returns (a serialised reply)."""
        return self.cluster_resource_state_reply().SerializeToString()

    # -- what RayStopper calls (GcsClient.drain_node / drain_nodes)
    def drain_node(self, node_id: str, reason: int, reason_message: str,
                   deadline_timestamp_ms: int) -> tuple[bool, str]:
        now = int(self.clock())
        with self._lock:
            node = self.nodes.get(bytes.fromhex(node_id))
            if node is None or node.status != "alive":
                self.stats["drains_rejected"] += 1
                return False, "node is not alive"
            if reason == DrainNodeReason.DRAIN_NODE_REASON_IDLE_TERMINATION:
                if node.tasks:
                    self.stats["drains_rejected"] += 1
                    return False, "node is not idle"
                spec = self.provider.spec(node.node_type)
                if self.rng.random() < spec.drain_reject_rate:
                    self.stats["drains_rejected"] += 1
                    return False, "simulated drain rejection"
            spec = self.provider.spec(node.node_type)
            node.status = "draining"
            node.dies_ns = now + int(round(spec.drain_latency_s * NS_PER_S))
            self.stats["drains_accepted"] += 1
            return True, ""

    def drain_nodes(self, node_ids: Sequence[bytes]) -> list[bytes]:
        now = int(self.clock())
        out = []
        with self._lock:
            for nid in node_ids:
                node = self.nodes.get(bytes(nid))
                if node is None or node.status == "dead":
                    continue
                node.status = "draining"
                node.dies_ns = now             # ray stops now: DEAD from the next step on
                self.stats["stops"] += 1
                out.append(bytes(nid))
        return out

    # -- introspection
    def busy_nodes(self) -> int:
        return sum(1 for n in self.nodes.values() if n.status == "alive" and n.tasks)


# ---- the autoscaler ------------------------------------------------------------------------

class SimAutoscaler:
    """`ray.autoscaler.v2.autoscaler.Autoscaler`, wired to the simulated cloud and GCS.

    The instance manager, its storage and its subscribers are built as in
    `Autoscaler._init_instance_manager` (no `ThreadedRayInstaller`: Ray only adds it
    for `NodeProviderAdapter` providers); the scheduler is an argument instead of the
    hard-coded `ResourceDemandScheduler`. `update_autoscaling_state()` is Ray's method;
    with `strict=True` an exception propagates instead of being logged and turned into
    a lost tick (None), and `failures` counts lost ticks either way.
    """

    def __init__(self, config: AutoscalingConfig, scheduler: IResourceScheduler,
                 provider: ICloudInstanceProvider, gcs: SimGcs, *,
                 session_name: str = "vecsched-sim", strict: bool = True,
                 metrics_reporter=None):
        self.config = config
        self.scheduler = scheduler
        self.provider = provider
        self.gcs = gcs
        self.strict = strict
        self.failures: list[BaseException] = []
        self._metrics_reporter = metrics_reporter
        self._ray_stop_errors_queue: Queue = Queue()
        self._ray_install_errors_queue: Queue = Queue()
        storage = InstanceStorage(cluster_id=session_name, storage=InMemoryStorage())
        self.ray_stopper = RayStopper(gcs_client=gcs, error_queue=self._ray_stop_errors_queue)
        self.cloud_resource_monitor = CloudResourceMonitor()
        self.instance_manager = InstanceManager(
            instance_storage=storage,
            instance_status_update_subscribers=[
                CloudInstanceUpdater(cloud_provider=provider,
                                     metrics_reporter=metrics_reporter),
                self.ray_stopper,
                self.cloud_resource_monitor,
            ])

    def update_autoscaling_state(self) -> Optional[AutoscalingState]:
        try:
            ray_stop_errors = []
            while not self._ray_stop_errors_queue.empty():
                ray_stop_errors.append(self._ray_stop_errors_queue.get())
            ray_install_errors = []
            while not self._ray_install_errors_queue.empty():
                ray_install_errors.append(self._ray_install_errors_queue.get())
            ray_cluster_resource_state = get_cluster_resource_state(self.gcs)
            autoscaling_config = self.config
            return Reconciler.reconcile(
                instance_manager=self.instance_manager,
                scheduler=self.scheduler,
                cloud_provider=self.provider,
                cloud_resource_monitor=self.cloud_resource_monitor,
                ray_cluster_resource_state=ray_cluster_resource_state,
                non_terminated_cloud_instances=self.provider.get_non_terminated(),
                cloud_provider_errors=self.provider.poll_errors(),
                ray_install_errors=ray_install_errors,
                ray_stop_errors=ray_stop_errors,
                autoscaling_config=autoscaling_config,
                metrics_reporter=self._metrics_reporter,
            )
        except Exception as e:      # Ray logs it and loses the tick
            self.failures.append(e)
            if self.strict:
                raise
            return None
        finally:
            self.settle()

    def settle(self) -> None:
        """Wait for the drains `RayStopper` started on its worker thread (its executor
        has one worker, so a no-op submitted now runs after them), keeping replays
        deterministic."""
        self.ray_stopper._executor.submit(lambda: None).result()

    def instances(self):
        from ray.core.generated.instance_manager_pb2 import GetInstanceManagerStateRequest
        reply = self.instance_manager.get_instance_manager_state(
            GetInstanceManagerStateRequest())
        return list(reply.state.instances)

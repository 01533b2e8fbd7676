"""The GCS and raylets of a simulated Ray cluster, as Ray's autoscaler reads them.

`SimGcs` plays the GCS and the raylets on the instances of a simulated cloud
(`provider.SimCloudProvider`): a ray node joins an allocated cloud instance after the
type's install latency, tasks are queued, placed first-fit on live nodes and finish
after their duration; `get_cluster_resource_state()` returns the serialised reply that
Ray's `sdk.get_cluster_resource_state` parses (node states with idle durations, pending
demand aggregated by shape). `drain_node` / `drain_nodes` answer Ray's `RayStopper`.
"""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from ray.core.generated.autoscaler_pb2 import (DrainNodeReason, GetClusterResourceStateReply,
                                               NodeState, NodeStatus, ResourceRequest,
                                               ResourceRequestByCount)
from ray.core.generated.instance_manager_pb2 import NodeKind

from vecsched.adapters.sim.lifecycle.cloud import CloudInstance

from .node_provider import SimCloudProvider

__all__ = ["HEAD_MARKER", "SimGcs", "SimRayNode", "SimTask", "node_id_for"]

NS_PER_S = 1_000_000_000
HEAD_MARKER = "node:__internal_head__"     # how Ray tells a head node (utils.is_head_node)


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

    def _join(self, cloud: CloudInstance) -> None:
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

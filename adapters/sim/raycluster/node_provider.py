"""Ray's `ICloudInstanceProvider` over the project's one simulated cloud
(`vecsched.adapters.sim.lifecycle.cloud.SimCloud`, the cloud the trace replay uses too)."""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Optional

import numpy as np
from ray.autoscaler.v2.instance_manager.node_provider import (CloudInstance,
                                                            CloudInstanceProviderError,
                                                            ICloudInstanceProvider,
                                                            LaunchNodeError,
                                                            TerminateNodeError)
from ray.core.generated.instance_manager_pb2 import NodeKind

from vecsched.adapters.sim.lifecycle.cloud import (ACCEPTED, FAILED, LOST, NS_PER_S, CloudInstance as
                                      SimCloudInstance, EventQueue, SimCloud, SimNodeType)

__all__ = ["SimCloudInstance", "SimCloudProvider"]

# event kinds
_ALLOCATE, _TERMINATE, _TERMINATE_FAILED, _PREEMPT = range(4)


class SimCloudProvider(ICloudInstanceProvider):
    """Ray's `ICloudInstanceProvider` over a seeded `SimCloud`.

    * `launch(shape, request_id)`: per instance the cloud decides (`SimCloud.launch`):
      a stock-out (type `capacity` reached by live plus in-flight instances) or a launch
      failure is reported by `poll_errors()` as one `LaunchNodeError` per type and
      request; a lost request is never answered (Ray's REQUESTED timeout requeues it);
      otherwise a cloud instance appears in `get_non_terminated()` after its allocation
      latency (`alloc_latency_s` × U(1−jitter, 1+jitter)).
    * `terminate(ids, request_id)`: the instance disappears after
      `termination_latency_s`, or with `termination_failure_rate` stays and a
      `TerminateNodeError` is reported then. Idempotent while a termination is pending.
    * Preemption: with `preemption_rate_per_h` > 0, each allocated instance vanishes
      after an exponential time from its allocation.
    * `boot_latency_s` (per type, or one value for all): how long an allocated instance
      is listed with `is_running=False` (Ray's reconciler only starts installing ray on
      running instances, so the scheduler sees it ALLOCATED meanwhile).
    * `ray_up_ns(id)`: when the simulated GCS should see a ray node on the instance
      (allocation + boot + `install_latency_s`, drawn at allocation).

    `head_type` starts the cluster with one running head instance. Cloud ids are
    `cloud-000000`, `cloud-000001`, … in allocation order. ``cloud`` shares an existing
    `SimCloud` instead of making one from ``types`` / ``seed`` / ``default``.
    """

    def __init__(self, types: Mapping[str, SimNodeType] | None, clock: Callable[[], int],
                 seed: int | np.random.Generator = 0, *, head_type: Optional[str] = None,
                 default: Optional[SimNodeType] = None,
                 boot_latency_s: float | Mapping[str, float] = 0.0,
                 cloud: Optional[SimCloud] = None):
        self.cloud = cloud if cloud is not None else SimCloud(types or {}, seed, default=default)
        self.boot_latency_s = boot_latency_s
        self.clock = clock
        self.calls = dict(launch_calls=0, terminate_calls=0)
        self._errors: list[CloudInstanceProviderError] = []
        self._events = EventQueue()
        self._lock = threading.Lock()
        if head_type is not None:
            self.cloud.add(head_type, int(clock()), kind=NodeKind.HEAD)

    # -- the cloud's state
    @property
    def types(self) -> dict:
        return self.cloud.types

    @property
    def instances(self) -> dict[str, SimCloudInstance]:
        """Every cloud instance ever, in allocation order."""
        return self.cloud.instances

    @property
    def stats(self) -> dict:
        return {**self.calls, **self.cloud.stats}

    def spec(self, node_type: str) -> SimNodeType:
        return self.cloud.spec(node_type)

    def live(self, node_type: str) -> int:
        return self.cloud.live(node_type)

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
            while (event := self._events.pop_due(now)) is not None:
                self._fire(*event)

    def _fire(self, due: int, kind: int, payload: tuple) -> None:
        cloud = self.cloud
        if kind == _ALLOCATE:
            node_type, request_id = payload
            spec = cloud.spec(node_type)
            inst = cloud.allocate(node_type, due, request_id=request_id)
            inst.running_ns = due + self.boot_ns(node_type)
            inst.ray_up_ns = inst.running_ns + cloud.latency_ns(spec.install_latency_s,
                                                                spec.latency_jitter)
            wait = cloud.preemption_delay_ns(node_type)
            inst.exposed = True
            if wait is not None:
                self._events.push(due + wait, _PREEMPT, inst.cloud_instance_id)
        elif kind == _TERMINATE:
            if cloud.kill(payload[0]):
                cloud.stats["terminations"] += 1
        elif kind == _TERMINATE_FAILED:
            cid, request_id = payload
            inst = self.instances[cid]
            inst.terminating = False
            if inst.alive:
                cloud.stats["termination_failures"] += 1
                self._errors.append(TerminateNodeError(
                    cloud_instance_id=cid, request_id=request_id, timestamp_ns=due,
                    details="simulated termination failure"))
        elif cloud.kill(payload[0], preempted=True):
            cloud.stats["preemptions"] += 1

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
            self.calls["launch_calls"] += 1
            for node_type, count in shape.items():
                failed: dict[str, int] = {}
                for _ in range(int(count)):
                    outcome, lat = self.cloud.launch(node_type)
                    if outcome == ACCEPTED:
                        self._events.push(now + lat, _ALLOCATE, node_type, request_id)
                    elif outcome != LOST:
                        failed[outcome] = failed.get(outcome, 0) + 1
                if failed:
                    why = []
                    if failed.get(FAILED):
                        why.append(f"{failed[FAILED]} simulated launch failure(s)")
                    if len(failed) > 1 or FAILED not in failed:
                        why.append(f"{sum(failed.values()) - failed.get(FAILED, 0)} over "
                                   f"capacity {self.spec(node_type).capacity}")
                    self._errors.append(LaunchNodeError(
                        node_type=node_type, count=sum(failed.values()),
                        request_id=request_id, timestamp_ns=now, details=", ".join(why)))

    def terminate(self, ids: list[str], request_id: str) -> None:
        now = int(self.clock())
        with self._lock:
            self.calls["terminate_calls"] += 1
            for cid in ids:
                inst = self.instances.get(cid)
                if inst is None or not inst.alive or inst.terminating:
                    continue
                inst.terminating = True
                failed, lat = self.cloud.termination(inst.node_type)
                if failed:
                    self._events.push(now + lat, _TERMINATE_FAILED, cid, request_id)
                else:
                    self._events.push(now + lat, _TERMINATE, cid)

    def poll_errors(self) -> list[CloudInstanceProviderError]:
        self.advance()
        with self._lock:
            errors, self._errors = self._errors, []
            return errors

"""The simulated cloud: one seeded model of a cloud's instances, shared by every
simulation in the project.

`SimCloud` knows instance types (`SimNodeType`), their capacity, the outcome of each
launch (accepted, launch error, stock-out, lost request), allocation and termination
latencies, termination failures and preemptions. It knows nothing of Ray or of an
instance store: a front end asks it for outcomes and keeps its own event queue
(`EventQueue`) of when they happen:

- `vecsched.adapters.sim.lifecycle.SimProvider` reports the cloud (and a ray installer and the
  raylets' drain) to our `InstanceStore`, for the trace replay;
- `vecsched.adapters.sim.raycluster.SimCloudProvider` is Ray's `ICloudInstanceProvider` over it, for
  Ray's real `Reconciler` loop.

Every random draw comes from the cloud's one numpy Generator, in the order the front
end asks: a launch draws (failure, loss) then, if accepted, its allocation latency; a
termination its failure then its latency; a preemption one exponential wait when the
front end starts the instance's exposure. The same seed and the same calls give the
same cloud.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from vecsched.engine.model.dtypes import Kind

NS_PER_S = 1_000_000_000

# Outcomes of one launch.
ACCEPTED, FAILED, STOCKOUT, LOST = "accepted", "failed", "stockout", "lost"
# What `SimCloud.by_type` counts per instance type.
_TYPE_COUNTS = (ACCEPTED, FAILED, STOCKOUT, LOST, "allocated", "orphaned")


class SimClock:
    """A manual clock in ns; pass it as the store's clock."""

    def __init__(self, start_ns: int = 0):
        self.ns = int(start_ns)

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> int:
        self.ns += int(round(seconds * NS_PER_S))
        return self.ns


@dataclass(frozen=True)
class SimNodeType:
    """How the simulated cloud treats one instance type. Latencies in seconds."""
    alloc_latency_s: float = 30.0
    install_latency_s: float = 60.0
    latency_jitter: float = 0.0          # each latency is nominal x U(1 - j, 1 + j)
    capacity: int | None = None          # live cloud instances of the type; None = unlimited
    launch_failure_rate: float = 0.0     # P(the launch call errors -> ALLOCATION_FAILED)
    launch_lost_rate: float = 0.0        # P(the request is never answered -> Ray's retries)
    preemption_rate_per_h: float = 0.0   # per instance-hour (Poisson), exposed from when the
                                         # front end says: ray running (SimProvider), allocation (Ray's)
    drain_latency_s: float = 10.0        # RAY_STOPPING -> RAY_STOPPED
    drain_reject_rate: float = 0.0       # P(a drain is rejected -> back to RAY_RUNNING)
    termination_latency_s: float = 10.0  # TERMINATING -> TERMINATED
    termination_failure_rate: float = 0.0  # P(a terminate call fails -> TERMINATION_FAILED)


@dataclass
class CloudInstance:
    """One cloud instance. `owner` is whatever the front end ties it to (an instance
    id of the store); `request_id`, `running_ns`, `ray_up_ns` and `terminating` are
    kept for front ends that report them (Ray's provider interface, the GCS)."""
    cloud_instance_id: str
    node_type: str
    node_kind: int
    owner: Optional[str]
    allocated_ns: int
    request_id: Optional[str] = None
    running_ns: int = 0              # listed as running from then (boot latency before)
    ray_up_ns: int = 0               # a ray node joins from then (for a simulated GCS)
    alive: bool = True
    terminating: bool = False
    preempted: bool = False
    exposed: bool = False            # its preemption time has been drawn

    @property
    def instance_type(self) -> str:
        return self.node_type

    @property
    def instance_id(self) -> Optional[str]:
        """The store's instance id (SimProvider's name for ``owner``)."""
        return self.owner

    @property
    def preemption_drawn(self) -> bool:
        return self.exposed


class EventQueue:
    """Events due at simulated times; equal times in push order."""

    def __init__(self):
        self._heap: list[tuple] = []
        self._seq = 0

    def push(self, due_ns: int, kind: int, *payload: Any) -> None:
        heapq.heappush(self._heap, (int(due_ns), self._seq, kind, payload))
        self._seq += 1

    def pop_due(self, now_ns: int) -> Optional[tuple[int, int, tuple]]:
        """The next event due by `now_ns` as (due, kind, payload), else None. Events a
        handler pushes meanwhile are seen if due by `now_ns`."""
        if self._heap and self._heap[0][0] <= now_ns:
            due, _, kind, payload = heapq.heappop(self._heap)
            return due, kind, payload
        return None

    def __len__(self) -> int:
        return len(self._heap)


class SimCloud:
    """A seeded simulated cloud (see the module docstring)."""

    def __init__(self, types: Mapping[str, SimNodeType],
                 seed: int | np.random.Generator = 0, *, default: SimNodeType | None = None,
                 id_factory: Optional[Callable[[int], str]] = None):
        self.types = dict(types)
        self.default = default
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.instances: dict[str, CloudInstance] = {}   # every instance ever, in order
        self.stats = dict(launches=0, launch_failures=0, stockouts=0, lost=0, allocations=0,
                          orphaned=0, preemptions=0, terminations=0, termination_failures=0)
        self._id = id_factory or (lambda n: f"cloud-{n:06d}")
        self._live: dict[str, int] = {}       # alive instances per type
        self._inflight: dict[str, int] = {}   # accepted launches not yet allocated, per type
        self._by_type: dict[str, dict[str, int]] = {}   # outcomes per type (`by_type`)

    # ---- types and draws ----------------------------------------------------------------
    def spec(self, node_type: str) -> SimNodeType:
        spec = self.types.get(node_type, self.default)
        if spec is None:
            raise KeyError(f"no simulated behaviour for instance type {node_type!r}")
        return spec

    def latency_ns(self, nominal_s: float, jitter: float) -> int:
        """One latency draw: nominal x U(1 - jitter, 1 + jitter), in ns."""
        u = self.rng.random()
        return int(round(nominal_s * (1.0 + jitter * (2.0 * u - 1.0)) * NS_PER_S))

    def live(self, node_type: str) -> int:
        """Alive instances of a type (what counts against its capacity, with the
        accepted launches still in flight)."""
        return self._live.get(node_type, 0)

    # ---- launches -----------------------------------------------------------------------
    def launch(self, node_type: str) -> tuple[str, int]:
        """Ask for one instance: (outcome, allocation latency ns; 0 unless ACCEPTED).
        ACCEPTED instances must later be `allocate`d (or `orphan`ed); the front end
        decides when."""
        spec = self.spec(node_type)
        self.stats["launches"] += 1
        u_fail, u_lost = self.rng.random(2)
        used = self._live.get(node_type, 0) + self._inflight.get(node_type, 0)
        if spec.capacity is not None and used >= spec.capacity:
            self.stats["stockouts"] += 1           # no capacity left: the call errors
            return self._outcome(node_type, STOCKOUT), 0
        if u_fail < spec.launch_failure_rate:
            self.stats["launch_failures"] += 1
            return self._outcome(node_type, FAILED), 0
        if u_lost < spec.launch_lost_rate:
            self.stats["lost"] += 1                # never answered
            return self._outcome(node_type, LOST), 0
        self._inflight[node_type] = self._inflight.get(node_type, 0) + 1
        return (self._outcome(node_type, ACCEPTED),
                self.latency_ns(spec.alloc_latency_s, spec.latency_jitter))

    def _outcome(self, node_type: str, what: str) -> str:
        by = self._by_type.setdefault(node_type, dict.fromkeys(_TYPE_COUNTS, 0))
        by[what] += 1
        return what

    def by_type(self) -> dict[str, dict[str, int]]:
        """The cloud's own record per instance type: launch calls by outcome (accepted,
        failed, stockout, lost), then allocated and orphaned accepted launches, and the
        accepted ones still in flight (``in_flight``). For every type: accepted =
        allocated + orphaned + in_flight."""
        out = {}
        for t, by in self._by_type.items():
            out[t] = dict(by, in_flight=self._inflight.get(t, 0))
        return out

    def allocate(self, node_type: str, now_ns: int, *, owner: Optional[str] = None,
                 request_id: Optional[str] = None, kind: int = Kind.WORKER) -> CloudInstance:
        """An accepted launch lands: a new alive instance."""
        self._inflight[node_type] -= 1
        self.stats["allocations"] += 1
        self._outcome(node_type, "allocated")
        return self.add(node_type, now_ns, owner=owner, request_id=request_id, kind=kind)

    def orphan(self, node_type: str) -> None:
        """An accepted launch landed after its requester gave up on it."""
        self._inflight[node_type] -= 1
        self.stats["orphaned"] += 1
        self._outcome(node_type, "orphaned")

    def add(self, node_type: str, now_ns: int, *, owner: Optional[str] = None,
            request_id: Optional[str] = None, kind: int = Kind.WORKER) -> CloudInstance:
        """An instance that exists without a launch (a cluster's head)."""
        cid = self._id(len(self.instances))
        inst = CloudInstance(cid, node_type, int(kind), owner, int(now_ns), request_id,
                             running_ns=int(now_ns), ray_up_ns=int(now_ns))
        self.instances[cid] = inst
        self._live[node_type] = self._live.get(node_type, 0) + 1
        return inst

    # ---- preemption and termination -----------------------------------------------------
    def preemption_delay_ns(self, node_type: str) -> Optional[int]:
        """When an instance allocated now will be preempted, from now (one exponential
        draw), or None if the type is never preempted."""
        rate = self.spec(node_type).preemption_rate_per_h
        if rate <= 0:
            return None
        return int(round(self.rng.exponential(3600.0 / rate) * NS_PER_S))

    def termination(self, node_type: str) -> tuple[bool, int]:
        """A terminate call: (fails, latency ns)."""
        spec = self.spec(node_type)
        failed = bool(self.rng.random() < spec.termination_failure_rate)
        return failed, self.latency_ns(spec.termination_latency_s, spec.latency_jitter)

    def kill(self, cloud_instance_id: str, *, preempted: bool = False) -> bool:
        """The instance is gone (terminated or preempted); False if it already was.
        Front ends count terminations and preemptions (`stats`) as they report them."""
        inst = self.instances.get(cloud_instance_id)
        if inst is None or not inst.alive:
            return False
        inst.alive = False
        inst.preempted = preempted
        self._live[inst.node_type] -= 1
        return True

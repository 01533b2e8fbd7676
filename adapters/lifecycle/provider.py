"""A simulated cloud provider (and ray installer, and GCS) on a simulated clock.

`SimProvider.step(now_ns)` plays the passive half of a reconcile tick: it notices what the
reconciler asked for (REQUESTED, TERMINATING, RAY_STOP_REQUESTED records) and reports what
the "cloud" and "ray" did by then, as moves through the store, so the status table checks
every one of them:

    REQUESTED --alloc latency--> ALLOCATED -> RAY_INSTALLING --install latency--> RAY_RUNNING
    REQUESTED -> ALLOCATION_FAILED          launch error (failure rate) or stock-out (capacity)
    REQUESTED (no answer)                   lost request: Ray's timeout requeues it / fails it
    RAY_RUNNING -> RAY_STOPPED              preemption (a Poisson rate per running node)
    RAY_STOP_REQUESTED -> RAY_STOPPING --drain latency--> RAY_STOPPED
    RAY_STOP_REQUESTED -> RAY_RUNNING       drain rejected
    TERMINATING --termination latency--> TERMINATED (or TERMINATION_FAILED)

(RAY_STOPPED -> TERMINATING is the reconciler's own step 4, `InstanceStore.reconcile`.)
Each move is stamped with the simulated time it happened, not the time of the step that
reports it. All randomness comes from one seeded numpy Generator, drawn in store order,
so the same seed and the same calls give the same histories.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from engine.dtypes import Kind, Status

from .instances import NS_PER_S, InstanceStore, Move

S = Status

# Statuses in which ray runs on the cloud instance, so a preemption kills a ray node.
_RAY_ALIVE = (S.RAY_RUNNING, S.RAY_STOP_REQUESTED, S.RAY_STOPPING)


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
    preemption_rate_per_h: float = 0.0   # preemptions per running-node hour (Poisson)
    drain_latency_s: float = 10.0        # RAY_STOPPING -> RAY_STOPPED
    drain_reject_rate: float = 0.0       # P(a drain is rejected -> back to RAY_RUNNING)
    termination_latency_s: float = 10.0  # TERMINATING -> TERMINATED
    termination_failure_rate: float = 0.0  # P(a terminate call fails -> TERMINATION_FAILED)


@dataclass
class _Cloud:
    instance_type: str
    instance_id: str
    alive: bool = True
    preemption_drawn: bool = False


# Event kinds, each applying one move when due (if its record has not moved on).
_LAUNCH_FAILED, _ALLOCATE, _INSTALL, _RUN, _DRAIN, _DRAIN_REJECTED, _STOPPED, \
    _TERMINATE, _TERMINATE_FAILED, _PREEMPT = range(10)


class SimProvider:
    """A seeded simulated cloud provider acting on an `InstanceStore`."""

    def __init__(self, store: InstanceStore, types: Mapping[str, SimNodeType],
                 seed: int | np.random.Generator = 0, *, installs_ray: bool = True,
                 default: SimNodeType | None = None):
        self.store = store
        self.types = dict(types)
        self.default = default
        self.installs_ray = installs_ray     # False: ALLOCATED -> RAY_RUNNING (KubeRay pods)
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.clouds: dict[str, _Cloud] = {}
        self.stats = dict(launches=0, launch_failures=0, stockouts=0, lost=0, allocations=0,
                          orphaned=0, preemptions=0, drains=0, drains_rejected=0,
                          terminations=0, termination_failures=0)
        self._live: dict[str, int] = {}      # alive cloud instances per type
        self._inflight: dict[str, int] = {}  # accepted launches not yet allocated, per type
        self._events: list[tuple] = []       # heap of (due_ns, seq, kind, instance_id, token)
        self._seq = 0
        self._seen: set[tuple[str, int]] = set()   # (instance_id, history length) handled
        self._scanned_version = -1
        self._n_cloud = 0

    # ---- helpers -----------------------------------------------------------------------
    def spec(self, instance_type: str) -> SimNodeType:
        spec = self.types.get(instance_type, self.default)
        if spec is None:
            raise KeyError(f"no simulated behaviour for instance type {instance_type!r}")
        return spec

    def live(self, instance_type: str) -> int:
        """Alive cloud instances of a type (what counts against its capacity, with
        the accepted launches still in flight)."""
        return self._live.get(instance_type, 0)

    def _latency_ns(self, nominal_s: float, jitter: float) -> int:
        u = self.rng.random()
        return int(round(nominal_s * (1.0 + jitter * (2.0 * u - 1.0)) * NS_PER_S))

    def _push(self, due_ns: int, kind: int, instance_id: str, token) -> None:
        heapq.heappush(self._events, (int(due_ns), self._seq, kind, instance_id, token))
        self._seq += 1

    def _token(self, instance_id: str) -> tuple[int, int]:
        rec = self.store[instance_id]
        return rec.status, len(rec.status_history)

    # ---- discovering what the reconciler asked for -------------------------------------
    def _discover(self, now_ns: int) -> None:
        if self.store.version == self._scanned_version:
            return
        for rec in self.store:
            if rec.status not in (S.REQUESTED, S.TERMINATING, S.RAY_STOP_REQUESTED):
                continue
            key = (rec.instance_id, len(rec.status_history))
            if key in self._seen:
                continue
            self._seen.add(key)
            spec, t0, token = self.spec(rec.instance_type), rec.entered_ns(), key[1]
            if rec.status == S.REQUESTED:
                self._on_requested(rec.instance_id, rec.instance_type, spec, t0, now_ns,
                                   (S.REQUESTED, token))
            elif rec.status == S.TERMINATING:
                failed = self.rng.random() < spec.termination_failure_rate
                lat = self._latency_ns(spec.termination_latency_s, spec.latency_jitter)
                self._push(t0 + lat, _TERMINATE_FAILED if failed else _TERMINATE,
                           rec.instance_id, (S.TERMINATING, token))
            else:
                rejected = self.rng.random() < spec.drain_reject_rate
                self._push(t0, _DRAIN_REJECTED if rejected else _DRAIN, rec.instance_id,
                           (S.RAY_STOP_REQUESTED, token))

    def _on_requested(self, instance_id, instance_type, spec, t0, now_ns, token) -> None:
        self.stats["launches"] += 1
        u_fail, u_lost = self.rng.random(2)
        lat = self._latency_ns(spec.alloc_latency_s, spec.latency_jitter)
        used = self._live.get(instance_type, 0) + self._inflight.get(instance_type, 0)
        if spec.capacity is not None and used >= spec.capacity:
            self.stats["stockouts"] += 1           # no capacity left: the call errors
            self._push(now_ns, _LAUNCH_FAILED, instance_id, token)
        elif u_fail < spec.launch_failure_rate:
            self.stats["launch_failures"] += 1
            self._push(now_ns, _LAUNCH_FAILED, instance_id, token)
        elif u_lost < spec.launch_lost_rate:
            self.stats["lost"] += 1                # never answered: left to Ray's timeout
        else:
            self._inflight[instance_type] = self._inflight.get(instance_type, 0) + 1
            self._push(t0 + lat, _ALLOCATE, instance_id, token)

    # ---- applying due events -----------------------------------------------------------
    def step(self, now_ns: int) -> list[Move]:
        """Report everything that happened up to `now_ns`; returns the moves applied."""
        self._discover(int(now_ns))
        applied: list[Move] = []
        while self._events and self._events[0][0] <= now_ns:
            due, _, kind, instance_id, token = heapq.heappop(self._events)
            move = self._fire(due, kind, instance_id, token)
            if move is not None:
                applied.extend(self.store.apply([move], at_ns=due))
                self._after(due, kind, move)
        self._scanned_version = self.store.version
        return applied

    def _fire(self, due: int, kind: int, instance_id: str, token) -> Move | None:
        """The move an event makes, or None if its record has moved on meanwhile."""
        if kind == _PREEMPT:
            return self._preempt(token)
        rec = self.store[instance_id]              # the store never forgets a record
        if (rec.status, len(rec.status_history)) != token:
            if kind == _ALLOCATE:                  # the launch landed after Ray gave up
                self._inflight[rec.instance_type] -= 1
                self.stats["orphaned"] += 1
            return None
        itype = rec.instance_type
        if kind == _LAUNCH_FAILED:
            return Move(instance_id, S.ALLOCATION_FAILED)
        if kind == _ALLOCATE:
            self._inflight[itype] -= 1
            self._live[itype] = self._live.get(itype, 0) + 1
            cloud_id = f"cloud-{self._n_cloud:06d}"
            self._n_cloud += 1
            self.clouds[cloud_id] = _Cloud(itype, instance_id)
            self.stats["allocations"] += 1
            return Move(instance_id, S.ALLOCATED, cloud_instance_id=cloud_id,
                        node_kind=Kind.WORKER)
        if kind == _INSTALL:
            return Move(instance_id, S.RAY_INSTALLING)
        if kind == _RUN:
            return Move(instance_id, S.RAY_RUNNING,
                        node_id=rec.node_id or f"node-{rec.cloud_instance_id}")
        if kind == _DRAIN:
            self.stats["drains"] += 1
            return Move(instance_id, S.RAY_STOPPING)
        if kind == _DRAIN_REJECTED:
            self.stats["drains_rejected"] += 1
            return Move(instance_id, S.RAY_RUNNING)
        if kind == _STOPPED:
            return Move(instance_id, S.RAY_STOPPED)
        if kind == _TERMINATE_FAILED:
            self.stats["termination_failures"] += 1
            return Move(instance_id, S.TERMINATION_FAILED)
        assert kind == _TERMINATE
        self.stats["terminations"] += 1
        self._kill(rec.cloud_instance_id)
        return Move(instance_id, S.TERMINATED)

    def _after(self, due: int, kind: int, move: Move) -> None:
        """Schedule what follows a move that was just applied."""
        iid = move.instance_id
        rec = self.store[iid]
        spec = self.spec(rec.instance_type)
        if kind == _ALLOCATE:
            if self.installs_ray:
                self._push(due, _INSTALL, iid, self._token(iid))
            else:
                lat = self._latency_ns(spec.install_latency_s, spec.latency_jitter)
                self._push(due + lat, _RUN, iid, self._token(iid))
        elif kind == _INSTALL:
            lat = self._latency_ns(spec.install_latency_s, spec.latency_jitter)
            self._push(due + lat, _RUN, iid, self._token(iid))
        elif kind == _RUN:
            cloud = self.clouds[rec.cloud_instance_id]
            if spec.preemption_rate_per_h > 0 and not cloud.preemption_drawn:
                cloud.preemption_drawn = True
                wait_s = self.rng.exponential(3600.0 / spec.preemption_rate_per_h)
                self._push(due + int(round(wait_s * NS_PER_S)), _PREEMPT, iid,
                           rec.cloud_instance_id)
        elif kind == _DRAIN:
            lat = self._latency_ns(spec.drain_latency_s, spec.latency_jitter)
            self._push(due + lat, _STOPPED, iid, self._token(iid))

    def _preempt(self, cloud_id: str) -> Move | None:
        cloud = self.clouds[cloud_id]
        rec = self.store.get(cloud.instance_id)
        if not cloud.alive or rec is None or rec.cloud_instance_id != cloud_id \
                or rec.status not in _RAY_ALIVE:
            return None                            # already going away on its own
        self.stats["preemptions"] += 1
        self._kill(cloud_id)
        return Move(rec.instance_id, S.RAY_STOPPED)

    def _kill(self, cloud_id: str) -> None:
        cloud = self.clouds.get(cloud_id)
        if cloud is not None and cloud.alive:
            cloud.alive = False
            self._live[cloud.instance_type] -= 1


def run(store: InstanceStore, provider: SimProvider, clock: SimClock, seconds: float,
        tick_s: float = 5.0, schedule: Callable | None = None) -> None:
    """Drive the simulation: every `tick_s`, advance the clock, let the provider report,
    then run one reconcile tick (with `schedule(store)` -> (launches, terminations))."""
    end = clock.ns + int(round(seconds * NS_PER_S))
    while clock.ns < end:
        clock.advance(tick_s)
        provider.step(clock.ns)
        store.reconcile(schedule)

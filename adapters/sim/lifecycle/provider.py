"""The simulated cloud (and ray installer, and raylets' drain) reported to an
`InstanceStore` on a simulated clock.

`SimProvider.step(now_ns)` plays the passive half of a reconcile tick: it notices what the
reconciler asked for (REQUESTED, TERMINATING, RAY_STOP_REQUESTED records), asks the
simulated cloud (`cloud.SimCloud`) what comes of it, and reports what happened by then as
moves through the store, so the status table checks every one of them:

    REQUESTED --alloc latency--> ALLOCATED -> RAY_INSTALLING --install latency--> RAY_RUNNING
    REQUESTED -> ALLOCATION_FAILED          launch error (failure rate) or stock-out (capacity)
    REQUESTED (no answer)                   lost request: Ray's timeout requeues it / fails it
    RAY_RUNNING -> RAY_STOPPED              preemption (a Poisson rate per running node)
    RAY_STOP_REQUESTED -> RAY_STOPPING --drain latency--> RAY_STOPPED
    RAY_STOP_REQUESTED -> RAY_RUNNING       drain rejected
    TERMINATING --termination latency--> TERMINATED (or TERMINATION_FAILED)

(RAY_STOPPED -> TERMINATING is the reconciler's own step 4, `InstanceStore.reconcile`.)
Each move is stamped with the simulated time it happened, not the time of the step that
reports it. All randomness comes from the cloud's one seeded Generator, drawn in store
order, so the same seed and the same calls give the same histories.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from vecsched.engine.model.dtypes import Kind, Status

from .cloud import (ACCEPTED, FAILED, LOST, NS_PER_S, STOCKOUT, CloudInstance, EventQueue,
                    SimClock, SimCloud, SimNodeType)
from .instances import InstanceStore, Move

S = Status

# Statuses in which ray runs on the cloud instance, so a preemption kills a ray node.
_RAY_ALIVE = (S.RAY_RUNNING, S.RAY_STOP_REQUESTED, S.RAY_STOPPING)

# Event kinds, each applying one move when due (if its record has not moved on).
_LAUNCH_FAILED, _ALLOCATE, _INSTALL, _RUN, _DRAIN, _DRAIN_REJECTED, _STOPPED, \
    _TERMINATE, _TERMINATE_FAILED, _PREEMPT = range(10)

# What a failed launch's record says, as Ray's reconciler words it ("launch failed with
# <the provider's error>"): a stock-out names the missing capacity, as clouds do.
LAUNCH_FAILED_DETAILS = {STOCKOUT: "launch failed with InsufficientInstanceCapacity: the "
                                   "simulated cloud has no capacity left for this type",
                         FAILED: "launch failed with a simulated launch error"}

_STATS = ("launches", "launch_failures", "stockouts", "lost", "allocations", "orphaned",
          "preemptions", "drains", "drains_rejected", "terminations", "termination_failures")

__all__ = ["SimClock", "SimNodeType", "SimProvider", "run"]


class SimProvider:
    """A seeded simulated cloud provider acting on an `InstanceStore`.

    ``types`` / ``seed`` / ``default`` make its `SimCloud`; pass ``cloud`` instead to
    act on an existing one. ``installs_ray`` False: ALLOCATED -> RAY_RUNNING after the
    install latency (KubeRay pods), True: through RAY_INSTALLING.
    """

    def __init__(self, store: InstanceStore, types: Mapping[str, SimNodeType] | None = None,
                 seed: int | np.random.Generator = 0, *, installs_ray: bool = True,
                 default: SimNodeType | None = None, cloud: SimCloud | None = None):
        self.store = store
        self.cloud = cloud if cloud is not None else SimCloud(types or {}, seed, default=default)
        self.installs_ray = installs_ray
        self._stats = dict(drains=0, drains_rejected=0)
        self._events = EventQueue()
        self._seen: set[tuple[str, int]] = set()   # (instance_id, history length) handled
        self._failure: dict[str, str] = {}         # instance id -> its failed launch's outcome
        self._scanned_version = -1

    # ---- the cloud's state, under the names this class always had -----------------------
    @property
    def types(self) -> dict:
        return self.cloud.types

    @property
    def default(self) -> SimNodeType | None:
        return self.cloud.default

    @property
    def rng(self) -> np.random.Generator:
        return self.cloud.rng

    @property
    def clouds(self) -> dict[str, CloudInstance]:
        """Cloud instances by cloud id (`CloudInstance.owner` is the store's id)."""
        return self.cloud.instances

    @property
    def stats(self) -> dict:
        """The cloud's counters and the drains this provider reported."""
        both = {**self.cloud.stats, **self._stats}
        return {k: both[k] for k in _STATS}

    def spec(self, instance_type: str) -> SimNodeType:
        return self.cloud.spec(instance_type)

    def live(self, instance_type: str) -> int:
        """Alive cloud instances of a type (what counts against its capacity, with
        the accepted launches still in flight)."""
        return self.cloud.live(instance_type)

    def _token(self, instance_id: str) -> tuple[int, int]:
        rec = self.store[instance_id]
        return rec.status, len(rec.status_history)

    # ---- discovering what the reconciler asked for -------------------------------------
    def _discover(self, now_ns: int) -> None:
        if self.store.version == self._scanned_version:
            return
        ev = self._events
        for rec in self.store:
            if rec.status not in (S.REQUESTED, S.TERMINATING, S.RAY_STOP_REQUESTED):
                continue
            key = (rec.instance_id, len(rec.status_history))
            if key in self._seen:
                continue
            self._seen.add(key)
            t0, token = rec.entered_ns(), (rec.status, key[1])
            if rec.status == S.REQUESTED:
                outcome, lat = self.cloud.launch(rec.instance_type)
                if outcome == ACCEPTED:
                    ev.push(t0 + lat, _ALLOCATE, rec.instance_id, token)
                elif outcome != LOST:              # lost: left to Ray's timeout
                    self._failure[rec.instance_id] = outcome
                    ev.push(now_ns, _LAUNCH_FAILED, rec.instance_id, token)
            elif rec.status == S.TERMINATING:
                failed, lat = self.cloud.termination(rec.instance_type)
                ev.push(t0 + lat, _TERMINATE_FAILED if failed else _TERMINATE,
                        rec.instance_id, token)
            else:
                spec = self.spec(rec.instance_type)
                rejected = self.rng.random() < spec.drain_reject_rate
                ev.push(t0, _DRAIN_REJECTED if rejected else _DRAIN, rec.instance_id, token)

    # ---- applying due events -----------------------------------------------------------
    def step(self, now_ns: int) -> list[Move]:
        """Report everything that happened up to `now_ns`; returns the moves applied."""
        self._discover(int(now_ns))
        applied: list[Move] = []
        while (event := self._events.pop_due(now_ns)) is not None:
            due, kind, (instance_id, token) = event
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
                self.cloud.orphan(rec.instance_type)
            return None
        if kind == _LAUNCH_FAILED:
            return Move(instance_id, S.ALLOCATION_FAILED,
                        details=LAUNCH_FAILED_DETAILS[self._failure.pop(instance_id, FAILED)])
        if kind == _ALLOCATE:
            inst = self.cloud.allocate(rec.instance_type, due, owner=instance_id)
            return Move(instance_id, S.ALLOCATED, cloud_instance_id=inst.cloud_instance_id,
                        node_kind=Kind.WORKER)
        if kind == _INSTALL:
            return Move(instance_id, S.RAY_INSTALLING)
        if kind == _RUN:
            return Move(instance_id, S.RAY_RUNNING,
                        node_id=rec.node_id or f"node-{rec.cloud_instance_id}")
        if kind == _DRAIN:
            self._stats["drains"] += 1
            return Move(instance_id, S.RAY_STOPPING)
        if kind == _DRAIN_REJECTED:
            self._stats["drains_rejected"] += 1
            return Move(instance_id, S.RAY_RUNNING)
        if kind == _STOPPED:
            return Move(instance_id, S.RAY_STOPPED)
        if kind == _TERMINATE_FAILED:
            self.cloud.stats["termination_failures"] += 1
            return Move(instance_id, S.TERMINATION_FAILED)
        assert kind == _TERMINATE
        self.cloud.stats["terminations"] += 1
        self.cloud.kill(rec.cloud_instance_id)
        return Move(instance_id, S.TERMINATED)

    def _after(self, due: int, kind: int, move: Move) -> None:
        """Schedule what follows a move that was just applied."""
        iid = move.instance_id
        rec = self.store[iid]
        spec = self.spec(rec.instance_type)
        ev = self._events
        if kind == _ALLOCATE:
            if self.installs_ray:
                ev.push(due, _INSTALL, iid, self._token(iid))
            else:
                lat = self.cloud.latency_ns(spec.install_latency_s, spec.latency_jitter)
                ev.push(due + lat, _RUN, iid, self._token(iid))
        elif kind == _INSTALL:
            lat = self.cloud.latency_ns(spec.install_latency_s, spec.latency_jitter)
            ev.push(due + lat, _RUN, iid, self._token(iid))
        elif kind == _RUN:
            cloud = self.clouds[rec.cloud_instance_id]
            if not cloud.exposed:                  # once per cloud instance
                cloud.exposed = True
                wait = self.cloud.preemption_delay_ns(rec.instance_type)
                if wait is not None:
                    ev.push(due + wait, _PREEMPT, iid, rec.cloud_instance_id)
        elif kind == _DRAIN:
            lat = self.cloud.latency_ns(spec.drain_latency_s, spec.latency_jitter)
            ev.push(due + lat, _STOPPED, iid, self._token(iid))

    def _preempt(self, cloud_id: str) -> Move | None:
        cloud = self.clouds[cloud_id]
        rec = self.store.get(cloud.owner)
        if not cloud.alive or rec is None or rec.cloud_instance_id != cloud_id \
                or rec.status not in _RAY_ALIVE:
            return None                            # already going away on its own
        self.cloud.stats["preemptions"] += 1
        self.cloud.kill(cloud_id, preempted=True)
        return Move(rec.instance_id, S.RAY_STOPPED)


def run(store: InstanceStore, provider: SimProvider, clock: SimClock, seconds: float,
        tick_s: float = 5.0, schedule: Callable | None = None) -> None:
    """Drive the simulation: every `tick_s`, advance the clock, let the provider report,
    then run one reconcile tick (with `schedule(store)` -> (launches, terminations))."""
    end = clock.ns + int(round(seconds * NS_PER_S))
    while clock.ns < end:
        clock.advance(tick_s)
        provider.step(clock.ns)
        store.reconcile(schedule)

"""The schedulers a replay can plug in, each a ``ReplayScheduler`` (``interface.py``: the
interface, ``TickState`` and ``Decision``). The engine and Ray are both handed the
protobuf ``SchedulingRequest`` that ``demand_specs.scheduling_request`` makes of the
tick's state, what Ray's reconciler hands its scheduler in production:

- ``engine``   ``EngineScheduler.schedule(request)`` — the production path (decode,
  engine, encode). ONE ``EngineScheduler`` serves every tick of a replay, built in
  ``start`` on the simulation's clock, so its pending-node idle tracking, resource
  vocabulary and decode caches carry over as they do inside Ray's autoscaler; its
  clocks and ids are the simulation's.
- ``baseline`` ``vecsched.engine.baseline.schedule_baseline(build_problem(state))``
- ``ray``      Ray 2.60's ``ResourceDemandScheduler().schedule(request)``, one object
  across ticks, built in ``start``, reading time from the simulated clock.
- ``efficient`` ``EngineScheduler(mode="efficient")`` (``efficient.py``): the engine's
  cost-driven mode on the same production path, priced from the worker groups;
  ``efficient-proxy`` the same priced by GPU-hours, then node-hours.

``decide`` is ``prepare`` (the scheduler's input, e.g. the protobuf request: untimed),
``run`` (the call proper: timed) and ``decision`` (its output as a Decision); a
benchmark times ``run`` on prepared inputs (bench/benchmarks/bench_traces.py).
``seconds`` times what runs in production: ``EngineScheduler.schedule`` /
``ResourceDemandScheduler.schedule`` (not the request's construction, which is Ray's
reconciler's work), and for the baseline its ``build_problem`` and its packing.

``registry.SCHEDULERS`` maps a name to a factory ``factory(check_ray=False) -> scheduler``;
a new scheduler is one entry (``register``), and the command line, ``summary.json`` and
the benchmarks pick it up by name.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional

from vecsched.engine import build_problem
from vecsched.engine import schedule
from vecsched.engine.model.dtypes import Status

from .interface import (Clock, Decision, ReplayScheduler, TickState, _zero_clock, bundle_key,
                        describe_diff)


def _quiet_ray() -> None:
    # Ray's scheduler logs every infeasible request and termination at INFO/WARNING.
    for name in ("ray.autoscaler", "ray.autoscaler.v2"):
        logging.getLogger(name).setLevel(logging.ERROR)


def reply_decision(reply) -> Decision:
    """A ``SchedulingReply`` (the engine's or Ray's) as a Decision. Terminations the
    instance manager has no legal move for (Ray's quirks Q4 and Q13: an empty instance
    id, or a REQUESTED / RAY_STOP_REQUESTED instance) are kept, and counted in
    ``quirks``."""
    from vecsched.adapters.ray.codec import engine_cause
    launches = [(lr.instance_type, int(lr.count)) for lr in reply.to_launch]
    terms, quirks = [], 0
    for t in reply.to_terminate:
        terms.append((t.instance_id, engine_cause(t)))
        if not t.instance_id or t.instance_status in Status.UNTERMINABLE:
            quirks += 1
    infeasible: Counter = Counter()
    for r in reply.infeasible_resource_requests:
        infeasible[bundle_key(r.resources_bundle)] += 1
    gangs: Counter = Counter(g.details for g in reply.infeasible_gang_resource_requests)
    return Decision(launches, terms, infeasible, quirks, gangs)


ray_decision = reply_decision            # the name this had before the engine used it too


def ray_request(state: TickState):
    """The ``SchedulingRequest`` Ray's reconciler would build for this tick."""
    from vecsched.adapters.replay.demand_specs import scheduling_request
    req = scheduling_request(state.types, state.nodes, state.requests, ids=state.ids,
                             gangs=state.gangs, idle_timeout_s=state.idle_timeout_s,
                             max_num_nodes=state.max_num_nodes,
                             pending_idle_timeout_s=state.pending_idle_timeout_s)
    req.current_instances.extend(state.answers)     # the cloud's answers since the last tick
    return req


def _problem(state: TickState):
    return build_problem(state.types, state.nodes, state.requests, gangs=state.gangs,
                         idle_timeout_s=state.idle_timeout_s,
                         max_num_nodes=state.max_num_nodes,
                         pending_idle_timeout_s=state.pending_idle_timeout_s)


def _sequential(prefix: str) -> Callable[[], str]:
    n = iter(range(1 << 62))
    return lambda: f"{prefix}{next(n):08d}"


class EngineSched(ReplayScheduler):
    """The engine through ``EngineScheduler`` (see the module docstring). With
    ``check_ray`` Ray's scheduler decides every tick's request too (untimed) and the
    ticks whose decisions differ are counted. ``scheduler_kwargs`` go to
    ``EngineScheduler``, built once, in ``start``."""
    name = "engine"

    def __init__(self, check_ray: bool = False, *, name: Optional[str] = None,
                 **scheduler_kwargs):
        self.name = name or type(self).name
        self.check = RayCheck() if check_ray else None
        self._kwargs = scheduler_kwargs
        self.request = None
        self.sched = None                # the EngineScheduler, from ``start``

    def use_limits(self, limits) -> None:
        self._kwargs = dict(self._kwargs, limits=limits)

    @property
    def last_plan(self):
        return self.sched.last_plan if self.sched is not None else None

    def start(self, clock: Clock) -> None:
        """The EngineScheduler on the simulated clock ``clock`` (ns)."""
        from vecsched.adapters.ray.scheduler import EngineScheduler
        super().start(clock)
        self.sched = EngineScheduler(new_id=_sequential("lr-e"), now_ns=clock,
                                     monotonic=lambda: clock() / 1e9, **self._kwargs)
        if self.check is not None:
            self.check.start(clock)

    def prepare(self, state: TickState):
        self.request = ray_request(state)
        return self.request

    def run(self, request):
        return self.sched.schedule(request)

    def decision(self, reply, request, state: TickState) -> Decision:
        return reply_decision(reply)

    def after(self, state: TickState, decision: Decision) -> None:
        if self.check is not None:
            self.check.compare(self.request, decision)


class BaselineSched(ReplayScheduler):
    """The first-fit-decreasing baseline; its ``build_problem`` is timed with it (it is
    the baseline's own decoding). It keeps an availability memory of the groups the
    cloud refused (the tick's ``answers``, read as ``EngineScheduler`` reads them) and
    applies the user's limits, through the engine's seam."""
    name = "baseline"

    def __init__(self):
        self._limits = None
        self._plan = None
        self.start(_zero_clock)

    def use_limits(self, limits) -> None:
        self._limits = limits

    @property
    def last_plan(self):
        return self._plan

    def start(self, clock: Clock) -> None:
        from vecsched.adapters.ray.availability import CloudAnswers
        from vecsched.engine.tick import AvailabilityMemory
        super().start(clock)
        self.memory, self.answers = AvailabilityMemory(), CloudAnswers()

    def run(self, state: TickState):
        from vecsched.adapters.ray.availability import apply
        now = self.clock() / 1e9
        events = self.answers.scan(state.answers, now)
        landed = [("landed", ns.type, now, False, i) for ns, i in zip(state.nodes, state.ids)
                  if ns.status == Status.RAY_RUNNING and i not in self.answers.running]
        apply(self.memory, events + landed)
        self.answers.commit(events + landed, [ai.im_instance.instance_id for ai in state.answers]
                            + list(state.ids))
        p = _problem(state)
        from vecsched.engine.tick import live_counts
        self.memory.observe(live_counts(p), now)
        plan = schedule(p, mode="baseline", limits=self._limits,
                        unavailable=self.memory.unavailable(now),
                        probing=self.memory.probing(now), room=self.memory.room(now))
        self._plan = plan
        return plan, p

    def decision(self, out, state, _state) -> Decision:
        return _from_plan(out[0], out[1], state)


def _from_plan(plan, problem, state: TickState) -> Decision:
    launches = list(plan.launches().items())
    terms = [(state.ids[int(problem.node_source[int(n)])], int(c))
             for n, c in zip(plan.term_node, plan.term_cause)]
    infeasible: Counter = Counter()
    for s, k in enumerate(plan.infeasible):
        if k:
            infeasible[bundle_key(state.requests[s].resources)] += int(k)
    gangs: Counter = Counter(problem.gang_names[g] for g in
                             range(len(plan.gang_infeasible)) if plan.gang_infeasible[g])
    return Decision(launches, terms, infeasible, infeasible_gangs=gangs)


class _RayOnClock:
    """Ray 2.60's ResourceDemandScheduler, one object across ticks (built in ``start``),
    reading the simulated clock (its pending-node idle tracking and request ids use it)."""

    def __init__(self):
        self._rds = None
        self.clock: Clock = lambda: 0

    def start(self, clock: Clock) -> None:
        from ray.autoscaler.v2.scheduler import ResourceDemandScheduler
        _quiet_ray()
        self._rds = ResourceDemandScheduler()
        self.clock = clock

    def schedule(self, request):
        from vecsched.adapters.sim.raycluster.clock import scheduler_clock
        with scheduler_clock(self.clock):
            return self._rds.schedule(request)


class RaySched(ReplayScheduler):
    """Ray 2.60's own ResourceDemandScheduler (needs ``pip install vecsched[ray]``)."""
    name = "ray"

    def __init__(self):
        self._ray = _RayOnClock()

    def start(self, clock: Clock) -> None:
        super().start(clock)
        self._ray.start(clock)

    def prepare(self, state: TickState):
        return ray_request(state)

    def run(self, request):
        return self._ray.schedule(request)

    def decision(self, reply, request, state: TickState) -> Decision:
        return reply_decision(reply)


@dataclass
class RayCheck:
    """Ray's decision on the same ``SchedulingRequest`` as the engine's, every tick
    (``start`` before the first ``compare``)."""
    ticks: int = 0
    differing: int = 0
    quirk_ticks: int = 0             # differing ticks where Ray's reply shows Q4 / Q13
    gang_ticks: int = 0              # ticks with pending placement groups
    seconds: float = 0.0
    examples: list = field(default_factory=list)   # (tick time, description), first few

    def __post_init__(self):
        self._ray = _RayOnClock()

    def start(self, clock: Clock) -> None:
        """Ray's scheduler on the simulated clock, which also dates the examples."""
        self._ray.start(clock)

    @property
    def now_s(self) -> float:
        return self._ray.clock() / 1e9

    def compare(self, request, decision: Decision) -> Optional[Decision]:
        t0 = time.perf_counter()
        self.ticks += 1
        self.gang_ticks += bool(request.gang_resource_requests)
        try:
            ray = reply_decision(self._ray.schedule(request))
        except Exception as e:          # Ray's own crash-class quirks (Q3, Q12)
            self.differing += 1
            if len(self.examples) < 5:
                self.examples.append((self.now_s, f"Ray raised {type(e).__name__}: {e}"))
            return None
        finally:
            self.seconds += time.perf_counter() - t0
        if ray.key() != decision.key():
            self.differing += 1
            self.quirk_ticks += ray.quirks > 0
            if len(self.examples) < 5:
                self.examples.append((self.now_s, describe_diff(decision, ray)))
        return ray

    def summary(self) -> dict:
        return {"ticks": self.ticks, "differing": self.differing,
                "differing_by_ray_quirk": self.quirk_ticks,
                "ticks_with_placement_groups": self.gang_ticks, "seconds": self.seconds,
                "examples": [f"t={t:.0f}s: {d}" for t, d in self.examples]}


__all__ = ["TickState", "Decision", "ReplayScheduler", "EngineSched", "BaselineSched",
           "RaySched", "RayCheck", "bundle_key", "reply_decision",
           "ray_decision", "ray_request", "describe_diff"]

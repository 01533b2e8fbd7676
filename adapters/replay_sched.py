"""The schedulers a replay can plug in, behind one small interface:

    scheduler.decide(state: TickState) -> Decision

``TickState`` is the cluster as one autoscaler tick sees it, in the engine's plain
specs (``NodeTypeSpec`` / ``NodeSpec`` / ``RequestSpec``) plus the instance id of every
node. Each scheduler converts that one state into its own input, so ``engine`` and
``ray`` are handed the same cluster by construction:

- ``engine``   ``engine.schedule(build_problem(state))``
- ``baseline`` ``engine.baseline.schedule_baseline(build_problem(state))``
- ``ray``      Ray 2.60's ``ResourceDemandScheduler().schedule(scheduling_request(state))``

A ``Decision`` is what the lifecycle applies (launches per type, terminations by
instance id and cause) plus the infeasible units per bundle, which the report counts.
``Decision.key()`` normalises a decision for comparison (RAY_V2_SEMANTICS.md §8):
the launch multiset, the terminated (instance id, cause) set, the infeasible multiset.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional, Sequence

from engine import build_problem, schedule
from engine.baseline import schedule_baseline
from engine.build import NodeTypeSpec
from engine.dtypes import Status

NAMES = ("engine", "baseline", "ray")


def bundle_key(resources) -> tuple:
    """A resource bundle as a hashable, order-free key."""
    return tuple(sorted((str(k), float(v)) for k, v in dict(resources).items()))


@dataclass
class TickState:
    types: Sequence[NodeTypeSpec]
    nodes: list                      # NodeSpec per instance, store order
    ids: list                        # instance id of each node
    requests: list                   # RequestSpec per pending shape, first-arrival order
    idle_timeout_s: Optional[float] = 60.0
    max_num_nodes: Optional[int] = None


@dataclass
class Decision:
    launches: list                   # (type name, count), first-appearance order
    terminations: list               # (instance id, dtypes.Cause)
    infeasible: Counter              # bundle_key -> units left unplaced
    quirks: int = 0                  # Ray terminations the instance manager cannot apply

    def key(self) -> tuple:
        launch = Counter()
        for t, c in self.launches:
            launch[t] += int(c)
        return (tuple(sorted(launch.items())),
                tuple(sorted((i, int(c)) for i, c in self.terminations)),
                tuple(sorted((k, int(v)) for k, v in self.infeasible.items() if v)))

    @property
    def infeasible_units(self) -> int:
        return int(sum(self.infeasible.values()))


def describe_diff(a: Decision, b: Decision, names=("engine", "ray")) -> str:
    parts = []
    for what, x, y in zip(("launch", "terminate", "infeasible"), a.key(), b.key()):
        if x != y:
            parts.append(f"{what}: {names[0]}={list(x)} {names[1]}={list(y)}")
    return "; ".join(parts)


def _from_plan(plan, problem, state: TickState) -> Decision:
    launches = list(plan.launches().items())
    terms = [(state.ids[int(problem.node_source[int(n)])], int(c))
             for n, c in zip(plan.term_node, plan.term_cause)]
    infeasible: Counter = Counter()
    for s, k in enumerate(plan.infeasible):
        if k:
            infeasible[bundle_key(state.requests[s].resources)] += int(k)
    return Decision(launches, terms, infeasible)


def _problem(state: TickState):
    return build_problem(state.types, state.nodes, state.requests,
                         idle_timeout_s=state.idle_timeout_s,
                         max_num_nodes=state.max_num_nodes)


class EngineSched:
    """The engine; with ``check_ray`` it also asks Ray's scheduler every tick (untimed)
    and counts the ticks whose decisions differ."""
    name = "engine"

    def __init__(self, check_ray: bool = False):
        self.check = RayCheck() if check_ray else None

    def decide(self, state: TickState) -> Decision:
        p = _problem(state)
        return _from_plan(schedule(p), p, state)

    def after(self, state: TickState, decision: Decision) -> None:
        if self.check is not None:
            self.check.compare(state, decision)


class BaselineSched:
    name = "baseline"
    check = None

    def decide(self, state: TickState) -> Decision:
        p = _problem(state)
        return _from_plan(schedule_baseline(p), p, state)

    def after(self, state, decision) -> None:
        pass


def _quiet_ray() -> None:
    # Ray's scheduler logs every infeasible request and termination at INFO/WARNING.
    for name in ("ray.autoscaler", "ray.autoscaler.v2"):
        logging.getLogger(name).setLevel(logging.ERROR)


def ray_decision(reply) -> Decision:
    """Ray's reply as a Decision. Terminations the instance manager has no legal move
    for (Ray's quirks Q4 and Q13: an empty instance id, or a REQUESTED /
    RAY_STOP_REQUESTED instance) are kept, and counted in ``quirks``."""
    launches = [(lr.instance_type, int(lr.count)) for lr in reply.to_launch]
    terms, quirks = [], 0
    for t in reply.to_terminate:
        terms.append((t.instance_id, int(t.cause)))
        if not t.instance_id or t.instance_status in Status.UNTERMINABLE:
            quirks += 1
    infeasible: Counter = Counter()
    for r in reply.infeasible_resource_requests:
        infeasible[bundle_key(r.resources_bundle)] += 1
    return Decision(launches, terms, infeasible, quirks)


def ray_request(state: TickState):
    from .ray.requests import scheduling_request
    return scheduling_request(state.types, state.nodes, state.requests, ids=state.ids,
                              idle_timeout_s=state.idle_timeout_s,
                              max_num_nodes=state.max_num_nodes)


class RaySched:
    """Ray 2.60's own ResourceDemandScheduler (needs ``pip install vecsched[ray]``)."""
    name = "ray"
    check = None

    def __init__(self):
        from ray.autoscaler.v2.scheduler import ResourceDemandScheduler
        _quiet_ray()
        self._rds = ResourceDemandScheduler()

    def decide(self, state: TickState) -> Decision:
        return ray_decision(self._rds.schedule(ray_request(state)))

    def after(self, state, decision) -> None:
        pass


@dataclass
class RayCheck:
    """Ray's decision on the same state as the engine's, every tick."""
    ticks: int = 0
    differing: int = 0
    quirk_ticks: int = 0             # differing ticks where Ray's reply shows Q4 / Q13
    seconds: float = 0.0
    examples: list = field(default_factory=list)   # (tick time, description), first few

    def __post_init__(self):
        from ray.autoscaler.v2.scheduler import ResourceDemandScheduler
        _quiet_ray()
        self._rds = ResourceDemandScheduler()
        self.now_s = 0.0

    def compare(self, state: TickState, decision: Decision) -> Optional[Decision]:
        t0 = time.perf_counter()
        self.ticks += 1
        try:
            ray = ray_decision(self._rds.schedule(ray_request(state)))
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
                "differing_by_ray_quirk": self.quirk_ticks, "seconds": self.seconds,
                "examples": [f"t={t:.0f}s: {d}" for t, d in self.examples]}


def make(name: str, *, check_ray: bool = False):
    """A scheduler by name (one of NAMES)."""
    if name == "engine":
        return EngineSched(check_ray=check_ray)
    if check_ray:
        raise ValueError("check_ray: only the engine scheduler is checked against Ray")
    if name == "baseline":
        return BaselineSched()
    if name == "ray":
        return RaySched()
    raise ValueError(f"scheduler: unknown scheduler {name!r}; choose from {', '.join(NAMES)}")


__all__ = ["NAMES", "TickState", "Decision", "EngineSched", "BaselineSched", "RaySched",
           "RayCheck", "make", "bundle_key", "ray_decision", "ray_request", "describe_diff"]

"""What a replay scheduler sees, what it answers, and the base class every one derives
from.

``TickState`` is the cluster as one autoscaler tick sees it, in the engine's plain specs
(``NodeTypeSpec`` / ``NodeSpec`` / ``RequestSpec`` / ``GangSpec``) plus the instance id of
every node; the replay builds it once per tick (``view.py``) and hands the same object
to the scheduler's ``decide`` and ``after``.

A ``Decision`` is what the lifecycle applies (launches per type, terminations by instance
id and cause) plus the infeasible units per bundle and the infeasible placement groups,
which the report counts. ``Decision.key()`` normalises a decision for comparison
(docs/ray-semantics.md §8): the launch multiset, the terminated (instance id, cause) set,
the infeasible multiset, the infeasible placement groups.

``ReplayScheduler`` declares the interface the replay calls, every optional hook with
its default, so the replay never probes a scheduler (no ``hasattr`` / ``getattr``):

    use_trace(trace)            before ``start``: the trace's worker groups (e.g. prices)
    use_limits(limits)          before ``start``: the user's limits on totals
                                (``engine.tick.Limits`` or None; default: ignored, as
                                Ray's own scheduler has none)
    last_plan                   the engine's plan of the latest decision, when it made
                                one (the replay counts the ticks a limit held demand back)
    drain_deadline_s            the drain deadline of its consolidation (0: none)
    start(clock)                once per replay, before the first decision: the simulated
                                clock (ns); a scheduler builds its state here, once
    decide(state) -> Decision   every tick: ``decision(run(prepare(state)))`` with
                                ``run`` timed into ``seconds``
    after(state, decision)      after the tick's decision (the Ray check, the cross-check)
    check                       the ``--check-ray`` comparison (``RayCheck``) or None

``ForwardingScheduler`` is the base of wrappers (the cross-check, benchmark recorders):
every member goes to the wrapped scheduler unless overridden.
"""
from __future__ import annotations

import abc
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from vecsched.engine.model.build.builder import NodeTypeSpec

Clock = Callable[[], int]            # simulated time in ns


def _zero_clock() -> int:
    return 0


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
    gangs: list = field(default_factory=list)      # GangSpec per pending group
    pending_idle_timeout_s: Optional[float] = None
    # the records that entered ALLOCATION_FAILED, ALLOCATION_TIMEOUT or RAY_STOPPED since
    # the last tick, as Ray's reconciler sends them (cloud_answers.CloudFeed)
    answers: list = field(default_factory=list)

    def __getstate__(self) -> dict:
        # Ray's generated protobuf classes name a module that does not exist
        # (src.ray.protobuf...), so the answers travel as their wire bytes (asv's
        # setup_cache and process pools pickle recorded ticks).
        from .cloud_answers import answers_to_wire
        state = dict(self.__dict__)
        state["answers"] = answers_to_wire(self.answers)
        return state

    def __setstate__(self, state: dict) -> None:
        from .cloud_answers import answers_from_wire
        state = dict(state)
        state["answers"] = answers_from_wire(state["answers"])
        self.__dict__.update(state)

    @property
    def pending_units(self) -> int:
        """Units of pending demand: plain requests and placement-group bundles."""
        return sum(r.count for r in self.requests) + sum(len(g.requests) for g in self.gangs)


@dataclass
class Decision:
    launches: list                   # (type name, count), first-appearance order
    terminations: list               # (instance id, dtypes.Cause)
    infeasible: Counter              # bundle_key -> units left unplaced
    quirks: int = 0                  # Ray terminations the instance manager cannot apply
    infeasible_gangs: Counter = field(default_factory=Counter)   # group details -> count

    def key(self) -> tuple:
        launch = Counter()
        for t, c in self.launches:
            launch[t] += int(c)
        return (tuple(sorted(launch.items())),
                tuple(sorted((i, int(c)) for i, c in self.terminations)),
                tuple(sorted((k, int(v)) for k, v in self.infeasible.items() if v)),
                tuple(sorted((k, int(v)) for k, v in self.infeasible_gangs.items() if v)))

    @property
    def infeasible_units(self) -> int:
        return int(sum(self.infeasible.values()))


def describe_diff(a: Decision, b: Decision, names=("engine", "ray")) -> str:
    parts = []
    for what, x, y in zip(("launch", "terminate", "infeasible", "infeasible groups"),
                          a.key(), b.key()):
        if x != y:
            parts.append(f"{what}: {names[0]}={list(x)} {names[1]}={list(y)}")
    return "; ".join(parts)


class ReplayScheduler(abc.ABC):
    """A scheduler the replay can plug in (see the module docstring). Subclasses give
    ``run`` (the call proper, timed) and ``decision`` (its output as a Decision), and
    override the hooks they need."""
    name: str = "?"
    check = None                     # RayCheck, when checked against Ray
    seconds: float = 0.0             # wall time of the latest ``run``
    clock: Optional[Clock] = None    # set by ``start``

    def use_trace(self, trace) -> None:
        """The replayed trace, before ``start`` (default: not needed)."""

    def use_limits(self, limits) -> None:
        """The user's limits, before ``start`` (default: ignored)."""

    @property
    def last_plan(self):
        """The engine's plan of the latest decision (default: None)."""
        return None

    @property
    def drain_deadline_s(self) -> float:
        """The drain deadline of its consolidation (0: drains stop at once)."""
        return 0.0

    def start(self, clock: Clock) -> None:
        """Once per replay, before the first decision: the simulated clock (ns)."""
        self.clock = clock

    def prepare(self, state: TickState):
        """The scheduler's input, untimed (e.g. the protobuf request)."""
        return state

    @abc.abstractmethod
    def run(self, prepared):
        """The scheduler call proper (timed)."""

    @abc.abstractmethod
    def decision(self, out, prepared, state: TickState) -> Decision:
        """``run``'s output as a Decision."""

    def decide(self, state: TickState) -> Decision:
        if self.clock is None:      # used outside a replay (the HA demo): time stays 0
            self.start(_zero_clock)
        prepared = self.prepare(state)
        t0 = time.perf_counter()
        try:
            out = self.run(prepared)
        finally:
            self.seconds = time.perf_counter() - t0
        return self.decision(out, prepared, state)

    def after(self, state: TickState, decision: Decision) -> None:
        """After the tick's decision, untimed (default: nothing)."""


class ForwardingScheduler(ReplayScheduler):
    """A wrapper: every member is the wrapped scheduler's (``inner``) unless a subclass
    overrides it."""

    def __init__(self, inner: ReplayScheduler):
        self.inner = inner
        self.name = inner.name

    @property
    def seconds(self) -> float:
        return self.inner.seconds

    @property
    def check(self):
        return self.inner.check

    @property
    def clock(self):
        return self.inner.clock

    @property
    def drain_deadline_s(self) -> float:
        return self.inner.drain_deadline_s

    def use_trace(self, trace) -> None:
        self.inner.use_trace(trace)

    def use_limits(self, limits) -> None:
        self.inner.use_limits(limits)

    @property
    def last_plan(self):
        return self.inner.last_plan

    def start(self, clock: Clock) -> None:
        self.inner.start(clock)

    def prepare(self, state: TickState):
        return self.inner.prepare(state)

    def run(self, prepared):
        return self.inner.run(prepared)

    def decision(self, out, prepared, state: TickState) -> Decision:
        return self.inner.decision(out, prepared, state)

    def decide(self, state: TickState) -> Decision:
        return self.inner.decide(state)

    def after(self, state: TickState, decision: Decision) -> None:
        self.inner.after(state, decision)


__all__ = ["Clock", "Decision", "ForwardingScheduler", "ReplayScheduler", "TickState",
           "bundle_key", "describe_diff"]

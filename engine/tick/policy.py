"""One policy interface and the registry of the engine's policies.

A policy decides one tick: ``policy.plan(problem, inputs) -> Plan``. Three are
registered: ``ray-compat`` (Ray 2.60's decisions), ``efficient`` (chosen for cost)
and ``baseline`` (first-fit-decreasing, the yardstick). What every policy shares
runs around them, once, in ``vecsched.engine.tick.seam``: the user's limits and the
groups the availability memory holds out become each type's launch room before
the policy runs, the plan is checked against the limits after it, and demand
held back by either gets its reason. The fixed phases (outdated nodes, caps,
minimum workers, idle termination) follow the shared rules of
``vecsched.engine.tick.fixed``; the reasons an unplaced request gets are those of
``vecsched.engine.tick.reasons``.

Policies are imported when first used, so the ray-compat path never loads the
efficient mode or the baseline.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from vecsched.engine.model.plan import Plan
from vecsched.engine.model.problem import Problem
from .limits import Limits


@dataclass(frozen=True)
class TickInputs:
    """What a tick reads besides the Problem.

    ``options``: the policy's options (``EfficientOptions`` for ``efficient``; the
    others take none). ``pending_since`` / ``now_s``: ray-compat's pending-node idle
    timestamps and the monotonic time (docs/ray-semantics.md §5.1). ``limits``: caps
    on totals (``limits.Limits``). ``unavailable``: worker groups the availability
    memory holds out this tick (read by the policies that read the memory);
    ``probing``: groups that may launch one node this tick (a hold ended, nothing of
    theirs landed since); ``room``: group -> the launches it may make this tick (a
    group below the cap the memory learned when it stocked out)."""
    options: object = None
    pending_since: Optional[dict] = None
    now_s: float = 0.0
    limits: Optional[Limits] = None
    unavailable: frozenset = field(default_factory=frozenset)
    probing: frozenset = field(default_factory=frozenset)
    room: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class Policy:
    """A registered policy. ``target``: ``"module:function"`` of its tick, called as
    ``function(problem, inputs)``; ``reads_memory``: it honours the availability
    memory (ray-compat reads Ray's availability scores instead);
    ``takes_options``: it accepts ``TickInputs.options``."""
    name: str
    target: str
    reads_memory: bool
    takes_options: bool = False

    def plan(self, problem: Problem, inputs: TickInputs) -> Plan:
        if inputs.options is not None and not self.takes_options:
            raise ValueError(f"options: mode {self.name!r} takes no options")
        return self._fn()(problem, inputs)

    def _fn(self) -> Callable:
        module, name = self.target.split(":")
        return getattr(importlib.import_module(module), name)


POLICIES: dict[str, Policy] = {}


def register(policy: Policy) -> None:
    """Make ``policy`` available by its name (``schedule(mode=...)``, ``EngineScheduler``)."""
    POLICIES[policy.name] = policy


def get(name: str) -> Policy:
    pol = POLICIES.get(name)
    if pol is None:
        raise ValueError(f"mode: unknown scheduling mode {name!r}; available: {tuple(POLICIES)}")
    return pol


def _raycompat(problem: Problem, inputs: TickInputs) -> Plan:
    from vecsched.engine.raycompat.tick import schedule_raycompat
    return schedule_raycompat(problem, inputs.pending_since, inputs.now_s)


def _efficient(problem: Problem, inputs: TickInputs) -> Plan:
    from vecsched.engine.efficient import schedule_efficient
    return schedule_efficient(problem, inputs.options)


def _baseline(problem: Problem, inputs: TickInputs) -> Plan:
    from vecsched.engine.baseline.ffd import schedule_baseline
    return schedule_baseline(problem)


register(Policy("ray-compat", f"{__name__}:_raycompat", reads_memory=False))
register(Policy("efficient", f"{__name__}:_efficient", reads_memory=True, takes_options=True))
register(Policy("baseline", f"{__name__}:_baseline", reads_memory=True))

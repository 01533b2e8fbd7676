"""The seam every policy runs through: limits and held-out groups, once.

``run(problem, mode, inputs)``:

1. With no limit set and no group held out, the policy plans ``problem`` as it
   is (ray-compat is then exactly Ray's).
2. Otherwise each configured type's ``max_worker_nodes`` is lowered, for this
   tick only, to what it already has plus the launches that keep every limit
   when the type is launched alone (``limits.type_room``); a held-out group may
   launch nothing (the policies that read the availability memory only), except
   one node when it is also ``probing`` (last refused a while ago) and some
   pending request fits no other group with room (the refused group is then its
   only chance: a probe finds capacity once it frees, where asking for the whole
   demand would only stock out more); a group ``probing`` and not held (its hold
   ended without a launch landing since) may launch one node a tick; a group with
   a learned ``room`` (below the cap the memory learned when it stocked out) may
   launch that many. The policy plans that Problem, and so falls back to the next
   group that fits by its own rules (cheapest first in the efficient mode, first
   fit in the baseline, Ray's utilisation score in ray-compat).
3. Launched together, several types may still exceed a shared limit: the plan's
   new nodes are then taken in launch order while they fit, every type the plan
   launched is pinned to the count kept, and the policy plans again with the
   others' room computed from what is left. Each round pins at least one more
   type, so this ends; in practice one round, two when a shared limit binds.
4. Demand the lowered caps held back gets the reason ``LIMIT`` or
   ``UNAVAILABLE`` instead of ``MAX_WORKERS`` / ``MAX_NUM_NODES``
   (``reasons.refine``); ``plan.stats["limits"]`` reports each limit's value,
   what the plan asks for and the headroom left, ``plan.stats["held_out"]`` the
   groups held out.

A limit never terminates a node: the lowered cap is never below what a type
already has.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from vecsched.engine.model.dtypes import CNT
from vecsched.engine.model.plan import Plan
from vecsched.engine.model.problem import Problem
from . import limits as lim
from .policy import TickInputs, get
from .reasons import refine, sole_holders


def run(problem: Problem, mode: str, inputs: TickInputs) -> Plan:
    pol = get(mode)
    none = np.zeros(problem.T, bool)
    held = _held(problem, inputs.unavailable) if pol.reads_memory else none
    probe = _held(problem, inputs.probing) if pol.reads_memory else none
    learned = _learned(problem, inputs.room) if pol.reads_memory else {}
    limits = inputs.limits if inputs.limits is not None and not inputs.limits.empty else None
    if limits is None and not held.any() and not probe.any() and not learned:
        return pol.plan(problem, inputs)
    lt = lim.table(problem, limits) if limits is not None else None
    have = np.bincount(problem.node_type, minlength=problem.T).astype(CNT)
    sole = held & probe & sole_holders(problem, held, have)
    probe, held = (probe & ~held) | sole, held & ~sole
    pinned: dict[int, int] = {}
    for _ in range(problem.T + 2):
        allowed = _allowed(problem, lt, have, held, pinned, probe, learned)
        plan = pol.plan(replace(problem, type_max=allowed), inputs)
        if lt is None:
            break
        keep = lim.keep_within(lt, plan.new_type)
        if keep.all():
            break
        kept = np.bincount(np.asarray(plan.new_type, np.int64)[keep], minlength=problem.T)
        launched = set(np.unique(plan.new_type).tolist()) | set(pinned)
        pinned = {t: int(kept[t]) for t in launched}
    else:        # cannot happen (each round pins a type); never return a plan over a limit
        raise AssertionError("limits: no plan within the limits after pinning every type")
    capped = np.zeros(problem.T, bool)
    capped[list(learned)] = True
    return _report(problem, plan, lt, held, allowed, probe | (capped & (allowed < problem.type_max)))


def _held(p: Problem, unavailable) -> np.ndarray:
    names = frozenset(unavailable or ())
    return np.asarray([p.type_configured[t] and n in names
                       for t, n in enumerate(p.type_names)], bool)


def _learned(p: Problem, room) -> dict:
    """type -> launches allowed by the memory's learned caps (configured types)."""
    idx = {n: t for t, n in enumerate(p.type_names) if p.type_configured[t]}
    return {idx[n]: max(0, int(k)) for n, k in (room or {}).items() if n in idx}


def _allowed(p: Problem, lt, have: np.ndarray, held: np.ndarray, pinned: dict,
             probe: np.ndarray, learned: dict) -> np.ndarray:
    """(T,) i8 this round's max_worker_nodes: never below what a type has."""
    room = np.full(p.T, 1 << 40, np.int64)
    if lt is not None:
        extra = np.zeros(len(lt.cap))
        for t, k in pinned.items():
            extra += k * lt.type_need[t]
        room = lim.type_room(lt, extra)
        for t, k in pinned.items():
            room[t] = k
    for t, k in learned.items():
        room[t] = min(room[t], k)
    room[held] = 0
    room[probe] = np.minimum(room[probe], 1)
    cap = np.minimum(p.type_max, have + room)
    return np.ascontiguousarray(np.maximum(cap, np.minimum(p.type_max, have)), dtype=CNT)


def _report(p: Problem, plan: Plan, lt, held: np.ndarray, allowed: np.ndarray,
            probe: np.ndarray) -> Plan:
    blocked_limit = p.type_configured & (allowed < p.type_max) & ~held & ~probe
    why, gang_why, blocked = refine(p, plan, held | probe, blocked_limit)
    stats = dict(plan.stats)
    if held.any():
        stats["held_out"] = [p.type_names[t] for t in np.flatnonzero(held).tolist()]
    if probe.any():
        stats["probing"] = [p.type_names[t] for t in np.flatnonzero(probe).tolist()]
    if lt is not None:
        asked = lim.asked(lt, plan.new_type)
        stats["limits"] = {lim.label(n): {"limit": float(lt.cap[k]), "asked": float(asked[k]),
                                          "headroom": float(lt.cap[k] - asked[k])}
                           for k, n in enumerate(lt.names)}
        stats["limit_blocked"] = blocked
    return replace(plan, infeasible_why=why, gang_why=gang_why, stats=stats)

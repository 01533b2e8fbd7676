"""A solver-independent check that a Plan is feasible and legal for its Problem.

Used by the property tests of every scheduler (engine, baseline). It knows
nothing about how a plan was found, only what a legal plan looks like:

- shapes and indices are in range; launches agree with the new node slots;
  every new node is made from a configured type's config and carries the type
  that config launches as (``type_launch_as``: itself unless its name differs
  from its key);
- placements over-commit no node (existing nodes: ``node_free``; new nodes:
  their config's resources, 1.0 for an absent implicit column), with a
  relative float tolerance of 1e-9;
- every unit of every run is placed or reported infeasible, with a reason
  exactly when some are infeasible;
- no configured type ends above ``max_worker_nodes`` (existing nodes kept plus
  launches), unless only untouchable nodes (HEAD, REQUESTED, RAY_STOP_REQUESTED) keep it there,
  or another config launches as that type (its name is the type, its key is not:
  Ray counts the room under the key and the nodes under the name, so the type
  may end above its max, as in Ray);
- launches respect ``max_num_nodes`` (only new launches are judged: the
  existing count may already exceed it);
- terminations: valid unique indices, known causes, the node's own status,
  never the head, never a REQUESTED or RAY_STOP_REQUESTED instance (its termination is an illegal
  lifecycle move, quirk Q13), never a node that received demand, and IDLE ones
  never take a type below ``min_worker_nodes``;
- ``cluster_resources`` equals the totals of the nodes kept plus the launches.

A node counts as terminated when it is in ``term_node`` or the builder already
marked it outdated (``problem.node_outdated``).
"""
from __future__ import annotations

import numpy as np

from .dtypes import Cause, Kind, Status, Why
from .plan import Plan
from .problem import Problem

RTOL = 1e-9          # relative float tolerance on capacities and totals
_SHOW = 5            # violations listed per kind before summarising the rest


class PlanError(AssertionError):
    """An illegal plan; ``violations`` lists what is wrong, one line each."""

    def __init__(self, violations: list[str]):
        self.violations = list(violations)
        super().__init__("illegal plan:\n  " + "\n  ".join(self.violations))


def assert_plan(problem: Problem, plan: Plan, *, allow_q1: bool = False) -> None:
    """Raise `PlanError` unless `check_plan` finds nothing."""
    violations = check_plan(problem, plan, allow_q1=allow_q1)
    if violations:
        raise PlanError(violations)


def check_plan(problem: Problem, plan: Plan, *, allow_q1: bool = False) -> list[str]:
    """Every way ``plan`` is infeasible or illegal for ``problem``; [] if none.

    ``allow_q1``: accept demand on nodes terminated before packing (outdated,
    MAX_* causes), as Ray 2.60 does (quirk Q1); IDLE victims must still be empty.
    """
    out = _check_structure(problem, plan)
    if out:
        return out           # indices may be out of range: the rest would crash
    for check in (_check_launches, _check_terminations, _check_placements,
                  _check_capacity, _check_caps, _check_cluster_resources):
        out += check(problem, plan)
    out += _check_demand_on_terminated(problem, plan, allow_q1)
    return out


# ---- helpers -------------------------------------------------------------------------

def _limit(msgs: list[str]) -> list[str]:
    if len(msgs) <= _SHOW:
        return msgs
    return msgs[:_SHOW] + [f"... and {len(msgs) - _SHOW} more like the above"]


def _gone(problem: Problem, plan: Plan) -> np.ndarray:
    """(N,) bool: nodes terminated by the plan or already outdated."""
    gone = problem.node_outdated.copy()
    gone[plan.term_node] = True
    return gone


def _new_node_free(problem: Problem) -> np.ndarray:
    return problem.type_free


def _templates(plan: Plan) -> np.ndarray:
    """(J,) the config each new node was made from (a plan that does not say:
    its type's own)."""
    t = np.asarray(plan.new_template)
    return t if t.shape == np.shape(plan.new_type) else np.asarray(plan.new_type)


def _over(used: np.ndarray, cap: np.ndarray) -> np.ndarray:
    return used > cap + RTOL * np.abs(cap)


# ---- checks ----------------------------------------------------------------------------

def _check_structure(problem: Problem, plan: Plan) -> list[str]:
    p, out = problem, []
    N, T, S, R = p.N, p.T, p.S, p.R
    if plan.n_nodes != N:
        out.append(f"plan.n_nodes is {plan.n_nodes}, the problem has {N} nodes")
    if tuple(plan.resources) != tuple(p.resources):
        out.append("plan.resources differ from problem.resources")
    if tuple(plan.type_names) != tuple(p.type_names):
        out.append("plan.type_names differ from problem.type_names")
    for name, n in (("launch", T), ("infeasible", S), ("infeasible_why", S),
                    ("run_order", S), ("cluster_resources", R)):
        shape = np.shape(getattr(plan, name))
        if shape != (n,):
            out.append(f"plan.{name} has shape {shape}, expected ({n},)")
    for group in (("term_node", "term_cause", "term_value", "term_status"),
                  ("place_slot", "place_run", "place_count")):
        lens = {g: np.shape(getattr(plan, g)) for g in group}
        if len(set(lens.values())) != 1 or len(next(iter(lens.values()))) != 1:
            out.append(f"plan.{'/'.join(group)} must be 1-d of one length, got {lens}")
    if np.ndim(plan.new_type) != 1:
        out.append(f"plan.new_type must be 1-d, got shape {np.shape(plan.new_type)}")
    for name in ("launch", "infeasible", "infeasible_why", "run_order", "term_node",
                 "term_cause", "term_value", "term_status", "place_slot", "place_run",
                 "place_count", "new_type"):
        dtype = np.asarray(getattr(plan, name)).dtype
        if not np.issubdtype(dtype, np.integer):
            out.append(f"plan.{name} must be an integer array, got {dtype}")
    if out:
        return out
    J = len(plan.new_type)
    for name, hi in (("term_node", N), ("place_slot", N + J), ("place_run", S), ("new_type", T)):
        a = np.asarray(getattr(plan, name))
        lo = -1 if name == "place_slot" else 0   # -1: a node the tick cut before launch (Q1)
        bad = np.flatnonzero((a < lo) | (a >= hi))
        out += _limit([f"plan.{name}[{i}] = {a[i]} is out of range [0, {hi})" for i in bad])
    tmpl = np.asarray(plan.new_template)
    if tmpl.shape == np.shape(plan.new_type):          # given (else the types' own)
        bad = np.flatnonzero((tmpl < 0) | (tmpl >= T))
        out += _limit([f"plan.new_template[{j}] = {tmpl[j]} is out of range [0, {T})"
                       for j in bad])
    bad_lo = [t for t in plan.launch_order if not 0 <= t < T]
    if bad_lo:
        out.append(f"plan.launch_order has types out of range: {bad_lo}")
    return out


def _check_launches(problem: Problem, plan: Plan) -> list[str]:
    p, out = problem, []
    T = p.T
    counted = np.bincount(plan.new_type, minlength=T)
    for t in np.flatnonzero(counted != plan.launch):
        out.append(f"type {p.type_names[t]!r}: launch {plan.launch[t]} but "
                   f"{counted[t]} new node slots of that type")
    tmpl = _templates(plan)                   # in range (_check_structure)
    for j in np.flatnonzero(~p.type_configured[tmpl]):
        out.append(f"new node {j} is made from unconfigured type {p.type_names[tmpl[j]]!r}")
    for j in np.flatnonzero(p.type_launch_as[tmpl] != plan.new_type):
        out.append(f"new node {j} of type {p.type_names[plan.new_type[j]]!r} is made from "
                   f"{p.type_names[tmpl[j]]!r}, which launches as "
                   f"{p.type_names[p.type_launch_as[tmpl[j]]]!r}")
    order = list(plan.launch_order)
    if len(set(order)) != len(order):
        out.append(f"plan.launch_order repeats a type: {order}")
    if set(order) != set(np.flatnonzero(plan.launch > 0).tolist()):
        out.append(f"plan.launch_order {order} is not the set of launched types "
                   f"{np.flatnonzero(plan.launch > 0).tolist()}")
    return _limit(out)


def _check_terminations(problem: Problem, plan: Plan) -> list[str]:
    p, out = problem, []
    nodes = np.asarray(plan.term_node)
    uniq, cnt = np.unique(nodes, return_counts=True)
    for n in uniq[cnt > 1]:
        out.append(f"node {n} is terminated {cnt[uniq == n][0]} times")
    for i, (n, c, st) in enumerate(zip(nodes, plan.term_cause, plan.term_status)):
        if int(c) not in Cause.NAMES:
            out.append(f"termination {i} (node {n}) has unknown cause {c}")
        if st != p.node_status[n]:
            out.append(f"termination {i} (node {n}) carries status {st}, the node has "
                       f"{p.node_status[n]}")
        if p.node_kind[n] == Kind.HEAD:
            out.append(f"node {n} is the HEAD node and is terminated")
        if p.node_status[n] in Status.UNTERMINABLE:
            out.append(f"node {n} is {Status.NAMES[int(p.node_status[n])]} and cannot be terminated (quirk Q13)")
    # IDLE never takes a configured type below min_worker_nodes.
    kept = np.bincount(p.node_type[~_gone(p, plan)], minlength=p.T) + plan.launch
    idle_types = np.unique(p.node_type[nodes[plan.term_cause == Cause.IDLE]])
    for t in idle_types:
        if kept[t] < p.type_min[t]:
            out.append(f"type {p.type_names[t]!r}: IDLE terminations leave {kept[t]} nodes, "
                       f"below min_worker_nodes {p.type_min[t]}")
    return _limit(out)


def _check_placements(problem: Problem, plan: Plan) -> list[str]:
    p, out = problem, []
    for i in np.flatnonzero(plan.place_count <= 0):
        out.append(f"placement {i} has count {plan.place_count[i]} (must be >= 1)")
    placed = np.bincount(plan.place_run, weights=plan.place_count, minlength=p.S)
    for s in range(p.S):
        inf, why = int(plan.infeasible[s]), int(plan.infeasible_why[s])
        if inf < 0:
            out.append(f"run {s}: infeasible {inf} is negative")
        if placed[s] + inf != p.shape_count[s]:
            out.append(f"run {s}: placed {int(placed[s])} + infeasible {inf} != "
                       f"count {p.shape_count[s]}")
        if (inf > 0) != (why != Why.NONE) or why not in Why.NAMES:
            out.append(f"run {s}: infeasible {inf} with reason {why} "
                       f"({Why.NAMES.get(why, 'unknown')})")
    if sorted(np.asarray(plan.run_order).tolist()) != list(range(p.S)):
        out.append("plan.run_order is not a permutation of the runs")
    return _limit(out)


def _check_capacity(problem: Problem, plan: Plan) -> list[str]:
    p, out = problem, []
    N, J = p.N, len(plan.new_type)
    used = np.zeros((N + J, p.R))
    on = plan.place_slot >= 0
    np.add.at(used, plan.place_slot[on],
              plan.place_count[on, None].astype(float) * p.shape_qty[plan.place_run[on]])
    cap = np.concatenate([p.node_free, _new_node_free(p)[_templates(plan)]])
    for slot, r in zip(*np.nonzero(_over(used, cap))):
        what = (f"node {slot}" if slot < N
                else f"new node {slot - N} ({p.type_names[plan.new_type[slot - N]]})")
        out.append(f"{what} over-committed on {p.resources[r]!r}: {float(used[slot, r])!r} > "
                   f"{float(cap[slot, r])!r}")
    return _limit(out)


def _check_caps(problem: Problem, plan: Plan) -> list[str]:
    p, out = problem, []
    alive = ~_gone(p, plan)
    kept = np.bincount(p.node_type[alive], minlength=p.T) + plan.launch
    # Nodes no plan may terminate keep their type above max legitimately.
    stuck_mask = alive & ((p.node_kind == Kind.HEAD) | np.isin(p.node_status, Status.UNTERMINABLE))
    stuck = np.bincount(p.node_type[stuck_mask], minlength=p.T)
    ts = np.arange(p.T)
    target = np.zeros(p.T, bool)                     # types other configs launch as
    target[p.type_launch_as[p.type_configured & (p.type_launch_as != ts)]] = True
    for t in np.flatnonzero(p.type_configured & ~target):
        if kept[t] > max(p.type_max[t], stuck[t]):
            out.append(f"type {p.type_names[t]!r}: {kept[t]} nodes after the plan "
                       f"({plan.launch[t]} launched) exceed max_worker_nodes {p.type_max[t]}")
    launched = int(plan.launch.sum())
    if p.max_num_nodes >= 0 and launched > 0 and int(alive.sum()) + launched > p.max_num_nodes:
        out.append(f"{launched} launches on top of {int(alive.sum())} nodes exceed "
                   f"max_num_nodes {p.max_num_nodes}")
    return out


def _check_cluster_resources(problem: Problem, plan: Plan) -> list[str]:
    p = problem
    want = p.node_total[~_gone(p, plan)].sum(axis=0) + p.type_cap[_templates(plan)].sum(axis=0)
    got = np.asarray(plan.cluster_resources, dtype=float)
    bad = np.abs(got - want) > RTOL * np.maximum(np.abs(want), 1.0)
    return _limit([f"cluster_resources[{p.resources[r]!r}] is {float(got[r])!r}, "
                   f"expected {float(want[r])!r}"
                   for r in np.flatnonzero(bad)])


def _check_demand_on_terminated(problem: Problem, plan: Plan, allow_q1: bool) -> list[str]:
    p = problem
    if allow_q1:       # only IDLE victims must be empty: they are chosen after packing
        banned = np.zeros(p.N, dtype=bool)
        banned[plan.term_node[plan.term_cause == Cause.IDLE]] = True
    else:
        banned = _gone(p, plan)
    slots = plan.place_slot[(plan.place_slot >= 0) & (plan.place_slot < p.N)]
    hit = np.unique(slots[banned[slots]])
    out = [f"node {n} receives demand but is terminated" for n in hit]
    if not allow_q1 and (plan.place_slot < 0).any():
        out.append("demand placed on a node cut before launch (slot -1)")
    return _limit(out)

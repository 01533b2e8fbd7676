"""One ray-compat tick: the phases of docs/ray-semantics.md §3 in Ray's order, over
the tick's node list (``context.Context``); the plan made by the assembly every
policy shares."""
from __future__ import annotations

import math

import numpy as np

from vecsched.engine.model import ippr
from vecsched.engine.model.assemble import (Decisions, Placements, Terminations,
                                            assemble_plan)
from vecsched.engine.model.dtypes import IDX, QTY, Sched, Status
from vecsched.engine.model.plan import Plan
from vecsched.engine.model.problem import Problem
from .context import Context
from .phases import (enforce_constraint, enforce_max_global, enforce_max_per_type,
                     enforce_min_workers, gang_reasons, idle_termination, pending_idle,
                     release_pending_idle, sched_gangs, sched_requests, terminate_outdated)
from .requests_view import Requests


def schedule_raycompat(problem: Problem, pending_since: dict | None = None,
                       now_s: float = 0.0) -> Plan:
    """Ray 2.60's ResourceDemandScheduler decision for decision (with the
    crash-class quirks fixed, see docs/ray-compat.md). ``pending_since`` /
    ``now_s``: the per-type timestamps of unneeded pending nodes from the previous
    tick and the current monotonic time (§5.1); the new timestamps come back in
    ``plan.pending_since``. The input is not modified."""
    ctx = Context(problem)
    rq = Requests(problem)
    terminate_outdated(ctx)
    enforce_min_workers(ctx)
    enforce_max_per_type(ctx)
    enforce_max_global(ctx)
    constraint_bad = enforce_constraint(ctx, rq)
    gang_bad, gang_order = sched_gangs(ctx, rq)
    run_order, infeasible, why, placements = sched_requests(ctx, rq)
    since = {}
    tracking = not math.isnan(problem.pending_idle_timeout_s)
    if tracking:
        since = pending_idle(ctx, {k: list(v) for k, v in (pending_since or {}).items()}, now_s)
    gang_why = gang_reasons(ctx, rq, gang_bad) if gang_bad.any() else np.zeros(len(gang_bad),
                                                                                 np.int8)
    kept = idle_termination(ctx)
    if tracking:
        release_pending_idle(ctx, since)
    send = [m for m in ctx.nodes[ctx.ippr_attached[ctx.nodes]].tolist() if ippr.to_send(ctx, m)]
    queued = [bool((ctx.ippr_desired[m] != problem.node_ippr["desired"][m]).any()
                   or problem.node_ippr["k8s"][m] != ippr.K8S_NEW) for m in send]
    return _assemble(ctx, run_order, infeasible, why, placements,
                     ippr_send=np.asarray(send, IDX), ippr_queued=np.asarray(queued, bool),
                     constraint_infeasible=constraint_bad, gang_infeasible=gang_bad,
                     gang_why=gang_why, idle_kept=np.asarray(kept[kept < problem.N], IDX),
                     gang_order=np.asarray(gang_order, IDX), pending_since=since)


def _assemble(ctx: Context, run_order, infeasible, why, placements, **extra) -> Plan:
    """The shared assembly (`assemble_plan`) of the node list's decisions. What
    is Ray's own: terminations are named in list order, nodes the tick itself
    added are simply not launched (Ray would emit empty-id terminations for them,
    quirk Q4), REQUESTED / RAY_STOP_REQUESTED instances are never named (quirk
    Q13), and a unit packed onto a node cut before launch keeps slot -1 (placed
    as Ray counts it, on no node: quirk Q1 with Q4 fixed). ``extra``: the Plan
    fields beyond the common ones."""
    p = ctx.p
    nodes = ctx.nodes
    N = p.N
    launching = nodes[ctx.sched[nodes] == Sched.TO_LAUNCH]
    term = nodes[(ctx.sched[nodes] == Sched.TO_TERMINATE) & (nodes < N)
                 & ~np.isin(ctx.status[nodes], Status.UNTERMINABLE)]
    live = ctx.live()
    # Problem row of each slot in the list: itself, or N + j for the j-th launch.
    slot_of = np.full(ctx.M, -1, np.int64)
    slot_of[nodes] = np.where(nodes < N, nodes, -1)
    slot_of[launching] = N + np.arange(len(launching))
    m, s, k = placements
    return assemble_plan(p, Decisions(
        new_type=ctx.type[launching],
        new_template=ctx.template[launching],
        terms=Terminations(term, ctx.cause[term], ctx.cause_value[term]),
        placements=Placements(slot_of[m], s, k) if len(m) else Placements.of_chunks([], [], []),
        infeasible=infeasible, infeasible_why=why, run_order=run_order,
        cluster_resources=ctx.total[live].sum(axis=0) if len(live) else np.zeros(p.R, QTY)),
        **extra)

"""The classic first-fit-decreasing (FFD) packer: the quality baseline.

This is the greedy a user would write without Ray's utilisation scoring. Plans
from the engine are compared with it on packing quality (nodes launched, units
left unplaced). It is deliberately simple, deterministic and not Ray-exact.

One tick, in order:

1. the fixed phases of every policy (``vecsched.engine.tick.fixed``): outdated
   nodes (OUTDATED), new nodes until every group has ``min_worker_nodes``, nodes
   above ``max_worker_nodes`` and ``max_num_nodes`` (never the head, never a
   REQUESTED or RAY_STOP_REQUESTED instance);
2. placement groups, all or nothing, in Ray's gang order (``ffd_gangs.py``);
   then demand, runs largest first, first fit (``ffd_runs.py``);
3. idle running nodes that received nothing are terminated (IDLE), never
   taking a group below ``min_worker_nodes`` (``fixed.idle``).

The phases' state is ``ffd_tick.FfdTick``; the plan is made by the assembly all
policies share (``vecsched.engine.model.assemble``).
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.assemble import Decisions, Terminations, assemble_plan, kept_totals
from vecsched.engine.model.plan import Plan
from vecsched.engine.model.problem import Problem
from vecsched.engine.tick import fixed
from .ffd_gangs import pack_gangs
from .ffd_runs import pack_runs, size_order
from .ffd_tick import FfdTick

__all__ = ["schedule_baseline", "size_order"]


def schedule_baseline(problem: Problem) -> Plan:
    """First-fit-decreasing plan for one tick (see the module docstring)."""
    p = problem
    tick = FfdTick(p)
    fixed.outdated(tick)
    fixed.min_workers(tick)
    fixed.caps(tick)
    gang_bad, gang_order, gang_received = pack_gangs(tick)
    run_order, infeasible, why, placed = pack_runs(tick)
    received = np.zeros(p.N, dtype=bool)
    received[placed.slot[placed.slot < p.N]] = True
    fixed.idle(tick, received | gang_received)
    new_type = np.asarray(tick.new.types, np.int64)
    launch = np.bincount(new_type, minlength=p.T)
    return assemble_plan(p, Decisions(
        new_type=new_type, terms=Terminations.of_list(tick.terms), placements=placed,
        infeasible=infeasible, infeasible_why=why, run_order=run_order,
        cluster_resources=kept_totals(p, ~tick.gone, launch)),
        gang_infeasible=gang_bad, gang_order=gang_order, stats={"scheduler": "baseline"})

"""One efficient-mode tick: Problem in, Plan out.

The phases follow Ray's (docs/ray-semantics.md §3) where they are not a packing
choice, with its crash-class and lifecycle quirks fixed; the packing is the
mode's own (``pack``, ``gangs``):

1. outdated nodes (the builder's, and with the launch-config check on, running
   nodes whose hash differs from their type's) are terminated; pending nodes are
   not (they have no hash to compare: Ray's quirk Q2 is not followed);
2. ``min_worker_nodes`` launches (within ``max_num_nodes``);
3. types above ``max_worker_nodes``, then the cluster above ``max_num_nodes``,
   lose victims: pending nodes first, then the longest idle, then the least
   used, then the lowest index; never the head or a REQUESTED /
   RAY_STOP_REQUESTED instance;
4. the ``request_resources()`` constraint, all or nothing against node totals;
5. placement groups (``gangs``), each all or nothing;
6. plain demand, existing nodes first, then new ones (``pack``); then, with the
   opt-in ``reserve`` (``reserve.py``), room for one more unit of each pending
   plain bundle on what is left (existing nodes first, then new ones), its
   placements not reported;
7. idle termination as Ray's (per-type timeout, nothing placed, never below
   ``min_worker_nodes``), and with ``cancel_pending`` the QUEUED nodes the plan
   does not need (with ``cancel_booting`` the booting ones too);
8. with ``consolidate`` (opt-in), on a tick with nothing pending, low-use GPU
   nodes whose work fits on another node (``consolidate``).

Nothing is ever placed on a node the tick terminates (no quirk Q1). IPPR resizes
are not issued: in-place-resizable nodes are packed at their current size.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.assemble import (Decisions, Placements, Terminations, assemble_plan,
                                            kept_totals, launch_counts)
from vecsched.engine.model.dtypes import CNT, IDX, Cause, Kind, Status
from vecsched.engine.model.fits import fit_count, selector_mask
from vecsched.engine.model.plan import Plan
from vecsched.engine.model.problem import Problem
from vecsched.engine.tick import fixed
from vecsched.engine.tick.reasons import why_rows
from .cost import Costs
from .gang_place import gang_batch, place_gangs
from .options import EfficientOptions
from .budget import Guard
from .consolidate import consolidate
from .disruption import limit_outdated
from .place import Chunks, place_batch
from .reserve import place_reserve
from .state import State


def schedule_efficient(p: Problem, options: EfficientOptions | None = None) -> Plan:
    opts = options if options is not None else EfficientOptions()
    guard = Guard(opts)
    st = State(p)
    costs = Costs(p, opts)
    stats: dict = {"scheduler": "efficient"}
    _outdated(st, opts)
    fixed.min_workers(st)
    fixed.caps(st)
    con_bad = _constraint(st, costs, opts)
    gang_bad, gang_order, gang_place = place_gangs(st, costs, opts, stats, guard)
    stats["gang_place"] = gang_place
    st.narrow_labels(np.arange(p.S))    # the groups' own keys are read no more
    run_order, infeasible, why, placements = _demand(st, costs, opts)
    if opts.reserve:
        stats["reserve"] = place_reserve(st, costs, opts)
    fixed.idle(st, st.received)
    if opts.cancel_pending:
        _cancel_pending(st, opts.cancel_booting)
    replaced = consolidate(st, opts)
    if replaced:
        stats["consolidate_replace"] = replaced      # victims the launched node is for
    if opts.tick_budget_s is not None:
        stats["budget_guard"] = guard.fired
    return _assemble(st, run_order, infeasible, why, placements,
                     constraint_infeasible=bool(con_bad), gang_infeasible=gang_bad,
                     gang_order=np.asarray(gang_order, IDX), stats=stats)


# ---- fixed phases: the shared rules of vecsched.engine.tick.fixed ----------------------

def _outdated(st: State, opts: EfficientOptions) -> None:
    """Outdated nodes go (``disruption.limit_outdated``: within the outdated budget)."""
    fixed.outdated(st, lambda every: limit_outdated(st.p, st, opts, every))


# ---- demand ---------------------------------------------------------------------------

def _constraint(st: State, costs: Costs, opts: EfficientOptions) -> bool:
    """Place the constraint against totals, all or nothing; True if infeasible."""
    p = st.p
    if not p.has_constraint:
        return False
    rows = p.con_req.astype(np.int64)
    qty = p.req.qty[rows]
    snap = st.snapshot()
    terms = len(st.terms)
    left = place_batch(st, costs, rows, qty, p.con_count, 1, opts.keep_gpu_for_gpu, 0.0, Chunks())
    if left.any():
        st.restore(snap)
        del st.terms[terms:]
        return True
    return False


def _demand(st: State, costs: Costs, opts: EfficientOptions):
    p = st.p
    S = p.S
    rows = np.arange(S, dtype=np.int64)
    out = Chunks()
    left = place_batch(st, costs, rows, p.shape_qty, p.shape_count, 0, opts.keep_gpu_for_gpu,
                       opts.fill_credit, out)
    why = np.zeros(S, np.int8)
    short = np.flatnonzero(left)
    if len(short):
        why[short] = why_rows(p, short, capped=st.global_room == 0)
    size = costs.size(p.shape_qty)
    run_order = np.lexsort((np.arange(S), -size)).astype(IDX)
    return run_order, left.astype(CNT), why, _placements(out, S)


def _placements(out: Chunks, S: int) -> Placements:
    """The demand's placements merged to one row per (slot, run), in slot order
    then run order (as ``Placements.of_triples``, from arrays)."""
    slots, runs, units = out.arrays()
    if len(slots):
        width = max(S, 1)
        keys, inverse = np.unique(slots * width + runs, return_inverse=True)
        units = np.bincount(inverse, weights=units)
        slots, runs = keys // width, keys % width
    return Placements(slots.astype(IDX), runs.astype(IDX), units.astype(CNT))


# ---- termination ----------------------------------------------------------------------

def _cancel_pending(st: State, booting: bool) -> None:
    """Pending nodes the plan puts nothing on, that no gang of the tick could use: the
    QUEUED ones (the cloud was not asked yet), and with ``booting`` the ALLOCATED and
    RAY_INSTALLING ones too (``EfficientOptions.cancel_booting`` says why not by
    default)."""
    p = st.p
    N = p.N
    statuses = Status.PENDING_TERMINABLE if booting else (Status.QUEUED,)
    pend = (st.alive[:N] & st.terminable & ~st.received[:N] & (p.node_kind != Kind.HEAD)
            & np.isin(p.node_status, statuses))
    if not pend.any():
        return
    if p.G:
        usable = np.zeros(N, bool)
        for g in range(p.G):
            rows, qty, _, _ = gang_batch(p, g)
            for r, q in zip(rows.tolist(), qty):
                usable |= (fit_count(p.node_total, q) > 0) & selector_mask(p, r, p.node_label)
        pend &= ~usable
    cand = np.flatnonzero(pend)
    # least advanced first (cheapest to drop), then the lowest index
    for n in cand[np.lexsort((cand, st.ready[cand]))].tolist():
        if not st.keeps_min(n):
            st.terminate(n, Cause.IDLE, int(p.node_idle_ms[n]))


# ---- the plan -------------------------------------------------------------------------

def _assemble(st: State, run_order, infeasible, why, placements, **extra) -> Plan:
    """The shared assembly (`assemble_plan`) of the state's decisions: new nodes
    carry their config's type, placements merge to one row per (slot, run).
    ``extra``: the Plan fields beyond the common ones (gangs, constraint, stats)."""
    p = st.p
    new_type = np.asarray(st.new_types, IDX)
    return assemble_plan(p, Decisions(
        new_type=new_type, terms=Terminations.of_list(st.terms),
        placements=placements,
        infeasible=infeasible, infeasible_why=why, run_order=run_order,
        cluster_resources=kept_totals(p, st.alive[:p.N], launch_counts(new_type, p.T))),
        **extra)

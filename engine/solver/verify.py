"""A plan against the model: its objective value, its gap to the solver's
bound, its packing as a model assignment, and a solver-free check of an
assignment. Pure numpy (no OR-Tools).
"""
from __future__ import annotations

import math

import numpy as np

from vecsched.engine.model.plan import Plan
from .instance import EXISTING, FORCED, NEW, Instance


def type_cost(inst: Instance) -> np.ndarray:
    """(T,) i8 objective cost of one new node of each type (0 for unconfigured)."""
    conf = inst.problem.type_configured
    return np.where(conf, np.round(inst.price * inst.price_scale), 0).astype(np.int64)


def plan_value(inst: Instance, plan: Plan, gangs_placed=None) -> int:
    """The model objective of a plan: ``big`` per bundle of a modelled gang it
    leaves unplaced and (``include_plain``) per plain unit it reports
    infeasible, plus the price of its launches beyond the forced ones.

    ``gangs_placed`` (G,) bool overrides the plan's own gang outcome (a plan
    without ``gang_infeasible``, like the FFD baseline's, places no gang)."""
    p = inst.problem
    if gangs_placed is None:
        gi = np.asarray(plan.gang_infeasible, bool)
        gangs_placed = ~gi if gi.shape == (p.G,) else np.zeros(p.G, bool)
    return decision_value(inst, plan.launch, gangs_placed,
                          plan.infeasible if inst.include_plain else None)


def decision_value(inst: Instance, launch, gangs_placed, infeasible=None) -> int:
    """The model objective of a tick's decision given as launches per type (T,),
    the problem's gangs placed (G,) bool and (``include_plain``) the infeasible
    units per plain run (S,): ``big`` per unplaced modelled bundle or unit, plus
    the price of the launches beyond the forced ones. (Any scheduler's reply
    reads as these, so one whose plan is not at hand is valued the same way.)"""
    gangs_placed = np.asarray(gangs_placed, bool)
    unplaced = int(sum(int(b) for g, b in zip(inst.gangs.tolist(), inst.gang_bundles.tolist())
                       if not gangs_placed[g]))
    if inst.include_plain and infeasible is not None:
        unplaced += int(np.asarray(infeasible, np.int64).sum())
    extra = np.maximum(np.asarray(launch, np.int64) - inst.forced, 0)
    return inst.big * unplaced + int((type_cost(inst) * extra).sum())


def gap(value: float, bound: float) -> float:
    """Relative gap of an objective value over a lower bound: (value - bound) / bound;
    0 when both are 0, infinity when only the bound is."""
    if bound <= 0:
        return 0.0 if value <= 0 else math.inf
    return (value - bound) / bound


def assignment_value(inst: Instance, A: np.ndarray) -> int:
    """The objective of an assignment (A, 4) rows (item, class, bin, units)."""
    placed = np.zeros(inst.I, np.int64)
    np.add.at(placed, A[:, 0], A[:, 3])
    unplaced = 0
    for g in range(len(inst.gangs)):
        members = np.flatnonzero(inst.gang == g)
        if not np.all(placed[members] == inst.mult[members]):
            unplaced += int(inst.gang_bundles[g])
    runs = inst.run >= 0
    unplaced += int((inst.mult[runs] - placed[runs]).sum())
    bins = {(int(k), int(j)) for _, k, j, n in A.tolist() if inst.kind[k] == NEW and n > 0}
    return inst.big * unplaced + int(sum(int(inst.cost[k]) for k, _ in bins))


def check_assignment(inst: Instance, A: np.ndarray) -> list[str]:
    """Every way the assignment breaks the model's constraints; [] if none."""
    out = []
    A = np.asarray(A, np.int64).reshape(-1, 4)
    load: dict = {}
    groups: dict = {}
    placed = np.zeros(inst.I, np.int64)
    for i, k, j, n in A.tolist():
        if n <= 0:
            out.append(f"item {i} on class {k} bin {j}: count {n}")
            continue
        if not inst.compat[i, k]:
            out.append(f"item {i} may not go on class {k} (selectors, anti-affinity or size)")
        if j >= inst.count[k]:
            out.append(f"class {k} has {inst.count[k]} bins, bin {j} is used")
        load[k, j] = load.get((k, j), 0) + n * inst.qty[i]
        placed[i] += n
        if inst.spread[i] >= 0:
            key = (k, j, int(inst.spread[i]))
            groups[key] = groups.get(key, 0) + n
    for (k, j), v in load.items():
        over = np.flatnonzero(v > inst.cap[k])
        if over.size:
            out.append(f"class {k} bin {j} over capacity in kept column(s) {over.tolist()}")
    for (k, j, g), n in groups.items():
        if n > 1:
            out.append(f"class {k} bin {j} holds {n} units of anti-affinity group {g}")
    for g in range(len(inst.gangs)):
        members = np.flatnonzero(inst.gang == g)
        full = placed[members] == inst.mult[members]
        none = placed[members] == 0
        if not (full.all() or none.all()):
            out.append(f"gang {int(inst.gangs[g])} is placed in part")
    for i in np.flatnonzero(placed > inst.mult):
        out.append(f"item {i}: {placed[i]} units placed, it has {inst.mult[i]}")
    new_bins = {(k, j) for (k, j) in load if inst.kind[k] == NEW}
    per_type: dict = {}
    for k, _ in new_bins:
        per_type[int(inst.ctype[k])] = per_type.get(int(inst.ctype[k]), 0) + 1
    for t, n in per_type.items():
        if n > inst.type_budget[t]:
            out.append(f"type {inst.problem.type_names[t]!r}: {n} launches beyond the forced "
                       f"ones, budget {inst.type_budget[t]}")
    if 0 <= inst.global_budget < len(new_bins):
        out.append(f"{len(new_bins)} launches beyond the forced ones, global budget "
                   f"{inst.global_budget}")
    return out


def assignment_of_plan(inst: Instance, plan: Plan, gang_place=None):
    """A plan's packing as a model assignment (A, 4), or None when it cannot be
    written in the model's bins (a slot the model left out, more bins of a class
    than materialised).

    ``gang_place`` (B, 3) rows (gang, bundle position, slot) - the efficient
    mode's ``plan.stats["gang_place"]``; plain placements come from the plan."""
    p = inst.problem
    N = p.N
    cls_of = {}
    for k in np.flatnonzero(inst.kind == EXISTING).tolist():
        for n in inst.nodes[k].tolist():
            cls_of[n] = k
    new_type = np.asarray(plan.new_type, np.int64)
    seen_t: dict = {}
    slot_class = {}
    for jj, t in enumerate(new_type.tolist()):
        r = seen_t.get(t, 0)
        seen_t[t] = r + 1
        kind = FORCED if r < inst.forced[t] else NEW
        ks = np.flatnonzero((inst.kind == kind) & (inst.ctype == t))
        if ks.size:
            slot_class[N + jj] = int(ks[0])
    bin_of: dict = {}
    next_bin = np.zeros(inst.K, np.int64)

    def where(slot):
        k = cls_of.get(slot) if slot < N else slot_class.get(slot)
        if k is None:
            return None
        if slot not in bin_of:
            bin_of[slot] = (k, int(next_bin[k]))
            next_bin[k] += 1
        return bin_of[slot]

    units: dict = {}
    if gang_place is not None and len(gang_place):
        gpos = {int(g): j for j, g in enumerate(inst.gangs.tolist())}
        mapped = [np.bincount(b[b >= 0], minlength=inst.I) for b in inst.bundle_item]
        for g, b, slot in np.asarray(gang_place, np.int64).tolist():
            if g not in gpos:
                continue
            i = int(inst.bundle_item[gpos[g]][b])
            w = where(slot)
            if w is None:
                return None
            # a merged item stands for several bundles but is one unit
            share = inst.mult[i] / mapped[gpos[g]][i]
            units[i, w] = units.get((i, w), 0.0) + share
    if inst.include_plain:
        run_item = {int(inst.run[i]): i for i in np.flatnonzero(inst.run >= 0)}
        for slot, s, n in zip(plan.place_slot.tolist(), plan.place_run.tolist(),
                              plan.place_count.tolist()):
            if slot < 0 or s not in run_item:
                continue
            w = where(slot)
            if w is None:
                return None
            units[run_item[s], w] = units.get((run_item[s], w), 0.0) + n
    rows = [(i, k, j, int(round(n))) for (i, (k, j)), n in units.items()]
    if any(j >= inst.bins[k] for _, k, j, _ in rows):
        return None
    return np.asarray(sorted(rows), np.int64).reshape(-1, 4)

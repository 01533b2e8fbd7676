"""One plan against the CP-SAT optimum of its tick: the plan's objective, the
proven bound, the gap, and whether the plan is feasible in the model."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vecsched.engine.model.plan import Plan
from .verify import assignment_of_plan, check_assignment, gap, plan_value
from .cpsat import Fixed, Result, solve
from .instance import Instance


@dataclass(frozen=True)
class PlanCheck:
    value: int                  # the plan's objective in the model
    bound: float                # the solver's proven lower bound
    optimum: float              # the best objective the solver found (nan if none)
    gap: float                  # (value - bound) / bound
    optimal: bool               # value equals a proven optimum
    feasible: bool | None       # a packing with the plan's decisions exists (None: unknown)
    why: str = ""               # what made it infeasible, or how it was checked


def cross_check_plan(inst: Instance, plan: Plan, result: Result, *, gang_place=None,
               gangs_placed=None, deterministic_limit: float = 5.0) -> PlanCheck:
    """``result``: ``solve(inst)``. Feasibility: with ``gang_place`` (the plan's own
    packing) the packing itself is checked against the model; otherwise the
    solver looks for a packing that places exactly the plan's gangs and plain
    units with at most the plan's launches per type."""
    p = inst.problem
    value = plan_value(inst, plan, gangs_placed)
    feasible, why = None, ""
    A = assignment_of_plan(inst, plan, gang_place) if gang_place is not None else None
    if A is not None:
        bad = check_assignment(inst, A)
        feasible, why = not bad, "; ".join(bad[:3]) or "the plan's own packing"
    if feasible is not True:
        if gangs_placed is None:
            gi = np.asarray(plan.gang_infeasible, bool)
            gangs_placed = ~gi if gi.shape == (p.G,) else np.zeros(p.G, bool)
        fix_units = np.zeros(inst.I, np.int64)
        for i in np.flatnonzero(inst.run >= 0):
            s = int(inst.run[i])
            fix_units[i] = int(inst.mult[i] - plan.infeasible[s])
        launch_max = np.maximum(np.asarray(plan.launch, np.int64) - inst.forced, 0)
        r = solve(inst, fixed=Fixed(gangs=np.asarray(gangs_placed, bool)[inst.gangs],
                                    units=fix_units, launch_max=launch_max),
                  deterministic_limit=deterministic_limit)
        if r.feasible:
            feasible, why = True, "a packing with the plan's decisions exists"
        elif r.status == "INFEASIBLE":
            feasible, why = False, "no packing places the plan's demand within its launches"
        else:
            feasible, why = None, f"undecided ({r.status})"
    opt = result.objective if result.feasible else float("nan")
    return PlanCheck(value=value, bound=result.bound, optimum=opt,
                     gap=gap(value, result.bound),
                     optimal=bool(result.optimal and value == opt), feasible=feasible, why=why)

"""vecsched.engine.solver: an OR-Tools CP-SAT model of one tick's placement, to
cross-check plans (the optional ``solver`` extra; never on the ray-compat tick path).

    inst = build_instance(problem)           # data: items, bin classes, budgets, prices
    res = solve(inst)                        # optimum (or best) and the proven bound
    chk = cross_check_plan(inst, plan, res)  # a plan's objective, gap, feasibility

Importable without OR-Tools: only ``solve`` (and what calls it) needs it, and
raises ``SolverUnavailable`` with the install hint.
"""
from .verify import (assignment_of_plan, assignment_value, check_assignment, decision_value, gap,
                    plan_value, type_cost)
from .cpsat import Fixed, Result, have_ortools, solve
from .crosscheck import PlanCheck, cross_check_plan
from .greedy import greedy_assignment
from .instance import (EXISTING, FORCED, NEW, Instance, SolverUnavailable, build_instance,
                       build_slot_instance)
from .prices import price_vector, proxy_prices

__all__ = ["Instance", "build_instance", "build_slot_instance", "price_vector", "proxy_prices",
           "SolverUnavailable", "Fixed", "Result", "solve", "have_ortools", "greedy_assignment",
           "plan_value", "decision_value", "type_cost", "gap", "assignment_value", "check_assignment", "assignment_of_plan",
           "PlanCheck", "cross_check_plan", "EXISTING", "FORCED", "NEW"]

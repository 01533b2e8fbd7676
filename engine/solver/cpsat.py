"""The CP-SAT model of one tick's placement, in the order of the OR-Tools
``bin_packing_sat.py`` sample: data (``Instance``) -> model -> variables ->
constraints -> objective -> solve -> read-out, with a greedy hint.

Variables, per materialised bin j of class k:
  x[i, k, j]  units of item i on the bin, 0..fitmax[i, k]
  used[k, j]  the bin is launched (new-node classes only; the cost is paid on it)
and y[g] (gang g placed, all or nothing), z[i] (units of plain run i placed).

Constraints: every item of a placed gang is placed in full and none of an
unplaced one; capacities per column, with at most one item over half a bin's
capacity in a column per bin (a clique cut); an anti-affinity group at most once per
bin; a new bin holds nothing unless used; the global launch budget over new
bins. Symmetry: bins of one class are interchangeable, so new ones are used in
order (used[k, j] >= used[k, j+1]); equal bundles of a gang are one item with a
count. A redundant capacity cut per new-node class (all its bins' load fits the
bins used) gives the LP relaxation a bin-covering bound.

Objective: ``big`` per unplaced bundle or unit, then the price of every used new bin.

Determinism: one worker, a fixed seed, and ``max_deterministic_time`` (a work
limit, not a clock), so a solve is reproducible bit for bit on one OR-Tools
version. ``time_limit_s`` adds a wall-clock cap for interactive use; a result
that hit it may differ between runs (``Result.status`` says whether the
optimum was proven).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .instance import NEW, Instance, SolverUnavailable


def _cp_model():
    try:
        from ortools.sat.python import cp_model
    except ImportError as e:       # a dependency of vecsched, but an install may lack it
        raise SolverUnavailable("vecsched.engine.solver needs OR-Tools, a dependency of vecsched "
                                f"that this environment lacks: pip install 'ortools>=9.10' "
                                f"(import failed: {e})") from e
    return cp_model


def have_ortools() -> bool:
    """True when OR-Tools' CP-SAT imports."""
    try:
        _cp_model()
    except SolverUnavailable:
        return False
    return True


def require_ortools(user: str) -> None:
    """Raise ``SolverUnavailable`` naming ``user`` (what needs CP-SAT, e.g. the option
    that turns it on) when OR-Tools does not import; nothing otherwise."""
    try:
        _cp_model()
    except SolverUnavailable as e:
        raise SolverUnavailable(f"{user} needs OR-Tools' CP-SAT, and it does not import here: "
                                f"pip install 'ortools>=9.10' (a dependency of vecsched), or "
                                f"turn the CP-SAT steps off with EfficientOptions("
                                f"gang_cpsat_bundles=0), which plans placement "
                                f"groups by heuristics alone (other plans). {e}") from None


@dataclass(frozen=True, eq=False)
class Result:
    status: str                 # OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN, MODEL_INVALID
    objective: float            # best objective found (nan when none)
    bound: float                # proven lower bound on the objective
    placed_gangs: np.ndarray    # (G',) bool
    placed_units: np.ndarray    # (I,) i8 units placed per item
    used: np.ndarray            # (K,) i8 bins used per class
    launches: np.ndarray        # (T,) i8 new nodes per type beyond the forced ones
    assignment: np.ndarray      # (A, 4) i8 rows (item, class, bin, units)
    wall_s: float
    deterministic_s: float
    branches: int
    source: str = "cpsat"       # "hint": CP-SAT found nothing in its limit, the hint is returned

    @property
    def optimal(self) -> bool:
        return self.status == "OPTIMAL"

    @property
    def feasible(self) -> bool:
        return self.status in ("OPTIMAL", "FEASIBLE")


@dataclass(frozen=True)
class Fixed:
    """Decisions a solve must keep, turning it into "is there a packing with
    exactly these decisions?" (a plan's feasibility in the model): ``gangs``
    (G',) bool placed or not, ``units`` (I,) units placed per plain item,
    ``launch_max`` (T,) launches per type beyond the forced ones. None: free."""
    gangs: np.ndarray | None = None
    units: np.ndarray | None = None
    launch_max: np.ndarray | None = None


@dataclass
class _Vars:
    """The model's variables: x[i, k, j] units of item i on bin j of class k,
    used[k, j] a new bin launched, y[g] gang g placed, z[i] units of plain item
    i placed; and x grouped by bin (``on_bin``: (k, j) -> [(i, var)]) and by
    item (``of_item``: i -> [var])."""
    x: dict
    used: dict
    y: list
    z: dict
    on_bin: dict
    of_item: dict


def solve(inst: Instance, *, hint=None, deterministic_limit: float = 5.0,
          time_limit_s: float | None = None, workers: int = 1, seed: int = 0,
          fixed: Fixed | None = None, params=None) -> Result:
    """Solve ``inst``. ``hint``: an (A, 4) assignment to start from (default: the
    greedy one, ``vecsched.engine.solver.greedy``). ``fixed``: decisions to keep
    (`Fixed`), which turns the solve into a feasibility question. ``params``:
    more CP-SAT parameters by name."""
    cp_model = _cp_model()
    model = cp_model.CpModel()
    optimise = fixed is None
    bins, hint, cap_obj = _bins_and_hint(inst, hint) if optimise else (inst.bins.copy(), None,
                                                                        None)
    v = _variables(model, inst, bins)
    _item_constraints(model, inst, v)
    _bin_constraints(model, inst, v)
    _class_cuts(model, inst, v.x, v.used, bins)
    if inst.global_budget >= 0 and v.used:
        model.add(sum(v.used.values()) <= inst.global_budget)
    _symmetry(model, inst, v.used, bins)
    if fixed is not None:
        _fix(model, inst, v, fixed)
    objective = _objective(inst, v)
    model.minimize(objective)
    if optimise:
        model.add(objective <= cap_obj)            # nothing worse than the hint is wanted
        _add_hint(model, inst, hint, v.x, v.used, v.y, v.z)
    solver = cp_model.CpSolver()
    _set_params(solver.parameters, workers, seed, deterministic_limit, time_limit_s, params)
    status = solver.solve(model)
    res = _read_out(inst, solver, status, v.x, v.used, v.y, v.z)
    if optimise and not res.feasible and res.status != "INFEASIBLE":
        res = _from_hint(inst, hint, res)       # the work limit ran out before any solution
    return res


def _bins_and_hint(inst: Instance, hint):
    """For an optimising solve: the bins per class (none of a dominated class,
    no more than a cost at most the hint's allows), the hint (default: the
    greedy one, dominated bins moved) and its objective."""
    from .verify import assignment_value
    from .greedy import greedy_assignment
    bins = inst.bins.copy()
    bins[inst.dominated] = 0
    hint = greedy_assignment(inst) if hint is None else np.asarray(hint, np.int64)
    hint = _without_dominated(inst, hint)
    cap_obj = assignment_value(inst, hint)
    return _cost_capped_bins(inst, bins, cap_obj), hint, cap_obj


def _variables(model, inst: Instance, bins: np.ndarray) -> _Vars:
    x: dict = {}
    for i, k in zip(*np.nonzero(inst.compat)):
        for j in range(int(bins[k])):
            x[i, k, j] = model.new_int_var(0, int(inst.fitmax[i, k]), f"x{i}_{k}_{j}")
    used: dict = {}
    for k in np.flatnonzero(inst.kind == NEW):
        for j in range(int(bins[k])):
            used[k, j] = model.new_bool_var(f"u{k}_{j}")
    y = [model.new_bool_var(f"y{g}") for g in range(len(inst.gangs))]
    z = {i: model.new_int_var(0, int(inst.mult[i]), f"z{i}") for i in np.flatnonzero(inst.run >= 0)}
    on_bin: dict = {}
    of_item: dict = {}
    for (i, k, j), var in x.items():
        on_bin.setdefault((k, j), []).append((i, var))
        of_item.setdefault(i, []).append(var)
    return _Vars(x, used, y, z, on_bin, of_item)


def _item_constraints(model, inst: Instance, v: _Vars) -> None:
    """Every item of a placed gang is placed in full and none of an unplaced
    one; a plain item's placed units are z[i]."""
    for i in range(inst.I):
        total = sum(v.of_item.get(i, []))
        g = int(inst.gang[i])
        if g >= 0:
            model.add(total == int(inst.mult[i]) * v.y[g])
        else:
            model.add(total == v.z[i])


def _bin_constraints(model, inst: Instance, v: _Vars) -> None:
    """Per bin: capacities per column with the over-half clique cut, nothing on
    a new bin unless used, an anti-affinity group at most once."""
    for (k, j), members in v.on_bin.items():
        gate = v.used.get((k, j))
        for c in range(inst.cap.shape[1]):
            _column_capacity(model, inst, members, k, c, gate)
        if gate is not None:
            for i, var in members:
                model.add(var <= int(inst.fitmax[i, k]) * gate)
        groups: dict = {}
        for i, var in members:
            if inst.spread[i] >= 0:
                groups.setdefault(int(inst.spread[i]), []).append(var)
        for vs in groups.values():
            if len(vs) > 1:
                model.add(sum(vs) <= 1)


def _column_capacity(model, inst: Instance, members: list, k: int, c: int, gate) -> None:
    """The load of column c on one bin of class k within its capacity (times the
    bin's used flag, ``gate``, for a new bin)."""
    terms = [(int(inst.qty[i, c]), var) for i, var in members if inst.qty[i, c] > 0]
    if not terms:
        return
    load = sum(a * var for a, var in terms)
    if gate is None:
        model.add(load <= int(inst.cap[k, c]))
    else:
        model.add(load <= int(inst.cap[k, c]) * gate)
    # items over half the bin in this column: at most one of them (a clique of
    # the conflict graph; the LP relaxation of the capacity row lets two share)
    big = [var for i, var in members if 2 * int(inst.qty[i, c]) > int(inst.cap[k, c])]
    if len(big) > 1:
        model.add(sum(big) <= (1 if gate is None else gate))


def _fix(model, inst: Instance, v: _Vars, fixed: Fixed) -> None:
    """Keep the decisions of ``fixed``."""
    if fixed.gangs is not None:
        for g, placed in enumerate(np.asarray(fixed.gangs, bool).tolist()):
            model.add(v.y[g] == int(placed))
    if fixed.units is not None:
        fu = np.asarray(fixed.units, np.int64)
        for i, var in v.z.items():
            model.add(var == int(fu[i]))
    if fixed.launch_max is not None:
        lm = np.asarray(fixed.launch_max, np.int64)
        for t in np.unique(inst.ctype[inst.kind == NEW]).tolist():
            vs = [u for (k, j), u in v.used.items() if inst.ctype[k] == t]
            if vs:
                model.add(sum(vs) <= int(lm[t]))


def _objective(inst: Instance, v: _Vars):
    """``big`` per unplaced bundle or unit, then the price of every used new bin."""
    unplaced = sum(int(inst.gang_bundles[g]) * (1 - v.y[g]) for g in range(len(v.y))) + \
        sum(int(inst.mult[i]) - var for i, var in v.z.items())
    cost = sum(int(inst.cost[k]) * u for (k, j), u in v.used.items())
    return inst.big * unplaced + cost


def _set_params(prm, workers: int, seed: int, deterministic_limit: float,
                time_limit_s: float | None, params: dict | None) -> None:
    prm.num_workers = int(workers)
    prm.random_seed = int(seed)
    prm.max_deterministic_time = float(deterministic_limit)
    # Measured on seeded gang ticks (tests/kits/ganggen.py, 100 bundles): CP-SAT's own
    # symmetry detection and presolve probing cost more than they save here (the
    # model already orders interchangeable new bins).
    prm.symmetry_level = 0
    prm.cp_model_probing_level = 0
    # The full LP relaxation (every linear row, with cuts) from the root: on the same
    # ticks it proved all 20 100-bundle instances optimal within 0.8 s (before: 19,
    # the slowest 2 s and one unproven after 20 deterministic s).
    prm.linearization_level = 2
    for k, val in (params or {}).items():        # more CP-SAT parameters, by name
        setattr(prm, k, val)
    if time_limit_s is not None:
        prm.max_time_in_seconds = float(time_limit_s)


def _from_hint(inst: Instance, hint: np.ndarray, res: Result) -> Result:
    from .verify import assignment_value, check_assignment
    if check_assignment(inst, hint):
        return res
    units = np.zeros(inst.I, np.int64)
    np.add.at(units, hint[:, 0], hint[:, 3])
    placed = np.asarray([bool(np.all(units[inst.gang == g] == inst.mult[inst.gang == g]))
                         for g in range(len(inst.gangs))], bool)
    used = np.zeros(inst.K, np.int64)
    launches = np.zeros(inst.problem.T, np.int64)
    for k, j in {(int(k), int(j)) for _, k, j, n in hint.tolist() if n > 0}:
        used[k] += 1
        if inst.kind[k] == NEW:
            launches[inst.ctype[k]] += 1
    return Result(status="FEASIBLE", objective=float(assignment_value(inst, hint)),
                  bound=res.bound, placed_gangs=placed, placed_units=units, used=used,
                  launches=launches, assignment=hint, wall_s=res.wall_s,
                  deterministic_s=res.deterministic_s, branches=res.branches, source="hint")


def _without_dominated(inst: Instance, hint: np.ndarray) -> np.ndarray:
    """The hint with each bin of a dominated class moved to a fresh bin of the
    first class that dominates it (same items, no dearer, within its room)."""
    if not inst.dominated.any() or not len(hint):
        return hint
    hint = hint.copy()
    used_bins = {}
    for k in range(inst.K):
        used_bins[k] = set(hint[hint[:, 1] == k, 2].tolist())
    moved = {}
    for r in range(len(hint)):
        k, j = int(hint[r, 1]), int(hint[r, 2])
        if not inst.dominated[k]:
            continue
        if (k, j) not in moved:
            a = _dominator(inst, k)
            if a < 0:
                return hint
            nj = 0
            while nj in used_bins[a]:
                nj += 1
            used_bins[a].add(nj)
            moved[k, j] = (a, nj)
        hint[r, 1], hint[r, 2] = moved[k, j]
    return hint


def _dominator(inst: Instance, b: int) -> int:
    for a in np.flatnonzero((inst.kind == NEW) & ~inst.dominated).tolist():
        if inst.cost[a] <= inst.cost[b] and np.all(inst.cap[a] >= inst.cap[b]) and \
                np.all(inst.compat[:, a] >= inst.compat[:, b]):
            return a
    return -1


def _cost_capped_bins(inst: Instance, bins: np.ndarray, hint_value: int) -> np.ndarray:
    """Bins per new-node class an answer at least as good as the hint can use.

    When the hint leaves unplaced only what no bin could ever hold (an item with
    no compatible class), every better answer places the same and pays at most
    the hint's cost, so it uses at most ``cost // cost[k]`` bins of class k."""
    never = np.zeros(inst.I, bool)
    never[~inst.compat.any(axis=1)] = True
    lb = 0
    for g in range(len(inst.gangs)):
        if never[inst.gang == g].any():
            lb += int(inst.gang_bundles[g])
    lb += int(inst.mult[never & (inst.run >= 0)].sum())
    if hint_value // inst.big != lb:
        return bins
    budget = hint_value % inst.big
    out = bins.copy()
    new = (inst.kind == NEW) & (inst.cost > 0)
    out[new] = np.minimum(bins[new], budget // inst.cost[new])
    return out


def _class_cuts(model, inst: Instance, x: dict, used: dict, bins) -> None:
    """Redundant per-class capacity: what all bins of a new-node class hold fits
    the capacity of the bins used. It lets the LP relaxation count fractional
    nodes per type (a bin-covering bound) instead of spreading load thinly."""
    for k in np.flatnonzero(inst.kind == NEW).tolist():
        B = int(bins[k])
        if B == 0:
            continue
        items = np.flatnonzero(inst.compat[:, k]).tolist()
        n_used = sum(used[k, j] for j in range(B))
        for c in range(inst.cap.shape[1]):
            terms = [int(inst.qty[i, c]) * x[i, k, j] for i in items if inst.qty[i, c] > 0
                     for j in range(B)]
            if terms:
                model.add(sum(terms) <= int(inst.cap[k, c]) * n_used)


def _symmetry(model, inst: Instance, used: dict, bins) -> None:
    """Interchangeable new bins are used in order. (Ordering their loads as well
    was measured slower on the gang ticks of tests/kits/ganggen.py, and is left out.)"""
    for k in range(inst.K):
        B = int(bins[k])
        if B >= 2 and (k, 0) in used:
            for j in range(B - 1):
                model.add(used[k, j] >= used[k, j + 1])


def _add_hint(model, inst: Instance, hint: np.ndarray, x, used, y, z) -> None:
    val = {}
    for i, k, j, n in hint.tolist():
        val[i, k, j] = val.get((i, k, j), 0) + n
    val = _sorted_bins(inst, val)
    for key, v in x.items():
        model.add_hint(v, int(val.get(key, 0)))
    busy = {(k, j) for (i, k, j), n in val.items() if n > 0}
    for (k, j), u in used.items():
        model.add_hint(u, int((k, j) in busy))
    placed = np.zeros(inst.I, np.int64)
    for (i, k, j), n in val.items():
        placed[i] += n
    for g in range(len(y)):
        members = np.flatnonzero(inst.gang == g)
        whole = bool(len(members)) and bool(np.all(placed[members] == inst.mult[members]))
        model.add_hint(y[g], int(whole))
    for i, v in z.items():
        model.add_hint(v, int(placed[i]))


def _sorted_bins(inst: Instance, val: dict) -> dict:
    """The hint's bins of each class renumbered 0, 1, ... (new bins are used in order)."""
    by_class: dict = {}
    for (i, k, j), n in val.items():
        by_class.setdefault(k, {}).setdefault(j, {})[i] = n
    out = {}
    for k, bins in by_class.items():
        for new_j, j in enumerate(sorted(bins)):
            for i, n in bins[j].items():
                out[i, k, new_j] = n
    return out


def _read_out(inst: Instance, solver, status, x, used, y, z) -> Result:
    name = solver.status_name(status)
    ok = name in ("OPTIMAL", "FEASIBLE")
    T = inst.problem.T
    rows, units = [], np.zeros(inst.I, np.int64)
    use = np.zeros(inst.K, np.int64)
    launches = np.zeros(T, np.int64)
    placed = np.zeros(len(y), bool)
    if ok:
        for (i, k, j), v in x.items():
            n = int(solver.value(v))
            if n:
                rows.append((i, k, j, n))
                units[i] += n
        for (k, j), u in used.items():
            if solver.value(u):
                use[k] += 1
                launches[inst.ctype[k]] += 1
        for k, j in {(k, j) for (i, k, j, n) in rows if (k, j) not in used}:
            use[k] += 1
        placed = np.asarray([bool(solver.value(v)) for v in y], bool)
    return Result(
        status=name,
        # the objective is an integer: its float read-out is rounded, and the
        # bound rounded up (1e-6 slack for the LP's own float error)
        objective=float(round(solver.objective_value)) if ok else float("nan"),
        bound=float(math.ceil(solver.best_objective_bound - 1e-6)),
        placed_gangs=placed, placed_units=units, used=use, launches=launches,
        assignment=np.asarray(rows, np.int64).reshape(-1, 4),
        # the response's own field: CpSolver has no deterministic_time property
        # before ortools 9.15
        wall_s=float(solver.wall_time),
        deterministic_s=float(solver.response_proto.deterministic_time),
        branches=int(solver.num_branches))

"""When the gang packing's CP-SAT steps cannot gain: a lower bound on what any
packing of the tick's placement groups leaves unplaced and pays for new nodes.

CP-SAT's packing (and the neighbourhood search's) replaces the heuristic one only when
strictly better: fewer bundles unplaced, then cheaper launches. So when the heuristic
packing already meets a lower bound on both, the solves are skipped and the plan is
the same as with them.

- **Unplaced**: a group is *impossible* when one of its items fits neither the free
  room of any alive node now (room only shrinks as groups are placed) nor a fresh
  node of any configured type with launch room (resources only: selectors would
  only make it harder). Every packing leaves its bundles unplaced.
- **Launch price**: the possible groups' resources beyond the alive nodes' free room
  (summed per column: fragmentation and selectors ignored), and at least all of the
  items that fit no alive node's free room, must come from new nodes;
  the cheapest mix of node counts per type (within launch room) that covers that
  deficit in every column is a small covering integer program, solved by CP-SAT
  (one worker, a tiny deterministic-time limit) for its proven bound. Its numbers
  are rounded so that the bound stays below the true one: prices down to thousandths,
  deficits down and capacities up to thousandths of each column's largest capacity.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.fits import fit_count
from .cost import Costs
from .state import State

SCALE = 1000
BOUND_DTIME = 0.05


def _fit_somewhere(free: np.ndarray, qty) -> list:
    """Per bundle of ``qty`` (each (R,)): whether one unit fits in some row of
    ``free`` (``fit_count``), computed once per distinct bundle."""
    seen: dict = {}
    out = []
    for q in qty:
        k = q.tobytes()
        got = seen.get(k)
        if got is None:
            got = seen[k] = bool((fit_count(free, q) > 0).any()) if len(free) else False
        out.append(got)
    return out


def impossible_gangs(st: State, batches) -> np.ndarray:
    """(G,) bool: groups with an item no alive node and no launchable type can hold."""
    p = st.p
    M = st.M
    free = st.free[:M][st.alive[:M]]
    room = p.type_configured & (st.type_room > 0) if st.global_room != 0 else \
        np.zeros(p.T, bool)
    fresh = p.type_free[room]
    items = [q for _, qty, _, _ in batches for q in qty]
    ok = [a or b for a, b in zip(_fit_somewhere(free, items), _fit_somewhere(fresh, items))]
    out = np.zeros(len(batches), bool)
    at = 0
    for g, (_, qty, _, _) in enumerate(batches):
        out[g] = not all(ok[at:at + len(qty)])
        at += len(qty)
    return out


def launch_price_bound(st: State, costs: Costs, batches, gangs: np.ndarray) -> float:
    """A lower bound on the price of the nodes any packing that places every group in
    ``gangs`` launches (module docstring)."""
    from ortools.sat.python import cp_model
    p = st.p
    M = st.M
    free = st.free[:M][st.alive[:M]]
    need, must = np.zeros(p.R), np.zeros(p.R)
    fits = _fit_somewhere(free, [q for g in gangs.tolist() for q in batches[g][1]])
    at = 0
    for g in gangs.tolist():
        _, qty, want, _ = batches[g]
        need += (qty * want[:, None]).sum(axis=0)
        nowhere = ~np.asarray(fits[at:at + len(qty)], bool)
        at += len(qty)
        must += (qty[nowhere] * want[nowhere, None]).sum(axis=0)
    deficit = np.maximum(np.maximum(need - free.sum(axis=0), 0.0), must)
    if not (deficit > 0).any():
        return 0.0
    types = np.flatnonzero(p.type_configured & (st.type_room > 0))
    if st.global_room == 0 or not types.size:
        return np.inf
    cap = p.type_free[types]
    ref = cap.max(axis=0)
    if ((deficit > 0) & (ref <= 0)).any():
        return np.inf                        # no launchable type has that resource
    m = cp_model.CpModel()
    hi = [int(st.type_room[t]) if st.global_room < 0 else int(min(st.type_room[t], st.global_room))
          for t in types.tolist()]
    x = [m.new_int_var(0, h, f"x{t}") for t, h in zip(types.tolist(), hi)]
    for r in np.flatnonzero(deficit > 0).tolist():
        d = int(np.floor(deficit[r] / ref[r] * SCALE))
        c = np.ceil(cap[:, r] / ref[r] * SCALE).astype(np.int64).tolist()
        m.add(sum(ci * xi for ci, xi in zip(c, x)) >= d)
    if st.global_room > 0:
        m.add(sum(x) <= st.global_room)
    price = np.floor(costs.price[types] * SCALE).astype(np.int64).tolist()
    m.minimize(sum(pi * xi for pi, xi in zip(price, x)))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = BOUND_DTIME
    status = solver.solve(m)
    if status == cp_model.INFEASIBLE:
        return np.inf
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return 0.0
    return float(solver.best_objective_bound) / SCALE


def bound_met(st: State, costs: Costs, batches, unplaced: int, price: float) -> bool:
    """Whether no packing can beat (``unplaced`` bundles, launch ``price``); False
    when unsure."""
    p = st.p
    bad = impossible_gangs(st, batches)
    floor_unplaced = int(sum(int(p.gang_ptr[g + 1] - p.gang_ptr[g]) for g in np.flatnonzero(bad)))
    if unplaced > floor_unplaced:
        return False
    lb = launch_price_bound(st, costs, batches, np.flatnonzero(~bad))
    return bool(np.isfinite(lb)) and price <= lb + 1e-9 * max(1.0, lb)

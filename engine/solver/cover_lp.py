"""The fractional covering LP: the cheapest mix of node types whose resources cover a
demand, for many demand vectors, with dual prices that certify each value from below.

    lp = CoverLP(cap, price, upper, member)
    res = lp.solve(demand)          # demand (K, G, R): class g's demand per row k

The LP of one row (``x_t`` nodes of type t, fractional):

    minimise   sum_t price[t] x[t]
    subject to sum_{t in class g} cap[t, r] x[t] >= demand[g, r]   for every class g, column r
               0 <= x[t] <= upper[t]

A *class* is a set of types (``member[g]``); its demand is the work that can run on
those types only (so the whole demand is a class of every type). Dropping integrality,
per-node packing and everything else a real cluster has (boots, idle time) leaves a
relaxation: no cluster that holds the demand costs less.

The dual prices ``y[g, r] >= 0`` (and ``z[t] >= 0`` for the bounded types) are made
feasible exactly (``_feasible``): for every type, ``sum_g member[g, t] y[g] . cap[t] -
z[t] <= price[t]``. Weak duality then gives, for *any* demand ``D`` (not only the row
they were solved for), ``y . D - upper . z <= the LP's value at D``: a caller may
price demand that moved in time with them and keep a valid bound
(``vecsched.adapters.replay.bounds``). ``res.value`` is GLOP's primal optimum,
``res.dual_value`` the certified bound of the row itself (equal up to the solver's
tolerance).

Pure arrays in and out; OR-Tools' GLOP (``pywraplp``) solves; identical rows are
solved once, and the model is built once and re-solved with new bounds.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .instance import SolverUnavailable


@dataclass(frozen=True)
class CoverResult:
    """Per demand row: GLOP's optimum, the certified dual bound, the dual prices."""
    value: np.ndarray          # (K,) primal optimum
    dual_value: np.ndarray     # (K,) y . D - upper . z with the repaired duals (<= value)
    y: np.ndarray              # (K, G, R) >= 0, dual-feasible
    z: np.ndarray              # (K, T) >= 0, nonzero only where upper is finite
    solves: int                # distinct rows solved
    x: np.ndarray = None       # (K, T) GLOP's optimal mix (nodes of each type)


class CoverLP:
    """The covering LP over fixed types and classes (module docstring)."""

    def __init__(self, cap, price, upper, member):
        self.cap = np.asarray(cap, dtype=np.float64)
        self.price = np.asarray(price, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.member = np.asarray(member, dtype=bool)
        T, R = self.cap.shape
        if self.price.shape != (T,) or self.upper.shape != (T,) or self.member.shape[1:] != (T,):
            raise ValueError(f"cover LP: cap is {self.cap.shape}, price {self.price.shape}, "
                             f"upper {self.upper.shape}, member {self.member.shape}: they must "
                             f"agree on the number of types")
        for name, a in (("cap", self.cap), ("price", self.price)):
            if not np.all(np.isfinite(a)) or np.any(a < 0):
                raise ValueError(f"cover LP: {name} must be finite and >= 0")
        if np.any(np.isnan(self.upper)) or np.any(self.upper < 0):
            raise ValueError("cover LP: upper must be >= 0 (inf: unbounded)")

    # ---- solving -------------------------------------------------------------------------
    def solve(self, demand) -> CoverResult:
        """Solve every row of ``demand`` (K, G, R) (module docstring)."""
        D = np.asarray(demand, dtype=np.float64)
        G, T = self.member.shape
        R = self.cap.shape[1]
        if D.ndim != 3 or D.shape[1:] != (G, R):
            raise ValueError(f"cover LP: demand must be (K, {G}, {R}), got {D.shape}")
        if not np.all(np.isfinite(D)) or np.any(D < 0):
            raise ValueError("cover LP: demand must be finite and >= 0")
        K = D.shape[0]
        rows = np.flatnonzero(D.reshape(K, -1).max(axis=0, initial=0.0) > 0)   # (g, r) used
        supply = self.member[:, :, None] * self.cap[None, :, :]                  # (G, T, R)
        flat = supply.transpose(0, 2, 1).reshape(G * R, T)[rows]                 # (C, T)
        empty = rows[~(flat > 0).any(axis=1)]
        if empty.size:
            g, r = divmod(int(empty[0]), R)
            raise ValueError(f"cover LP: class {g} has demand in column {r} that none of "
                             f"its types offers")
        if rows.size == 0:                       # nothing to cover: every value is 0
            zero = np.zeros(K)
            return CoverResult(value=zero, dual_value=zero.copy(), y=np.zeros((K, G, R)),
                               z=np.zeros((K, T)), solves=0, x=np.zeros((K, T)))
        uniq, inverse = np.unique(D.reshape(K, -1)[:, rows], axis=0, return_inverse=True)
        # each constraint scaled to a largest coefficient of 1 (memory is in bytes, a GPU
        # model's share in thousandths): the same LP, its duals scaled back
        norm = flat.max(axis=1)
        values, y_rows, x = self._glop(flat / norm[:, None], uniq / norm[None, :])
        y_rows = y_rows / norm[None, :]
        y = np.zeros((len(uniq), G * R))
        y[:, rows] = y_rows
        y, z = self._feasible(y.reshape(-1, G, R))
        inverse = inverse.reshape(-1)
        y, z, values, x = y[inverse], z[inverse], values[inverse], x[inverse]
        finite = np.where(np.isfinite(self.upper), self.upper, 0.0)
        dual = np.einsum("kgr,kgr->k", y, D) - z @ finite
        return CoverResult(value=values, dual_value=dual, y=y, z=z, solves=len(uniq), x=x)

    def _glop(self, flat: np.ndarray, rhs: np.ndarray) -> tuple:
        """GLOP over the rows of ``rhs`` (one model, re-solved with new lower bounds):
        (optimum per row, the constraints' duals per row, the mix per row)."""
        try:
            from ortools.linear_solver import pywraplp
        except ImportError as e:       # pragma: no cover - OR-Tools is a core dependency
            raise SolverUnavailable("the covering LP needs OR-Tools (pip install ortools)") from e
        solver = pywraplp.Solver.CreateSolver("GLOP")
        T = flat.shape[1]
        x = [solver.NumVar(0.0, float(u) if np.isfinite(u) else solver.infinity(), f"x{t}")
             for t, u in enumerate(self.upper)]
        cons = []
        for c in range(flat.shape[0]):
            ct = solver.Constraint(0.0, solver.infinity())
            for t in np.flatnonzero(flat[c] > 0):
                ct.SetCoefficient(x[t], float(flat[c, t]))
            cons.append(ct)
        obj = solver.Objective()
        for t in range(T):
            obj.SetCoefficient(x[t], float(self.price[t]))
        obj.SetMinimization()
        values = np.zeros(len(rhs))
        duals = np.zeros((len(rhs), len(cons)))
        mix = np.zeros((len(rhs), T))
        for k, row in enumerate(rhs):
            for ct, b in zip(cons, row):
                ct.SetLb(float(b))
            status = solver.Solve()
            if status != pywraplp.Solver.OPTIMAL:
                raise ValueError(f"cover LP: GLOP ended with status {status} on a demand row "
                                 f"(a bounded type's cap cannot hold it?)")
            values[k] = obj.Value()
            duals[k] = [ct.dual_value() for ct in cons]
            mix[k] = [v.solution_value() for v in x]
        return values, duals, mix

    def _feasible(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Dual prices made exactly feasible: y >= 0; zero on the (class, column) pairs a
        free unbounded type offers; scaled down until no unbounded priced type is dearer
        in y than its price; z the excess of the bounded types."""
        y = np.maximum(y, 0.0)
        unbounded = ~np.isfinite(self.upper)
        offers = self.member[:, :, None] & (self.cap[None, :, :] > 0)            # (G, T, R)
        free = offers[:, unbounded & (self.price <= 0), :].any(axis=1)           # (G, R)
        y[:, free] = 0.0
        load = np.einsum("kgr,gt,tr->kt", y, self.member.astype(np.float64), self.cap)
        priced = unbounded & (self.price > 0)
        scale = np.ones(len(y))
        if priced.any():        # (1 + 1e-12): no rounding may leave a type dearer in y
            scale = np.maximum(1.0, (load[:, priced] / self.price[priced]).max(axis=1)
                               * (1 + 1e-12))
        y = y / scale[:, None, None]
        load = load / scale[:, None]
        z = np.where(unbounded[None, :], 0.0, np.maximum(load - self.price[None, :], 0.0))
        return y, z

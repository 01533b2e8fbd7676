"""A lower bound on the cost and the GPU-hours of replaying a trace: from the trace's
work and the worker groups alone (no node a scheduler chose, no cloud), given only how
long each unit waited to start in a run.

**The bound.** At every instant the nodes a cluster pays for hold the work running
then, so they are a feasible point of the *covering LP* of that work
(``vecsched.engine.solver.cover_lp``): the cheapest fractional mix of worker groups
whose summed resources cover the work's, in every resource column (CPU, memory, GPU,
``accelerator_type:<model>``, custom resources, and the implicit per-node slots of
per-node caps, of which every node holds exactly one), with one such constraint more
for each *class* of work that only some groups can hold (the types an empty node of
which fits the unit: a GPU model, an 8-GPU pod, a custom resource). The head node is a
free type the LP may use once. A scheduler's cost is the integral of its nodes' price,
so it is at least the integral of that LP's value over the work *it* runs.

**What is relaxed**: whole nodes (fractional counts), per-node packing (only column
sums and per-class column sums are covered; a unit may be split across nodes), each
node's own caps beyond its column (a per-node cap counts only through the slot column),
placement-group strategies and labels beyond the class a unit fits, the worker groups'
``max_workers``, and everything a real cluster pays besides running work: boots,
idle time before the idle timeout, draining, stopped nodes awaiting termination.

**Which work is alive.** What a scheduler runs depends on it: a unit starts at or after
its arrival and runs its duration, so the set running at ``t`` differs from the trace's
"arrived and not yet done" by the units still waiting, and a unit that waits ``w``
runs ``w`` less before the replay's end. So the bound is not the LP integrated over the
trace's alive sets (a scheduler that holds work back could pay less than that); it is
made valid for *every* schedule whose units each start within ``max_wait_s`` of their
arrival (their last run, after restarts):

- per tick interval (``tick_s``), the LP of the trace's mean alive demand there is
  solved, giving dual prices ``y_k`` (feasible for every demand, exactly) and the
  head's ``z_k``;
- weak duality: at any instant of any schedule, the cost rate is at least
  ``sum over running units of y_k . d_u - z_k`` (a unit's price rate is the sum of its
  classes' prices times its demand);
- so the cost of any schedule with waits ``<= max_wait_s`` is at least
  ``sum_u min_{0 <= w <= max_wait_s} integral of the unit's price rate over
  [a_u + w, a_u + w + d_u) cut at the replay's end`` minus the head's integral of
  ``z``: computed exactly (the rate is constant per tick, so each unit's minimum is at
  a breakpoint of ``w``).

With ``max_wait_s = 0`` this is the LP integrated over the alive sets (up to each
tick's averaging). Units no worker group can hold (no class) are left out: they are
never placed. The same with the GPUs per node as the price gives GPU-hours.

    b = CoverBound(trace, tick_s=5.0, end_s=3000.0)
    b.at(120.0)      # {"cost": ..., "gpu_hours": ...} valid for waits <= 120 s
    b.at(0.0)        # the LP over the trace's alive sets (every unit starting on arrival)
    replay_bounds(trace, config, cluster, end_s)   # a finished run's, at its own delays
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from vecsched.engine.model.dtypes import IMPLICIT_PREFIX
from vecsched.engine.solver.cover_lp import CoverLP

from .cluster import SCALE
from .trace import HEAD_TYPE, LoadedTrace

_SECONDS_PER_HOUR = 3600.0


def replay_end_s(trace: LoadedTrace, tick_s: float, tail_s: float) -> float:
    """The replay's last tick time (``Replay.run``'s end)."""
    last = float(trace.arrival_s[-1]) if trace.n_units else 0.0
    return int(math.ceil((last + tail_s) / tick_s)) * float(tick_s)


def _fixed_point(trace: LoadedTrace, columns: list) -> tuple[np.ndarray, np.ndarray]:
    """(type capacities (T, R), shape demands (S, R)) as the replay's cluster holds them
    (Ray's fixed point; every node holds one of each implicit slot; a slot's 1/c
    truncated), in resource units."""
    col = {c: i for i, c in enumerate(columns)}
    implicit = np.array([c.startswith(IMPLICIT_PREFIX) for c in columns], dtype=bool)
    cap = np.zeros((len(trace.types), len(columns)), dtype=np.int64)
    for t, spec in enumerate(trace.types):
        for k, v in spec.resources.items():
            cap[t, col[k]] = int(round(float(v) * SCALE))
        cap[t, implicit] = SCALE
    dem = np.zeros((len(trace.shapes), len(columns)), dtype=np.int64)
    for s, shape in enumerate(trace.shapes):
        for k, v in shape.items():
            x = float(v) * SCALE
            dem[s, col[k]] = int(x) if implicit[col[k]] else int(round(x))
    return cap, dem


class CoverBound:
    """The lower bounds of one loaded trace on one tick grid (module docstring)."""

    _cache: dict = {}

    @classmethod
    def of(cls, trace: LoadedTrace, tick_s: float, end_s: float) -> "CoverBound":
        """The bound of ``trace`` on this grid, built once per trace object (the suite
        replays one window with several schedulers)."""
        key = (id(trace), float(tick_s), float(end_s))
        hit = cls._cache.get(key)
        if hit is not None and hit[0]() is trace:
            return hit[1]
        b = cls(trace, tick_s, end_s)
        cls._cache = {k: v for k, v in cls._cache.items() if v[0]() is not None}
        cls._cache[key] = (weakref.ref(trace), b)
        return b

    def __init__(self, trace: LoadedTrace, tick_s: float, end_s: float):
        # the trace's arrays, not the trace (``of`` caches by a weak reference to it)
        self.arrival, self.duration = trace.arrival_s, trace.duration_s
        self.unit_shape, self.n_shapes = trace.unit_shape, len(trace.shapes)
        self.names = [t.name for t in trace.types]
        self.prices = dict(trace.prices)
        self.gpu_col = trace.columns.index("GPU") if "GPU" in trace.columns else None
        self.tick_s = float(tick_s)
        self.K = max(int(round(end_s / self.tick_s)), 1)
        self.end_s = self.K * self.tick_s
        columns = trace.columns
        cap_fp, dem_fp = _fixed_point(trace, columns)
        self.cap = cap_fp / SCALE
        self.dem = dem_fp / SCALE
        fits = (dem_fp[:, None, :] <= cap_fp[None, :, :]).all(axis=2)             # (S, T)
        shapes_used = np.unique(trace.unit_shape)
        placeable = shapes_used[fits[shapes_used].any(axis=1)]
        # classes: the whole set of types, then each distinct set of types a shape fits
        sets = {tuple(np.ones(len(trace.types), dtype=bool))}
        sets.update(tuple(fits[s]) for s in placeable)
        self.member = np.array(sorted(sets, key=lambda m: (-sum(m), m)), dtype=bool)  # (G, T)
        # shape s counts in class g when every type it fits is in g
        self.in_class = ~(fits[:, None, :] & ~self.member[None, :, :]).any(axis=2)   # (S, G)
        self.in_class[~fits.any(axis=1)] = False
        keep = fits[trace.unit_shape].any(axis=1)
        self.units = np.flatnonzero(keep)
        self.left_out = int((~keep).sum())
        self._duals = {}

    # ---- the trace's alive demand --------------------------------------------------------
    def _unit_seconds(self) -> np.ndarray:
        """(K, S): seconds of each tick interval the trace's units of each shape are
        alive, summed over units (arrival to arrival + duration, cut at the end)."""
        tau, K, S = self.tick_s, self.K, self.n_shapes
        a = self.arrival[self.units]
        e = np.minimum(a + self.duration[self.units], self.end_s)
        s = self.unit_shape[self.units]
        live = e > a
        a, e, s = a[live], e[live], s[live]
        out = np.zeros((K + 1, S))
        # G(x) = seconds alive before x is piecewise linear; accumulate on the grid
        ka, ke = np.floor(a / tau).astype(int), np.floor(e / tau).astype(int)
        same = ka == ke
        np.add.at(out, (ka[same], s[same]), (e - a)[same])
        d = ~same
        np.add.at(out, (ka[d], s[d]), ((ka[d] + 1) * tau - a[d]))
        np.add.at(out, (ke[d], s[d]), (e[d] - ke[d] * tau))
        full = np.zeros((K + 2, S))
        np.add.at(full, (ka[d] + 1, s[d]), tau)
        np.add.at(full, (ke[d], s[d]), -tau)
        out += np.cumsum(full, axis=0)[:K + 1]
        return out[:K]

    def _lp(self, what: str):
        """(duals y (K, G, R), z (K, T), primal values (K,), LP) for 'cost' or 'gpu'."""
        if what in self._duals:
            return self._duals[what]
        names = self.names
        if what == "cost":
            price = np.array([0.0 if n == HEAD_TYPE or self.prices.get(n) is None
                              else float(self.prices[n]) for n in names])
        else:
            price = (self.cap[:, self.gpu_col].copy() if self.gpu_col is not None
                     else np.zeros(len(names)))
        upper = np.array([1.0 if n == HEAD_TYPE else np.inf for n in names])
        lp = CoverLP(self.cap, price, upper, self.member)
        mean = self._unit_seconds() / self.tick_s                                   # (K, S)
        demand = np.einsum("ks,sg,sr->kgr", mean, self.in_class.astype(np.float64), self.dem)
        res = lp.solve(demand)
        self._duals[what] = (res, lp)
        return self._duals[what]

    # ---- the bound -----------------------------------------------------------------------
    def at(self, max_wait_s=0.0) -> dict:
        """{"cost": ..., "gpu_hours": ...}: valid for every schedule whose units each
        start within ``max_wait_s`` (a number, or one per unit of the trace) of their
        arrival; "cost" is None when no worker group has a price."""
        priced = any(v is not None for v in self.prices.values())
        out = {"cost": self._bound("cost", max_wait_s) if priced else None,
               "gpu_hours": self._bound("gpu", max_wait_s)}
        return out

    def lp_integral(self) -> dict:
        """The LP's optimum integrated over the tick grid at the trace's mean alive
        demand (what ``at(0)`` certifies, up to the solver's tolerance)."""
        h = self.tick_s / _SECONDS_PER_HOUR
        return {k: float(self._lp(w)[0].value.sum() * h) for k, w in
                (("cost", "cost"), ("gpu_hours", "gpu"))}

    def lp_mix(self) -> dict:
        """Node-hours of each worker group in the cost LP's optimal mix, integrated over
        the ticks (where the limit puts its capacity; ``bench/where_work_runs.py``)."""
        h = self.tick_s / _SECONDS_PER_HOUR
        x = self._lp("cost")[0].x
        return {n: float(x[:, t].sum() * h) for t, n in enumerate(self.names)}

    def lp_by_period(self, split_s: float) -> dict:
        """{"cost": (before, after), "gpu": (before, after)}: the trace's LP optimum
        integrated over the ticks before ``split_s`` and from it on (``excess.py``)."""
        h = self.tick_s / _SECONDS_PER_HOUR
        cut = int(np.clip(np.ceil(split_s / self.tick_s), 0, self.K))
        out = {}
        for what in ("cost", "gpu"):
            v = self._lp(what)[0].value
            out[what] = (float(v[:cut].sum() * h), float(v[cut:].sum() * h))
        return out

    def _bound(self, what: str, max_wait_s) -> float:
        res, lp = self._lp(what)
        tau, K = self.tick_s, self.K
        h = tau / _SECONDS_PER_HOUR
        # price rate of each shape per tick: its classes' duals . its demand
        rate = np.einsum("kgr,sg,sr->ks", res.y, self.in_class.astype(np.float64), self.dem)
        cum = np.concatenate([np.zeros((1, rate.shape[1])), np.cumsum(rate * h, axis=0)])
        grid = np.arange(K + 1) * tau
        wait = np.broadcast_to(np.asarray(max_wait_s, dtype=np.float64), self.arrival.shape)
        if np.any(~np.isfinite(wait)) or np.any(wait < 0):
            raise ValueError("max_wait_s must be finite and >= 0")
        total = 0.0
        shape = self.unit_shape[self.units]
        for s in np.unique(shape):
            u = self.units[shape == s]
            total += _min_shifted(cum[:, s], grid, self.arrival[u], self.duration[u],
                                  wait[u], tau).sum()
        finite = np.where(np.isfinite(lp.upper), lp.upper, 0.0)
        return float(total - (res.z @ finite).sum() * h)


def _min_shifted(cum: np.ndarray, grid: np.ndarray, a: np.ndarray, d: np.ndarray,
                 wait: np.ndarray, tau: float) -> np.ndarray:
    """Per unit, the least integral of a piecewise-constant rate (``cum`` its integral
    on ``grid``) over [a + w, a + w + d) cut at the grid's end, for w in [0, wait]: the
    integral is linear in w between the points where either end crosses a grid point,
    so the minimum is at w = 0, w = wait or one of those."""
    end = grid[-1]
    J = int(math.ceil(float(wait.max(initial=0.0)) / tau)) + 1
    j = np.arange(J)[None, :] * tau
    first = (np.ceil(a / tau) * tau - a)[:, None] + j
    second = (np.ceil((a + d) / tau) * tau - a - d)[:, None] + j
    w = np.concatenate([np.zeros((a.size, 1)), wait[:, None], first, second], axis=1)
    w = np.minimum(w, wait[:, None])
    start = np.minimum(a[:, None] + w, end)
    stop = np.minimum(a[:, None] + w + d[:, None], end)
    return (np.interp(stop, grid, cum) - np.interp(start, grid, cum)).min(axis=1)


# ---- a finished replay -------------------------------------------------------------------

def start_delays(trace: LoadedTrace, cluster, end_s: float) -> np.ndarray:
    """(U,) seconds from each unit's arrival to the start of its last run in a finished
    replay (its ``cluster``); a unit still pending at the end counts as starting at the
    end."""
    c, tr = cluster, trace
    start = np.where(np.isnan(c.placed_at), end_s, c.placed_at)
    pending = [u for q in c.queues for u in q]
    pending += [int(u) for g in c.gang_pending for u in tr.gangs.members(g)]
    start[np.asarray(pending, dtype=np.int64)] = end_s
    return np.maximum(start - tr.arrival_s, 0.0)


def replay_bounds(trace: LoadedTrace, config, cluster, end_s: float) -> dict:
    """The bounds of a finished replay of ``trace`` under ``config`` (its ``cluster``;
    ``summarize``'s keys): ``cost_lower_bound`` and ``gpu_hours_lower_bound``, valid
    for this run (each unit's own start delay), and ``lower_bound`` with the trace's LP
    integral (every unit starting on arrival) and the run's longest start delay."""
    bound = CoverBound.of(trace, config.tick_s, end_s)
    delays = start_delays(trace, cluster, end_s)
    run = bound.at(delays)
    lp = bound.at(0.0)
    return {"cost_lower_bound": run["cost"], "gpu_hours_lower_bound": run["gpu_hours"],
            "lower_bound": {"cost_trace_lp": lp["cost"], "gpu_hours_trace_lp": lp["gpu_hours"],
                            "max_start_delay_s": float(delays.max(initial=0.0)),
                            "units_left_out": bound.left_out}}


def common_bounds(metrics: list) -> None:
    """Set every run's ``cost_lower_bound`` / ``gpu_hours_lower_bound`` (metrics dicts
    of replays of one trace window) to the least over the runs: each run's own bound is
    valid for it, so their minimum is valid for every one of them."""
    for key in ("cost_lower_bound", "gpu_hours_lower_bound"):
        vals = [m[key] for m in metrics if m.get(key) is not None]
        for m in metrics:
            if vals and key in m:
                m[key] = min(vals)

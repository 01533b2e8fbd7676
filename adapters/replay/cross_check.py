"""``vecsched replay --cross-check``: every scheduler's placement-group decisions
against the CP-SAT optimum (``vecsched.engine.solver``), tick by tick, off the tick path.

On every tick with pending placement groups, after the scheduler decided (its tick
timed and applied as usual), the cross-check asks the question the model answers:
*given this tick's cluster - free capacity of running nodes, booting nodes at their
config, launch room per type and overall - and its pending placement groups alone,
what is launched?*

- **The scheduler's answer**: a second object of the same scheduler (``make(name)``,
  same prices, same simulated clock) decides the tick's state with the plain demand
  removed. Every scheduler here packs placement groups before plain demand (Ray's
  order, which the engine, the baseline and the efficient mode follow), so this is the
  part of its decision the groups caused. Untimed; the replay's own scheduler object is
  never called twice.
- **The model's**: ``build_instance(problem, include_plain=False)`` with the same
  prices (the worker groups', else 1 + GPUs per node-hour), solved by CP-SAT with one
  worker, seed 0 and ``dtime`` deterministic seconds (a work limit: reproducible), its
  proven lower bound kept whether or not it proved the optimum. Identical instances
  (a group waiting on booting nodes) are solved once.
- **The value** of an answer is the model's objective (``vecsched.engine.solver.decision_value``):
  ``big`` per bundle of a group left unplaced, plus the price of the launches beyond
  ``min_workers``. **gap** = (value - bound) / max(bound, the cheapest launchable
  type's price): relative to the optimum, but counted in at least one node when the
  optimum launches nothing (a plain ratio would be infinite there).

Ticks whose decisions the model cannot compare (``Instance.notes``: a constraint,
IPPR, outdated nodes, a type over its max) are counted, not checked.

``cross_check`` in ``summary.json``, per scheduler: ``ticks_checked``,
``optimal_ticks`` (value = a proven optimum), ``gap_p50``, ``gap_max``,
``within_2pct``, ``proven_ticks`` (the solver proved its optimum), ``free_ticks_paid``
(ticks the optimum launches nothing and the scheduler launched), ``launch_ticks``,
``launch_gap_p50``, ``launch_within_2pct`` (the same over the ticks whose optimum
launches something: most ticks' groups fit nodes already there or booting, where every
scheduler is trivially optimal), ``not_comparable``, ``solve_s`` (CP-SAT wall time in
all), ``seconds`` (the whole cross-check).
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import OrderedDict
from typing import Callable

import numpy as np

from .interface import ForwardingScheduler

DTIME = 5.0              # deterministic seconds per solve
_MEMO = 256              # solved instances kept per scheduler


def for_command(enabled: bool, make: Callable):
    """``vecsched replay``'s checker: None when off; a clear exit without OR-Tools."""
    if not enabled:
        return None
    from vecsched.engine.solver import have_ortools
    if not have_ortools():
        raise SystemExit("vecsched replay --cross-check: needs OR-Tools "
                         "(pip install 'vecsched[solver]')")
    return CrossCheck(make)


class CrossCheck:
    """Makes cross-checked schedulers (``make``, the registry's signature) and
    collects their figures (``summary``)."""

    def __init__(self, make: Callable, dtime: float = DTIME):
        self._make = make
        self.dtime = float(dtime)
        self.checked: dict[str, "CrossChecked"] = {}

    def make(self, name: str, *, check_ray: bool = False):
        sched = CrossChecked(self._make(name, check_ray=check_ray), self._make(name),
                             self.dtime)
        self.checked[name] = sched
        return sched

    def summary(self) -> dict:
        return {name: s.summary() for name, s in self.checked.items()}


@dataclasses.dataclass
class TickCheck:
    t_s: float
    bundles: int
    value: int
    bound: float
    optimum: float
    status: str
    gap: float
    launched: int            # new nodes the scheduler's answer launched


class CrossChecked(ForwardingScheduler):
    """A replay scheduler whose ``after`` also cross-checks the tick (see the module
    docstring). Everything else is the inner scheduler's (``ForwardingScheduler``)."""

    def __init__(self, inner, shadow, dtime: float):
        super().__init__(inner)
        self.shadow, self.dtime = shadow, dtime
        self.ticks: list[TickCheck] = []
        self.not_comparable = 0
        self.solve_s = 0.0
        self.total_s = 0.0
        self._memo: OrderedDict = OrderedDict()
        self._prices = None
        self._now = lambda: 0

    def use_trace(self, trace) -> None:
        self._prices = trace.prices
        self.inner.use_trace(trace)
        self.shadow.use_trace(trace)

    def start(self, clock) -> None:
        self._now = clock
        self.inner.start(clock)
        self.shadow.start(clock)

    def after(self, state, decision) -> None:
        self.inner.after(state, decision)
        if state.gangs:
            t0 = time.perf_counter()
            try:
                self._check(state)
            finally:
                self.total_s += time.perf_counter() - t0

    # ---- the check ---------------------------------------------------------------------------
    def _check(self, state) -> None:
        from vecsched.engine.solver import build_instance, decision_value, solve, type_cost

        from .schedulers import _problem
        alone = dataclasses.replace(state, requests=[])
        p = _problem(alone)
        inst = build_instance(p, include_plain=False, prices=self._prices)
        if not inst.comparable:
            self.not_comparable += 1
            return
        answer = self.shadow.decide(alone)
        launch = np.zeros(p.T, np.int64)
        for t, c in answer.launches:
            launch[p.type_names.index(t)] += int(c)
        bad = {k for k, v in answer.infeasible_gangs.items() if v}
        placed = np.asarray([name not in bad for name in p.gang_names], bool)
        value = decision_value(inst, launch, placed)
        res = self._solve(inst, solve)
        cost = type_cost(inst)
        room = (inst.type_budget > 0) & (cost > 0)
        floor = float(cost[room].min()) if room.any() else 1.0
        gap = (value - res.bound) / max(res.bound, floor)
        self.ticks.append(TickCheck(
            t_s=self._now() / 1e9, bundles=inst.n_bundles, value=int(value),
            bound=float(res.bound), optimum=float(res.objective), status=res.status,
            gap=float(max(gap, 0.0)), launched=int(launch.sum())))

    def _solve(self, inst, solve):
        key = _instance_key(inst)
        hit = self._memo.get(key)
        if hit is not None:
            self._memo.move_to_end(key)
            return hit
        t0 = time.perf_counter()
        res = solve(inst, deterministic_limit=self.dtime)
        self.solve_s += time.perf_counter() - t0
        self._memo[key] = res
        if len(self._memo) > _MEMO:
            self._memo.popitem(last=False)
        return res

    def summary(self) -> dict:
        ticks = self.ticks
        gaps = np.asarray([c.gap for c in ticks], float)
        optimal = sum(c.status == "OPTIMAL" and c.value == c.optimum for c in ticks)
        paid = np.asarray([c.gap for c in ticks if c.bound > 0], float)
        return {
            "ticks_checked": len(ticks),
            "optimal_ticks": int(optimal),
            "gap_p50": float(np.median(gaps)) if len(gaps) else 0.0,
            "gap_max": float(gaps.max()) if len(gaps) else 0.0,
            "within_2pct": float(np.mean(gaps <= 0.02)) if len(gaps) else 1.0,
            "proven_ticks": int(sum(c.status == "OPTIMAL" for c in ticks)),
            "free_ticks_paid": int(sum(c.bound == 0 and c.value > 0 for c in ticks)),
            "launch_ticks": int(len(paid)),
            "launch_gap_p50": float(np.median(paid)) if len(paid) else 0.0,
            "launch_within_2pct": float(np.mean(paid <= 0.02)) if len(paid) else 1.0,
            "bundles_max": int(max((c.bundles for c in ticks), default=0)),
            "not_comparable": self.not_comparable,
            "solve_s": self.solve_s,
            "seconds": self.total_s,
            "dtime": self.dtime,
        }


def _instance_key(inst) -> bytes:
    """A digest of everything the model reads (two equal instances solve alike)."""
    h = hashlib.blake2b(digest_size=20)
    for a in (inst.qty, inst.mult, inst.gang, inst.spread, inst.gang_bundles, inst.cap,
              inst.cost, inst.count, inst.bins, inst.dominated, inst.kind, inst.ctype,
              inst.compat, inst.fitmax, inst.forced, inst.type_budget):
        a = np.ascontiguousarray(a)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    h.update(np.asarray([inst.global_budget, inst.big], np.int64).tobytes())
    for b in inst.bundle_item:
        h.update(np.ascontiguousarray(b).tobytes())
    return h.digest()


def table(summary: dict):
    """The cross-check as a rich Table (the command line report)."""
    from rich.table import Table
    t = Table(title="Cross-check: placement-group decisions against the CP-SAT optimum")
    for col in ("scheduler", "ticks checked", "optimal", "within 2 %", "gap p50", "gap max",
                "ticks launching: within 2 % (gap p50)", "solver proved", "CP-SAT time"):
        t.add_column(col, justify="left" if col == "scheduler" else "right")
    for name, s in summary.items():
        t.add_row(name, str(s["ticks_checked"]), str(s["optimal_ticks"]),
                  f"{s['within_2pct']:.0%}", f"{s['gap_p50']:.1%}", f"{s['gap_max']:.1%}",
                  f"{s['launch_ticks']}: {s['launch_within_2pct']:.0%} "
                  f"({s['launch_gap_p50']:.1%})",
                  f"{s['proven_ticks']}/{s['ticks_checked']}", f"{s['solve_s']:.1f} s")
    return t


__all__ = ["CrossCheck", "CrossChecked", "TickCheck", "DTIME", "for_command", "table"]

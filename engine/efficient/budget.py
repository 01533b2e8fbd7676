"""The tick budget of the efficient mode (``EfficientOptions.tick_budget_s``).

Two parts:

- ``Allowance``: what the CP-SAT steps (the gang packing, then the neighbourhood
  search) may spend, in work units only, so the same tick gets the same plan on any
  machine at any load. The budget is wall seconds *of the machine the constants
  were measured on* (the README's 2-core machine, with other jobs on it;
  ``bench/tick_budget.py``, docs/efficient.md): the heuristics' share is estimated
  from the tick's size (alive nodes, unit placements of the passes), and every
  solve is charged its model size (variables: items times the bins each may go on,
  which is what building the model costs), a fixed cost, one per alive node (the
  state the step copies) and its deterministic seconds times the measured wall
  seconds per deterministic second. A solve is given at most what is left as its
  deterministic limit; one whose model could not even be built within what is left
  is not started (its instance, which says how large the model would be, is charged
  a small fixed cost). Without a budget the allowance is unlimited and the options'
  own limits (``cpsat_dtime``, ``lns_dtime``) apply as they are.
- ``Guard``: the wall-clock backstop for a slower or busier machine, opt-in with an
  injected ``clock``. It says how much wall time the tick has left, and counts every
  time it cut a CP-SAT step short (``fired``), which the tick reports as
  ``stats["budget_guard"]``. Without a clock it never fires and never limits anything.
"""
from __future__ import annotations

import math
from typing import Optional

from .options import EfficientOptions

# Measured with bench/tick_budget.py on the README's machine (docs/efficient.md,
# "The efficient mode's own CP-SAT step and neighbourhood search").
WALL_PER_DTIME = 3.0        # wall seconds per CP-SAT deterministic second (median 3.0)
SOLVE_BASE_S = 0.02         # per solve: instance, solver start-up, read-back, the LNS step,
SOLVE_NODE_S = 2.0e-5       # and per alive node (the LNS step's state copies, the instance)
CELL_S = 1.5e-5             # per model variable (item x bin it may go on): building it
INSTANCE_S = 0.01           # the instance (items, bin classes) of a model then not solved
HEUR_BASE_S = 0.03          # the heuristics, the bound and the rest of the tick: fixed,
HEUR_NODE_S = 3.0e-5        # per alive node,
HEUR_UNIT_S = 8.0e-5        # per unit placement of the heuristic passes (gang_pass_work's units)
CPSAT_STEP_SHARE = 2.0 / 3.0   # of the steps' allowance, the gang packing's; the rest
                               # (and what it leaves) the neighbourhood search's
MIN_DTIME = 0.002           # a solve given less than this is not started


def heuristics_estimate(nodes: int, pass_work: int) -> float:
    """The estimated seconds of the heuristics and the rest of the tick."""
    return HEUR_BASE_S + HEUR_NODE_S * nodes + HEUR_UNIT_S * pass_work


def model_cells(inst) -> int:
    """The model's size: per item, the materialised bins it may go on."""
    ok = inst.compat & (inst.fitmax > 0)
    return int((ok * inst.bins[None, :]).sum())


class Allowance:
    """The CP-SAT steps' allowance of one tick, in estimated seconds computed from
    work units only (module docstring); unlimited without a budget."""

    def __init__(self, budget_s: Optional[float], nodes: int = 0, pass_work: int = 0):
        self.budgeted = budget_s is not None
        self.nodes = nodes
        self.left = math.inf
        if self.budgeted:
            self.left = max(0.0, budget_s - heuristics_estimate(nodes, pass_work))
        self.total = self.left

    def fixed_cost(self, cells: int) -> float:
        """A solve's estimated seconds besides its deterministic work: building its
        model of ``cells`` variables and the step around it."""
        return SOLVE_BASE_S + SOLVE_NODE_S * self.nodes + CELL_S * cells

    def limit(self, cells: int, cap: float, share: float = 1.0) -> float:
        """The deterministic limit for a solve of ``cells`` variables, at most ``cap``,
        within ``share`` of the allowance as first given (and what is left): 0 when
        the solve cannot be afforded (it should not start)."""
        if not self.budgeted:
            return cap
        room = min(self.left, share * self.total) - self.fixed_cost(cells)
        dt = min(cap, room / WALL_PER_DTIME)
        return dt if dt >= MIN_DTIME else 0.0

    def charge(self, cells: int, dtime: float) -> None:
        """Count a solve done (its model built, ``dtime`` deterministic seconds)."""
        if self.budgeted:
            self.left = max(0.0, self.left - self.fixed_cost(cells) - WALL_PER_DTIME * dtime)

    def refuse(self) -> None:
        """Count an instance built and then not solved (its model would not fit what
        is left): the instance only, the model is never built."""
        if self.budgeted:
            self.left = max(0.0, self.left - INSTANCE_S)


class Guard:
    """The tick's wall-clock guard (module docstring); started at construction."""

    def __init__(self, opts: EfficientOptions):
        self.budget = opts.tick_budget_s
        self.clock = opts.clock if self.budget is not None else None
        self.start = self.clock() if self.clock is not None else 0.0
        self.fired = 0

    def remaining(self) -> Optional[float]:
        """Wall seconds left in the budget (at least 0), or None when unguarded."""
        if self.clock is None:
            return None
        return max(0.0, self.budget - (self.clock() - self.start))

    def spent(self) -> bool:
        """True when the budget's wall time is used up (a step should not start);
        counted as a firing."""
        left = self.remaining()
        if left is not None and left <= 0.0:
            self.fired += 1
            return True
        return False

    def cut(self, status: str) -> None:
        """After a solve given ``remaining()`` as its time limit: count a firing when
        the limit, not the work units or optimality, ended it."""
        if status != "OPTIMAL" and self.remaining() == 0.0:
            self.fired += 1

"""The wall-clock guard of ``EfficientOptions.tick_budget_s``.

The budget itself is spent in CP-SAT's deterministic seconds (``options.cpsat_limit``,
``options.lns_limit``), so plans do not depend on the machine. The guard is the
backstop for a slow or loaded machine: with an injected ``clock`` it says how much
wall time the tick has left, and counts every time it cut a CP-SAT step short
(``fired``), which the tick reports as ``stats["budget_guard"]``. Without a clock or
a budget it never fires and never limits anything.
"""
from __future__ import annotations

from typing import Optional

from .options import EfficientOptions


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

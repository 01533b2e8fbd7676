"""The efficient mode as a replay scheduler (``decide(state) -> Decision``), beside
``adapters.replay.schedulers``'s engine / baseline / ray. It converts the replay's
``TickState`` exactly as those do and runs ``engine.schedule(mode="efficient")``,
pricing types from the worker-group table's ``price`` column when every group
has one (else the engine's proxy: 1 + GPUs per node-hour).
"""
from __future__ import annotations

from typing import Mapping, Optional

from engine import schedule
from engine.efficient import EfficientOptions

from .replay.schedulers import TickState, _Scheduler, _from_plan, _problem


def worker_group_prices(table) -> Optional[dict]:
    """type name -> price per node-hour from a worker-group table, or None when
    any price is null (the bundled tables have none)."""
    if table is None or "price" not in table.column_names:
        return None
    names = table.column("type").to_pylist()
    prices = table.column("price").to_pylist()
    if any(x is None for x in prices):
        return None
    return dict(zip(names, (float(x) for x in prices)))


class EfficientSched(_Scheduler):
    name = "efficient"

    def __init__(self, prices: Optional[Mapping[str, float]] = None,
                 options: Optional[EfficientOptions] = None):
        if options is None:
            options = EfficientOptions(prices=dict(prices) if prices else None)
        self.options = options

    def run(self, state: TickState):
        p = _problem(state)
        return schedule(p, mode="efficient", options=self.options), p

    def decision(self, out, state, _state):
        return _from_plan(out[0], out[1], state)

"""The ray-compat packing against its slow readable twins: a Packer.run per gang and
the Python packing loop (engine/raycompat/packer.py) in place of kernels/gangs.py and
kernels/loop.py; the plans must be equal."""
from __future__ import annotations

import numpy as np

from vecsched.engine import schedule

FIELDS = ("launch", "term_node", "term_cause", "term_value", "infeasible", "infeasible_why",
          "place_slot", "place_run", "place_count", "new_type", "cluster_resources")


def plans_equal(a, b, where):
    for f in FIELDS + ("gang_infeasible", "gang_order"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), (where, f)


def twin_schedule(p, monkeypatch):
    """The plan of the slow readable twins: a Packer.run per gang and the
    Python packing loop, instead of kernels/gangs.py and kernels/loop.py."""
    from vecsched.engine.raycompat import phases
    from vecsched.engine.raycompat.packer import Packer
    monkeypatch.setattr(phases, "GANG_KERNEL", False)
    monkeypatch.setattr(Packer, "kernel", False)
    try:
        return schedule(p)
    finally:
        monkeypatch.setattr(phases, "GANG_KERNEL", True)
        monkeypatch.setattr(Packer, "kernel", True)


def capped_against_twin(specs, slack: int, monkeypatch) -> tuple:
    """Each ``(where, ClusterSpec)``'s Problem, uncapped and with max_num_nodes
    N + slack, scheduled by the kernels and by their slow twins: the plans must
    be equal. Returns (groups, infeasible groups, units placed) over all runs."""
    import dataclasses

    from bench.benchmarks.common import engine_problem

    gangs = infeasible = placed = 0
    for where, spec in specs:
        p = engine_problem(spec)
        for cap in (-1, p.N + slack):
            q = dataclasses.replace(p, max_num_nodes=cap)
            fast = schedule(q)
            plans_equal(fast, twin_schedule(q, monkeypatch), where + (cap,))
            gangs += q.G
            infeasible += int(fast.gang_infeasible.sum())
            placed += int(fast.place_count.sum())
    return gangs, infeasible, placed

"""The gang kernel's shortcuts against its slow twin (a Packer.run per gang):
one candidate per class with the other members chained behind it, and trial
walks kept across gangs of one run (kernels/walkcache.py). Many groups of few
shapes on a cluster with many equal pending nodes reach both."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from engine import schedule

from .test_engine_properties import _plans_equal, _twin_schedule


@pytest.mark.parametrize("scenario", ["saturated", "fragmented"])
def test_gang_kernel_shortcuts_equal_twin(scenario, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from benchmarks.common import cluster_v2, engine_problem

    gangs = infeasible = 0
    for seed in range(2):
        p = engine_problem(cluster_v2(nodes=300, units=300, shapes=6, scenario=scenario,
                                      seed=seed, gangs=250))
        for cap in (-1, p.N + 40):
            q = dataclasses.replace(p, max_num_nodes=cap)
            fast = schedule(q)
            _plans_equal(fast, _twin_schedule(q, monkeypatch), (scenario, seed, cap))
            gangs += q.G
            infeasible += int(fast.gang_infeasible.sum())
    assert gangs == 1000 and 0 < infeasible < gangs

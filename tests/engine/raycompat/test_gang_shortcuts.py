"""The gang kernel's shortcuts against its slow twin (a Packer.run per gang):
one candidate per class with the other members chained behind it, and trial
walks kept across gangs of one run (kernels/walkcache.py). Many groups of few
shapes on a cluster with many equal pending nodes reach both."""
from __future__ import annotations

import pytest

from tests.kits.packer_twin import capped_against_twin


@pytest.mark.parametrize("scenario", ["saturated", "fragmented"])
def test_gang_kernel_shortcuts_equal_twin(scenario, monkeypatch):
    from bench.benchmarks.common import cluster_v2

    specs = [((scenario, seed), cluster_v2(nodes=300, units=300, shapes=6, scenario=scenario,
                                           seed=seed, gangs=250)) for seed in range(2)]
    gangs, infeasible, _ = capped_against_twin(specs, 40, monkeypatch)
    assert gangs == 1000 and 0 < infeasible < gangs

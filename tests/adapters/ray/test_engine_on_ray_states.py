"""The engine's own properties on the differential generator's random states
(tests/kits/raygen.py: labels, selectors, anti-affinity, every gang strategy,
constraints, IPPR, caps, pending and outdated nodes), decoded by the Ray codec. The
engine's tests check the same properties on the engine's generators
(tests/engine/efficient/, tests/engine/raycompat/); these states reach the parts those
generators do not (selectors, anti-affinity), so they are checked here, where Ray and
the codec may be imported."""
from __future__ import annotations

import pytest

pytest.importorskip("ray")

from vecsched.adapters.ray.codec import decode  # noqa: E402
from vecsched.engine import schedule  # noqa: E402
from vecsched.engine.model.validate import check_plan  # noqa: E402

from tests.kits.efficient_checks import (efficient, fallback_plans_like_batched,  # noqa: E402
                                         gangs_valid, primed_masks_equal_one_at_a_time,
                                         same_plan)
from tests.kits.packer_twin import plans_equal, twin_schedule  # noqa: E402
from tests.kits.raygen import make_request  # noqa: E402


@pytest.mark.parametrize("block", range(3))
@pytest.mark.slow
def test_efficient_plans_are_legal_on_the_differential_generators_states(block):
    """No violation at all (not even Ray's quirk Q1), gang packings valid in the
    solver's model, and the same plan twice."""
    for seed in range(block * 100, (block + 1) * 100):
        p = decode(make_request(seed)).problem
        plan = efficient(p)
        assert check_plan(p, plan) == [], (seed, check_plan(p, plan))
        gangs_valid(p, plan, seed)
        same_plan(plan, efficient(p), seed)


def test_ray_compat_kernels_equal_python_packer_on_random_states(monkeypatch):
    """kernels/gangs.py and kernels/loop.py against their slow twins (a Packer.run per
    gang, the Python packing loop), as tests/engine/raycompat/test_engine_properties.py
    does on the benchmark clusters."""
    with_gangs = 0
    for seed in range(300):
        p = decode(make_request(seed, max_nodes=30 if seed % 4 else 80)).problem
        plans_equal(schedule(p), twin_schedule(p, monkeypatch), seed)
        with_gangs += p.G > 0 and not p.node_ippr["attached"].any()
    assert with_gangs >= 100


def test_efficient_per_unit_fallback_plans_like_the_batched_path(monkeypatch):
    """engine/efficient/improve.py's fallback for selectors that name an anti-affinity
    key, forced on, plans as the batched path (tests/engine/efficient/
    test_gang_speed_improve.py does it on gang ticks)."""
    problems = [p for p in (decode(make_request(s)).problem for s in range(30)) if p.G]
    assert fallback_plans_like_batched(problems, monkeypatch) > 0     # 4 when written


def test_efficient_primed_type_masks_equal_the_one_at_a_time_ones():
    """engine/efficient/place.prime_type_ok against ``_type_ok`` one pair at a time,
    on states with label selectors, anti-affinity, unconfigured types and merged
    STRICT_PACK items."""
    problems = (p for p in (decode(make_request(s)).problem for s in range(120)) if p.G)
    pairs, with_sel, with_anti = primed_masks_equal_one_at_a_time(problems)
    assert pairs > 400 and with_sel > 50 and with_anti > 50    # each part is covered

"""engine/efficient/place.prime_type_ok (which types may take each gang item, for all
items of a tick at once) gives exactly what ``_type_ok`` computes one pair at a time, on
gang ticks. The states with label selectors, anti-affinity, unconfigured types and
merged STRICT_PACK items come from the differential generator through the Ray codec:
tests/adapters/ray/test_engine_on_ray_states.py runs the same check on them."""
from __future__ import annotations

from tests.kits.efficient_checks import primed_masks_equal_one_at_a_time
from tests.kits.ganggen import gang_tick


def test_primed_masks_equal_the_one_at_a_time_ones():
    pairs, with_sel, with_anti = primed_masks_equal_one_at_a_time(
        gang_tick(seed, bundles=60) for seed in range(4))
    assert pairs > 60 and with_anti > 10          # 85 pairs, 28 with anti-affinity when written

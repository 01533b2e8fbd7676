"""What the scheduler supplies per tick for consolidation (the stability window's held
nodes, the count of nodes being disrupted, a victim order) is not a deployment's to set
in ``VECSCHED_EFFICIENT_OPTIONS``; the quiet window is."""
from __future__ import annotations

import pytest

pytest.importorskip("ray.autoscaler.v2.scheduler", reason="the installer needs ray")


def test_a_deployment_cannot_set_what_the_scheduler_supplies():
    from vecsched.adapters.ray.efficient_settings import (InstallError, efficient_options,
                                                          settable_fields)
    for name in ("consolidate_disrupting", "consolidate_order", "consolidate_hold"):
        assert name not in settable_fields()
        with pytest.raises(InstallError, match=name):
            efficient_options("efficient", '{"%s": 1}' % name)
    assert "consolidate_quiet_s" in settable_fields()
    assert efficient_options("efficient", '{"consolidate": 0.25, "consolidate_quiet_s": 120}') \
        .consolidate_quiet_s == 120

"""The availability memory (engine/tick/availability.py): pure, on the caller's clock."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vecsched.engine.tick import AvailabilityMemory, AvailabilityOptions


def test_a_stockout_holds_for_the_ttl_and_failed_retries_double_it():
    m = AvailabilityMemory(AvailabilityOptions(ttl_s=180, backoff=2, max_ttl_s=500))
    m.refused("g", 100.0)
    assert m.unavailable(100.0) == {"g"} and m.unavailable(279.9) == {"g"}
    assert m.unavailable(280.0) == frozenset()
    m.refused("g", 150.0)                       # asked before the hold: no change
    assert m.held_until("g") == 280.0
    m.refused("g", 300.0)                       # the retry failed
    assert m.held_until("g") == 660.0
    m.refused("g", 700.0)                       # capped at max_ttl_s
    assert m.held_until("g") == 1200.0
    m.succeeded("g", 1300.0)
    m.refused("g", 1400.0)                      # a landed launch reset the escalation
    assert m.held_until("g") == 1580.0
    assert m.counts["stockouts"] == 5 and m.counts["holds"] == 4


def test_plain_errors_hold_briefly_or_never():
    m = AvailabilityMemory(AvailabilityOptions(error_ttl_s=30))
    m.refused("g", 10.0, stockout=False)
    assert m.held_until("g") == 40.0
    off = AvailabilityMemory(AvailabilityOptions(error_ttl_s=0))
    off.refused("g", 10.0, stockout=False)
    assert off.unavailable(10.0) == frozenset() and off.counts["launch_failures"] == 1
    assert off.held_until("h") == -math.inf


def test_interruptions_are_counted_over_the_window_and_priced():
    m = AvailabilityMemory(AvailabilityOptions(interruption_window_s=3600,
                                               interruption_cost_h=0.5))
    for t in (0.0, 100.0, 3000.0):
        m.interrupted("spot", t)
    assert m.interruptions(3500.0) == {"spot": 3}
    assert m.interruptions(3650.0) == {"spot": 2}
    prices = m.interruption_prices({"spot": 2.0, "od": 3.0}, {"spot": 2}, 3650.0)
    assert prices == {"spot": 2.0 * (1 + 2 / 2 * 0.5), "od": 3.0}
    assert m.interruption_prices({"spot": 2.0}, {}, 9000.0) == {"spot": 2.0}


def test_same_calls_same_answers():
    def run():
        m = AvailabilityMemory()
        for i in range(50):
            m.refused(f"g{i % 3}", 7.0 * i, stockout=i % 2 == 0)
            if i % 7 == 0:
                m.succeeded(f"g{i % 3}", 7.0 * i)
        return [m.held_until(f"g{k}") for k in range(3)], m.counts
    assert run() == run()


@pytest.mark.parametrize("bad", [dict(ttl_s=-1), dict(backoff=0.5), dict(max_ttl_s=float("nan")),
                                 dict(error_ttl_s="30"), dict(pending_stockout_s=-5),
                                 dict(ttl_s=300, max_ttl_s=60), dict(error_ttl_s=90, max_ttl_s=60)])
def test_options_are_checked(bad):
    with pytest.raises(ValueError, match="availability."):
        AvailabilityOptions(**bad)


def test_numpy_numbers_are_numbers():
    o = AvailabilityOptions(ttl_s=np.float32(60), max_ttl_s=np.int64(600))
    assert (o.ttl_s, o.max_ttl_s) == (60, 600)


@pytest.mark.parametrize("backoff", [2.0, 1e300])
def test_a_group_refused_for_weeks_stays_held_at_the_longest_hold(backoff):
    """Every refusal after a hold expired is one more strike: 2.0 ** 1024 (or 1e300 **
    2) is no float, and the hold must stay max_ttl_s instead of raising (the
    scheduler would then fail every tick, re-reading the same refusal)."""
    o = AvailabilityOptions(ttl_s=180, backoff=backoff, max_ttl_s=1800)
    m = AvailabilityMemory(o)
    at = 0.0
    for _ in range(1100):
        m.refused("g", at)
        at = m.held_until("g")                 # the retry fails as soon as it may
    assert m.counts["holds"] == 1100
    m.refused("g", at)
    assert m.held_until("g") == at + 1800.0 and m.unavailable(at + 1799.0) == {"g"}


def test_a_group_probes_after_its_hold_until_a_launch_lands():
    m = AvailabilityMemory(AvailabilityOptions(ttl_s=100, probe_interval_s=30))
    m.refused("g", 0.0)
    assert m.probing(20.0) == frozenset() and m.unavailable(20.0) == {"g"}
    assert m.probing(50.0) == {"g"} and m.unavailable(50.0) == {"g"}   # held, due a probe
    assert m.probing(100.0) == {"g"} and m.unavailable(100.0) == frozenset()
    m.succeeded("g", 120.0)
    assert m.probing(130.0) == frozenset()


def test_a_stockout_teaches_the_groups_cap_and_the_cap_keeps_it_out():
    o = AvailabilityOptions(ttl_s=100, probe_interval_s=30, backoff=2, cap_ttl_s=1000)
    m = AvailabilityMemory(o)
    m.refused("g", 0.0)
    m.refused("g", 0.0)                         # the same batch: two over the cap
    m.observe({"g": 10, "h": 3}, 5.0)           # it holds 10 (in flight included)
    assert m.unavailable(150.0) == {"g"}        # past the hold, at its cap: still out
    assert m.room(150.0) == {}
    m.observe({"g": 8}, 200.0)                  # two of its nodes went: room for two
    assert m.unavailable(200.0) == frozenset() and m.room(200.0) == {"g": 2}
    assert m.probing(200.0) == frozenset()      # no probe needed below the cap
    m.observe({"g": 10}, 210.0)
    assert m.unavailable(210.0) == {"g"} and m.room(210.0) == {}
    m.observe({"g": 11}, 220.0)                 # more than the cap: capacity grew
    assert m.unavailable(220.0) == frozenset() and m.room(220.0) == {}


def test_a_learned_cap_is_forgotten_after_cap_ttl_and_never_learned_from_plain_errors():
    m = AvailabilityMemory(AvailabilityOptions(ttl_s=100, cap_ttl_s=1000))
    m.refused("g", 0.0)
    m.refused("e", 0.0, stockout=False)         # an error that names no capacity
    m.observe({"g": 4, "e": 4}, 1.0)
    assert m.unavailable(500.0) == {"g"}
    m.observe({"g": 4, "e": 4}, 1000.0)
    assert m.unavailable(1000.0) == frozenset()         # one retry, the cap forgotten
    assert m.probing(1000.0) == {"g", "e"}              # hold over, nothing landed since
    off = AvailabilityMemory(AvailabilityOptions(ttl_s=100, cap_ttl_s=0))
    off.refused("g", 0.0)
    off.observe({"g": 4}, 1.0)
    assert off.unavailable(150.0) == frozenset()        # caps off: the old retry


def test_probes_at_a_cap_back_off_while_they_are_refused():
    m = AvailabilityMemory(AvailabilityOptions(ttl_s=100, probe_interval_s=30, backoff=2,
                                               max_ttl_s=1800, cap_ttl_s=10_000))
    m.refused("g", 0.0)
    m.observe({"g": 2}, 1.0)
    assert m.probing(29.0) == frozenset() and m.probing(30.0) == {"g"}
    m.refused("g", 30.0)                        # the probe was refused
    m.observe({"g": 2}, 31.0)
    assert m.probing(89.0) == frozenset() and m.probing(90.0) == {"g"}    # 60 s now
    m.refused("g", 90.0)
    m.observe({"g": 2}, 91.0)
    assert m.probing(209.0) == frozenset() and m.probing(210.0) == {"g"}  # 120 s
    m.succeeded("g", 300.0)                     # something of it landed: back to 30 s
    assert m.probing(330.0) == {"g"}


@pytest.mark.parametrize("backoff", [2.0, 1e300])
def test_probes_refused_for_weeks_at_a_cap_wait_the_longest_hold(backoff):
    """Each refused probe at a learned cap doubles the wait: after 1,100 of them the
    wait must stay max_ttl_s (2.0 ** 1100 is no float) instead of raising every tick."""
    m = AvailabilityMemory(AvailabilityOptions(ttl_s=100, probe_interval_s=30, backoff=backoff,
                                               max_ttl_s=1800, cap_ttl_s=1e9))
    at = 0.0
    m.refused("g", at)
    m.observe({"g": 2}, at + 1.0)
    for _ in range(1100):
        at += 1800.0
        assert m.probing(at) == {"g"}
        m.refused("g", at)
        m.observe({"g": 2}, at + 1.0)
    assert m.probing(at + 1799.0) == frozenset() and m.probing(at + 1800.0) == {"g"}


def test_live_counts_are_a_problems_nodes_per_group():
    from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
    from vecsched.engine.tick import live_counts
    types = [NodeTypeSpec("a", {"CPU": 4.0}, max_workers=5),
             NodeTypeSpec("b", {"CPU": 8.0}, max_workers=5)]
    from vecsched.engine.model.dtypes import Status
    nodes = [NodeSpec("a", status=Status.QUEUED), NodeSpec("a", total={"CPU": 4.0},
                                                          available={"CPU": 4.0})]
    p = build_problem(types, nodes, [])
    assert live_counts(p) == {"a": 2}

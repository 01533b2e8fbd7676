"""Targeted regression tests for demand placement: request_resources() (§3.6),
placement groups (§3.7), the core routine's request order, round robin,
tie-breakers, GPU avoidance and label selectors (§4.1, §4.5, §4.6, §4.8, §4.9).

Each test: Ray and the engine agree, and the outcome is the one the spec predicts.
"""
from __future__ import annotations

import pytest

from tests.kits.semantics_kit import (IDLE, IN, NOT_IN, RAY_RUNNING, both, cfg, constraint, gang,
                            infeasible, infeasible_gangs, launches, pg_label, request, rr,
                            running, selector, terms)

A = {"CPU": 4.0}
BUSY = {"CPU": 0.0}
HEAD = {"CPU": 2.0}


def head():
    return running("h", "head", HEAD, BUSY, head=True)


def types(mx=10, **kw):
    return [cfg("head", HEAD, mx=1), cfg("a", A, mx=mx, **kw)]


# ---- §3.6 request_resources() --------------------------------------------------------------

def test_constraint_is_satisfied_by_a_busy_existing_node():
    # The constraint is judged against totals: a fully used node still counts.
    insts = [head(), running("i-1", "a", A, BUSY)]
    _, got = both(lambda: request(types(), insts, constraints=[constraint(rr({"CPU": 4}))]))
    assert launches(got) == {}
    assert got.infeasible_cluster_resource_constraints == []


def test_constraint_launches_the_missing_capacity_which_demand_can_use():
    # Nodes added for the constraint keep their full demand availability.
    _, got = both(lambda: request(types(), [head()], [rr({"CPU": 4}, 2)],
                                  constraints=[constraint(rr({"CPU": 4}, 2))]))
    assert launches(got) == {"a": 2}
    assert infeasible(got) == []


def test_q11_partially_satisfiable_constraint_launches_nothing():
    _, got = both(lambda: request(types(mx=2), [head()],
                                  constraints=[constraint(rr({"CPU": 4}, 3))]))
    assert launches(got) == {}
    assert len(got.infeasible_cluster_resource_constraints) == 1


def test_constraint_placements_protect_idle_nodes():
    insts = [head(), running("i-1", "a", A, idle_ms=10**6)]
    _, bare = both(lambda: request(types(), insts, idle_timeout_s=60))
    assert terms(bare) == [("i-1", IDLE, RAY_RUNNING)]
    _, got = both(lambda: request(types(), insts, idle_timeout_s=60,
                                  constraints=[constraint(rr({"CPU": 4}))]))
    assert terms(got) == []
    assert launches(got) == {}


# ---- §3.7 placement groups ---------------------------------------------------------------

def test_strict_pack_is_merged_into_one_request_that_fits_one_node():
    # 3 x {CPU: 2}: only the 8-CPU type holds all of them at once.
    tt = [cfg("small", A), cfg("big", {"CPU": 8.0})]
    _, got = both(lambda: request(tt, gangs=[gang("aa01", "STRICT_PACK", [{"CPU": 2}] * 3)]))
    assert launches(got) == {"big": 1}
    _, pack = both(lambda: request(tt, gangs=[gang("aa01", "PACK", [{"CPU": 2}] * 3)]))
    assert launches(pack) == {"small": 2}


def test_strict_pack_larger_than_any_node_is_an_infeasible_gang():
    _, got = both(lambda: request(types(), [head()],
                                  gangs=[gang("aa01", "STRICT_PACK", [{"CPU": 3}] * 2)]))
    assert launches(got) == {}
    assert infeasible_gangs(got) == ["aa01:STRICT_PACK:PENDING"]


def test_strict_spread_puts_one_bundle_per_node():
    _, got = both(lambda: request(types(), [head()],
                                  gangs=[gang("aa01", "STRICT_SPREAD", [{"CPU": 1}] * 3)]))
    assert launches(got) == {"a": 3}


def test_strict_spread_excludes_nodes_already_hosting_the_group():
    hosting = running("i-1", "a", A, dyn={pg_label("aa01"): ""})
    other = running("i-2", "a", A, dyn={pg_label("bb02"): ""})
    _, got = both(lambda: request(types(), [head(), hosting, other],
                                  gangs=[gang("aa01", "STRICT_SPREAD", [{"CPU": 1}] * 2)]))
    assert launches(got) == {"a": 1}      # i-2 takes one bundle, i-1 none
    _, fresh = both(lambda: request(types(), [head(), running("i-1", "a", A), other],
                                    gangs=[gang("aa01", "STRICT_SPREAD", [{"CPU": 1}] * 2)]))
    assert launches(fresh) == {}


@pytest.mark.parametrize("strategy", ["PACK", "SPREAD"])
def test_pack_and_spread_are_all_or_nothing(strategy):
    _, got = both(lambda: request(types(mx=2), [head()],
                                  gangs=[gang("aa01", strategy, [{"CPU": 4}] * 3)]))
    assert launches(got) == {}
    assert infeasible_gangs(got) == [f"aa01:{strategy}:PENDING"]
    _, plain = both(lambda: request(types(mx=2), [head()], [rr({"CPU": 4}, 3)]))
    assert launches(plain) == {"a": 2}      # the same units as plain demand: 2 placed


def test_q7_spread_is_not_spread():
    _, got = both(lambda: request(types(), [head()], gangs=[gang("aa01", "SPREAD", [{"CPU": 1}] * 2)]))
    assert launches(got) == {"a": 1}


def test_strict_gangs_go_first():
    # One free node and no room to launch: the STRICT_SPREAD group (listed second)
    # is placed first and takes it; the PACK group is infeasible.
    insts = [head(), running("i-1", "a", A)]
    _, got = both(lambda: request(types(mx=1), insts, gangs=[
        gang("aa01", "PACK", [{"CPU": 4}]), gang("bb02", "STRICT_SPREAD", [{"CPU": 4}])]))
    assert infeasible_gangs(got) == ["aa01:PACK:PENDING"]


def test_bigger_gangs_go_first():
    insts = [head(), running("i-1", "a", A)]
    _, got = both(lambda: request(types(mx=1), insts, gangs=[
        gang("aa01", "PACK", [{"CPU": 4}]), gang("bb02", "PACK", [{"CPU": 2}] * 2)]))
    assert infeasible_gangs(got) == ["aa01:PACK:PENDING"]


def test_an_infeasible_gang_leaves_the_context_unchanged():
    # The STRICT_SPREAD group needs 3 nodes of a (max 2): rejected as a whole, so
    # the two nodes it would have half-filled are free for the plain demand.
    _, got = both(lambda: request(types(mx=2), [head()], [rr({"CPU": 4}, 2)],
                                  gangs=[gang("aa01", "STRICT_SPREAD", [{"CPU": 1}] * 3)]))
    assert infeasible_gangs(got) == ["aa01:STRICT_SPREAD:PENDING"]
    assert launches(got) == {"a": 2}
    assert infeasible(got) == []


# ---- §4.1 request order ------------------------------------------------------------------

def test_bigger_requests_are_placed_first_regardless_of_input_order():
    insts = [head(), running("i-1", "a", A)]
    _, got = both(lambda: request(types(mx=1), insts, [rr({"CPU": 1}), rr({"CPU": 4})]))
    assert launches(got) == {}
    assert infeasible(got) == [[("CPU", 1.0)]]


def test_q8_more_entries_go_first_and_zero_entries_count():
    # {CPU: 1, x: 0} has two entries, so it is placed before the bigger {CPU: 3}.
    node = {"CPU": 3.0, "x": 1.0}
    insts = [head(), running("i-1", "a", node)]
    _, got = both(lambda: request([cfg("head", HEAD, mx=1), cfg("a", node, mx=1)], insts,
                                  [rr({"CPU": 3}), rr({"CPU": 1, "x": 0})]))
    assert infeasible(got) == [[("CPU", 3.0)]]


# ---- §4.5 round robin ----------------------------------------------------------------------

def test_exactly_tied_types_launch_round_robin():
    tt = [cfg(n, A) for n in ("x", "y", "z")]
    _, got = both(lambda: request(tt, [], [rr({"CPU": 4}, 5)]))
    assert launches(got) == {"x": 2, "y": 2, "z": 1}


# ---- §4.6 tie-breakers -----------------------------------------------------------------------

def test_priority_loses_to_a_better_utilisation_score():
    tt = [cfg("big", {"CPU": 8.0}, priority=10), cfg("small", A, priority=0)]
    _, got = both(lambda: request(tt, [], [rr({"CPU": 4})]))
    assert launches(got) == {"small": 1}


def test_zero_availability_loses_only_ties():
    tt = [cfg("big", {"CPU": 8.0}), cfg("small", A)]
    _, got = both(lambda: request(tt, [], [rr({"CPU": 4})], cloud={"small": 0.0}))
    assert launches(got) == {"small": 1}


@pytest.mark.parametrize("kw, winner", [
    ({}, "p"),                                                           # first listed
    ({"prio": {"q": 1}}, "q"),                                           # priority
    ({"cloud": {"p": 0.5}}, "q"),                                        # cloud availability
    ({"prio": {"p": 1}, "cloud": {"p": 0.0}}, "p"),                      # priority before cloud
    ({"prio": {"p": 5}, "recoverable": {"p": 0.5}}, "q"),                # recoverable first
])
def test_tie_breakers_between_identical_types(kw, winner):
    prio = kw.get("prio", {})
    tt = [cfg(n, A, priority=prio.get(n, 0)) for n in ("p", "q")]
    _, got = both(lambda: request(tt, [], [rr({"CPU": 4})], cloud=kw.get("cloud"),
                                  recoverable=kw.get("recoverable")))
    assert launches(got) == {winner: 1}


# ---- §4.8 score: GPU avoidance and the label score ---------------------------------------------

GPU_TYPES = [cfg("cpu", {"CPU": 8.0, "disk": 1.0}), cfg("gpu", {"CPU": 2.0, "GPU": 1.0})]


def test_cpu_work_avoids_gpu_types():
    # The GPU type scores better on utilisation, but hosts no GPU work.
    _, got = both(lambda: request(GPU_TYPES, [], [rr({"CPU": 2})]))
    assert launches(got) == {"cpu": 1}


def test_q8_gpu_zero_counts_as_a_gpu_request():
    _, got = both(lambda: request(GPU_TYPES, [], [rr({"CPU": 2, "GPU": 0})]))
    assert launches(got) == {"gpu": 1}


def test_cpu_work_still_lands_on_a_free_existing_gpu_node():
    insts = [running("g", "gpu", {"CPU": 2.0, "GPU": 1.0})]
    _, got = both(lambda: request(GPU_TYPES, insts, [rr({"CPU": 2})]))
    assert launches(got) == {}


ZONE_TYPES = [cfg("za", {"CPU": 8.0}, labels={"zone": "a"}),
              cfg("zb", A, labels={"zone": "b"}), cfg("plain", A)]


def two_selectors():
    return rr({"CPU": 4}, selectors=[selector(("zone", IN, ["a"])), selector(("zone", IN, ["b"]))])


def test_first_selector_beats_a_better_utilisation_on_the_fallback():
    # za matches selector 0 (label score 2), zb only selector 1 (score 1) even
    # though a 4-CPU zb node would be fully used.
    _, got = both(lambda: request(ZONE_TYPES, [], [two_selectors()]))
    assert launches(got) == {"za": 1}


def test_fallback_selector_is_used_when_the_first_cannot_be():
    tt = [cfg("za", {"CPU": 8.0}, mx=0, labels={"zone": "a"})] + ZONE_TYPES[1:]
    _, got = both(lambda: request(tt, [], [two_selectors()]))
    assert launches(got) == {"zb": 1}


def test_selector_rejects_unlabelled_types():
    tt = [ZONE_TYPES[2]]
    _, got = both(lambda: request(tt, [], [rr({"CPU": 4}, selectors=[selector(("zone", IN, ["a"]))])]))
    assert launches(got) == {}
    assert len(got.infeasible_resource_requests) == 1


def test_not_in_excludes_the_value_and_accepts_a_missing_key():
    # za fits exactly but has zone=a; the unlabelled 8-CPU type is chosen over
    # the 16-CPU zone=b one on utilisation.
    tt = [cfg("za", A, labels={"zone": "a"}), cfg("zb", {"CPU": 16.0}, labels={"zone": "b"}),
          cfg("plain", {"CPU": 8.0})]
    _, got = both(lambda: request(tt, [], [rr({"CPU": 4},
                                              selectors=[selector(("zone", NOT_IN, ["a"]))])]))
    assert launches(got) == {"plain": 1}


def test_selector_matches_running_node_labels():
    insts = [running("i-1", "plain", A, labels={"zone": "b"})]
    _, got = both(lambda: request(ZONE_TYPES, insts, [two_selectors()]))
    assert launches(got) == {}


def test_equal_size_requests_are_ordered_by_their_sorted_items():
    # Same entry count and sum: {CPU: 2, x: 1} > {CPU: 1, x: 2} by (name, value) pairs.
    node = {"CPU": 2.0, "x": 2.0}
    tt = [cfg("head", HEAD, mx=1), cfg("a", node, mx=1)]
    _, got = both(lambda: request(tt, [head(), running("i-1", "a", node)],
                                  [rr({"CPU": 1, "x": 2}), rr({"CPU": 2, "x": 1})]))
    assert infeasible(got) == [[("CPU", 1.0), ("x", 2.0)]]


def test_requests_with_more_selector_constraints_go_first():
    node = {"CPU": 4.0, "x": 1.0}
    labels = {"zone": "a", "m": "s"}
    tt = [cfg("head", HEAD, mx=1), cfg("a", node, mx=1, labels=labels)]
    _, got = both(lambda: request(tt, [head(), running("i-1", "a", node, labels=labels)], [
        rr({"CPU": 3, "x": 1}),
        rr({"CPU": 2}, selectors=[selector(("zone", IN, ["a"]), ("m", IN, ["s"]))])]))
    assert infeasible(got) == [[("CPU", 3.0), ("x", 1.0)]]


def test_missing_implicit_resource_counts_as_one():
    implicit = "node:__internal_implicit_resource_x"
    _, got = both(lambda: request(types(), [head(), running("i-1", "a", A)],
                                  [rr({"CPU": 1, implicit: 0.5}, 3)]))
    assert launches(got) == {"a": 1}      # two units on i-1 (0.5 + 0.5 of an implied 1)


# ---- §3.7 more gang encodings --------------------------------------------------------------

def _strict_pack_with_selectors(vals0, vals1):
    g = gang("aa01", "STRICT_PACK", [{"CPU": 3}] * 2)
    for rq, vals in zip(g.bundle_selectors[0].resource_requests, (vals0, vals1)):
        rq.label_selectors.append(selector(("zone", IN, vals)))
    return g


SP_TYPES = [cfg("za", A, labels={"zone": "a"}), cfg("zb", A, labels={"zone": "b"}),
            cfg("big", {"CPU": 8.0}, labels={"zone": "a"})]


def test_strict_pack_bundles_with_equal_selectors_are_merged():
    # The selectors differ only in value order: one group, one 8-CPU node.
    _, got = both(lambda: request(SP_TYPES, gangs=[
        _strict_pack_with_selectors(["a", "b"], ["b", "a"])]))
    assert launches(got) == {"big": 1}


def test_strict_pack_bundles_with_different_selectors_are_not_merged():
    _, got = both(lambda: request(SP_TYPES, gangs=[_strict_pack_with_selectors(["a"], ["b"])]))
    assert launches(got) == {"za": 1, "zb": 1}


def test_gang_without_bundle_selectors_uses_the_legacy_requests():
    g = gang("aa01", "STRICT_SPREAD", [{"CPU": 1}] * 2)
    del g.bundle_selectors[:]
    _, got = both(lambda: request(types(), [head()], gangs=[g]))
    assert launches(got) == {"a": 2}


def test_gang_order_ignores_bundle_selectors():
    # bb02 has only bundle_selectors, so its order key is (0, 0): aa01 goes first.
    g = gang("bb02", "STRICT_SPREAD", [{"CPU": 4}])
    del g.requests[:]
    _, got = both(lambda: request(types(mx=1), [head(), running("i-1", "a", A)],
                                  gangs=[gang("aa01", "PACK", [{"CPU": 4}]), g]))
    assert infeasible_gangs(got) == ["bb02:STRICT_SPREAD:PENDING"]


def test_constraint_honours_label_selectors():
    _, got = both(lambda: request(ZONE_TYPES, [], constraints=[
        constraint(rr({"CPU": 4}, 2, selectors=[selector(("zone", IN, ["b"]))]))]))
    assert launches(got) == {"zb": 2}

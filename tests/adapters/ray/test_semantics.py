"""Targeted regression tests, one small tick per behaviour: which instances become
nodes (docs/ray-semantics.md §2.1), outdated nodes (§3.1), min/max caps and the victim
order (§3.2–§3.5) and the crash-class quirks Q3, Q4, Q12, Q13.

Each test runs Ray 2.60's scheduler and the engine on the same input, asserts
their decisions agree, and asserts the outcome the specification predicts (so
a test fails if both are wrong). The other phases are in test_semantics_*.py.
"""
from __future__ import annotations

import pytest

from vecsched.engine import ProblemError

from tests.kits.semantics_kit import (ALLOCATED, GLOBAL, OUTDATED, PER_TYPE, QUEUED, RAY_INSTALLING,
                            RAY_RUNNING, RAY_STOP_REQUESTED, REQUESTED, AutoscalerInstance,
                            EngineScheduler, Instance, NodeState, ResourceDemandScheduler,
                            both, cfg, diff, infeasible, launches, pending, request, rr,
                            running, schedule_fixed, terms)

A = {"CPU": 4.0}
HEAD = {"CPU": 2.0}
BUSY = {"CPU": 0.0}


def head(idle_ms=0):
    return running("h", "head", HEAD, BUSY, head=True, idle_ms=idle_ms)


def types(**kw):
    return [cfg("head", HEAD, mx=1), cfg("a", A, **kw)]


# ---- §2.1 which instances become nodes ---------------------------------------------------

def test_instance_without_im_record_is_ignored():
    # A free 4-CPU ray node that the instance manager does not know about does not
    # take the {CPU: 4} unit: one node of type a is launched for it.
    unmanaged = AutoscalerInstance(im_instance=None, cloud_instance_id="c-x",
                                   ray_node=NodeState(node_id=b"x", total_resources=A,
                                                      available_resources=A))
    _, got = both(lambda: request(types(mx=1), [head(), unmanaged], [rr({"CPU": 4})]))
    assert launches(got) == {"a": 1}
    assert infeasible(got) == []


@pytest.mark.parametrize("status", [7, 8, 9, 10, 11, 12, 13, 14])
def test_statuses_that_cannot_reach_running_are_ignored(status):
    # RAY_STOPPING ... ALLOCATION_TIMEOUT: not a node, not even against max_worker_nodes=1.
    inst = pending("i-1", "a", status, kind=2)
    _, got = both(lambda: request(types(mx=1), [head(), inst], [rr({"CPU": 4})]))
    assert launches(got) == {"a": 1}
    assert terms(got) == []


@pytest.mark.parametrize("status", [QUEUED, REQUESTED, ALLOCATED, RAY_INSTALLING])
def test_pending_node_is_built_from_its_config_and_absorbs_demand(status):
    _, got = both(lambda: request(types(mx=1), [head(), pending("i-1", "a", status)],
                                  [rr({"CPU": 4})]))
    assert launches(got) == {}
    assert infeasible(got) == []
    assert got.cluster_resources == {"CPU": 6.0}


def test_running_instance_without_ray_node_is_skipped():
    stale = pending("i-1", "a", RAY_RUNNING, kind=2)     # GCS has no node for it
    _, got = both(lambda: request(types(mx=1), [head(), stale], [rr({"CPU": 4})]))
    assert launches(got) == {"a": 1}


def test_pending_of_unknown_type_is_dropped_with_the_check_off():
    _, got = both(lambda: request(types(mx=1), [head(), pending("i-1", "gone", QUEUED)],
                                  [rr({"CPU": 4})], check=False))
    assert terms(got) == []
    assert launches(got) == {"a": 1}


def test_pending_of_unknown_type_is_outdated_with_the_check_on():
    # An empty TO_TERMINATE node: reported as OUTDATED, takes no demand.
    _, got = both(lambda: request(types(mx=1), [head(), pending("i-1", "gone", ALLOCATED)],
                                  [rr({"CPU": 4})], check=True))
    assert terms(got) == [("i-1", OUTDATED, ALLOCATED)]
    assert launches(got) == {"a": 1}


@pytest.mark.parametrize("status", [REQUESTED, RAY_STOP_REQUESTED])
def test_pending_of_unknown_type_in_unterminable_status_is_not_reported(status):
    # Plain Ray names it (the instance manager then rejects the tick, Q13); the
    # engine leaves it out, as Ray with the documented fix does.
    make = lambda: request(types(mx=1), [head(), pending("i-1", "gone", status)], [],  # noqa: E731
                           check=True)
    plain = ResourceDemandScheduler().schedule(make())
    assert terms(plain) == [("i-1", OUTDATED, status)]
    _, got = both(make, fixed=True)
    assert terms(got) == []


def test_q14_ray_stop_requested_node_is_modelled_as_free():
    # A fully used 4-CPU node being drained still takes a {CPU: 4} unit (§9 Q14).
    draining = pending("i-1", "a", RAY_STOP_REQUESTED, kind=2,
                       ray_node=NodeState(node_id=b"i-1", total_resources=A,
                                          available_resources=BUSY))
    _, got = both(lambda: request(types(mx=5), [head(), draining], [rr({"CPU": 4})]))
    assert launches(got) == {}
    assert infeasible(got) == []
    assert terms(got) == []


# ---- §3.1 outdated nodes -----------------------------------------------------------------

def outdated_types(**kw):
    return [cfg("head", HEAD, mx=1, launch_config_hash="h2"),
            cfg("a", A, launch_config_hash="h2", **kw)]


def test_q1_outdated_running_node_is_terminated_and_absorbs_demand():
    # 1 outdated free 4-CPU node + {CPU: 4}: terminate it, launch nothing (Q1).
    old = running("i-1", "a", A, hash_="h1")
    _, got = both(lambda: request(outdated_types(), [head(), old], [rr({"CPU": 4})], check=True))
    assert terms(got) == [("i-1", OUTDATED, RAY_RUNNING)]
    assert launches(got) == {}
    assert infeasible(got) == []


def test_outdated_check_disabled_keeps_the_node():
    old = running("i-1", "a", A, hash_="h1")
    _, got = both(lambda: request(outdated_types(), [head(), old], [rr({"CPU": 4})], check=False))
    assert terms(got) == []
    assert launches(got) == {}


def test_current_hash_and_head_are_not_outdated():
    stale_head = running("h", "head", HEAD, BUSY, head=True, hash_="h1")
    fresh = running("i-1", "a", A, hash_="h2")
    _, got = both(lambda: request(outdated_types(), [stale_head, fresh], [], check=True))
    assert terms(got) == []


def test_q2_pending_nodes_of_a_hashed_type_are_outdated():
    # Pending nodes carry no hash, so with the check on every terminable pending
    # node of a hashed type is OUTDATED on every tick; REQUESTED and
    # RAY_STOP_REQUESTED ones are not named (the engine's Q13 fix).
    insts = [head(), pending("q", "a", QUEUED), pending("r", "a", REQUESTED),
             pending("al", "a", ALLOCATED), pending("in", "a", RAY_INSTALLING),
             pending("s", "a", RAY_STOP_REQUESTED)]
    make = lambda: request(outdated_types(), insts, [], check=True)  # noqa: E731
    plain = ResourceDemandScheduler().schedule(make())
    assert {t[0] for t in terms(plain)} == {"q", "r", "al", "in", "s"}
    _, got = both(make, fixed=True)
    assert terms(got) == [("al", OUTDATED, ALLOCATED), ("in", OUTDATED, RAY_INSTALLING),
                          ("q", OUTDATED, QUEUED)]


def test_q2_pending_nodes_of_an_unhashed_type_are_kept():
    insts = [head(), pending("q", "a", QUEUED), pending("al", "a", ALLOCATED)]
    _, got = both(lambda: request(types(), insts, [], check=True))
    assert terms(got) == []


def test_q1_q2_outdated_pending_node_absorbs_demand():
    # The QUEUED node is cut as OUTDATED but still soaks up the unit: no launch.
    _, got = both(lambda: request(outdated_types(), [head(), pending("q", "a", QUEUED)],
                                  [rr({"CPU": 4})], check=True))
    assert terms(got) == [("q", OUTDATED, QUEUED)]
    assert launches(got) == {}
    assert infeasible(got) == []


# ---- §3.2 minimum workers ----------------------------------------------------------------

def test_min_workers_launch_the_shortfall_counting_pending_nodes():
    insts = [head(), running("i-1", "a", A), pending("q", "a", QUEUED)]
    _, got = both(lambda: request(types(mn=4), insts, []))
    assert launches(got) == {"a": 2}


def test_min_worker_nodes_take_demand_before_new_launches():
    _, got = both(lambda: request(types(mn=2), [head()], [rr({"CPU": 4}, 3)]))
    assert launches(got) == {"a": 3}


# ---- §3.3 max per type and the victim order (§3.5) -----------------------------------------

def test_max_per_type_cuts_pending_nodes_first():
    insts = [head(), running("i-1", "a", A, idle_ms=10**6), pending("q", "a", QUEUED),
             running("i-2", "a", A, idle_ms=10**6)]
    _, got = both(lambda: request(types(mx=2), insts, []))
    assert terms(got) == [("q", PER_TYPE, QUEUED)]
    assert got.to_terminate[0].max_num_nodes_per_type == 2


def test_max_per_type_cuts_the_longest_idle_next():
    insts = [head(), running("i-1", "a", A, idle_ms=100), running("i-2", "a", A, idle_ms=5000),
             running("i-3", "a", A, idle_ms=900)]
    _, got = both(lambda: request(types(mx=1), insts, []))
    assert terms(got) == [("i-2", PER_TYPE, RAY_RUNNING), ("i-3", PER_TYPE, RAY_RUNNING)]


def test_max_per_type_cuts_the_lowest_utilisation_among_equally_idle():
    insts = [head(), running("i-1", "a", A, {"CPU": 1.0}), running("i-2", "a", A, {"CPU": 3.0}),
             running("i-3", "a", A, {"CPU": 2.0})]
    _, got = both(lambda: request(types(mx=2), insts, []))
    assert terms(got) == [("i-2", PER_TYPE, RAY_RUNNING)]


def test_max_per_type_never_cuts_the_head():
    # The head (type a here) is the longest idle and least used, yet a worker goes.
    insts = [running("h", "a", A, head=True, idle_ms=10**7),
             running("i-1", "a", A, BUSY), running("i-2", "a", A, {"CPU": 2.0})]
    _, got = both(lambda: request([cfg("a", A, mx=2)], insts, []))
    assert terms(got) == [("i-2", PER_TYPE, RAY_RUNNING)]


# ---- §3.4 global max ---------------------------------------------------------------------

def test_global_max_cuts_the_excess_in_victim_order():
    insts = [head(idle_ms=10**7), running("i-1", "a", A, idle_ms=10),
             running("i-2", "a", A, idle_ms=20), pending("q", "a", ALLOCATED)]
    _, got = both(lambda: request(types(), insts, [], max_num_nodes=2))
    assert terms(got) == [("i-2", GLOBAL, RAY_RUNNING), ("q", GLOBAL, ALLOCATED)]
    assert {t.max_num_nodes for t in got.to_terminate} == {2}


def test_q6_max_num_nodes_zero_cuts_nothing_and_launches_nothing():
    insts = [head(), running("i-1", "a", A, BUSY), running("i-2", "a", A, BUSY)]
    _, got = both(lambda: request(types(), insts, [rr({"CPU": 4})], max_num_nodes=0))
    assert terms(got) == []
    assert launches(got) == {}
    assert infeasible(got) == [[("CPU", 4.0)]]


def test_launch_loop_stops_at_max_num_nodes_counting_existing_nodes():
    insts = [head(), running("i-1", "a", A, BUSY)]
    _, got = both(lambda: request(types(), insts, [rr({"CPU": 4}, 3)], max_num_nodes=3))
    assert launches(got) == {"a": 1}
    assert infeasible(got) == [[("CPU", 4.0)]] * 2


def test_q4_min_workers_over_global_max_cut_only_what_is_needed():
    # mins 3 (a) + 2 (b) with max_num_nodes=3: plain Ray aliases the min-worker
    # nodes and emits empty-id terminations; the engine simply launches 3 nodes.
    make = lambda: request([cfg("a", A, mn=3, mx=5), cfg("b", {"CPU": 8.0}, mn=2, mx=5)],  # noqa: E731
                           [], [], max_num_nodes=3)
    plain = ResourceDemandScheduler().schedule(make())
    assert [t.instance_id for t in plain.to_terminate] == ["", "", ""]
    assert launches(plain) == {"b": 2}
    want, got = both(make, fixed=True)
    assert all(t.instance_id for t in got.to_terminate)
    assert got.to_terminate == []
    assert launches(got) == {"a": 1, "b": 2}


# ---- crash-class quirks -------------------------------------------------------------------

def test_q3_running_node_of_unconfigured_type_is_kept_not_a_keyerror():
    make = lambda: request(types(mx=1), [head(), running("i-1", "gone", A)],  # noqa: E731
                           [rr({"CPU": 4})], check=False)
    with pytest.raises(KeyError):
        ResourceDemandScheduler().schedule(make())
    got = EngineScheduler().schedule(make())
    assert terms(got) == []
    assert launches(got) == {}              # the unit lands on the kept node
    assert infeasible(got) == []
    assert got.cluster_resources == {"CPU": 6.0}


def test_q3_with_the_check_on_the_unconfigured_running_node_is_outdated():
    _, got = both(lambda: request(types(mx=1), [head(), running("i-1", "gone", A)], [],
                                  check=True))
    assert terms(got) == [("i-1", OUTDATED, RAY_RUNNING)]


def test_q12_available_above_total_is_counted_not_an_assertion():
    over = lambda: running("i-1", "a", A, {"CPU": 6.0})  # noqa: E731
    make = lambda: request(types(mx=1), [head(), over()], [rr({"CPU": 1})])  # noqa: E731
    with pytest.raises(AssertionError):
        ResourceDemandScheduler().schedule(make())
    eng = EngineScheduler()
    got = eng.schedule(make())
    assert eng.stats["clamped_available"] == 1
    assert launches(got) == {} and infeasible(got) == [] and terms(got) == []
    # The same decisions as Ray's on the input with available = total.
    clamped = ResourceDemandScheduler().schedule(
        request(types(mx=1), [head(), running("i-1", "a", A, A)], [rr({"CPU": 1})]))
    assert diff(clamped, got) == []


def test_q13_requested_instance_as_only_victim_is_never_named():
    # max_worker_nodes lowered to 0 while a launch is in flight (ray #50868).
    make = lambda: request(types(mx=0), [head(), pending("r", "a", REQUESTED)], [])  # noqa: E731
    plain = ResourceDemandScheduler().schedule(make())
    assert terms(plain) == [("r", PER_TYPE, REQUESTED)]
    _, got = both(make, fixed=True)
    assert terms(got) == []


def test_q13_the_next_candidate_is_cut_instead_of_a_requested_instance():
    insts = [head(), running("i-1", "a", A, idle_ms=5), pending("r", "a", REQUESTED)]
    make = lambda: request(types(mx=1), insts, [], max_num_nodes=None)  # noqa: E731
    assert terms(ResourceDemandScheduler().schedule(make())) == [("r", PER_TYPE, REQUESTED)]
    _, got = both(make, fixed=True)
    assert terms(got) == [("i-1", PER_TYPE, RAY_RUNNING)]


def test_q13_global_cap_skips_ray_stop_requested_instances():
    insts = [head(), pending("s", "a", RAY_STOP_REQUESTED, kind=2), running("i-1", "a", A)]
    make = lambda: request(types(), insts, [], max_num_nodes=2)  # noqa: E731
    _, got = both(make, fixed=True)
    assert terms(got) == [("i-1", GLOBAL, RAY_RUNNING)]


# ---- Q12 beyond the assertion: available > total on nodes Ray never scores ------------------
# Ray asserts only when such a node is *scored*; elsewhere it uses the raw
# value (victim utilisation goes negative, a bigger-than-total unit fits). The
# engine keeps the raw values too and clamps only the utilisation term it scores.

Q12_UNSCORED = {
    "per-type victim": (lambda: request(types(mx=1), [head(), running("n", "a", A),
                                                      running("o", "a", A, {"CPU": 6.0})], []),
                        ("o", PER_TYPE, RAY_RUNNING)),
    "global victim": (lambda: request(types(), [head(), running("n", "a", A),
                                                running("o", "a", A, {"CPU": 6.0})], [],
                                      max_num_nodes=2), ("o", GLOBAL, RAY_RUNNING)),
    "idle victim": (lambda: request(types(mn=1), [
        head(), running("n", "a", A, idle_ms=10**6),
        running("o", "a", A, {"CPU": 6.0}, idle_ms=10**6)], [], idle_timeout_s=60.0),
        ("o", 1, RAY_RUNNING)),
    "fit above total": (lambda: request(types(mx=2), [head(), running("o", "a", A, {"CPU": 6.0})],
                                        [rr({"CPU": 5})]), None),
}


@pytest.mark.parametrize("case", list(Q12_UNSCORED))
def test_q12_unscored_available_above_total_follows_ray(case):
    # The node with negative utilisation is the first victim; a 5-CPU unit fits
    # on the 4-CPU node reporting 6 free (1 CPU is left afterwards, so its score
    # stays within [0, 1] and Ray does not assert).
    make, term = Q12_UNSCORED[case]
    _, got = both(make)                   # Ray does not assert on these
    assert terms(got) == ([term] if term else [])
    assert launches(got) == {} and infeasible(got) == []


def test_q12_scored_node_above_total_loses_on_clamped_utilisation():
    # Both idle nodes can take the unit; Ray asserts scoring "o". The engine
    # scores o's CPU term as 0, so "n" (fully used after placement) wins and "o"
    # is the idle one terminated.
    make = lambda: request(types(), [head(), running("n", "a", A, {"CPU": 1.0}, idle_ms=10**6),  # noqa: E731
                                     running("o", "a", A, {"CPU": 6.0}, idle_ms=10**6)],
                           [rr({"CPU": 1})], idle_timeout_s=60.0)
    with pytest.raises(AssertionError):
        ResourceDemandScheduler().schedule(make())
    eng = EngineScheduler()
    got = eng.schedule(make())
    assert eng.stats["clamped_available"] == 1
    assert terms(got) == [("o", 1, RAY_RUNNING)]
    assert launches(got) == {}


# Divergence D6: negative available is bad input. Ray schedules such a tick
# unless it scores the node (then it asserts); the engine names the field and
# the tick fails cleanly instead of deciding on a corrupt cluster view.
def test_negative_available_is_bad_input():
    make = lambda: request(types(), [head(), running("i-1", "a", A, {"CPU": -1.0})],  # noqa: E731
                           [rr({"CPU": 4})])
    assert launches(ResourceDemandScheduler().schedule(make())) == {"a": 1}
    with pytest.raises(ProblemError) as e:
        EngineScheduler().schedule(make())
    assert e.value.field == "instances[1].available_resources['CPU']"


# ---- caps count nodes being terminated ----------------------------------------------------

def test_outdated_nodes_still_consume_the_per_type_quota():
    tt = [cfg("head", HEAD, mx=1), cfg("a", A, mx=1, launch_config_hash="h2")]
    _, got = both(lambda: request(tt, [head(), running("o", "a", A, BUSY, hash_="h1")],
                                  [rr({"CPU": 4})], check=True))
    assert terms(got) == [("o", OUTDATED, RAY_RUNNING)]
    assert launches(got) == {}
    assert infeasible(got) == [[("CPU", 4.0)]]


def test_q6_launch_cap_counts_nodes_being_terminated():
    tt = [cfg("head", HEAD, mx=1), cfg("a", A, launch_config_hash="h2")]
    insts = [head(), running("o", "a", A, BUSY, hash_="h1"), running("p", "a", A, BUSY, hash_="h1")]
    _, got = both(lambda: request(tt, insts, [rr({"CPU": 4})], check=True, max_num_nodes=3))
    assert len(terms(got)) == 2
    assert launches(got) == {}
    assert infeasible(got) == [[("CPU", 4.0)]]


def test_q4_q1_a_cut_min_worker_node_still_absorbs_demand():
    make = lambda: request([cfg("a", A, mn=2, mx=5)], [], [rr({"CPU": 4})],  # noqa: E731
                           max_num_nodes=1)
    _, got = both(make, fixed=True)
    assert launches(got) == {"a": 1} and terms(got) == [] and infeasible(got) == []

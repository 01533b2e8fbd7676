"""Targeted regression tests for termination after scheduling (§5.1 pending-node
idle tracking over ticks with a frozen clock, §5.2 idle termination), the
infeasible list (Q10), KubeRay in-place resizes (§4.4) and bad input.

Each test: Ray and the engine agree, and the outcome is the one the spec predicts.
"""
from __future__ import annotations

import math
import time

import pytest

from vecsched.engine import ProblemError

from tests.kits.semantics_kit import (GIB, IDLE, QUEUED, RAY_INSTALLING, RAY_RUNNING, REQUESTED,
                            EngineScheduler, ResourceDemandScheduler, both, cfg, constraint,
                            gang, infeasible, launches, pending, request, rr, running, terms)

A = {"CPU": 4.0}
BUSY = {"CPU": 0.0}
HEAD = {"CPU": 2.0}


def head(idle_ms=0):
    return running("h", "head", HEAD, BUSY, head=True, idle_ms=idle_ms)


def types(**kw):
    return [cfg("head", HEAD, mx=1), cfg("a", A, **kw)]


# ---- §5.1 pending-node idle tracking over ticks ------------------------------------------

@pytest.fixture
def clock(monkeypatch):
    now = {"t": 1000.0}
    monkeypatch.setattr(time, "monotonic", lambda: now["t"])
    return now


def ticker(clock):
    """Run one tick on a persistent pair of schedulers at a given time."""
    ray_s = ResourceDemandScheduler()
    eng = EngineScheduler(monotonic=lambda: clock["t"])

    def tick(t, insts, reqs=()):
        clock["t"] = t
        _, got = both(lambda: request(types(), insts, list(reqs), pending_idle_timeout_s=10.0),
                      ray_sched=ray_s, eng=eng)
        return got
    return tick, eng


def test_pending_nodes_accumulate_idle_time_across_ticks(clock):
    tick, _ = ticker(clock)
    q, r, inst = pending("q", "a", QUEUED), pending("r", "a", REQUESTED), \
        pending("in", "a", RAY_INSTALLING)
    assert terms(tick(1000.0, [head(), q, r])) == []
    # The RAY_INSTALLING node appears (listed first); the oldest timestamp still
    # goes to the least advanced node, the QUEUED one.
    assert terms(tick(1006.0, [head(), inst, q, r])) == []
    assert terms(tick(1012.0, [head(), inst, q, r])) == [("q", IDLE, QUEUED)]
    # q popped the oldest stamp; "in" inherits 1006 and is now 12 s unneeded.
    assert terms(tick(1018.0, [head(), inst, r])) == [("in", IDLE, RAY_INSTALLING)]
    # A REQUESTED launch cannot be cancelled: never tracked, never terminated.
    assert terms(tick(1100.0, [head(), r])) == []


def test_demand_on_a_pending_node_resets_its_idle_time(clock):
    tick, _ = ticker(clock)
    q = pending("q", "a", QUEUED)
    assert terms(tick(1000.0, [head(), q])) == []
    assert terms(tick(1006.0, [head(), q], [rr({"CPU": 4})])) == []
    assert terms(tick(1012.0, [head(), q])) == []        # unneeded again only since 1012
    assert terms(tick(1023.0, [head(), q])) == [("q", IDLE, QUEUED)]


def test_a_failing_tick_leaves_the_pending_idle_state_intact(clock):
    tick, eng = ticker(clock)
    q = pending("q", "a", QUEUED)
    assert terms(tick(1000.0, [head(), q])) == []
    before = {k: list(v) for k, v in eng._pending_since.items()}
    clock["t"] = 1006.0
    with pytest.raises(ProblemError):
        eng.schedule(request(types(), [head(), q], [rr({"CPU": math.nan})],
                             pending_idle_timeout_s=10.0))
    assert eng._pending_since == before
    # Ray never saw the bad tick; both still date q from 1000.
    assert terms(tick(1012.0, [head(), q])) == [("q", IDLE, QUEUED)]


# ---- §5.2 idle termination --------------------------------------------------------------

def test_idle_timeout_is_strict_and_per_type_overrides_the_global_one():
    tt = [cfg("head", HEAD, mx=1), cfg("a", A, idle_timeout_s=300.0), cfg("b", A)]
    insts = [head(), running("a1", "a", A, idle_ms=100_000), running("a2", "a", A, idle_ms=400_000),
             running("b1", "b", A, idle_ms=60_000), running("b2", "b", A, idle_ms=60_001)]
    _, got = both(lambda: request(tt, insts, idle_timeout_s=60.0))
    assert terms(got) == [("a2", IDLE, RAY_RUNNING), ("b2", IDLE, RAY_RUNNING)]
    idle_ms = {t.instance_id: t.idle_duration_ms for t in got.to_terminate}
    assert idle_ms == {"a2": 400_000, "b2": 60_001}


def test_no_timeout_means_no_idle_termination():
    insts = [head(), running("i-1", "a", A, idle_ms=10**8)]
    _, got = both(lambda: request(types(), insts, idle_timeout_s=None))
    assert terms(got) == []


def test_idle_termination_keeps_min_workers_and_cuts_the_longest_idle():
    insts = [head(), running("i-1", "a", A, idle_ms=100_000), running("i-2", "a", A, idle_ms=200_000)]
    _, got = both(lambda: request(types(mn=1), insts, idle_timeout_s=60.0))
    assert terms(got) == [("i-2", IDLE, RAY_RUNNING)]
    assert launches(got) == {}


def test_idle_node_that_receives_demand_is_kept():
    insts = [head(), running("i-1", "a", A, idle_ms=10**6), running("i-2", "a", A, idle_ms=10**6)]
    _, got = both(lambda: request(types(), insts, [rr({"CPU": 4})], idle_timeout_s=60.0))
    assert len(terms(got)) == 1                      # one of the two is needed, one goes
    assert launches(got) == {}


def test_idle_node_that_hosts_a_gang_is_kept():
    insts = [head(), running("i-1", "a", A, idle_ms=10**6)]
    _, got = both(lambda: request(types(), insts, idle_timeout_s=60.0,
                                  gangs=[gang("aa01", "PACK", [{"CPU": 2}] * 2)]))
    assert terms(got) == []
    assert launches(got) == {}


def test_idle_head_is_never_terminated():
    _, got = both(lambda: request(types(), [running("h", "head", HEAD, head=True, idle_ms=10**8)],
                                  idle_timeout_s=1.0))
    assert terms(got) == []


def test_constraint_keeps_one_idle_node_and_lets_the_other_go():
    insts = [head(), running("i-1", "a", A, idle_ms=10**6), running("i-2", "a", A, idle_ms=10**6)]
    _, got = both(lambda: request(types(), insts, idle_timeout_s=60.0,
                                  constraints=[constraint(rr({"CPU": 4}))]))
    assert len(terms(got)) == 1


# ---- Q10 the infeasible list --------------------------------------------------------------

def test_q10_infeasible_is_count_expanded_and_includes_cap_blocked_demand():
    # 3 x {CPU: 4} with room for one node: 1 launch, 2 units reported infeasible
    # although they only wait for the cap; plus 2 units no type can ever hold.
    _, got = both(lambda: request(types(mx=1), [head()], [rr({"CPU": 4}, 3), rr({"CPU": 100}, 2)]))
    assert launches(got) == {"a": 1}
    assert infeasible(got) == [[("CPU", 4.0)]] * 2 + [[("CPU", 100.0)]] * 2


# ---- §4.4 IPPR (KubeRay in-place pod resize) ---------------------------------------------

POD = {"CPU": 2.0, "memory": 4 * GIB}
POD_BUSY = {"CPU": 0.0, "memory": 0.0}


def ippr_request(status_kw, bundle):
    from ray.autoscaler.v2.schema import IPPRGroupSpec, IPPRSpecs, IPPRStatus
    spec = IPPRGroupSpec(min_cpu=2.0, max_cpu=4.0, min_memory=int(4 * GIB),
                         max_memory=int(8 * GIB), resize_timeout=60)
    st = IPPRStatus(cloud_instance_id="pod-1", spec=spec, current_cpu=2.0,
                    current_memory=int(4 * GIB), desired_cpu=2.0, desired_memory=int(4 * GIB))
    for k, v in status_kw.items():
        setattr(st, k, v)
    insts = [head(), running("i-1", "a", POD, POD_BUSY, cloud="pod-1")]
    return request([cfg("head", HEAD, mx=1), cfg("a", POD)], insts, [rr(bundle)],
                   ippr_specs=IPPRSpecs(groups={"a": spec}), ippr_statuses={"pod-1": st})


def test_ippr_resize_is_preferred_over_a_new_node():
    _, got = both(lambda: ippr_request({}, {"CPU": 2}))
    assert launches(got) == {}
    assert [(s.cloud_instance_id, s.desired_cpu, s.desired_memory, s.k8s_resize_status,
             s.raylet_id) for s in got.to_ippr] == [("pod-1", 4.0, int(8 * GIB), "new", "n-i-1")]


def test_ippr_resize_in_flight_counts_at_its_desired_size():
    flight = {"desired_cpu": 4.0, "desired_memory": int(8 * GIB), "resizing_at": 1000,
              "k8s_resize_status": "inprogress"}
    _, got = both(lambda: ippr_request(flight, {"CPU": 2}))
    assert launches(got) == {} and got.to_ippr == []
    _, more = both(lambda: ippr_request(flight, {"CPU": 3}))
    assert launches(more) == {"a": 1} and more.to_ippr == []   # the new node is sized at max


def test_ippr_failed_pod_is_never_resized():
    _, got = both(lambda: ippr_request({"last_failed_at": 900}, {"CPU": 2}))
    assert launches(got) == {"a": 1}
    assert got.to_ippr == []


# ---- bad input: a typed error naming the field --------------------------------------------

def _two_pcs():
    from tests.kits.semantics_kit import (AffinityConstraint, AntiAffinityConstraint,
                                PlacementConstraint)
    return [PlacementConstraint(affinity=AffinityConstraint(label_name="_PG_x")),
            PlacementConstraint(anti_affinity=AntiAffinityConstraint(label_name="_PG_y"))]


def _gang_two_pcs():
    g = gang("aa01", "PACK", [{"CPU": 1}])
    g.bundle_selectors[0].resource_requests[0].placement_constraints.extend(_two_pcs())
    return g


def _unspecified():
    from tests.kits.semantics_kit import selector
    return rr({"CPU": 1}, selectors=[selector(("zone", 0, ["a"]))])


BAD = {
    "negative count": (lambda: request(types(), [head()], [rr({"CPU": 1}, -1)]),
                       "resource_requests[0].count"),
    "NaN quantity": (lambda: request(types(), [head()], [rr({"CPU": math.nan})]),
                     "resource_requests[0].resources_bundle['CPU']"),
    "unspecified label operator": (lambda: request(types(), [head()], [_unspecified()]),
                                   "resource_requests[0].label_selectors[0]"
                                   ".label_constraints[0].operator"),
    "two constraints": (lambda: request(types(), [head()], constraints=[
        constraint(rr({"CPU": 1})), constraint(rr({"CPU": 2}))]), "cluster_resource_constraints"),
    "two placement constraints": (lambda: request(types(), [head()], [
        rr({"CPU": 1}, pcs=_two_pcs())]), "resource_requests[0].placement_constraints"),
    "two placement constraints in a gang": (
        lambda: request(types(), [head()], gangs=[_gang_two_pcs()]),
        "gang_resource_requests[0].bundle_selectors[0].resource_requests[0].placement_constraints"),
    "negative idle timeout": (lambda: request(types(), [head()], idle_timeout_s=-1.0),
                              "idle_timeout_s"),
    "negative per-type idle timeout": (lambda: request(types(idle_timeout_s=-5.0), [head()]),
                                       "node_type_configs['a'].idle_timeout_s"),
    "negative pending idle timeout": (lambda: request(types(), [head()],
                                                      pending_idle_timeout_s=-1.0),
                                      "pending_idle_timeout_s"),
    "negative constraint count": (lambda: request(types(), [head()], constraints=[
        constraint(rr({"CPU": 1}, -2))]), "cluster_resource_constraints[0].resource_requests[0].count"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_raises_problem_error_naming_the_field(case):
    make, field = BAD[case]
    with pytest.raises(ProblemError) as err:
        EngineScheduler().schedule(make())
    assert err.value.field == field

"""A ``node_type_configs`` entry whose ``name`` differs from its key behaves as in
Ray 2.60 (docs/ray-compat.md "key and name").

Ray looks a config up by its key, but a node it makes from a config - a pending
instance, a min-worker node, a new node - carries the config's *name* as its
type, and everything afterwards goes by that type: counts (max per type, the
room for launches, min workers), the launch request, idle timeouts, pending
idle timestamps, availability tie-breaks, the outdated check, IPPR. After a new
node of type T is picked, the template that comes back is T's config. When that
type is no key, Ray raises KeyError in the max-per-type phase; the engine gives
such a type no cap (divergence D1, applied to Ray by tests/kits/rayfixed.py)."""
from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("ray")
from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig  # noqa: E402
from ray.autoscaler.v2.scheduler import ResourceDemandScheduler, SchedulingRequest  # noqa: E402
from ray.autoscaler.v2.schema import AutoscalerInstance  # noqa: E402
from ray.core.generated.autoscaler_pb2 import ResourceRequest, ResourceRequestByCount  # noqa: E402
from ray.core.generated.instance_manager_pb2 import Instance, NodeKind  # noqa: E402

from vecsched.adapters.ray import EngineScheduler  # noqa: E402
from vecsched.adapters.ray.codec import decode  # noqa: E402
from vecsched.engine import schedule  # noqa: E402
from vecsched.engine.model.validate import check_plan  # noqa: E402

from tests.kits.compare import decisions, diff  # noqa: E402
from tests.kits.rayfixed import schedule_fixed  # noqa: E402
from tests.kits.raygen import make_request  # noqa: E402

KINDS = ("own name", "another key", "mixed", "rotated")


def _renamed(req: SchedulingRequest, seed: int) -> SchedulingRequest:
    """Some configs renamed: to a name no key has, to another key, a mix of both
    (two configs may share a name), or every key to the next one."""
    rng = random.Random(seed)
    keys = list(req.node_type_configs)
    kind = KINDS[seed % 4]
    for i, k in enumerate(keys):
        if kind != "rotated" and rng.random() < 0.5:
            continue
        cfg = req.node_type_configs[k]
        cfg.name = {"own name": f"{k}-as", "another key": rng.choice(keys),
                    "mixed": rng.choice(keys + [f"{k}-as", "shared"]),
                    "rotated": keys[(i + 1) % len(keys)]}[kind]
    return req


@pytest.mark.slow
@pytest.mark.parametrize("kind", range(4))
def test_key_and_name_differ_as_in_ray(kind):
    outcome = Counter()
    for seed in range(kind, 320, 4):
        for full in (True, False):
            kw = dict(max_nodes=30 if seed % 3 else 60, full=full)
            make = lambda: _renamed(make_request(seed, **kw), seed)    # noqa: E731
            try:
                ResourceDemandScheduler().schedule(make())
                crash = ""
            except KeyError:
                crash = " (plain Ray: KeyError)"
            try:
                want = schedule_fixed(make())
            except AssertionError:
                outcome["ray-fixed-asserts"] += 1
                continue
            got = EngineScheduler().schedule(make())
            problems = diff(want, got)
            assert not problems, f"{KINDS[kind]} seed {seed}: " + "; ".join(problems)
            d = decode(make())
            # vecsched.engine.model.validate on the engine's plan (it models neither in-place
            # resizes nor gang placements: a few plain seeds with gangs trip it)
            q = d.problem
            if not q.node_ippr["attached"].any() and np.isnan(q.type_ippr_max).all() and not q.G:
                violations = check_plan(d.problem, schedule(d.problem), allow_q1=True)
                assert not violations, violations
                outcome["plan checked"] += 1
            same = decisions(schedule_fixed(make_request(seed, **kw)))
            mattered = "" if decisions(want) == same else ", renaming mattered"
            outcome["match" + crash + mattered] += 1
    print(KINDS[kind], dict(outcome))
    assert outcome["ray-fixed-asserts"] <= 10 and outcome["plan checked"] >= 60, outcome
    assert sum(v for k, v in outcome.items() if "renaming mattered" in k) >= 20, outcome


def _request(configs: dict, insts: list, demand: int, **kw) -> SchedulingRequest:
    return SchedulingRequest(
        node_type_configs=configs, disable_launch_config_check=True, current_instances=insts,
        resource_requests=[ResourceRequestByCount(request=ResourceRequest(
            resources_bundle={"CPU": 4.0}), count=demand)] if demand else [], **kw)


def _cfg(name, mx=10, mn=0, cpu=4.0):
    return NodeTypeConfig(name=name, min_worker_nodes=mn, max_worker_nodes=mx,
                          resources={"CPU": cpu})


def _pending(i, t, status=Instance.QUEUED):
    return AutoscalerInstance(im_instance=Instance(instance_id=f"i-{i}", instance_type=t,
                                                   status=status, node_kind=NodeKind.WORKER))


def _both(req_fn):
    want, got = schedule_fixed(req_fn()), EngineScheduler().schedule(req_fn())
    assert not diff(want, got), diff(want, got)
    return decisions(want)


def test_a_config_launches_under_its_name_once_a_pass():
    """Config "a" named "a-as" (no such key): new nodes are launched as "a-as",
    and after one is picked its template does not come back (Ray counts the
    room left under "a-as", which has none), so five nodes' demand launches one."""
    got = _both(lambda: _request({"a": _cfg("a-as")}, [], 5))
    assert got["launch"] == {"a-as": 1} and len(got["infeasible"]) == 4


def test_another_keys_template_comes_back():
    """Config "a" (8 CPU) named "b"; "b" has 4 CPU. The first new node is made from
    "a" (typed "b"); the template that comes back is "b"'s own, so 8-CPU demand
    places one node and the rest is infeasible. 4-CPU demand: "a"'s node takes two
    units, and "b"'s own template (in the pool from the start) and the ones that
    come back take one each while "b" has room: four "b" nodes for a max of 3."""
    configs = lambda: {"a": _cfg("b", cpu=8.0), "b": _cfg("b", mx=3)}   # noqa: E731
    assert _both(lambda: _request(configs(), [], 5))["launch"] == {"b": 4}
    big = lambda: SchedulingRequest(                                    # noqa: E731
        node_type_configs=configs(), disable_launch_config_check=True, current_instances=[],
        resource_requests=[ResourceRequestByCount(request=ResourceRequest(
            resources_bundle={"CPU": 8.0}), count=3)])
    got = _both(big)
    assert got["launch"] == {"b": 1} and len(got["infeasible"]) == 2


def test_pending_nodes_count_under_the_name_and_min_workers_under_the_key():
    """Pending instances of "a" (named "b") are "b" nodes: they take "b"'s room and
    count for "b"'s min workers, not "a"'s, so "a"'s min workers are launched (as
    "b" again) and "b"'s max then cuts them."""
    got = _both(lambda: _request({"a": _cfg("b", mn=2), "b": _cfg("b", mx=3)},
                                 [_pending(1, "a"), _pending(2, "a")], 0))
    assert got["launch"] == {"b": 1}, got

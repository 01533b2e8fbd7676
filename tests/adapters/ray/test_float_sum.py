"""The engine sums floats as the running interpreter's ``sum()`` does, as Ray does
(engine/kernels/pysum.py): plain left to right up to CPython 3.11, compensated
(Neumaier) from 3.12. With raylet quantities (0.1 CPU steps, odd byte counts)
the two can round one node's utilisation mean differently from another's when
their maps list the same values in another order: Ray then sees a tie (first
node wins) where the other sum sees a winner, or the reverse.

Each test searches seeded values for a case where the two sums pick different
nodes - given the maps' real iteration order, which protobuf does not promise
to be insertion order: upb's follows its hash table, seeded per process. Each
node gets its own ``node:<ip>``, a shuffled insertion and a different number of
zero-total resources - which Ray's sums skip, but which size the table - so
two nodes' orders differ whatever the seed) - and checks the engine against Ray
on it, on whichever interpreter runs the tests (CI runs 3.11 and 3.12). A
kernel-level test pins one case with explicit orders.
"""
from __future__ import annotations

import math
import random

import pytest

pytest.importorskip("ray")
from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig  # noqa: E402
from ray.autoscaler.v2.scheduler import ResourceDemandScheduler, SchedulingRequest  # noqa: E402
from ray.autoscaler.v2.schema import AutoscalerInstance  # noqa: E402
from ray.core.generated.autoscaler_pb2 import (NodeState, ResourceRequest,  # noqa: E402
                                               ResourceRequestByCount)
from ray.core.generated.instance_manager_pb2 import Instance, NodeKind  # noqa: E402

from vecsched.adapters.ray import EngineScheduler  # noqa: E402
from vecsched.engine.kernels.pysum import COMPENSATED  # noqa: E402

from tests.kits.compare import decisions, diff  # noqa: E402

ORDERS = (["CPU", "GPU", "memory", "ssd"], ["memory", "ssd", "CPU", "GPU"])
RAYLET = {"object_store_memory": 1_000_000_007.0}     # fully free: a zero term


def plain_sum(xs):
    s = 0
    for x in xs:
        s = s + x
    return s


def neumaier_sum(xs):
    """CPython 3.12's float sum(), written out (independent of the engine's)."""
    xs = list(xs)
    if not xs:
        return 0
    s, c = 0 + xs[0], 0.0
    for x in xs[1:]:
        t = s + x
        c += (s - t) + x if abs(s) >= abs(x) else (x - t) + s
        s = t
    return s + c if c and math.isfinite(c) else s


def test_the_sums_are_the_interpreters():
    rng = random.Random(3)
    for _ in range(2000):
        xs = [rng.choice([0.1, 0.3, rng.random(), rng.random() * 1e10]) for _ in range(5)]
        assert sum(xs) == (neumaier_sum(xs) if COMPENSATED else plain_sum(xs))


def _node(rng, i: int, total: dict, avail: dict, idle_ms: int) -> AutoscalerInstance:
    """A running node with its raylet's own resources, keys inserted shuffled."""
    own = {**RAYLET, f"node:10.0.{rng.randrange(256)}.{i}": 1.0,
           **{f"unused{j}": 0.0 for j in range(rng.randrange(12))}}
    total, avail = {**total, **own}, {**avail, **own}
    keys = list(total)
    rng.shuffle(keys)
    im = Instance(instance_id=f"i-{i}", instance_type="w", status=Instance.RAY_RUNNING,
                  node_id=f"n{i}", node_kind=NodeKind.WORKER)
    ns = NodeState(node_id=bytes([i]), total_resources={k: total[k] for k in keys},
                   available_resources={k: avail[k] for k in keys}, idle_duration_ms=idle_ms)
    return AutoscalerInstance(im_instance=im, ray_node=ns, cloud_instance_id=f"c-{i}")


def _values(rng):
    total = {"CPU": float(rng.choice([4, 8, 16])), "GPU": float(rng.choice([1, 2, 4])),
             "memory": float(rng.randint(1, 60) * 1_000_000_007 | 1), "ssd": 3.0}
    avail = {"CPU": (round(total["CPU"] * 10_000) - rng.randint(1, int(total["CPU"] * 10)) * 1000)
             / 10_000,
             "GPU": (round(total["GPU"] * 10_000) - rng.randint(0, int(total["GPU"] * 10)) * 1000)
             / 10_000,
             "memory": float(int(total["memory"] * rng.random()) | 1),
             "ssd": rng.choice([0.3, 1.7, 2.9])}
    return total, avail


def _first_wins(a: float, b: float) -> bool:
    return a >= b            # Ray's stable sort: on a tie the first node in the list wins


def test_utilisation_score_sums_as_ray():
    """Two idle nodes, one {CPU: 0.1} task: the node with the higher utilisation
    mean after the trial placement gets it and is kept, the other is idle-terminated."""
    rng = random.Random(0)
    for _ in range(100000):       # cases are found within ~50 draws; which ones, depends
        total, avail = _values(rng)   # on protobuf's map order, which varies per process
        if avail["CPU"] < 0.1:
            continue                  # the task must fit on either node
        nodes = [_node(rng, 1, total, avail, 600_000), _node(rng, 2, total, avail, 600_000)]
        means = []
        for x in nodes:
            after = dict(x.ray_node.available_resources)
            after["CPU"] -= 0.1
            terms = [v * ((v - after[k]) / v) ** 3 for k, v in x.ray_node.total_resources.items()
                     if v != 0]
            means.append([f(terms) / len(terms) for f in (plain_sum, neumaier_sum)])
        if _first_wins(means[0][0], means[1][0]) != _first_wins(means[0][1], means[1][1]):
            break
    else:
        pytest.fail("no case where the two sums pick different nodes")
    req = SchedulingRequest(
        node_type_configs={"w": NodeTypeConfig(name="w", min_worker_nodes=0, max_worker_nodes=10,
                                               resources=dict(total))},
        idle_timeout_s=60.0, disable_launch_config_check=True, current_instances=nodes,
        resource_requests=[ResourceRequestByCount(
            request=ResourceRequest(resources_bundle={"CPU": 0.1}), count=1)])
    want, got = ResourceDemandScheduler().schedule(req), EngineScheduler().schedule(req)
    assert not diff(want, got), diff(want, got)
    kept = 0 if _first_wins(*[m[1 if COMPENSATED else 0] for m in means]) else 1
    assert decisions(want)["terminate"] == [(f"i-{2 - kept}", "IDLE", Instance.RAY_RUNNING)]


def test_victim_order_sums_as_ray():
    """Two nodes of a type capped at one: the one with the lower mean utilisation
    (Ray's victim order) is terminated; the means differ only in how they are summed."""
    rng = random.Random(1)
    for _ in range(100000):       # as above: the map order varies per process
        total, avail = _values(rng)
        nodes = [_node(rng, 1, total, avail, 0), _node(rng, 2, total, avail, 0)]
        means = []
        for x in nodes:
            av = x.ray_node.available_resources
            u = [(v - av[k]) / v for k, v in x.ray_node.total_resources.items() if v > 0]
            means.append([f(u) / len(u) for f in (plain_sum, neumaier_sum)])
        # sorted ascending, stable: the first node is the victim unless the second is lower
        if (means[1][0] < means[0][0]) != (means[1][1] < means[0][1]):
            break
    else:
        pytest.fail("no case where the two sums pick different victims")
    req = SchedulingRequest(
        node_type_configs={"w": NodeTypeConfig(name="w", min_worker_nodes=0, max_worker_nodes=1,
                                               resources=dict(total))},
        disable_launch_config_check=True, current_instances=nodes)
    want, got = ResourceDemandScheduler().schedule(req), EngineScheduler().schedule(req)
    assert not diff(want, got), diff(want, got)
    k = 1 if COMPENSATED else 0
    victim = 2 if means[1][k] < means[0][k] else 1
    assert [t[0] for t in decisions(want)["terminate"]] == [f"i-{victim}"]


def test_score_kernels_sum_as_the_interpreter():
    """The kernels on cases with explicit orders: two nodes with the same values
    listed in another order, whose plain sums differ and compensated ones do not
    (or the reverse); each kernel mean equals the interpreter's sum() of the same
    terms in the same order."""
    import numpy as np

    from vecsched.engine.kernels.score import _victim_util
    from vecsched.engine.kernels.steps import score_once     # _score's Python entry point

    rng = random.Random(5)
    names = ORDERS[0]
    order = np.array([[names.index(k) for k in o] for o in ORDERS], np.int32)
    present = np.ones((2, 4), bool)
    found = {"score": 0, "victim": 0}
    for _ in range(5000):
        t, a = _values(rng)
        total = np.array([[t[k] for k in names]] * 2)
        free = np.array([[a[k] for k in names]] * 2)
        cols, tv, fv = order.tolist(), total[0].tolist(), free[0].tolist()   # Python floats,
        # as Ray's (sum() compensates only exact floats, not numpy's float64)
        terms = [[tv[r] * ((tv[r] - fv[r]) / tv[r]) ** 3 for r in o] for o in cols]
        utils = [[(tv[r] - fv[r]) / tv[r] for r in o] for o in cols]
        for what, xs in (("score", terms), ("victim", utils)):
            if (plain_sum(xs[0]) == plain_sum(xs[1])) == (neumaier_sum(xs[0]) == neumaier_sum(xs[1])):
                continue                     # both sums tie, or both do not: not sensitive
            found[what] += 1
            if what == "score":
                for n in range(2):
                    _, _, lo, mean = score_once(total[n], order[n], free[n], present[n],
                                                np.zeros(4, bool), False, -1, False)
                    assert (mean, lo) == (sum(terms[n]) / 4, min(terms[n]))
            else:
                got = _victim_util(total, order, free, present, np.arange(2))
                assert got.tolist() == [sum(u) / 4 for u in utils]
    assert min(found.values()) >= 5, found

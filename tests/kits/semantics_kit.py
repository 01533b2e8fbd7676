"""Small builders for the hand-made regression ticks of tests/adapters/ray/test_semantics*.py.

Every test builds one small SchedulingRequest per behaviour (through a
zero-argument factory, so each scheduler gets a fresh copy), runs Ray 2.60's
own scheduler and the engine on it, checks that their decisions agree
(tests.compare.diff) and returns both replies so the test can then assert the
outcome the specification (docs/ray-semantics.md) predicts.
"""
from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("ray")

from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig  # noqa: E402
from ray.autoscaler.v2.scheduler import ResourceDemandScheduler, SchedulingRequest  # noqa: E402
from ray.autoscaler.v2.schema import AutoscalerInstance  # noqa: E402
from ray.core.generated.autoscaler_pb2 import (AffinityConstraint,  # noqa: E402
                                               AntiAffinityConstraint, BundleSelector,
                                               ClusterResourceConstraint, GangResourceRequest,
                                               NodeState, PlacementConstraint, ResourceRequest,
                                               ResourceRequestByCount)
from ray.core.generated.common_pb2 import LabelSelector, LabelSelectorConstraint  # noqa: E402
from ray.core.generated.instance_manager_pb2 import Instance, NodeKind  # noqa: E402

from vecsched.adapters.ray import EngineScheduler  # noqa: E402

from tests.kits.compare import diff  # noqa: E402
from tests.kits.raygen import pg_constraints  # noqa: E402
from tests.kits.rayfixed import schedule_fixed  # noqa: E402

GIB = float(2 ** 30)
IN, NOT_IN = 1, 2
IDLE, PER_TYPE, GLOBAL, OUTDATED = 1, 2, 3, 4
QUEUED, REQUESTED, ALLOCATED, RAY_INSTALLING, RAY_RUNNING, RAY_STOP_REQUESTED = 1, 2, 3, 4, 5, 6


# ---- inputs -----------------------------------------------------------------------------

def cfg(name, resources, mn=0, mx=10, **kw) -> NodeTypeConfig:
    return NodeTypeConfig(name=name, min_worker_nodes=mn, max_worker_nodes=mx,
                          resources=dict(resources), **kw)


def running(iid, type_, total, avail=None, *, idle_ms=0, head=False, labels=None,
            dyn=None, hash_="", cloud=None) -> AutoscalerInstance:
    """A RAY_RUNNING instance with its GCS node (available defaults to total)."""
    ns = NodeState(node_id=iid.encode(), total_resources=dict(total),
                   available_resources=dict(total if avail is None else avail),
                   labels=dict(labels or {}), dynamic_labels=dict(dyn or {}),
                   idle_duration_ms=idle_ms)
    im = Instance(instance_id=iid, instance_type=type_, status=Instance.RAY_RUNNING,
                  node_id="n-" + iid, node_kind=NodeKind.HEAD if head else NodeKind.WORKER,
                  launch_config_hash=hash_)
    return AutoscalerInstance(im_instance=im, ray_node=ns, cloud_instance_id=cloud or "c-" + iid)


def pending(iid, type_, status, *, kind=None, ray_node=None) -> AutoscalerInstance:
    """An instance without a running ray node (QUEUED/REQUESTED carry UNMANAGED)."""
    if kind is None:
        kind = NodeKind.UNMANAGED if status in (QUEUED, REQUESTED) else NodeKind.WORKER
    im = Instance(instance_id=iid, instance_type=type_, status=status, node_kind=kind)
    return AutoscalerInstance(im_instance=im, ray_node=ray_node, cloud_instance_id="c-" + iid)


def selector(*cons) -> LabelSelector:
    """selector(("zone", IN, ["a"]), ...): all constraints must hold."""
    return LabelSelector(label_constraints=[
        LabelSelectorConstraint(label_key=k, operator=op, label_values=list(vals))
        for k, op, vals in cons])


def rr(bundle, count=1, *, selectors=(), pcs=()) -> ResourceRequestByCount:
    req = ResourceRequest(resources_bundle=dict(bundle), placement_constraints=list(pcs))
    for s in selectors:
        req.label_selectors.append(s)
    return ResourceRequestByCount(request=req, count=count)


def constraint(*rbcs) -> ClusterResourceConstraint:
    return ClusterResourceConstraint(resource_requests=list(rbcs))


def pg_label(pg: str) -> str:
    return "_PG_" + pg


def gang(pg: str, strategy: str, bundles) -> GangResourceRequest:
    """A placement group as the GCS encodes it (docs/ray-semantics.md §3.7): each bundle
    written to the legacy ``requests`` and to ``bundle_selectors[0]``, with the
    strategy's `_PG_<hex>` constraint on every bundle."""
    label = pg_label(pg)
    pcs = pg_constraints(strategy, label)
    g = GangResourceRequest(details=f"{pg}:{strategy}:PENDING")
    sel = BundleSelector()
    for b in bundles:
        g.requests.append(ResourceRequest(resources_bundle=dict(b), placement_constraints=pcs))
        sel.resource_requests.append(ResourceRequest(resources_bundle=dict(b),
                                                     placement_constraints=pcs))
    g.bundle_selectors.append(sel)
    return g


def request(configs, instances=(), requests=(), *, gangs=(), constraints=(), check=False,
            max_num_nodes=None, idle_timeout_s=None, pending_idle_timeout_s=None,
            cloud=None, recoverable=None, ippr_specs=None, ippr_statuses=None
            ) -> SchedulingRequest:
    return SchedulingRequest(
        disable_launch_config_check=not check,
        node_type_configs={c.name: c for c in configs},
        max_num_nodes=max_num_nodes,
        idle_timeout_s=idle_timeout_s,
        pending_idle_timeout_s=pending_idle_timeout_s,
        resource_requests=list(requests),
        gang_resource_requests=list(gangs),
        cluster_resource_constraints=list(constraints),
        current_instances=list(instances),
        cloud_resource_availabilities=dict(cloud or {}),
        recoverable_resource_availabilities=dict(recoverable or {}),
        ippr_specs=ippr_specs,
        ippr_statuses=dict(ippr_statuses or {}),
    )


# ---- running both -----------------------------------------------------------------------

def both(make, *, fixed=False, ray_sched=None, eng=None):
    """(Ray's reply, the engine's reply) on fresh copies of ``make()``; asserts
    the decisions agree. ``fixed`` compares with Ray plus the engine's documented
    Q4/Q13 fixes (tests/kits/rayfixed.py)."""
    want = (schedule_fixed(make(), ray_sched) if fixed
            else (ray_sched or ResourceDemandScheduler()).schedule(make()))
    got = (eng or EngineScheduler()).schedule(make())
    problems = diff(want, got)
    assert not problems, "engine differs from Ray: " + "; ".join(problems)
    return want, got


# ---- reading replies --------------------------------------------------------------------

def launches(reply) -> dict:
    return dict(Counter({lr.instance_type: lr.count for lr in reply.to_launch}))


def terms(reply) -> list:
    """Sorted (instance_id, cause, instance_status) of every termination."""
    return sorted((t.instance_id, t.cause, t.instance_status) for t in reply.to_terminate)


def infeasible(reply) -> list:
    """Bundles of the count-expanded infeasible list, sorted."""
    return sorted(sorted(dict(r.resources_bundle).items())
                  for r in reply.infeasible_resource_requests)


def infeasible_gangs(reply) -> list:
    return sorted(g.details for g in reply.infeasible_gang_resource_requests)

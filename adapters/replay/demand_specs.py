"""Engine specs -> Ray's SchedulingRequest, so one tick can be handed to Ray's
own scheduler and to the engine alike (demo, replay, benchmarks).

Placement groups (``GangSpec``) are encoded as Ray 2.60's GCS reports pending ones
(docs/ray-semantics.md §3.7): ``details`` is the spec's name (``<pg hex>:<strategy>:
<state>``), every bundle is written to the legacy ``requests`` list and to
``bundle_selectors[0].resource_requests``, each with its affinity / anti-affinity
placement constraint. A node's labels starting with ``_PG_`` (the GCS's marks of the
groups a node hosts) are sent as ``dynamic_labels``, the others as ``labels``."""
from __future__ import annotations

from typing import Optional, Sequence

from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
from ray.autoscaler.v2.scheduler import SchedulingRequest
from ray.autoscaler.v2.schema import AutoscalerInstance
from ray.core.generated.autoscaler_pb2 import (AffinityConstraint, AntiAffinityConstraint,
                                               BundleSelector, GangResourceRequest, NodeState,
                                               PlacementConstraint, ResourceRequest,
                                               ResourceRequestByCount)
from ray.core.generated.instance_manager_pb2 import Instance

from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec
from vecsched.engine.model.requests import GangSpec

PG_LABEL_PREFIX = "_PG_"


def type_config(ts: NodeTypeSpec) -> NodeTypeConfig:
    return NodeTypeConfig(name=ts.name, min_worker_nodes=ts.min_workers,
                          max_worker_nodes=ts.max_workers, idle_timeout_s=ts.idle_timeout_s,
                          priority=ts.priority, resources=dict(ts.resources),
                          labels=dict(ts.labels), launch_config_hash=ts.launch_hash)


def instance(ns: NodeSpec, instance_id: str) -> AutoscalerInstance:
    im = Instance(instance_id=instance_id, instance_type=ns.type, status=int(ns.status),
                  node_kind=int(ns.kind), launch_config_hash=ns.launch_hash or "")
    ray_node = None
    if ns.total is not None:
        im.node_id = ns.ray_node_id or instance_id
        labels = dict(ns.labels or {})
        dynamic = {k: labels.pop(k) for k in [k for k in labels if k.startswith(PG_LABEL_PREFIX)]}
        ray_node = NodeState(node_id=im.node_id.encode(), total_resources=dict(ns.total),
                             available_resources=dict(ns.available or {}),
                             labels=labels, dynamic_labels=dynamic,
                             idle_duration_ms=int(ns.idle_ms))
    return AutoscalerInstance(im_instance=im, ray_node=ray_node, cloud_instance_id=instance_id)


def _request(rs: RequestSpec) -> ResourceRequest:
    pcs = []
    if rs.affinity is not None:
        pcs.append(PlacementConstraint(affinity=AffinityConstraint(
            label_name=rs.affinity[0], label_value=rs.affinity[1])))
    if rs.anti_affinity is not None:
        pcs.append(PlacementConstraint(anti_affinity=AntiAffinityConstraint(
            label_name=rs.anti_affinity[0], label_value=rs.anti_affinity[1])))
    if rs.label_selectors:
        raise ValueError("gang bundles with label selectors are not encoded here")
    return ResourceRequest(resources_bundle=dict(rs.resources), placement_constraints=pcs)


def gang_request(gs: GangSpec) -> GangResourceRequest:
    """One pending placement group as the GCS reports it (see the module docstring)."""
    bundles = [_request(rs) for rs in gs.requests]
    gang = GangResourceRequest(details=gs.name, requests=bundles)
    gang.bundle_selectors.append(BundleSelector(resource_requests=bundles))
    return gang


def scheduling_request(types: Sequence[NodeTypeSpec], nodes: Sequence[NodeSpec],
                       requests: Sequence[RequestSpec], *,
                       ids: Optional[Sequence[str]] = None,
                       gangs: Sequence[GangSpec] = (),
                       max_num_nodes: Optional[int] = None,
                       idle_timeout_s: Optional[float] = None,
                       pending_idle_timeout_s: Optional[float] = None,
                       disable_launch_config_check: bool = True) -> SchedulingRequest:
    ids = ids or [f"i-{i}" for i in range(len(nodes))]
    return SchedulingRequest(
        disable_launch_config_check=disable_launch_config_check,
        node_type_configs={ts.name: type_config(ts) for ts in types},
        max_num_nodes=max_num_nodes,
        idle_timeout_s=idle_timeout_s,
        resource_requests=[
            ResourceRequestByCount(request=ResourceRequest(resources_bundle=dict(r.resources)),
                                   count=int(r.count)) for r in requests if r.count > 0],
        gang_resource_requests=[gang_request(g) for g in gangs],
        pending_idle_timeout_s=pending_idle_timeout_s,
        current_instances=[instance(ns, i) for ns, i in zip(nodes, ids)],
        cloud_resource_availabilities={ts.name: ts.availability for ts in types
                                       if ts.availability != 1.0},
        recoverable_resource_availabilities={ts.name: ts.recoverable for ts in types
                                             if ts.recoverable != 1.0},
    )

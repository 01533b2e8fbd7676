"""Engine specs -> Ray's SchedulingRequest, so one tick can be handed to Ray's
own scheduler and to the engine alike (demo, replay, benchmarks)."""
from __future__ import annotations

from typing import Optional, Sequence

from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
from ray.autoscaler.v2.scheduler import SchedulingRequest
from ray.autoscaler.v2.schema import AutoscalerInstance
from ray.core.generated.autoscaler_pb2 import NodeState, ResourceRequest, ResourceRequestByCount
from ray.core.generated.instance_manager_pb2 import Instance

from engine.build import NodeSpec, NodeTypeSpec, RequestSpec


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
        ray_node = NodeState(node_id=im.node_id.encode(), total_resources=dict(ns.total),
                             available_resources=dict(ns.available or {}),
                             labels=dict(ns.labels or {}), idle_duration_ms=int(ns.idle_ms))
    return AutoscalerInstance(im_instance=im, ray_node=ray_node, cloud_instance_id=instance_id)


def scheduling_request(types: Sequence[NodeTypeSpec], nodes: Sequence[NodeSpec],
                       requests: Sequence[RequestSpec], *,
                       ids: Optional[Sequence[str]] = None,
                       max_num_nodes: Optional[int] = None,
                       idle_timeout_s: Optional[float] = None,
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
        current_instances=[instance(ns, i) for ns, i in zip(nodes, ids)],
        cloud_resource_availabilities={ts.name: ts.availability for ts in types
                                       if ts.availability != 1.0},
        recoverable_resource_availabilities={ts.name: ts.recoverable for ts in types
                                             if ts.recoverable != 1.0},
    )



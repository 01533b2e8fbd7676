"""A sample tick for ``vecsched explain --write-sample``: one dumped request that
shows every kind of answer, and the same tick grown to any number of request rows
(for measuring ``explain`` on large dumps).

The tick, on KubeRay in its Conservative upscaling mode: pods for zone a that launch
ten cpu-large nodes, nine of them held back by the upscaling speed; a pod asking for
more GPUs than any group has; a pod whose label selector no group matches; a
STRICT_SPREAD placement group wider than the GPU group may grow (at maxReplicas); two
GPU pods Pending on Kubernetes; idle nodes kept by minReplicas; and a node with every
resource free that Ray does not count idle. ``rows`` adds pending request rows of
distinct shapes (a mix that fits, that fits no group, and that matches no label), each
one explained.
"""
from __future__ import annotations

from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
from ray.autoscaler.v2.scheduler import SchedulingRequest
from ray.autoscaler.v2.schema import AutoscalerInstance
from ray.core.generated.autoscaler_pb2 import (BundleSelector, GangResourceRequest,
                                               NodeState, PlacementConstraint,
                                               AntiAffinityConstraint, ResourceRequest,
                                               ResourceRequestByCount)
from ray.core.generated.common_pb2 import (LabelSelector, LabelSelectorConstraint,
                                           LabelSelectorOperator)
from ray.core.generated.instance_manager_pb2 import Instance, NodeKind

from .dump import dump_request

GIB = float(2 ** 30)
CONTEXT = {"source": "kuberay", "upscaling_speed": 1, "upscaling_mode": "Conservative",
           "max_concurrent_launches": 10}


def _groups() -> list:
    return [
        NodeTypeConfig(name="head", min_worker_nodes=0, max_worker_nodes=0,
                       resources={"CPU": 0.0}),
        NodeTypeConfig(name="cpu-small", min_worker_nodes=4, max_worker_nodes=4,
                       resources={"CPU": 4.0, "memory": 16 * GIB}),
        NodeTypeConfig(name="cpu-large", min_worker_nodes=0, max_worker_nodes=50,
                       resources={"CPU": 32.0, "memory": 128 * GIB},
                       labels={"zone": "a"}),
        NodeTypeConfig(name="gpu-a100", min_worker_nodes=0, max_worker_nodes=2,
                       resources={"CPU": 16.0, "GPU": 4.0, "memory": 64 * GIB},
                       labels={"accelerator": "A100"}),
    ]


def _running(iid: str, group: str, total: dict, free: dict | None = None, *,
             idle_ms: int = 0, head: bool = False, activity: tuple = ()) -> AutoscalerInstance:
    node = NodeState(node_id=iid.encode(), total_resources=total,
                     available_resources=total if free is None else free,
                     idle_duration_ms=idle_ms, node_activity=list(activity))
    im = Instance(instance_id=iid, instance_type=group, status=Instance.RAY_RUNNING,
                  node_id="n-" + iid, node_kind=NodeKind.HEAD if head else NodeKind.WORKER)
    return AutoscalerInstance(im_instance=im, ray_node=node, cloud_instance_id="c-" + iid)


def _pending(iid: str, group: str, status: int) -> AutoscalerInstance:
    im = Instance(instance_id=iid, instance_type=group, status=status,
                  node_kind=NodeKind.WORKER)
    return AutoscalerInstance(im_instance=im, ray_node=None, cloud_instance_id="c-" + iid)


def _instances() -> list:
    small = {"CPU": 4.0, "memory": 16 * GIB}
    large = {"CPU": 32.0, "memory": 128 * GIB}
    out = [_running("head", "head", {"CPU": 0.0}, head=True)]
    out += [_running(f"small-busy-{i}", "cpu-small", small, {"CPU": 0.0, "memory": 0.0})
            for i in range(2)]
    out += [_running(f"small-idle-{i}", "cpu-small", small, idle_ms=900_000)
            for i in range(2)]
    out.append(_running("large-held", "cpu-large", large, idle_ms=0,
                        activity=("Objects in use: 12 (referenced by a driver)",)))
    out += [_pending(f"gpu-pending-{i}", "gpu-a100", Instance.REQUESTED) for i in range(2)]
    return out


def _rbc(bundle: dict, count: int = 1, selector: tuple | None = None) -> ResourceRequestByCount:
    req = ResourceRequest(resources_bundle=bundle)
    if selector:
        key, values = selector
        req.label_selectors.append(LabelSelector(label_constraints=[LabelSelectorConstraint(
            label_key=key, operator=LabelSelectorOperator.LABEL_OPERATOR_IN,
            label_values=list(values))]))
    return ResourceRequestByCount(request=req, count=count)


def _spread_group(pg: str, bundles: int) -> GangResourceRequest:
    """A STRICT_SPREAD placement group as the GCS encodes it: each bundle in the legacy
    list and in the first bundle selector, with an anti-affinity on the group's label."""
    pc = PlacementConstraint(anti_affinity=AntiAffinityConstraint(
        label_name="_PG_" + pg, label_value=pg))
    g = GangResourceRequest(details=f"{pg}:STRICT_SPREAD:PENDING")
    sel = BundleSelector()
    for _ in range(bundles):
        bundle = {"GPU": 4.0, "CPU": 8.0}
        g.requests.append(ResourceRequest(resources_bundle=bundle, placement_constraints=[pc]))
        sel.resource_requests.append(ResourceRequest(resources_bundle=bundle,
                                                     placement_constraints=[pc]))
    g.bundle_selectors.append(sel)
    return g


def _requests(rows: int) -> list:
    base = [_rbc({"CPU": 8.0, "memory": 16 * GIB}, 40, ("zone", ("a",))),  # cpu-large grows
            _rbc({"GPU": 8.0}, 2),                              # no group has 8 GPUs
            _rbc({"CPU": 1.0}, 1, ("zone", ("c",)))]            # no group in zone c
    extra = []
    for i in range(max(0, rows - len(base))):
        cpu = 0.25 * (1 + i % 120)                              # a distinct shape per row
        mem = float(1 + i // 120) * 2 ** 20
        if i % 10 == 7:
            extra.append(_rbc({"CPU": cpu, "GPU": 16.0, "memory": mem}))     # no shape
        elif i % 10 == 8:
            extra.append(_rbc({"CPU": cpu, "memory": mem}, 1, ("zone", ("c",))))
        else:
            extra.append(_rbc({"CPU": cpu, "memory": mem}, 1 + i % 3))
    return base + extra


def sample_request(rows: int = 4) -> SchedulingRequest:
    """The sample tick with at least ``rows`` pending request rows (4: the base tick)."""
    return SchedulingRequest(
        disable_launch_config_check=True,
        node_type_configs={c.name: c for c in _groups()},
        max_num_nodes=None, idle_timeout_s=60.0, pending_idle_timeout_s=None,
        resource_requests=_requests(rows),
        gang_resource_requests=[_spread_group("aa01", 3)],
        cluster_resource_constraints=[],
        current_instances=_instances(),
        cloud_resource_availabilities={}, recoverable_resource_availabilities={},
        ippr_specs=None, ippr_statuses={})


def write_sample(path: str, rows: int = 4) -> str:
    """Dump the sample tick (with its KubeRay context) to ``path``; returns ``path``."""
    return dump_request(sample_request(rows), path, dict(CONTEXT))

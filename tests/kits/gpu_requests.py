"""A small GPU cluster's SchedulingRequest (groups g8 and g4, a head) with failed launches
in its instance records: the availability memory's and the limits' adapter tests."""
from __future__ import annotations

from ray.autoscaler.v2.schema import AutoscalerInstance
from ray.core.generated.instance_manager_pb2 import Instance

from vecsched.adapters.replay.demand_specs import scheduling_request
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec
from vecsched.engine.model.dtypes import Status

G8 = {"CPU": 32.0, "GPU": 8.0}
G4 = {"CPU": 16.0, "GPU": 4.0}
TYPES = [NodeTypeSpec("g8", G8, max_workers=10), NodeTypeSpec("g4", G4, max_workers=10),
         NodeTypeSpec("head", {"CPU": 2.0}, max_workers=0)]
PRICES = {"g8": 8.0, "g4": 4.4, "head": 1.0}


def gpu_request(failed=(), pods=4):
    """``pods`` pending {GPU: 1, CPU: 1}; ``failed``: (type, status, time s, details) records."""
    head = NodeSpec("head", Status.RAY_RUNNING, 1, {"CPU": 2.0}, {"CPU": 2.0}, ray_node_id="h")
    req = scheduling_request(TYPES, [head], [RequestSpec({"GPU": 1.0, "CPU": 1.0}, pods)],
                             ids=["head"])
    for i, (typ, status, ts_s, details) in enumerate(failed):
        im = Instance(instance_id=f"f{i}", instance_type=typ, status=status)
        im.status_history.add(instance_status=Instance.REQUESTED, timestamp_ns=int((ts_s - 1) * 1e9))
        im.status_history.add(instance_status=status, timestamp_ns=int(ts_s * 1e9),
                              details=details)
        req.current_instances.append(AutoscalerInstance(im_instance=im))
    return req

"""A tick's columns decide as Ray decides: a node whose only extra column is one GPU
(engine/model/build/columns.py gives it the column, and Ray's GPU avoidance reads it)
against Ray 2.60's scheduler on the same request. The column rules themselves are
tests/engine/model/test_build_columns.py."""
from __future__ import annotations

import pytest

pytest.importorskip("ray")
from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig  # noqa: E402
from ray.autoscaler.v2.scheduler import ResourceDemandScheduler, SchedulingRequest  # noqa: E402
from ray.autoscaler.v2.schema import AutoscalerInstance  # noqa: E402
from ray.core.generated.autoscaler_pb2 import (NodeState, ResourceRequest,  # noqa: E402
                                               ResourceRequestByCount)
from ray.core.generated.instance_manager_pb2 import Instance, NodeKind  # noqa: E402

from vecsched.adapters.ray import EngineScheduler  # noqa: E402
from vecsched.adapters.ray.compare import decisions, reply_diff  # noqa: E402


def test_gpu_of_one_node_decides_as_in_ray():
    """Ray avoids the GPU node for a CPU task; so must the engine."""
    def inst(i, total):
        im = Instance(instance_id=f"i-{i}", instance_type="w", status=Instance.RAY_RUNNING,
                      node_id=f"n{i}", node_kind=NodeKind.WORKER)
        ns = NodeState(node_id=bytes([i]), total_resources=total, available_resources=total,
                       idle_duration_ms=100_000)
        return AutoscalerInstance(im_instance=im, ray_node=ns, cloud_instance_id=f"c{i}")

    req = SchedulingRequest(
        node_type_configs={"w": NodeTypeConfig(name="w", min_worker_nodes=0, max_worker_nodes=9,
                                               resources={"CPU": 4.0})},
        idle_timeout_s=60.0, disable_launch_config_check=True,
        resource_requests=[ResourceRequestByCount(
            request=ResourceRequest(resources_bundle={"CPU": 1.0}), count=1)],
        current_instances=[inst(1, {"CPU": 4.0, "GPU": 1.0}), inst(2, {"CPU": 4.0, "X": 1.0})])
    want, got = ResourceDemandScheduler().schedule(req), EngineScheduler().schedule(req)
    assert decisions(want)["terminate"] == [("i-1", "IDLE", Instance.RAY_RUNNING)]
    assert not reply_diff(want, got), reply_diff(want, got)

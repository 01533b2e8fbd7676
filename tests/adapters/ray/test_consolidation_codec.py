"""How a CONSOLIDATE termination of the efficient mode reaches Ray: as OUTDATED, with
details that carry the drain deadline and read back as CONSOLIDATE (and that Ray's own
event logger takes). Which nodes consolidation stops is the engine's business
(tests/engine/efficient/test_consolidate.py, test_consolidation_safety.py)."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

pytest.importorskip("ray.autoscaler.v2.scheduler")
from ray.autoscaler.v2.event_logger import AutoscalerEventLogger  # noqa: E402
from ray.core.generated.instance_manager_pb2 import TerminationRequest  # noqa: E402

from vecsched.adapters.ray.codec import (CONSOLIDATION_DETAILS, _details,  # noqa: E402
                                         drain_deadline_ms, engine_cause)
from vecsched.adapters.ray.scheduler import EngineScheduler  # noqa: E402
from vecsched.adapters.replay.demand_specs import scheduling_request  # noqa: E402
from vecsched.adapters.replay.schedulers import reply_decision  # noqa: E402
from vecsched.engine.efficient import EfficientOptions  # noqa: E402
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem  # noqa: E402
from vecsched.engine.model.dtypes import Cause, Kind, Status  # noqa: E402

TYPES = [NodeTypeSpec("gpu8", {"CPU": 32.0, "GPU": 8.0}, max_workers=10),
         NodeTypeSpec("cpu", {"CPU": 16.0}, max_workers=10)]


def _gpu_node(gpu_free, i):
    """A running 8-GPU worker with `gpu_free` GPUs and half its CPUs free."""
    return NodeSpec("gpu8", Status.RAY_RUNNING, Kind.WORKER, {"CPU": 32.0, "GPU": 8.0},
                    {"CPU": 16.0, "GPU": gpu_free}, idle_ms=0, ray_node_id=f"n{i}")


def test_the_deadline_reaches_ray_in_the_details():
    p = build_problem(TYPES, [_gpu_node(7.0, 0), _gpu_node(4.0, 1)], [], idle_timeout_s=60.0)
    text = _details(5, 90_000, "gpu8", True, p, 0)
    assert text.startswith(CONSOLIDATION_DETAILS) and text.endswith("drain deadline 90 s")
    assert drain_deadline_ms(SimpleNamespace(details=text)) == 90_000
    assert drain_deadline_ms(SimpleNamespace(details=f"{CONSOLIDATION_DETAILS} old")) == 0
    assert drain_deadline_ms(SimpleNamespace(details="node from x has outdated config")) == 0


def test_reaches_ray_as_outdated_and_reads_back():
    class _Events:
        def __init__(self):
            self.lines = []

        def info(self, msg, *a, **k):
            self.lines.append(msg)

        warning = error = debug = info

    events = _Events()
    nodes = [_gpu_node(7.0, 0), _gpu_node(4.0, 1)]
    req = scheduling_request(TYPES, nodes, [], ids=["i-0", "i-1"], idle_timeout_s=60.0)
    sched = EngineScheduler(AutoscalerEventLogger(events), mode="efficient",
                            options=EfficientOptions(consolidate=0.25), warm=False)
    logging.getLogger("ray.autoscaler.v2").setLevel(logging.ERROR)
    reply = sched.schedule(req)
    (tr,) = reply.to_terminate
    assert tr.instance_id == "i-0" and tr.cause == TerminationRequest.Cause.OUTDATED
    assert tr.ray_node_id == "n0" and tr.details.startswith(CONSOLIDATION_DETAILS)
    assert engine_cause(tr) == Cause.CONSOLIDATE
    assert reply_decision(reply).terminations == [("i-0", Cause.CONSOLIDATE)]
    assert any("Removing 1 nodes of type gpu8" in line for line in events.lines)
    # an ordinary OUTDATED termination reads back as OUTDATED
    assert engine_cause(TerminationRequest(cause=TerminationRequest.Cause.OUTDATED,
                                           details="node from gpu8 has outdated config")) \
        == Cause.OUTDATED

"""Consolidation drains on a live local Ray 2.60 cluster (``adapters/ray/drain.py``).

``DrainingRayStopper`` gets the instance manager's RAY_STOP_REQUESTED event for a
consolidation termination as the codec encodes it (OUTDATED, consolidation details,
the drain deadline) and must drain the node through the GCS, not stop it:

- node A (deadline 120 s): a task running on it finishes with its result; a new task
  that only node A could run stays pending (no new work lands on a draining node); a
  task any node can run lands elsewhere; once its work is done node A exits by itself,
  long before the deadline.
- node B (deadline 3 s): its long task is still running at the deadline, so the stopper
  stops the ray node then (what Ray's ``ray drain-node`` leaves to the caller).

Marked ``cluster`` (about a minute).
"""
from __future__ import annotations

import time
from queue import Queue

import pytest

ray = pytest.importorskip("ray")

from ray.core.generated.instance_manager_pb2 import (  # noqa: E402
    Instance, InstanceUpdateEvent, TerminationRequest)

from vecsched.adapters.ray.codec import CONSOLIDATION_DETAILS, drain_deadline_ms  # noqa: E402
from vecsched.adapters.ray.drain import DrainingRayStopper  # noqa: E402


def _event(instance_id: str, ray_node_id: str, deadline_s: float) -> InstanceUpdateEvent:
    tr = TerminationRequest(
        id=f"t-{instance_id}", instance_id=instance_id, ray_node_id=ray_node_id,
        cause=TerminationRequest.Cause.OUTDATED,
        details=f"{CONSOLIDATION_DETAILS} test; drain deadline {deadline_s:g} s")
    assert drain_deadline_ms(tr) == int(deadline_s * 1000)
    return InstanceUpdateEvent(instance_id=instance_id,
                               new_instance_status=Instance.RAY_STOP_REQUESTED,
                               termination_request=tr)


def _alive(node_id: str) -> bool:
    return any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes())


def _wait(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.25)
    return False


@pytest.mark.cluster
def test_consolidation_drains_then_stops_on_a_live_cluster(tmp_path):
    from ray._raylet import GcsClient
    from ray.cluster_utils import Cluster as RayCluster
    cluster = RayCluster(initialize_head=True, head_node_args={"num_cpus": 1})
    stopper = None
    try:
        a = cluster.add_node(num_cpus=2, resources={"a": 2})
        b = cluster.add_node(num_cpus=1, resources={"b": 1})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)

        @ray.remote(num_cpus=1, max_retries=0)
        def work(seconds: float, flag: str) -> str:
            open(flag, "w").close()
            time.sleep(seconds)
            return ray.get_runtime_context().get_node_id()

        flag_a, flag_b = str(tmp_path / "a"), str(tmp_path / "b")
        running_a = work.options(resources={"a": 1}).remote(8.0, flag_a)
        running_b = work.options(resources={"b": 1}).remote(300.0, flag_b)
        import os
        assert _wait(lambda: os.path.exists(flag_a) and os.path.exists(flag_b), 60)

        errors = Queue()
        stopper = DrainingRayStopper(GcsClient(address=cluster.gcs_address), errors)
        stopper.notify([_event("i-a", a.node_id, 120.0), _event("i-b", b.node_id, 3.0)])
        assert _wait(lambda: len(stopper.drains) == 2, 30)
        assert [(i, r.accepted) for i, r in stopper.drains] == [("i-a", True), ("i-b", True)]

        # no new work on the draining node A: a task only A could run stays pending ...
        only_a = work.options(resources={"a": 1}).remote(0.1, str(tmp_path / "x"))
        ready, _ = ray.wait([only_a], timeout=4)
        assert ready == []
        # ... and a task any node can run goes elsewhere (the head)
        anywhere = work.remote(0.1, str(tmp_path / "y"))
        assert ray.get(anywhere, timeout=60) not in (a.node_id, b.node_id)
        # the running task on A finishes, with its result
        assert ray.get(running_a, timeout=60) == a.node_id
        # A exits by itself once its work is done, long before its deadline
        assert _wait(lambda: not _alive(a.node_id), 60)
        # B's task still ran at its deadline: the stopper stopped B then
        assert _wait(lambda: stopper.deadline_stops == [("i-b", True)], 60)
        assert _wait(lambda: not _alive(b.node_id), 60)
        with pytest.raises(Exception):
            ray.get(running_b, timeout=60)
        assert errors.empty()
        ray.cancel(only_a, force=True)
    finally:
        if stopper is not None:      # A's 120 s stop must not fire on a dead GCS later
            stopper.close()
        ray.shutdown()
        cluster.shutdown()

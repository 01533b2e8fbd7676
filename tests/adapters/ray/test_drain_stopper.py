"""``DrainingRayStopper``'s routing, in process: which terminations it drains (with
what reason and deadline) and which go to stock Ray's stop. The GCS client here
records calls (a live GCS answers them in ``test_drain_cluster.py``); time and the
deadline timer are injected."""
from __future__ import annotations

from queue import Queue

import pytest

pytest.importorskip("ray")

from ray.core.generated.autoscaler_pb2 import DrainNodeReason  # noqa: E402
from ray.core.generated.instance_manager_pb2 import (  # noqa: E402
    Instance, InstanceUpdateEvent, TerminationRequest)

from vecsched.adapters.ray.codec import CONSOLIDATION_DETAILS  # noqa: E402
from vecsched.adapters.ray.drain import DrainingRayStopper, drain_for_consolidation  # noqa: E402

NODE = "ab" * 28


class RecordingGcs:
    def __init__(self, accept=True):
        self.calls = []
        self.accept = accept

    def drain_node(self, node_id, reason, reason_message, deadline_timestamp_ms):
        self.calls.append(("drain_node", node_id, reason, deadline_timestamp_ms))
        return self.accept, "" if self.accept else "no"

    def drain_nodes(self, node_ids):
        self.calls.append(("drain_nodes", node_ids))
        return list(node_ids)


def _stopper(gcs):
    timers = []
    s = DrainingRayStopper(gcs, Queue(), now_ms=lambda: 1_000_000,
                           timer=lambda sec, fn: timers.append((sec, fn)))
    return s, timers


def _event(cause, details="", idle_ms=0):
    tr = TerminationRequest(id="t", instance_id="i-1", ray_node_id=NODE, cause=cause,
                            details=details, idle_duration_ms=idle_ms)
    return InstanceUpdateEvent(instance_id="i-1", new_instance_status=Instance.RAY_STOP_REQUESTED,
                               termination_request=tr)


def test_consolidation_is_drained_with_its_deadline_then_stopped_at_it():
    gcs = RecordingGcs()
    s, timers = _stopper(gcs)
    s._stop_or_drain_ray(_event(TerminationRequest.Cause.OUTDATED,
                                f"{CONSOLIDATION_DETAILS} x; drain deadline 60 s"))
    assert gcs.calls == [("drain_node", NODE, DrainNodeReason.DRAIN_NODE_REASON_PREEMPTION,
                          1_060_000)]
    assert [sec for sec, _ in timers] == [60.0]
    timers[0][1]()                                     # the deadline passes
    assert gcs.calls[-1][0] == "drain_nodes" and s.deadline_stops == [("i-1", True)]


def test_other_terminations_are_stock_ray():
    gcs = RecordingGcs()
    s, timers = _stopper(gcs)
    s._stop_or_drain_ray(_event(TerminationRequest.Cause.OUTDATED, "node from x has outdated"))
    s._stop_or_drain_ray(_event(TerminationRequest.Cause.OUTDATED, f"{CONSOLIDATION_DETAILS} old"))
    s._stop_or_drain_ray(_event(TerminationRequest.Cause.IDLE, "idle", idle_ms=5000))
    assert [c[0] for c in gcs.calls] == ["drain_nodes", "drain_nodes", "drain_node"]
    assert gcs.calls[2][2] == DrainNodeReason.DRAIN_NODE_REASON_IDLE_TERMINATION
    assert timers == [] and s.drains == []


def test_a_rejected_drain_is_reported_to_the_reconciler():
    s, timers = _stopper(RecordingGcs(accept=False))
    s._stop_or_drain_ray(_event(TerminationRequest.Cause.OUTDATED,
                                f"{CONSOLIDATION_DETAILS} x; drain deadline 60 s"))
    assert timers == [] and s._error_queue.get_nowait().im_instance_id == "i-1"


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="ray_node_id"):
        drain_for_consolidation(RecordingGcs(), "", 1000)
    with pytest.raises(ValueError, match="deadline_ms"):
        drain_for_consolidation(RecordingGcs(), NODE, -1)


def test_close_cancels_the_stops_still_scheduled():
    """After close() no deadline stop runs (it would call a GCS that may be gone)."""
    import threading

    gcs = RecordingGcs()
    fired = threading.Event()
    s = DrainingRayStopper(gcs, Queue(), now_ms=lambda: 1_000_000)   # the real timers
    s._stop_at_deadline = lambda *a: fired.set()
    s._stop_or_drain_ray(_event(TerminationRequest.Cause.OUTDATED,
                                f"{CONSOLIDATION_DETAILS} x; drain deadline 0.3 s"))
    assert gcs.calls and gcs.calls[0][0] == "drain_node" and len(s._scheduled) == 1
    s.close()
    assert not fired.wait(1.0)
    assert s._scheduled == []

"""Consolidation drains instead of stopping: a ``RayStopper`` for Ray 2.60's autoscaler v2.

Stock Ray's ``RayStopper`` (``ray/autoscaler/v2/instance_manager/subscribers/
ray_stopper.py``) drains a ray node only for an IDLE termination (GCS ``DrainNode``,
reason IDLE_TERMINATION, which the raylet rejects while anything runs) and stops it
outright for every other cause. The efficient mode's consolidation terminations reach
Ray as OUTDATED with details saying so (``codec.CONSOLIDATION_DETAILS``) and carrying
the drain deadline (``codec.drain_deadline_ms``).

:class:`DrainingRayStopper` drains those instead: the GCS ``DrainNode`` request with
reason PREEMPTION (which the raylet accepts while work runs), a message naming the
consolidation and ``deadline_timestamp_ms`` = now + the deadline. The raylet then
takes no new work and exits by itself once nothing runs on it (Ray's reconciler sees
the node DRAINING, then DEAD: RAY_STOPPING, RAY_STOPPED, then the cloud instance is
terminated). Ray does not stop a node at the deadline (its ``ray drain-node`` says it
is the caller's job), so at the deadline this stopper stops the ray node as stock Ray
would have at once (``GcsClient.drain_nodes``); what still runs is restarted
elsewhere. Every other termination goes to stock Ray's code unchanged.

``install_stopper`` puts it into an autoscaler process (before the ``Autoscaler`` is
built), as ``install.install`` does for the scheduler. Clock and timer are injected.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ray._common.utils import hex_to_binary
from ray.autoscaler.v2.instance_manager.subscribers.ray_stopper import RayStopError, RayStopper
from ray.core.generated.autoscaler_pb2 import DrainNodeReason

from .codec import CONSOLIDATION_DETAILS, drain_deadline_ms

logger = logging.getLogger(__name__)

REASON = DrainNodeReason.DRAIN_NODE_REASON_PREEMPTION


@dataclass(frozen=True)
class DrainResult:
    """What the GCS answered to a drain request."""
    accepted: bool
    message: str
    deadline_timestamp_ms: int


def drain_for_consolidation(gcs_client, ray_node_id: str, deadline_ms: int, *,
                            now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
                            message: str = "") -> DrainResult:
    """Ask the GCS to drain a ray node (hex id) for consolidation with a deadline
    ``deadline_ms`` from now (0: no deadline)."""
    if not isinstance(ray_node_id, str) or not ray_node_id:
        raise ValueError(f"ray_node_id: must be a non-empty hex string, got {ray_node_id!r}")
    if isinstance(deadline_ms, bool) or not isinstance(deadline_ms, int) or deadline_ms < 0:
        raise ValueError(f"deadline_ms: must be an integer >= 0, got {deadline_ms!r}")
    at = now_ms() + deadline_ms if deadline_ms else 0
    text = message or (f"consolidation (vecsched): the node's work fits elsewhere; "
                       f"drain deadline {deadline_ms / 1000:g} s")
    accepted, why = gcs_client.drain_node(ray_node_id, REASON, text, at)
    return DrainResult(bool(accepted), str(why or ""), at)


def is_consolidation(termination_request) -> bool:
    return termination_request.details.startswith(CONSOLIDATION_DETAILS)


class DrainingRayStopper(RayStopper):
    """Stock ``RayStopper``, but consolidation terminations are drained with their
    deadline (see the module docstring). ``timer(seconds, fn)`` schedules the stop at
    the deadline (default: a daemon ``threading.Timer``); ``close()`` cancels the stops
    still scheduled (a stop that fired after its GCS went away would block on the dead
    GCS, and Ray's GCS client ends the process once it gives up reconnecting)."""

    def __init__(self, gcs_client, error_queue, *,
                 now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
                 timer: Callable[[float, Callable[[], None]], object] = None):
        super().__init__(gcs_client, error_queue)
        self._now_ms = now_ms
        self._timer = timer or _daemon_timer
        self.drains: list[tuple[str, DrainResult]] = []     # (instance id, result)
        self.deadline_stops: list[tuple[str, bool]] = []    # (instance id, was running)
        self._scheduled: list = []          # what ``timer`` returned, for ``close``

    def _stop_or_drain_ray(self, event) -> None:
        tr = event.termination_request
        if not is_consolidation(tr):
            return super()._stop_or_drain_ray(event)
        deadline = drain_deadline_ms(tr)
        if deadline == 0:                  # no deadline asked: stop at once, as stock Ray
            return super()._stop_or_drain_ray(event)
        try:
            res = drain_for_consolidation(self._gcs_client, tr.ray_node_id, deadline,
                                          now_ms=self._now_ms)
        except Exception:
            logger.exception("vecsched: error draining ray on %s", tr.ray_node_id)
            self._error_queue.put_nowait(RayStopError(im_instance_id=event.instance_id))
            return
        self.drains.append((event.instance_id, res))
        logger.info("vecsched: drained ray on %s for consolidation (accepted=%s, "
                    "deadline in %d ms) %s", tr.ray_node_id, res.accepted, deadline,
                    res.message)
        if not res.accepted:
            self._error_queue.put_nowait(RayStopError(im_instance_id=event.instance_id))
            return
        self._scheduled.append(self._timer(
            deadline / 1000.0, lambda: self._stop_at_deadline(tr.ray_node_id, event.instance_id)))

    def close(self) -> None:
        """Cancel the deadline stops not run yet (each ``timer`` result that has a
        ``cancel``); the drains already sent stay in force."""
        scheduled, self._scheduled = self._scheduled, []
        for t in scheduled:
            cancel = getattr(t, "cancel", None)
            if cancel is not None:
                cancel()

    def _stop_at_deadline(self, ray_node_id: str, instance_id: str) -> None:
        """The deadline passed: stop the ray node if it still runs (a node that exited
        on its own once drained is no error)."""
        try:
            stopped = self._gcs_client.drain_nodes(node_ids=[hex_to_binary(ray_node_id)])
        except Exception:
            logger.exception("vecsched: error stopping ray on %s at its drain deadline",
                             ray_node_id)
            self._error_queue.put_nowait(RayStopError(im_instance_id=instance_id))
            return
        self.deadline_stops.append((instance_id, len(stopped) > 0))
        logger.info("vecsched: drain deadline of %s (instance %s): %s", ray_node_id,
                    instance_id, "stopped" if stopped else "already gone")


def _daemon_timer(seconds: float, fn: Callable[[], None]) -> threading.Timer:
    t = threading.Timer(seconds, fn)
    t.daemon = True
    t.start()
    return t


def install_stopper() -> type:
    """Make every ``Autoscaler`` built from now on in this process use
    :class:`DrainingRayStopper` (it builds ``RayStopper`` by name)."""
    import ray.autoscaler.v2.autoscaler as mod
    if not (isinstance(mod.RayStopper, type) and issubclass(mod.RayStopper, RayStopper)):
        raise RuntimeError(f"ray.autoscaler.v2.autoscaler.RayStopper is {mod.RayStopper!r}, "
                           "not Ray's RayStopper; refusing to install")
    mod.RayStopper = DrainingRayStopper
    return DrainingRayStopper


def uninstall_stopper() -> None:
    """Give the autoscaler module Ray's own ``RayStopper`` back (in this process)."""
    import ray.autoscaler.v2.autoscaler as mod
    mod.RayStopper = RayStopper


__all__ = ["uninstall_stopper", "DrainResult", "DrainingRayStopper", "drain_for_consolidation",
           "install_stopper", "is_consolidation", "REASON"]

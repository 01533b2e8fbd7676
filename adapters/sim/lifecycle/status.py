"""The instance status machine: which status may follow which.

The codes are Ray's `Instance.InstanceStatus` protobuf values (`vecsched.engine.model.dtypes.Status`);
the edges are Ray 2.60's `InstanceUtil.get_valid_transitions()`, one comment per edge
saying who takes it and why. A test compares this table with Ray's, status by status.
"""
from __future__ import annotations

from vecsched.engine.model.dtypes import Status

S = Status

# from status -> the statuses it may move to next.
TRANSITIONS: dict[int, frozenset[int]] = {
    S.QUEUED: frozenset({
        S.REQUESTED,            # the reconciler's launch step hands it to the cloud provider
        S.TERMINATED,           # cancelled by a scale-down before any launch call was made
    }),
    S.REQUESTED: frozenset({
        S.ALLOCATED,            # a cloud instance of its type appeared in the provider's list
        S.QUEUED,               # no cloud instance within the request timeout: queue again
        S.ALLOCATION_FAILED,    # the launch call failed, or the retries are used up
    }),
    S.ALLOCATED: frozenset({
        S.RAY_INSTALLING,       # the autoscaler installs and starts ray on the instance itself
        S.RAY_RUNNING,          # the provider starts ray itself (KubeRay); the ray node joined
        S.ALLOCATION_TIMEOUT,   # the cloud instance never became a ray node within the timeout
        S.RAY_STOPPING,         # the ray node is already reported as draining
        S.RAY_STOPPED,          # the ray node is already reported as dead
        S.TERMINATING,          # scaled down (or leaked) before ray ran: terminate directly
        S.TERMINATED,           # the cloud instance vanished from the provider's list
    }),
    S.RAY_INSTALLING: frozenset({
        S.RAY_RUNNING,          # installation finished and the ray node joined
        S.RAY_INSTALL_FAILED,   # the installer reported an error, or the install timed out
        S.RAY_STOPPED,          # ray started and died before it was ever seen running
        S.TERMINATING,          # scaled down while installing: terminate directly
        S.TERMINATED,           # the cloud instance vanished during the installation
    }),
    S.RAY_RUNNING: frozenset({
        S.RAY_STOP_REQUESTED,   # a scale-down asks for a drain / stop of the ray node
        S.RAY_STOPPING,         # the ray node is reported as draining
        S.RAY_STOPPED,          # the ray node is reported dead (or vanished from GCS)
        S.TERMINATING,          # the cloud instance is being terminated outright
        S.TERMINATED,           # the cloud instance vanished (e.g. preempted)
    }),
    S.RAY_STOP_REQUESTED: frozenset({
        S.RAY_STOPPING,         # the drain was accepted; the node is draining
        S.RAY_STOPPED,          # ray has already stopped
        S.RAY_RUNNING,          # the drain was rejected or timed out: the node keeps running
        S.TERMINATED,           # the cloud instance vanished
    }),
    S.RAY_STOPPING: frozenset({
        S.RAY_STOPPED,          # the drained node is reported dead
        S.TERMINATING,          # the cloud instance is being terminated outright
        S.TERMINATED,           # the cloud instance vanished
    }),
    S.RAY_STOPPED: frozenset({
        S.TERMINATING,          # the reconciler terminates every instance whose ray stopped
        S.TERMINATED,           # the cloud instance vanished (or a stale duplicate record)
    }),
    S.ALLOCATION_TIMEOUT: frozenset({
        S.TERMINATING,          # the reconciler terminates the stuck cloud instance
        S.TERMINATED,           # the cloud instance already vanished: nothing to terminate
    }),
    S.RAY_INSTALL_FAILED: frozenset({
        S.TERMINATING,          # the reconciler terminates it; installs are not retried
        S.TERMINATED,           # the cloud instance vanished
    }),
    S.TERMINATING: frozenset({
        S.TERMINATED,           # the cloud instance left the provider's list
        S.TERMINATION_FAILED,   # the terminate call failed, or it did not finish in time
    }),
    S.TERMINATION_FAILED: frozenset({
        S.TERMINATING,          # the reconciler retries the termination
        S.TERMINATED,           # the cloud instance vanished anyway
    }),
    S.TERMINATED: frozenset(),          # terminal: the cloud instance is gone
    S.ALLOCATION_FAILED: frozenset(),   # terminal: no cloud instance was ever obtained
    S.UNKNOWN: frozenset(),             # never used: the status before a record exists
}

# Statuses a record may be created in (Ray's upsert rule).
CREATABLE: frozenset[int] = frozenset({
    S.QUEUED,           # a launch decided by the scheduler
    S.ALLOCATED,        # a head or unmanaged cloud instance discovered in the provider
    S.TERMINATING,      # a leaked cloud instance that must go
})

TERMINAL: frozenset[int] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)


def can_transition(from_status: int, to_status: int) -> bool:
    """True if `to_status` may directly follow `from_status`."""
    return to_status in TRANSITIONS.get(from_status, frozenset())


def reachable(from_status: int) -> frozenset[int]:
    """Every status reachable in one or more moves (Ray's `get_reachable_statuses`)."""
    seen: set[int] = set()
    todo = list(TRANSITIONS.get(from_status, ()))
    while todo:
        s = todo.pop()
        if s not in seen:
            seen.add(s)
            todo.extend(TRANSITIONS[s])
    return frozenset(seen)


def status_name(status: int | None) -> str:
    return "(new)" if status is None else Status.NAMES.get(status, f"<{status}>")


class IllegalTransition(Exception):
    """A move the status machine does not allow; `from_status` is None for a creation."""

    def __init__(self, instance_id: str, from_status: int | None, to_status: int):
        self.instance_id = instance_id
        self.from_status = from_status
        self.to_status = to_status
        super().__init__(f"instance {instance_id}: illegal transition "
                         f"{status_name(from_status)} -> {status_name(to_status)}")

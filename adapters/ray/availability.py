"""What the cloud answered, read from Ray's instance records.

Two readers of the same records:

- ``CloudAnswers`` feeds vecsched's availability memory
  (``vecsched.engine.tick.AvailabilityMemory``) for the policies that read it (the
  efficient mode, the baseline). Ray's reconciler hands the scheduler every
  instance record it keeps, failed ones included (docs/ray-semantics.md §14): an
  ALLOCATION_FAILED record is a refused launch (a stock-out when its details say
  the cloud lacked capacity, else a plain launch error), an ALLOCATION_TIMEOUT
  record a launch the cloud accepted but never delivered (a KubeRay pod left
  Pending: a stock-out; with ``pending_stockout_s`` an ALLOCATED record older than
  that counts already, once: Ray's own timeout is an hour), a RAY_RUNNING record a launch that landed, and a
  RAY_STOPPED record whose ray node was never asked to stop an interruption
  (a spot instance taken back). Each record is read once, at the time of its
  transition.
- ``RayCloudMonitor`` derives the two availability maps Ray 2.60's own
  ``CloudResourceMonitor`` hands its scheduler, in our words (§14): it learns
  only from ALLOCATION_TIMEOUT (unavailable at that time) and RAY_RUNNING (the
  type is forgotten). The trace replay uses it to give Ray's scheduler and the
  engine in ray-compat the inputs Ray's reconciler would.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from vecsched.engine.model.dtypes import Status

# Words in a failed launch's details that say the cloud had no capacity (AWS's
# InsufficientInstanceCapacity, GCE's ZONE_RESOURCE_POOL_EXHAUSTED / stockout, Azure's
# AllocationFailed / SkuNotAvailable, a simulated stock-out).
CAPACITY_WORDS = ("insufficient", "capacity", "stockout", "stock-out", "exhausted",
                  "skunotavailable", "allocationfailed", "out of stock")

_FAILED = (Status.ALLOCATION_FAILED, Status.ALLOCATION_TIMEOUT)


def is_capacity_error(details: str) -> bool:
    d = (details or "").lower().replace(" ", "")
    return any(w.replace(" ", "") in d for w in CAPACITY_WORDS)


def _entered(im, status: int, default_s: float) -> tuple[float, str]:
    """(seconds, details) of the record's last move into ``status``."""
    for u in reversed(im.status_history):
        if u.instance_status == status:
            return u.timestamp_ns / 1e9, u.details
    return default_s, ""


def _interrupted(im) -> bool:
    """RAY_STOPPED straight from RAY_RUNNING: the ray node stopped without a drain."""
    hist = [u.instance_status for u in im.status_history]
    return len(hist) >= 2 and hist[-1] == Status.RAY_STOPPED and hist[-2] == Status.RAY_RUNNING


@dataclass
class CloudAnswers:
    """Reads each record's answer once (see the module docstring). ``scan`` returns
    the events of a tick without changing anything; ``commit`` marks them read once
    the tick succeeded, so a failed tick reads them again."""
    failed: set = field(default_factory=set)       # ids read as refused or interrupted
    running: set = field(default_factory=set)      # ids read as landed
    pending_stockout_s: float | None = None        # ALLOCATED this long: a stock-out

    def scan(self, instances, now_s: float) -> list[tuple]:
        """[(kind, group, at_s, stockout)] with kind refused / landed / interrupted."""
        out = []
        for ai in instances:
            im = ai.im_instance
            if im is None or not im.instance_type:
                continue
            iid, st = im.instance_id, im.status
            if st in _FAILED and iid not in self.failed:
                at, details = _entered(im, st, now_s)
                stock = st == Status.ALLOCATION_TIMEOUT or is_capacity_error(details)
                out.append(("refused", im.instance_type, at, stock, iid))
            elif st == Status.RAY_RUNNING and iid not in self.running:
                at, _ = _entered(im, st, now_s)
                out.append(("landed", im.instance_type, at, False, iid))
            elif st == Status.RAY_STOPPED and iid not in self.failed and _interrupted(im):
                at, _ = _entered(im, st, now_s)
                out.append(("interrupted", im.instance_type, at, False, iid))
            elif (st == Status.ALLOCATED and self.pending_stockout_s is not None
                  and iid not in self.failed):
                at, _ = _entered(im, st, now_s)
                if now_s - at >= self.pending_stockout_s:
                    out.append(("refused", im.instance_type, now_s, True, iid))
        return out

    def commit(self, events: list, present_ids) -> None:
        for kind, _, _, _, iid in events:
            (self.running if kind == "landed" else self.failed).add(iid)
        present = set(present_ids)            # forget records the store no longer has
        self.failed &= present
        self.running &= present


def apply(memory, events: list) -> None:
    """Tell an ``AvailabilityMemory`` what ``CloudAnswers.scan`` found."""
    for kind, group, at, stockout, _ in events:
        if kind == "refused":
            memory.refused(group, at, stockout=stockout)
        elif kind == "landed":
            memory.succeeded(group, at)
        else:
            memory.interrupted(group, at)


class RayCloudMonitor:
    """Ray 2.60's two availability maps, derived as its ``CloudResourceMonitor``
    derives them (docs/ray-semantics.md §14), on an injected clock.

    ``timeout(group, at_s)``: an instance of the group reached ALLOCATION_TIMEOUT at
    ``at_s``; ``running(group)``: one reached RAY_RUNNING (the group is forgotten).
    ``recovery_s``: Ray's ``RAY_AUTOSCALER_AVAILABILITY_RECOVERY_S`` (600)."""

    def __init__(self, recovery_s: float = 600.0):
        if not recovery_s > 0:
            raise ValueError(f"recovery_s must be > 0, got {recovery_s!r}")
        self.recovery_s = float(recovery_s)
        self.last: dict[str, float] = {}      # group -> last time it was unavailable

    def timeout(self, group: str, at_s: float) -> None:
        self.last[group] = float(at_s)

    def running(self, group: str) -> None:
        self.last.pop(group, None)

    def availabilities(self) -> dict[str, float]:
        """``cloud_resource_availabilities``: 1 - t / (the latest t), per group listed."""
        if not self.last:
            return {}
        top = max(self.last.values())
        return {g: 1.0 - t / top for g, t in self.last.items()}

    def recoverable(self, now_s: float) -> dict[str, float]:
        """``recoverable_resource_availabilities``: 0 within a floor of min(10 s, 10 % of
        the recovery window) after the failure, then the elapsed share of the window,
        capped at 1."""
        floor = min(10.0, self.recovery_s * 0.1)
        out = {}
        for g, t in self.last.items():
            d = now_s - t
            out[g] = 0.0 if d < floor else min(1.0, d / self.recovery_s)
        return out

"""Ray's clock on a simulated clock.

`ray_clock(clock)` points the clock Ray's instance manager stamps status changes with
(and times out on), its reconciler's stuck-instance warnings and its cloud resource
monitor at a simulated clock. `scheduler_clock(clock)` does the same for Ray's
`ResourceDemandScheduler` (its pending-node idle tracking reads `time.monotonic()`; its
request ids and timestamps `time.time_ns()`), so Ray's scheduler can be compared with
the engine tick for tick on a simulated timeline.
"""
from __future__ import annotations

import importlib
import time as _time
from collections.abc import Callable, Sequence
from contextlib import contextmanager

NS_PER_S = 1_000_000_000

__all__ = ["ray_clock", "scheduler_clock"]


class _SimTime:
    """Stands in for the `time` module: `time()`, `time_ns()` and `monotonic()` read the
    simulated clock, everything else is the real module."""

    def __init__(self, clock: Callable[[], int]):
        self._clock = clock

    def time_ns(self) -> int:
        return int(self._clock())

    def time(self) -> float:
        return int(self._clock()) / NS_PER_S

    def monotonic(self) -> float:
        return int(self._clock()) / NS_PER_S

    def __getattr__(self, name):
        return getattr(_time, name)


_RAY_TIMED_MODULES = (
    "ray.autoscaler.v2.instance_manager.common",      # status_history stamps, has_timeout
    "ray.autoscaler.v2.instance_manager.reconciler",  # stuck-instance warnings
    "ray.autoscaler.v2.instance_manager.subscribers.cloud_resource_monitor",
)
_RAY_SCHEDULER_MODULES = ("ray.autoscaler.v2.scheduler",)


@contextmanager
def _patched(modules: Sequence[str], clock: Callable[[], int]):
    mods = [importlib.import_module(m) for m in modules]
    saved = [m.time for m in mods]
    shim = _SimTime(clock)
    for m in mods:
        m.time = shim
    try:
        yield clock
    finally:
        for m, t in zip(mods, saved):
            m.time = t


def ray_clock(clock: Callable[[], int]):
    """Within the block, Ray's instance manager, reconciler and cloud resource monitor
    read wall time from `clock` (ns). The schedulers are left alone: they only stamp ids
    and `request_ts_ms` with it (pending-node idle tracking is off unless
    RAY_AUTOSCALER_PENDING_NODE_IDLE_TIMEOUT_S is set); see `scheduler_clock`."""
    return _patched(_RAY_TIMED_MODULES, clock)


def scheduler_clock(clock: Callable[[], int]):
    """Within the block, Ray's `ResourceDemandScheduler` reads `time.monotonic()` and
    `time.time_ns()` from `clock` (ns)."""
    return _patched(_RAY_SCHEDULER_MODULES, clock)

"""The replay's settings: ``ReplayConfig`` (everything but the trace and the scheduler)
and ``DEFAULT_WINDOW``, the window ``vecsched replay`` plays by default."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from .trace import Window

# The default replay (`vecsched replay`): the last 2,000 pods of openb (its busiest
# weeks), durations as recorded, arrivals 200x denser. The openb pod list is a sample
# of a 1,523-node cluster: replayed literally it needs a handful of nodes; x200 keeps
# tens to ~250 instances live, about 40 simulated minutes (~600 ticks).
DEFAULT_WINDOW = Window(start=None, pods=2000, compress=1.0, arrival_scale=200.0)


@dataclass(frozen=True)
class ReplayConfig:
    """Everything but the trace and the scheduler. Times in simulated seconds."""
    tick_s: float = 5.0
    idle_timeout_s: float = 60.0
    tail_s: float = 600.0                # simulated time after the last arrival
    max_num_nodes: Optional[int] = None
    seed: int = 0
    # launch rate limits (§10.2): Ray's default max_concurrent_launches, and KubeRay's
    # upscalingMode Default (1000); Ray's own v2 default speed is 0 (one launch per type)
    max_concurrent_launches: int = 10
    upscaling_speed: float = 1000.0
    # the simulated cloud, the same for every type
    alloc_latency_s: float = 30.0
    install_latency_s: float = 60.0
    latency_jitter: float = 0.2
    launch_failure_rate: float = 0.0
    preemption_rate_per_h: float = 0.0
    # Ray's pending-node idle tracking (RAY_AUTOSCALER_PENDING_NODE_IDLE_TIMEOUT_S); None:
    # off, Ray's default
    pending_idle_timeout_s: Optional[float] = None
    # the raylets keep CPU-only work off GPU nodes while others have room
    # (RAY_scheduler_avoid_gpu_nodes, on by default in Ray; cluster.py)
    avoid_gpu_nodes: bool = True

    def __post_init__(self):
        for name in ("tick_s", "tail_s", "idle_timeout_s", "alloc_latency_s",
                     "install_latency_s", "latency_jitter", "launch_failure_rate",
                     "preemption_rate_per_h", "upscaling_speed"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) \
                    or v < 0 or (name == "tick_s" and v == 0):
                raise ValueError(f"{name} must be a finite number >= 0"
                                 f"{' and > 0' if name == 'tick_s' else ''}, got {v!r}")
        for name in ("latency_jitter", "launch_failure_rate"):
            if getattr(self, name) > 1:
                raise ValueError(f"{name} must be within [0, 1], got {getattr(self, name)}")
        if not isinstance(self.max_concurrent_launches, int) or self.max_concurrent_launches < 1:
            raise ValueError(f"max_concurrent_launches must be an integer >= 1, "
                             f"got {self.max_concurrent_launches!r}")
        if self.max_num_nodes is not None and (not isinstance(self.max_num_nodes, int)
                                               or self.max_num_nodes < 0):
            raise ValueError(f"max_num_nodes must be an integer >= 0, got {self.max_num_nodes!r}")
        t = self.pending_idle_timeout_s
        if t is not None and (not isinstance(t, (int, float)) or isinstance(t, bool)
                              or not math.isfinite(t) or t < 0):
            raise ValueError(f"pending_idle_timeout_s must be None or a finite number >= 0, "
                             f"got {t!r}")


__all__ = ["DEFAULT_WINDOW", "ReplayConfig"]
